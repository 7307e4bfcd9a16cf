/*
 * The URLs `sleeve serve` prints at start-up, and the README's own examples, work on the
 * demo catalogue: each answers 200 or a 307 whose target answers 200, never a 404.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DIALECT, makeTestEnv, ROOT, type TestEnv } from './helpers/env.js';
import { startServe, type ServeProcess } from './helpers/serve-process.js';

/** Fetches a URL; a 307 is followed once, and its target must answer 200. */
async function assertWorks(url: string): Promise<void> {
  const res = await fetch(url, { redirect: 'manual' });
  await res.arrayBuffer();
  assert.ok(res.status === 200 || res.status === 307, `${url} answered ${res.status}`);
  if (res.status === 307) {
    const target = res.headers.get('location') as string;
    const followed = await fetch(target);
    await followed.arrayBuffer();
    assert.equal(followed.status, 200, `${url} → ${target} answered ${followed.status}`);
  }
}

describe(`start-up banner and README examples (${DIALECT})`, () => {
  let t: TestEnv;
  let server: ServeProcess;
  before(async () => {
    t = await makeTestEnv({ SLEEVE_DEMO: 'on', SLEEVE_METRICS_LISTEN: 'off' });
    server = await startServe(t.env, ['--only', 'coverart']);
  });
  after(async () => {
    await server?.stop();
    await t?.cleanup();
  });

  it("every URL the banner suggests answers 200 or 307 (to a file that answers 200)", async () => {
    const urls = [...server.stderr().matchAll(/^ {4}curl (?:-\S+ )*(?:-o \S+ )?(\S+)$/gm)].map((m) => m[1] as string);
    assert.ok(urls.length >= 5, `the banner suggests URLs:\n${server.stderr()}`);
    for (const url of urls) {
      assert.ok(url.startsWith(server.base), url);
      await assertWorks(url);
    }
    assert.ok(urls.some((u) => u.endsWith('/back')), 'a back cover is among them');
  });

  it("the README's curl examples of the cover art API work on the demo catalogue", async () => {
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const urls = [...readme.matchAll(/curl (?:-\S+ )*(?:-o \S+ )?(http:\/\/localhost:8080\/\S+)/g)].map((m) => (m[1] as string).replace('http://localhost:8080', server.base));
    assert.ok(urls.length >= 3, 'the README has examples');
    for (const url of urls) await assertWorks(url);
  });
});

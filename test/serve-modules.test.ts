/*
 * What a server process loads (docs/decisions.md, "Server memory: one copy of each module"):
 * kysely once, as the one module the build makes of it (dist/node_modules/kysely/), shared by
 * the CLI bundle and the unbundled server code; and with `--only coverart`, none of the
 * authorization listener's or the website's code, nor jose. The ES modules the process loads
 * are recorded by a module hook (node's --import), as node resolved them.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CLI, DIALECT, DIST, makeTestEnv, type TestEnv } from './helpers/env.js';

/** Starts `sleeve serve ARGS` with the hook, stops it once it runs, and returns the URLs of the ES modules it loaded. */
async function modulesLoaded(t: TestEnv, args: string[]): Promise<string[]> {
  const list = path.join(t.dir, `modules-${args.join('-') || 'all'}.txt`);
  writeFileSync(list, '');
  const hooks = path.join(t.dir, 'hooks.mjs');
  writeFileSync(
    hooks,
    `import { appendFileSync } from 'node:fs';
let file;
export function initialize(data) { file = data.file; }
export async function load(url, context, next) { appendFileSync(file, url + '\\n'); return next(url, context); }
`,
  );
  const register = path.join(t.dir, 'register.mjs');
  writeFileSync(register, `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(hooks).href)}, { data: { file: ${JSON.stringify(list)} } });\n`);
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_') && k !== 'NODE_OPTIONS'));
  const child = spawn(process.execPath, ['--import', pathToFileURL(register).href, CLI, 'serve', ...args], { env: { ...clean, ...t.env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdout.resume();
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const deadline = Date.now() + 60_000;
  while (!stderr.includes('sleeve is running') && child.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  assert.match(stderr, /sleeve is running/, stderr);
  // One answer first: the banner is written just before the signal handlers are set.
  const coverArt = /cover art:\s+(http:\/\/\S+)/.exec(stderr)?.[1];
  assert.ok(coverArt !== undefined, stderr);
  await (await fetch(`${coverArt}/`)).arrayBuffer();
  child.kill('SIGTERM');
  assert.equal(await exited, 0, stderr);
  return readFileSync(list, 'utf8')
    .split('\n')
    .filter((l) => l !== '');
}

const under = (urls: string[], part: string) => urls.filter((u) => u.includes(part));

/** kysely's single module, made with the CLI bundle (scripts/bundle.mjs); a tsc-only build (SLEEVE_TEST_DIST) has neither. */
const SINGLE_KYSELY = path.join(DIST, 'node_modules', 'kysely', 'index.js');
const bundled = existsSync(path.join(DIST, 'bundle', 'index.js'));
/** A module of the build under test, as part of its file URL (`/dist/src/…`, or the directory SLEEVE_TEST_DIST names). */
const built = (rest: string) => `${pathToFileURL(DIST).href}/src/${rest}`;

describe(`sleeve serve: the modules a server loads (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });

  after(async () => {
    await t?.cleanup();
  });

  it('--only coverart: one kysely, the build’s single module; no authorization listener, website or jose', async () => {
    const urls = await modulesLoaded(t, ['--only', 'coverart']);
    if (bundled) assert.deepEqual(under(urls, '/kysely/'), [pathToFileURL(SINGLE_KYSELY).href]);
    assert.ok(under(urls, built('cover-art/files/file-server.js')).length === 1, 'the file server is loaded (the hook sees the server code)');
    assert.deepEqual(under(urls, built('auth/app.js')), []);
    assert.deepEqual(under(urls, built('website/')), []);
    assert.deepEqual(under(urls, '/node_modules/jose/'), []);
  });

  it('both listeners: the authorization listener and the website loaded, kysely still once', async () => {
    const urls = await modulesLoaded(t, []);
    if (bundled) assert.equal(under(urls, '/kysely/').length, 1);
    assert.equal(under(urls, built('auth/app.js')).length, 1);
    assert.ok(under(urls, built('website/')).length > 0);
  });
});

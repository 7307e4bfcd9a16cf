/*
 * Several `sleeve serve` processes on one machine: when the metrics address is taken (two
 * processes left on the same SLEEVE_METRICS_LISTEN, as two left on the default would be),
 * the second serves without metrics and says why, and the first keeps its metrics.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DIALECT, freePort, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';
import { countOf, scrape } from './support.js';

const UNKNOWN = '3e7a0000-0000-4000-8000-00000000fffe';
const REQS = 'sleeve_http_requests_total';
const LOOKUP_404 = { listener: 'coverart', route: '/release/:mbid/', method: 'GET', status: '404' };

async function status(url: string): Promise<number> {
  const res = await fetch(url, { redirect: 'manual' });
  await res.arrayBuffer();
  return res.status;
}

describe(`a second serve process whose metrics address is taken (${DIALECT})`, () => {
  let t: TestEnv;
  let metrics: string;
  let first: ServeProcess | undefined;
  let second: ServeProcess | undefined;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    metrics = `http://127.0.0.1:${await freePort()}`;
    t.env.SLEEVE_METRICS_LISTEN = metrics.slice('http://'.length);
    first = await startServe(t.env);
    second = await startServe(t.env);
  });

  after(async () => {
    await second?.stop();
    await first?.stop();
    await t?.cleanup();
  });

  it('serves on its own cover art and auth addresses, ready', async () => {
    assert.ok(second);
    assert.equal(second.child.exitCode, null, 'still running');
    assert.equal(await status(`${second.base}/release/${UNKNOWN}/`), 404);
    assert.equal(await status(`${second.base}/readyz`), 200);
    const auth = await fetch(`${second.authBase.replace('https:', 'http:')}/healthz`);
    assert.equal(auth.status, 200, 'the auth listener answers too (its probes over plain HTTP)');
    await auth.arrayBuffer();
  });

  it('warns that its metrics are off, naming the address and the way out', () => {
    assert.ok(second);
    const warning = logLines(second).find((l) => l.level === 40 && /metrics are off/.test(l.msg));
    assert.ok(warning, `a warning in the log:\n${second.stdout()}`);
    assert.ok(warning.msg.includes(metrics.slice('http://'.length)), warning.msg);
    assert.match(warning.msg, /SLEEVE_METRICS_LISTEN/);
    assert.doesNotMatch(second.stderr(), /metrics: /, 'the banner shows no metrics address');
    assert.match(first?.stderr() ?? '', new RegExp(`metrics: +${metrics}/metrics`), "the first process's banner shows it");
  });

  it("leaves the first process's metrics where they were, counting its requests and only those", async () => {
    assert.ok(first && second);
    const before = countOf(await scrape(metrics), REQS, LOOKUP_404);
    assert.equal(await status(`${first.base}/release/${UNKNOWN}/`), 404);
    for (let i = 0; i < 3; i++) assert.equal(await status(`${second.base}/release/${UNKNOWN}/`), 404);
    const after = countOf(await scrape(metrics), REQS, LOOKUP_404);
    assert.equal(after - before, 1, 'one lookup counted: the one made to the first process');
  });
});

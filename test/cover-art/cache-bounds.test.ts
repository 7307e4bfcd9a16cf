/*
 * The response cache is keyed on what decides an answer and bounded in bytes
 * (SLEEVE_RESPONSE_CACHE_BYTES): long query strings, which the API ignores, share one entry
 * instead of filling memory; distinct answers beyond the budget push the oldest out, and
 * the budget holds. Seen through HTTP and the metrics listener.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { countOf, scrape } from '../metrics/support.js';

const BUDGET = 40_000;
const mbid = (n: number) => `b0de0000-0000-4000-8000-${String(n).padStart(12, '0')}`;

describe(`the response cache is bounded in bytes, keyed on the parsed path (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;

  const metrics = async () => {
    const m = await scrape(s.server.metricsAddress);
    return {
      entries: countOf(m, 'sleeve_response_cache_entries'),
      bytes: countOf(m, 'sleeve_response_cache_bytes'),
      hits: countOf(m, 'sleeve_response_cache_total', { result: 'hit' }),
    };
  };
  const get = async (p: string) => {
    const res = await fetch(`${s.base}${p}`, { redirect: 'manual' });
    return { status: res.status, body: await res.text() };
  };

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE_BYTES: String(BUDGET) });
    s = await startServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('SLEEVE_RESPONSE_CACHE_BYTES and SLEEVE_CHANGE_WAIT_MS are checked, both named in one error', async () => {
    const r = await runCli({ ...t.env, SLEEVE_RESPONSE_CACHE_BYTES: '64M', SLEEVE_CHANGE_WAIT_MS: '-1' }, ['migrate']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /SLEEVE_RESPONSE_CACHE_BYTES="64M": must be a whole number from 0 to 1099511627776/);
    assert.match(r.stderr, /SLEEVE_CHANGE_WAIT_MS="-1": must be a whole number from 0 to 60000/);
    const ok = await runCli({ ...t.env, SLEEVE_RESPONSE_CACHE_BYTES: '0', SLEEVE_RESPONSE_CACHE: '100', SLEEVE_CHANGE_WAIT_MS: '0' }, ['migrate']);
    assert.equal(ok.code, 0, ok.stderr);
  });

  it('4,000 requests with 15,000-character query strings hold one entry per path', async () => {
    const home = await get('/');
    assert.equal(home.status, 200);
    const missing = await get(`/release/${mbid(1)}/front`);
    assert.equal(missing.status, 404);
    const start = await metrics();
    assert.equal(start.entries, 2);
    for (let i = 0; i < 4000; i += 50) {
      await Promise.all(
        Array.from({ length: 50 }, async (_, k) => {
          const q = randomBytes(7500).toString('hex');
          const r = await get((i + k) % 2 === 0 ? `/?${q}` : `//release/${mbid(1)}/front/?${q}`);
          assert.equal(r.status, (i + k) % 2 === 0 ? 200 : 404);
          if (r.status === 404) assert.equal(r.body, missing.body);
        }),
      );
    }
    const end = await metrics();
    assert.equal(end.entries, 2, 'still one entry for / and one for the release front');
    assert.equal(end.bytes, start.bytes);
    assert.equal(end.hits - start.hits, 4000, 'every one answered from the cache');
  });

  it('distinct answers beyond SLEEVE_RESPONSE_CACHE_BYTES evict the oldest, and the budget holds', async () => {
    for (let n = 100; n < 400; n++) assert.equal((await get(`/release/${mbid(n)}/front-250`)).status, 404);
    const m = await metrics();
    assert.ok(m.bytes <= BUDGET, `${m.bytes} bytes held`);
    // Each 404 page is some 250 bytes of body: far fewer than the 300 answers fit.
    assert.ok(m.entries > 10 && m.entries < 150, `${m.entries} entries`);
    // The newest is still there, the first went.
    const before = (await metrics()).hits;
    await get(`/release/${mbid(399)}/front-250`);
    assert.equal((await metrics()).hits, before + 1, 'the newest answer is a hit');
    await get(`/release/${mbid(100)}/front-250`);
    assert.equal((await metrics()).hits, before + 1, 'the oldest answer was evicted');
  });
});

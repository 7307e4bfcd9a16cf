/*
 * `sleeve mirror images --rate R`: the token bucket on an injected clock (a burst of
 * min(R, --concurrency) files, then one every 1/R s), and through the binary: a run of N files
 * cannot end before (N - burst) / R seconds, and fetches each file once.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { RateLimit } from '../../src/cover-art/upstream/mirror-rate.js';
import { cliInProcess, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { ManualClock } from '../helpers/clock.js';
import { makeJpeg } from '../helpers/images.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';

const TS = '2012-01-26 00:54:05.519372+00';
const R1 = '7e1ea5e0-0000-4000-8000-000000000031';
const IDS = Array.from({ length: 12 }, (_, i) => 3101 + i);
const orig = (m: string, id: number) => `mbid-${m}/mbid-${m}-${id}.jpg`;

describe('the mirror rate limit on an injected clock', () => {
  it('gives a burst, then one take per 1/rate seconds, never more however long the wait', () => {
    const clock = new ManualClock(1_000_000);
    const limit = new RateLimit(4, 2, clock);
    assert.equal(limit.tryTake(), 0);
    assert.equal(limit.tryTake(), 0);
    assert.equal(limit.tryTake(), 250, 'a quarter second for the next token at 4/s');
    clock.advance(100);
    assert.equal(limit.tryTake(), 150);
    clock.advance(150);
    assert.equal(limit.tryTake(), 0);
    assert.equal(limit.tryTake(), 250);
    // A long pause refills only up to the burst.
    clock.advance(60_000);
    assert.equal(limit.tryTake(), 0);
    assert.equal(limit.tryTake(), 0);
    assert.notEqual(limit.tryTake(), 0);
    // Ten seconds give forty takes at 4/s: counted, not slept.
    let taken = 0;
    for (let ms = 0; ms < 10_000; ms += 10) {
      clock.advance(10);
      while (limit.tryTake() === 0) taken++;
    }
    assert.ok(taken >= 39 && taken <= 41, `${taken} takes in 10 s at 4/s`);
  });

  it('allows fractions of a file per second', () => {
    const clock = new ManualClock(0);
    const limit = new RateLimit(0.5, 1, clock);
    assert.equal(limit.tryTake(), 0);
    assert.equal(limit.tryTake(), 2000);
    clock.advance(2000);
    assert.equal(limit.tryTake(), 0);
  });
});

describe(`sleeve mirror images --rate (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;

  before(async () => {
    up = await startUpstream();
    const jpeg = await makeJpeg(64, 48, 70);
    for (const id of IDS) up.put(orig(R1, id), jpeg);
    t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url });
    const dump = await writeDump(path.join(t.dir, 'dump'), {
      release_group: [[1, '5b0a1f00-0000-4000-8000-000000000031', 'Group', 1, 1, '', 0, TS]],
      release: [[1, R1, 'Release', 1, 1, 1, null, 120, 28, null, '', 0, -1, TS]],
      'cover_art_archive.cover_art': IDS.map((id, i) => [id, 1, '', 5000 + id, i + 1, TS, 0, 'image/jpeg', 1000, 100, 200, 300] as Value[]),
      'cover_art_archive.cover_art_type': IDS.map((id) => [id, 1] as Value[]),
    });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', dump]);
  });

  after(async () => {
    await up?.close();
    await t?.cleanup();
  });

  it('takes at least (files - burst) / rate seconds, each file fetched once', async () => {
    // 12 files at 10/s with bursts of 4 (--concurrency): at least 0.8 s, whatever the machine.
    const r = await runCli(t.env, ['--json', 'mirror', 'images', R1, '--sizes', 'original', '--concurrency', '4', '--rate', '10']);
    assert.equal(r.code, 0, r.stderr);
    const s = JSON.parse(r.stdout) as { fetched: number; seconds: number };
    assert.equal(s.fetched, IDS.length);
    assert.ok(s.seconds >= 0.75, `${s.seconds} s for ${IDS.length} files at 10/s`);
    for (const id of IDS) assert.equal(up.count(orig(R1, id)), 1);
    // Nothing left: a second run fetches nothing and takes no tokens to speak of.
    const again = await runCli(t.env, ['--json', 'mirror', 'images', R1, '--sizes', 'original', '--rate', '0.1']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal((JSON.parse(again.stdout) as { skipped: number; fetched: number }).skipped, IDS.length);
    assert.ok((JSON.parse(again.stdout) as { seconds: number }).seconds < 10, 'skipped files take no token (one every 10 s)');
  });
});

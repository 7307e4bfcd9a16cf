/*
 * Listings rewritten for thumbnails made on demand, a batch at a time (cover-art/listings/listing-rewrites.ts;
 * docs/decisions.md, "A listing refreshed is forgotten per release"), through HTTP against `sleeve
 * serve` processes: a burst of thumbnails of one release rewrites its index.json in one batch (the
 * failpoint `listing-rewrite` stops each batch, so what a batch holds is seen, not timed), another
 * process's cached listing follows, and a process killed before its rewrite leaves the release
 * dirty, so the next start writes the listing with every thumbnail's dimensions.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { isDeepStrictEqual } from 'node:util';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { filesRoot, writeInput } from './cli-support.js';

const R = '7e1ea5e0-0000-4000-8000-0000000000c1';
const G = '5b0a1f00-0000-4000-8000-0000000000c1';
type Dims = Record<string, { width: number; height: number }>;

describe(`listings rewritten in batches for thumbnails made on demand (${DIALECT})`, () => {
  let t: TestEnv;
  const ids: Record<string, number> = {};
  const procs: ServeProcess[] = [];

  const thumb = (base: string, id: number, size: number) => fetch(`${base}/download/mbid-${R}/mbid-${R}-${id}_thumb${size}.jpg`);
  /** thumbnail_dimensions of each image in the index.json `base` answers. */
  const listed = async (base: string): Promise<Record<number, Dims>> => {
    const index = (await (await fetch(`${base}/download/mbid-${R}/index.json`)).json()) as { images: { id: string; thumbnail_dimensions?: Dims }[] };
    return Object.fromEntries(index.images.map((i) => [Number(i.id), i.thumbnail_dimensions ?? {}]));
  };
  const stops = (p: ServeProcess) => p.stderr().split('\n').filter((l) => l.startsWith('sleeve: failpoint listing-rewrite'));

  before(async () => {
    t = await makeTestEnv({ SLEEVE_THUMBNAIL_SIZES: '100,200,250,300,500,600,1200' });
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G, '--title', 'Batches']);
    for (const [name, w, h] of [['a', 900, 600], ['b', 400, 800], ['c', 150, 150]] as const) {
      ids[name] = Number((await cliInProcess(t.env, ['--json', 'art', 'add', R, await writeInput(t, `${name}.jpg`, await makeJpeg(w, h, 80)), '--type', 'Front'])).id);
    }
  });

  after(async () => {
    for (const p of procs) await p.stop('SIGKILL');
    await t?.cleanup();
  });

  it("a burst of thumbnails of one release is one batch: its listing is rewritten for all of them at once, and another process's cached listing follows", async () => {
    const s = await startServe({ ...t.env, SLEEVE_TEST_FAILPOINT: 'listing-rewrite' });
    const other = await startServe(t.env);
    procs.push(s, other);
    const a = ids.a as number;
    const b = ids.b as number;
    const c = ids.c as number;
    // The other process keeps R's listing (asked twice: kept in its file cache).
    const cached = await listed(other.base);
    assert.deepEqual(await listed(other.base), cached);
    assert.equal(cached[a]?.['100'], undefined);
    // The first thumbnail: made and answered; its release's rewrite waits at the failpoint.
    assert.equal((await thumb(s.base, a, 100)).status, 200);
    await pollUntil(async () => stops(s).length, (n) => n === 1, 20_000);
    assert.equal(stops(s)[0], `sleeve: failpoint listing-rewrite ${R}`);
    // Five more while it waits: every one answered at once, none rewriting the listing itself.
    const more: [number, number][] = [
      [a, 300],
      [b, 100],
      [b, 600],
      [c, 200],
      [c, 100],
    ];
    const answers = await Promise.all(more.map(([id, size]) => thumb(s.base, id, size)));
    assert.deepEqual(
      answers.map((r) => r.status),
      [200, 200, 200, 200, 200],
    );
    const stored = JSON.parse(await readFile(path.join(filesRoot(t), `mbid-${R}`, 'index.json'), 'utf8')) as { images: { id: string; thumbnail_dimensions: Dims }[] };
    assert.ok(
      stored.images.every((i) => i.thumbnail_dimensions['100'] === undefined),
      'index.json is not rewritten before its batch runs',
    );
    // The first batch goes on: it writes every dimension recorded so far (the rows have them all).
    s.child.kill('SIGUSR2');
    const want: Record<number, Dims> = {
      [a]: { '100': { width: 100, height: 67 }, '300': { width: 300, height: 200 } },
      [b]: { '100': { width: 50, height: 100 }, '600': { width: 300, height: 600 } },
      // Never upscaled: a 150 px original gives 150 px for 200.
      [c]: { '100': { width: 100, height: 100 }, '200': { width: 150, height: 150 } },
    };
    const has = (l: Record<number, Dims>) => Object.entries(want).every(([id, dims]) => Object.entries(dims).every(([n, d]) => isDeepStrictEqual(l[Number(id)]?.[n], d)));
    const { value } = await pollUntil(() => listed(s.base), has, 20_000);
    assert.ok(has(value), JSON.stringify(value));
    // The five made while the first batch waited are one more batch, not five.
    await pollUntil(async () => stops(s).length, (n) => n === 2, 20_000);
    assert.deepEqual(stops(s), [`sleeve: failpoint listing-rewrite ${R}`, `sleeve: failpoint listing-rewrite ${R}`]);
    s.child.kill('SIGUSR2');
    // The other process forgets its cached listing at its next look.
    const { value: followed } = await pollUntil(() => listed(other.base), has, 20_000, 100);
    assert.ok(has(followed), JSON.stringify(followed));
    // Stopped: nothing was left waiting (a third batch would stop at the failpoint and be killed).
    assert.equal(await s.stop('SIGTERM', 15_000), 0);
    assert.equal(stops(s).length, 2);
  });

  it('a process killed before its rewrite leaves the listing dirty: the next start writes it with the thumbnail', async () => {
    const s = await startServe({ ...t.env, SLEEVE_TEST_FAILPOINT: 'listing-rewrite' });
    procs.push(s);
    const a = ids.a as number;
    assert.equal((await thumb(s.base, a, 200)).status, 200);
    await pollUntil(async () => stops(s).length, (n) => n === 1, 20_000);
    await s.stop('SIGKILL');
    const stored = JSON.parse(await readFile(path.join(filesRoot(t), `mbid-${R}`, 'index.json'), 'utf8')) as { images: { id: string; thumbnail_dimensions: Dims }[] };
    assert.equal(stored.images.find((i) => i.id === String(a))?.thumbnail_dimensions['200'], undefined);
    const next = await startServe(t.env);
    procs.push(next);
    assert.deepEqual((await listed(next.base))[a]?.['200'], { width: 200, height: 133 });
  });
});

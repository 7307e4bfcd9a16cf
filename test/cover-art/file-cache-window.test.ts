/*
 * The file cache's doorkeeper window (HashWindow: a set of key hashes in one preallocated
 * Int32Array): the same members as a Set through any mix of additions and removals, including
 * runs of colliding hashes that wrap round the end of the array; never more than its bound; and
 * through FileCache, a file let in on its second read, forgotten once the window starts again.
 * And an evicted entry's object made the entry of the next file read into its memory, with that
 * file's own headers. And once full with most lookups missing, only one in SPARSE_ONE_IN of the
 * files the doorkeeper lets in kept, until a set that fits is hit again.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cachedFile, FileCache } from '../../src/cover-art/files/file-cache.js';
import { HashWindow } from '../../src/cover-art/files/hash-window.js';

/**
 * The file cache's hit-ratio window and its sampling once most lookups miss: 1,024 lookups, one
 * in 16 (docs/decisions.md, "The file cache's admission once most lookups miss").
 */
const RATIO_WINDOW = 1024;
const SPARSE_ONE_IN = 16;

/** A small deterministic generator (mulberry32), so a failure replays. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('the doorkeeper window (HashWindow)', () => {
  it('holds what a Set holds through 200,000 additions and removals of colliding hashes', () => {
    // max 24: 64 slots. Hashes that differ by multiples of 64 share a home slot; homes near the
    // end (60–63) make runs that wrap round to the start.
    const w = new HashWindow(24);
    const model = new Set<number>();
    const next = random(12345);
    const pick = (): number => {
      const home = next() < 0.5 ? 60 + Math.floor(next() * 4) : Math.floor(next() * 8);
      return home + 64 * Math.floor(next() * 40) + (next() < 0.1 ? 0x3fffff00 - 64 * 40 : 0);
    };
    for (let i = 0; i < 200_000; i++) {
      const h = pick();
      const r = next();
      if (r < 0.45) {
        const added = w.add(h);
        const fits = model.has(h) || model.size < 24;
        assert.equal(added, fits, `add ${h} at step ${i}`);
        if (fits) model.add(h);
      } else if (r < 0.999) {
        assert.equal(w.delete(h), model.delete(h), `delete ${h} at step ${i}`);
      } else {
        w.clear();
        model.clear();
      }
      assert.equal(w.size, model.size);
    }
    // Every member is still found, and nothing else.
    for (const h of [...model]) assert.equal(w.delete(h), true);
    assert.equal(w.size, 0);
    for (let h = 0; h < 64 * 40; h++) assert.equal(w.delete(h), false);
  });

  it('takes no member past its bound, takes one again after a removal, and is emptied by clear', () => {
    const w = new HashWindow(512);
    for (let h = 0; h < 512; h++) assert.equal(w.add(h * 7919), true);
    assert.equal(w.add(1), false);
    assert.equal(w.add(7919), true, 'a member is still one');
    assert.equal(w.size, 512);
    assert.equal(w.delete(7919), true);
    assert.equal(w.add(1), true);
    assert.equal(w.add(2), false);
    w.clear();
    assert.equal(w.size, 0);
    assert.equal(w.delete(1), false);
    assert.equal(w.add(0x3fffffff), true, 'the largest 30-bit hash');
    assert.equal(w.delete(0x3fffffff), true);
  });
});

describe('the file cache once full: a file gets in on its second read within the window', () => {
  const info = { size: 1000, etag: '"x"', lastModified: new Date(0) };
  const fill = (cache: FileCache, n: number) => {
    for (let i = 0; i < n; i++) {
      const key = `kept-${i}`;
      assert.equal(cache.mayKeep(key), true);
      cache.set(key, cachedFile(key, info, Buffer.alloc(1000)), cache.generation);
    }
  };

  it('says no, then yes; and no again once 512 other keys have started the window again', () => {
    // Eight files of 1,000 bytes (+ 1,024 each) fill 16 KiB; the ninth pushes one out.
    const cache = new FileCache(16 * 1024);
    fill(cache, 9);
    assert.equal(cache.size, 8);
    assert.equal(cache.mayKeep('a'), false);
    assert.equal(cache.mayKeep('a'), true);
    assert.equal(cache.mayKeep('a'), false, 'a yes forgets the key');
    // 'a' is in the window; 511 more keys fill it (512, the smallest window), the next starts it again.
    for (let i = 0; i < 511; i++) assert.equal(cache.mayKeep(`other-${i}`), false);
    assert.equal(cache.mayKeep('b'), false);
    assert.equal(cache.mayKeep('a'), false, 'forgotten when the window started again');
    assert.equal(cache.mayKeep('b'), true);
  });

  it('keeps the window at half the entries of a large cache, within the bound the budget sets', () => {
    // 4 MiB of 1,000-byte files: 2,072 entries, a window of 1,036 keys.
    const cache = new FileCache(4 * 1024 * 1024);
    fill(cache, 2073);
    assert.equal(cache.size, 2072);
    assert.equal(cache.mayKeep('a'), false);
    for (let i = 0; i < 1034; i++) assert.equal(cache.mayKeep(`other-${i}`), false);
    // 1,035 keys in the window: one more fits before it starts again.
    assert.equal(cache.mayKeep('b'), false);
    assert.equal(cache.mayKeep('a'), true, 'still remembered after 1,035 other keys');
    assert.equal(cache.mayKeep('b'), true);
  });
  it('starts the window again at its bound when half the entries are more (a budget past 1 GiB)', () => {
    // 2,072 entries would make a window of 1,036 keys; bounded at 600.
    const cache = new FileCache(4 * 1024 * 1024, { windowMax: 600 });
    fill(cache, 2073);
    assert.equal(cache.mayKeep('a'), false);
    for (let i = 0; i < 598; i++) assert.equal(cache.mayKeep(`other-${i}`), false);
    assert.equal(cache.mayKeep('a'), true, 'remembered with 599 other keys in the window');
    for (let i = 0; i < 600; i++) cache.mayKeep(`more-${i}`);
    assert.equal(cache.mayKeep('b'), false, 'the window started again at 600: b gets in');
    assert.equal(cache.mayKeep('b'), true);
    for (let round = 0; round < 5; round++) {
      // Past many restarts, a key read twice within the window still gets in.
      for (let i = 0; i < 700; i++) cache.mayKeep(`r${round}-${i}`);
      assert.equal(cache.mayKeep(`again-${round}`), false);
      assert.equal(cache.mayKeep(`again-${round}`), true, `round ${round}`);
    }
  });
});

describe('an evicted entry is made the next file read into its memory (FileCache.fileOf)', () => {
  const mbid = '5e1f0000-0000-4000-8000-000000000001';
  const image = (n: number) => `mbid-${mbid}/mbid-${mbid}-${n}.jpg`;
  const info = (etag: string, s: number) => ({ size: 1000, etag, lastModified: new Date(s * 1000) });

  it('with the headers a new entry for that file has, and not when the store read elsewhere', () => {
    const cache = new FileCache(16 * 1024);
    const first = cache.fileOf(image(0), info('"a0"', 1), cache.alloc(1000), undefined);
    assert.equal(first.own, false, 'bytes not in lent memory');
    const kept = [];
    for (let i = 1; i <= 8; i++) {
      const lent = cache.alloc(1000);
      const f = cache.fileOf(image(i), info(`"a${i}"`, i), lent, lent);
      assert.equal(f.own, true);
      f.common = ['stale'];
      cache.set(image(i), f, cache.generation);
      kept.push(f);
    }
    // The ninth pushes the oldest (image 1) out: its memory and object are spare.
    const lent = cache.alloc(1000);
    cache.set(image(9), cache.fileOf(image(9), info('"a9"', 9), lent, lent), cache.generation);
    assert.equal(cache.size, 8);
    // An index.json (another content type and Cache-Control) read into the next memory handed out.
    const key = `mbid-${mbid}/index.json`;
    const bytes = cache.alloc(1000);
    assert.equal(bytes.buffer, kept[0]?.bytes.buffer, 'the evicted entry\'s memory');
    const again = cache.fileOf(key, info('"idx"', 1_700_000_000), bytes, bytes);
    assert.equal(again, kept[0], 'the evicted entry\'s object');
    const fresh = cachedFile(key, info('"idx"', 1_700_000_000), Buffer.from(bytes));
    assert.deepEqual(again.ok, fresh.ok);
    assert.deepEqual(
      [again.etag, again.modifiedS, again.contentType, again.common, again.notModified, again.used, again.writing, again.retired, again.own],
      [fresh.etag, fresh.modifiedS, fresh.contentType, undefined, undefined, false, 0, false, true],
    );
    // Memory handed out but read elsewhere (a store with memory of its own): a new object, not own.
    const spareAgain = cache.alloc(1000);
    cache.set(key, again, cache.generation);
    const elsewhere = cache.fileOf(image(20), info('"b"', 2), Buffer.alloc(1000), spareAgain);
    assert.notEqual(elsewhere, kept[1]);
    assert.equal(elsewhere.own, false);
  });
});

describe('the file cache once full and missing on most lookups: fills sampled', () => {
  const info = { size: 1000, etag: '"x"', lastModified: new Date(0) };
  /** One request as the file server makes it: a hit, or a miss kept when the cache says so. Whether it was a hit. */
  const request = (cache: FileCache, key: string): boolean => {
    if (cache.get(key) !== undefined) return true;
    if (cache.mayKeep(key)) cache.set(key, cachedFile(key, info, Buffer.alloc(1000)), cache.generation);
    return false;
  };
  /** `n` requests spread evenly over `keys` files (seeded); how many of the misses were kept. */
  const spread = (cache: FileCache, prefix: string, keys: number, n: number, seed: number, misses = { n: 0 }): number => {
    const next = random(seed);
    let kept = 0;
    for (let i = 0; i < n; i++) {
      const key = `${prefix}-${Math.floor(next() * keys)}`;
      if (cache.get(key) !== undefined) continue;
      misses.n++;
      if (cache.mayKeep(key)) {
        cache.set(key, cachedFile(key, info, Buffer.alloc(1000)), cache.generation);
        kept++;
      }
    }
    return kept;
  };

  // 64 KiB of 1,000-byte files (+ 1,024 each): 32 entries.
  const budget = 64 * 1024;

  it('keeps a hot set that fits on its second read, never sampling, and answers it from memory', () => {
    const cache = new FileCache(budget);
    // Full first (a file pushed out), with files read once.
    for (let i = 0; i < 40; i++) request(cache, `once-${i}`);
    assert.equal(cache.size, 32);
    const hot = Array.from({ length: 20 }, (_, i) => `hot-${i}`);
    for (const key of hot) assert.equal(request(cache, key), false);
    for (const key of hot) assert.equal(request(cache, key), false, 'its second read: kept now');
    for (let round = 0; round < 100; round++) for (const key of hot) assert.equal(request(cache, key), true, `${key} from memory`);
    assert.equal(cache.sampling, false);
  });

  it('keeps at most one in SPARSE_ONE_IN of its misses over a set far larger than the cache, and all it reads while not full', () => {
    const cache = new FileCache(budget);
    // Two ratio windows over 2,000 files, 32 of which fit: ~2 % hits.
    const first = spread(cache, 'cold', 2000, 2 * RATIO_WINDOW, 1);
    assert.ok(first > 32, 'filled while not full, and pushing out once full');
    assert.equal(cache.sampling, true, 'sampling once a window mostly missed');
    const misses = { n: 0 };
    const sampled = spread(cache, 'cold', 2000, 8 * RATIO_WINDOW, 2, misses);
    // The doorkeeper alone lets in about a quarter of these misses (a window of 512 of 2,000 keys).
    assert.ok(sampled * SPARSE_ONE_IN <= misses.n, `kept ${sampled} of ${misses.n} misses`);
    assert.ok(sampled > 0, 'still some, so that a set that fits again gets in');
    assert.equal(cache.sampling, true);
  });

  it('finds every file it keeps while sampling, through pushes out and a catalogue change', () => {
    const cache = new FileCache(budget);
    const keys = Array.from({ length: 2000 }, (_, i) => `cold-${i}`);
    const found = (): number => keys.filter((key) => cache.get(key) !== undefined).length;
    for (let seed = 10; seed < 14; seed++) {
      spread(cache, 'cold', 2000, 4 * RATIO_WINDOW, seed);
      assert.equal(cache.sampling, true);
      // Over 2,000 keys, each kept one found once (a missed one would make the count short).
      assert.equal(found(), cache.size, `after round ${seed}`);
      assert.equal(cache.sampling, true, 'still sampling: a sweep of mostly misses');
    }
    cache.clear();
    assert.equal(found(), 0);
    spread(cache, 'cold', 2000, 4 * RATIO_WINDOW, 20);
    assert.equal(cache.sampling, true);
    assert.equal(found(), cache.size, 'after the change');
  });

  it('stops sampling once the traffic is a set that fits again, and keeps all of it', () => {
    const cache = new FileCache(budget);
    spread(cache, 'cold', 2000, 4 * RATIO_WINDOW, 3);
    assert.equal(cache.sampling, true);
    const hot = Array.from({ length: 24 }, (_, i) => `hot-${i}`);
    let lookups = 0;
    while (!hot.every((key) => cache.get(key) !== undefined)) {
      for (const key of hot) request(cache, key);
      lookups += hot.length;
      assert.ok(lookups < 40 * RATIO_WINDOW, 'the hot set gets in');
    }
    for (let round = 0; round < 2 * Math.ceil(RATIO_WINDOW / hot.length); round++) for (const key of hot) assert.equal(request(cache, key), true);
    assert.equal(cache.sampling, false, 'a window of hits ends the sampling');
    // Back to sampling nothing: a new hot file gets in on its second read.
    assert.equal(request(cache, 'new'), false);
    assert.equal(request(cache, 'new'), false);
    assert.equal(request(cache, 'new'), true);
  });

  it('starts again from the catalogue change that empties the cache (clear)', () => {
    const cache = new FileCache(budget);
    spread(cache, 'cold', 2000, 4 * RATIO_WINDOW, 4);
    assert.equal(cache.sampling, true);
    cache.clear();
    assert.equal(cache.sampling, false);
    assert.equal(request(cache, 'a'), false);
    assert.equal(request(cache, 'a'), true, 'kept on its first read: not full');
  });
});


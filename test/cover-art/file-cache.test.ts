/*
 * The file server's memory (SLEEVE_FILE_CACHE_BYTES), through the public surface: files
 * moved away on disk behind the server's back show what it answers from memory; the
 * metrics listener shows what it holds; catalogue changes are made with the CLI.
 */
import assert from 'node:assert/strict';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { S3ObjectStore } from '../../src/storage/index.js';
import { cliOk, DIALECT, makeTestEnv, pollUntil, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { newMbid } from './cli-support.js';

interface Got {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
}

async function get(url: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Got> {
  const res = await fetch(url, { headers, method });
  const out: Record<string, string> = {};
  // These differ per request (or per connection), whoever answers.
  res.headers.forEach((v, k) => {
    if (!['date', 'connection', 'keep-alive', 'x-request-id'].includes(k)) out[k] = v;
  });
  return { status: res.status, headers: out, body: Buffer.from(await res.arrayBuffer()) };
}

/** A gauge of the file cache from the server's metrics listener. */
async function gauge(s: RunningServer, name: 'entries' | 'bytes'): Promise<number> {
  const text = await (await fetch(`${s.server.metricsAddress}/metrics`)).text();
  const m = new RegExp(`^sleeve_file_cache_${name} (\\d+)$`, 'm').exec(text);
  assert.ok(m, `sleeve_file_cache_${name} is exposed`);
  return Number(m[1]);
}

const thumbKey = (mbid: string, id: string, size: number) => `mbid-${mbid}/mbid-${mbid}-${id}_thumb${size}.jpg`;
const originalKey = (mbid: string, id: string) => `mbid-${mbid}/mbid-${mbid}-${id}.jpg`;

describe(`the file cache (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const R1 = newMbid();
  const R2 = newMbid();
  const ids: string[] = [];
  let removable: string;
  let keep: string;
  const url = (base: string, key: string) => `${base}/download/${key}`;
  const file = (key: string) => path.join(t.dir, 'files', key);

  /** Moves a stored file away behind the server's back; the result puts it back (same inode, same ETag). */
  async function aside(key: string): Promise<() => Promise<void>> {
    const away = path.join(path.dirname(file(key)), `.aside-${path.basename(key)}`);
    await rename(file(key), away);
    return () => rename(away, file(key));
  }

  async function addArt(mbid: string, width: number): Promise<string> {
    const input = path.join(t.dir, `in-${width}.jpg`);
    await writeFile(input, await makeJpeg(width, width));
    return ((await cliOk(t.env, ['--json', 'art', 'add', mbid, input, '--approved'])) as { id: string }).id;
  }

  before(async () => {
    t = await makeTestEnv();
    await cliOk(t.env, ['release', 'add', R1, '--release-group', newMbid(), '--title', 'Cached']);
    await cliOk(t.env, ['release', 'add', R2, '--release-group', newMbid(), '--title', 'Changing']);
    for (const w of [180, 200, 220]) ids.push(await addArt(R1, w));
    removable = await addArt(R2, 240);
    keep = await addArt(R2, 260);
    s = await startServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('answers a hit with the same status, headers and bytes as the miss that filled it, from memory', async () => {
    for (const key of [originalKey(R1, ids[0] as string), thumbKey(R1, ids[0] as string, 250), `mbid-${R1}/index.json`]) {
      const missHead = await get(url(s.base, key), {}, 'HEAD');
      const miss = await get(url(s.base, key));
      const hit = await get(url(s.base, key));
      assert.equal(miss.status, 200, key);
      assert.deepEqual(hit, miss, `${key}: the hit answers as the miss did`);
      assert.deepEqual(missHead.headers, miss.headers, `${key}: HEAD has GET's headers`);
      assert.equal(miss.headers['access-control-allow-origin'], '*');
      assert.match(miss.headers.etag ?? '', /^"[\x21\x23-\x7e]+"$/);
      assert.equal(miss.headers['content-length'], String(miss.body.length));
      assert.equal(miss.headers['cache-control'], key.endsWith('.json') ? 'public, no-cache' : 'public, max-age=31536000, immutable');
      assert.equal(miss.headers['content-type'], key.endsWith('.json') ? 'application/json' : 'image/jpeg');
      assert.ok(miss.body.equals(await readFile(file(key))), `${key}: the stored bytes`);
      const back = await aside(key);
      try {
        assert.deepEqual(await get(url(s.base, key)), miss, `${key}: answered from memory while the file is away`);
        assert.deepEqual(await get(`${url(s.base, key)}?x=1`), miss, `${key}: a query string names the same file`);
      } finally {
        await back();
      }
    }
  });

  it('answers ranges, 304s and HEAD from memory', async () => {
    const key = thumbKey(R1, ids[1] as string, 500);
    const full = await get(url(s.base, key));
    const size = full.body.length;
    const back = await aside(key);
    try {
      const part = await get(url(s.base, key), { range: 'bytes=10-99' });
      assert.equal(part.status, 206);
      assert.equal(part.headers['content-range'], `bytes 10-99/${size}`);
      assert.equal(part.headers['content-length'], '90');
      assert.equal(part.headers.etag, full.headers.etag);
      assert.ok(part.body.equals(full.body.subarray(10, 100)));
      const tail = await get(url(s.base, key), { range: 'bytes=-20' });
      assert.ok(tail.body.equals(full.body.subarray(size - 20)));
      const none = await get(url(s.base, key), { range: `bytes=${size}-` });
      assert.equal(none.status, 416);
      assert.equal(none.headers['content-range'], `bytes */${size}`);
      assert.equal(none.headers['access-control-allow-origin'], '*');
      const stale = await get(url(s.base, key), { range: 'bytes=0-9', 'if-range': '"other"' });
      assert.equal(stale.status, 200);
      assert.ok(stale.body.equals(full.body));
      const ok = await get(url(s.base, key), { range: 'bytes=0-9', 'if-range': full.headers.etag as string });
      assert.equal(ok.status, 206);

      const inm = await get(url(s.base, key), { 'if-none-match': `"x", ${full.headers.etag}` });
      assert.equal(inm.status, 304);
      assert.equal(inm.body.length, 0);
      assert.equal(inm.headers.etag, full.headers.etag);
      assert.equal(inm.headers['cache-control'], full.headers['cache-control']);
      assert.equal(inm.headers['last-modified'], full.headers['last-modified']);
      assert.equal((await get(url(s.base, key), { 'if-modified-since': full.headers['last-modified'] as string })).status, 304);
      assert.equal((await get(url(s.base, key), { 'if-modified-since': 'Thu, 01 Jan 1970 00:00:00 GMT' })).status, 200);
      assert.equal((await get(url(s.base, key), { 'if-none-match': '"nope"' })).status, 200);

      const head = await get(url(s.base, key), {}, 'HEAD');
      assert.equal(head.status, 200);
      assert.deepEqual(head.headers, full.headers);
      assert.equal(head.body.length, 0);
      const headRange = await get(url(s.base, key), { range: 'bytes=0-9' }, 'HEAD');
      assert.equal(headRange.status, 206);
      assert.equal(headRange.headers['content-length'], '10');
    } finally {
      await back();
    }
  });

  it('keeps only files the catalogue names: a stray file of the layout is served, not kept', async () => {
    const stray = originalKey(R1, '999999999');
    await writeFile(file(stray), await makeJpeg(50, 50));
    assert.equal((await get(url(s.base, stray))).status, 200);
    const back = await aside(stray);
    assert.equal((await get(url(s.base, stray))).status, 404, 'not answered from memory');
    await back();
  });

  it('is emptied by a catalogue change made with the CLI: a removed image 404s, index.json is the new one', async () => {
    const gone = [originalKey(R2, removable), ...[250, 500, 1200].map((n) => thumbKey(R2, removable, n))];
    const kept = thumbKey(R2, keep, 250);
    const index = `mbid-${R2}/index.json`;
    for (const key of [...gone, kept, index]) {
      assert.equal((await get(url(s.base, key))).status, 200, key);
      assert.equal((await get(url(s.base, key))).status, 200, key);
    }
    const before = await get(url(s.base, index));
    assert.equal(JSON.parse(before.body.toString()).images.length, 2);
    await cliOk(t.env, ['art', 'remove', R2, removable]);
    for (const key of gone) {
      const { value, ms } = await pollUntil(async () => (await get(url(s.base, key))).status, (v) => v === 404, 3000);
      assert.equal(value, 404, `${key} of the removed image, ${ms} ms after the command`);
    }
    const listing = await get(url(s.base, index));
    assert.notEqual(listing.headers.etag, before.headers.etag);
    assert.deepEqual(
      JSON.parse(listing.body.toString()).images.map((i: { id: string }) => i.id),
      [keep],
    );
    for (let i = 0; i < 5; i++) for (const key of gone) assert.equal((await get(url(s.base, key))).status, 404, `${key} stays gone`);
    assert.equal((await get(url(s.base, kept))).status, 200);
    assert.equal((await get(url(s.base, `${index}`), { 'if-none-match': listing.headers.etag as string })).status, 304);
  });

  describe('bounded in bytes', () => {
    /** Twelve files of R1 (three images, four files each), in the order they are asked for. */
    const files = () => ids.flatMap((id) => [originalKey(R1, id), ...[250, 500, 1200].map((n) => thumbKey(R1, id, n))]);
    let costs: number[];

    before(async () => {
      // What each file costs the cache, as a server with room for all of them counts it.
      const big = await startServer(t, { SLEEVE_FILE_CACHE_BYTES: String(64 << 20) });
      try {
        costs = [];
        let last = await gauge(big, 'bytes');
        for (const key of files()) {
          await get(url(big.base, key));
          const now = await gauge(big, 'bytes');
          costs.push(now - last);
          last = now;
        }
      } finally {
        await big.server.close();
      }
      for (const [i, key] of files().entries()) assert.ok((costs[i] as number) > (await stat(file(key))).size, `${key} is counted with its bytes`);
    });

    /** A server with room for the first eleven files and one byte short of also holding the twelfth. */
    async function tight(): Promise<RunningServer> {
      const budget = costs.reduce((a, b) => a + b, 0) - 1;
      const largest = Math.max(...(await Promise.all(files().map(async (k) => (await stat(file(k))).size))));
      assert.ok(largest <= budget / 8, 'every file is small enough to be kept (an eighth of the budget)');
      return startServer(t, { SLEEVE_FILE_CACHE_BYTES: String(budget) });
    }

    /** Which files a server answers while every file is away on disk. */
    async function heldBy(server: RunningServer): Promise<boolean[]> {
      const backs = await Promise.all(files().map(aside));
      try {
        const held: boolean[] = [];
        for (const key of files()) held.push((await get(url(server.base, key))).status === 200);
        return held;
      } finally {
        for (const back of backs) await back();
      }
    }

    it('evicts the oldest file when the next one would pass the budget; once full, lets a file in on its second read', async () => {
      const server = await tight();
      try {
        const keys = files();
        for (const key of keys.slice(0, 11)) await get(url(server.base, key));
        assert.equal(await gauge(server, 'entries'), 11);
        assert.equal(await gauge(server, 'bytes'), costs.slice(0, 11).reduce((a, b) => a + b, 0));
        await get(url(server.base, keys[11] as string));
        assert.equal(await gauge(server, 'entries'), 11);
        assert.equal(await gauge(server, 'bytes'), costs.slice(1).reduce((a, b) => a + b, 0), 'the first file went');

        // Full now: a file read once is answered but not kept, and nothing is pushed out for it.
        await get(url(server.base, keys[0] as string));
        assert.equal(await gauge(server, 'bytes'), costs.slice(1).reduce((a, b) => a + b, 0));
        // Read again, it gets in, and the oldest not read since goes.
        await get(url(server.base, keys[0] as string));
        assert.equal(await gauge(server, 'entries'), 11);
        assert.deepEqual(await heldBy(server), [true, false, ...Array<boolean>(10).fill(true)]);
      } finally {
        await server.server.close();
      }
    });

    it('gives a file read again since a second chance: the next oldest goes instead', async () => {
      const server = await tight();
      try {
        const keys = files();
        for (const key of keys.slice(0, 11)) await get(url(server.base, key));
        await get(url(server.base, keys[0] as string));
        await get(url(server.base, keys[11] as string));
        const held = await heldBy(server);
        assert.deepEqual(held, [true, false, ...Array<boolean>(10).fill(true)]);
        assert.ok((await gauge(server, 'bytes')) <= costs.reduce((a, b) => a + b, 0) - 1, 'within the budget');
      } finally {
        await server.server.close();
      }
    });

    it('keeps nothing with SLEEVE_FILE_CACHE_BYTES=0, and answers the same', async () => {
      const off = await startServer(t, { SLEEVE_FILE_CACHE_BYTES: '0' });
      try {
        const key = thumbKey(R1, ids[2] as string, 250);
        const first = await get(url(off.base, key));
        assert.deepEqual(await get(url(s.base, key)), first, 'as a server with a cache answers');
        // Read again with no cache: described from the store's memory of the image's stat, the same answers.
        assert.deepEqual(await get(url(off.base, key)), first, 'as its own first read answered');
        assert.deepEqual(await get(url(off.base, key), { range: 'bytes=3-12' }), await get(url(s.base, key), { range: 'bytes=3-12' }));
        assert.deepEqual(await get(url(off.base, key), {}, 'HEAD'), await get(url(s.base, key), {}, 'HEAD'));
        assert.equal((await get(url(off.base, key), { 'if-none-match': first.headers.etag as string })).status, 304);
        assert.equal((await get(url(off.base, key), { range: 'bytes=0-9' })).status, 206);
        const back = await aside(key);
        try {
          assert.equal((await get(url(off.base, key))).status, 404);
        } finally {
          await back();
        }
        assert.equal(await gauge(off, 'entries'), 0);
        // Files not kept are read into memory lent to each answer: answers in flight together never mix.
        const keys = files();
        const want = await Promise.all(keys.map((k) => readFile(file(k))));
        const got = await Promise.all(Array.from({ length: 240 }, (_, i) => get(url(off.base, keys[i % keys.length] as string), i % 5 === 0 ? { range: 'bytes=5-' } : {})));
        for (const [i, r] of got.entries()) {
          const whole = want[i % keys.length] as Buffer;
          assert.ok(r.body.equals(i % 5 === 0 ? whole.subarray(5) : whole), `answer ${i}`);
        }
      } finally {
        await off.server.close();
      }
    });
  });
});

describe(`the file cache over an S3 bucket (${DIALECT})`, () => {
  let s3: S3TestServer;
  let t: TestEnv;
  let s: RunningServer;
  let bucket: S3ObjectStore;
  const R = newMbid();
  let id: string;

  before(async () => {
    s3 = await startS3();
    t = await makeTestEnv(s3.env);
    bucket = new S3ObjectStore({ bucket: s3.bucket, endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, credentials: s3.credentials });
    await cliOk(t.env, ['release', 'add', R, '--release-group', newMbid(), '--title', 'Bucket']);
    const input = path.join(t.dir, 'in.jpg');
    await writeFile(input, await makeJpeg(300, 300));
    id = ((await cliOk(t.env, ['--json', 'art', 'add', R, input, '--approved'])) as { id: string }).id;
    // The server runs in this process, where the SDK looks for its credentials.
    process.env.AWS_ACCESS_KEY_ID = s3.credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = s3.credentials.secretAccessKey;
    s = await startServer(t);
  });

  after(async () => {
    await s?.server.close();
    await bucket?.close();
    await t?.cleanup();
    await s3?.close();
    delete process.env.AWS_ACCESS_KEY_ID;
    delete process.env.AWS_SECRET_ACCESS_KEY;
  });

  it('reads the bucket through the same cache', async () => {
    const key = thumbKey(R, id, 250);
    const stored = Buffer.from(await (await s3.fetchObject(key)).arrayBuffer());
    const miss = await get(`${s.base}/download/${key}`);
    assert.equal(miss.status, 200);
    assert.ok(miss.body.equals(stored));
    assert.equal(miss.headers['content-type'], 'image/jpeg');
    assert.equal(miss.headers['cache-control'], 'public, max-age=31536000, immutable');
    assert.deepEqual(await get(`${s.base}/download/${key}`), miss);
    assert.equal(await gauge(s, 'entries'), 1);

    // Gone from the bucket behind the server's back: still answered, from memory.
    await bucket.delete(key);
    assert.equal((await s3.fetchObject(key)).status, 404);
    assert.deepEqual(await get(`${s.base}/download/${key}`), miss);
    const part = await get(`${s.base}/download/${key}`, { range: 'bytes=0-9' });
    assert.equal(part.status, 206);
    assert.ok(part.body.equals(stored.subarray(0, 10)));
    assert.equal((await get(`${s.base}/download/${key}`, { 'if-none-match': miss.headers.etag as string })).status, 304);

    // A change through the CLI empties it.
    await cliOk(t.env, ['art', 'remove', R, id]);
    const { value } = await pollUntil(async () => (await get(`${s.base}/download/${key}`)).status, (v) => v === 404, 3000);
    assert.equal(value, 404);
    assert.equal(JSON.parse((await get(`${s.base}/download/mbid-${R}/index.json`)).body.toString()).images.length, 0);
  });
});

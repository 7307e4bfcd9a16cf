/*
 * S3ObjectStore against a real S3-compatible server (s3rver, test/helpers/s3.ts): the
 * store contract with and without a key prefix, then what only a bucket has: content
 * types and cache headers a browser sees, pagination, the prefix as a fence, a store that
 * goes away and comes back, and the readiness probe.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { S3ObjectStore, type ObjectStore } from '../../src/storage/index.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { readAll, runObjectStoreContract } from './object-store.contract.js';

let s3: S3TestServer;
let buckets = 0;

before(async () => {
  s3 = await startS3();
  // The prefixed stores below share one bucket with neighbours outside every prefix: none may leak in.
  await s3.createBucket('prefixed');
  const neighbour = storeOn('prefixed');
  await neighbour.put('mbid-a/index.json', Buffer.from('outside'), 'application/json');
  await neighbour.put('tenant/mbid-a/index.json', Buffer.from('outside'), 'application/json');
  await neighbour.close();
});

after(async () => {
  await s3?.close();
});

function storeOn(bucket: string, extra: { prefix?: string; listPageSize?: number } = {}): S3ObjectStore {
  return new S3ObjectStore({ bucket, endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, credentials: s3.credentials, ...extra });
}

// A fresh bucket for every test: the contract wants an empty store each time.
runObjectStoreContract('S3ObjectStore', async () => {
  const bucket = `contract-${++buckets}`;
  await s3.createBucket(bucket);
  return storeOn(bucket, { listPageSize: 3 });
});

runObjectStoreContract('S3ObjectStore with a key prefix', async () => storeOn('prefixed', { prefix: `tenant/t${++buckets}`, listPageSize: 4 }));

describe('S3ObjectStore in a bucket', () => {
  let store: S3ObjectStore;

  before(async () => {
    await s3.createBucket('special');
    store = storeOn('special');
  });

  after(async () => {
    await store?.close();
  });

  it('objects carry the Content-Type of their suffix and cache headers fit for the layout, as a browser sees them', async () => {
    const mbid = '0b1c2d3e-4f50-4617-8899-aabbccddeeff';
    const cases: [string, string, string, string | null][] = [
      [`mbid-${mbid}/mbid-${mbid}-1.jpg`, 'application/octet-stream', 'image/jpeg', 'public, max-age=31536000, immutable'],
      [`mbid-${mbid}/mbid-${mbid}-2.png`, 'application/octet-stream', 'image/png', 'public, max-age=31536000, immutable'],
      [`mbid-${mbid}/mbid-${mbid}-3.gif`, 'image/png', 'image/gif', 'public, max-age=31536000, immutable'],
      [`mbid-${mbid}/mbid-${mbid}-4.pdf`, 'text/plain', 'application/pdf', 'public, max-age=31536000, immutable'],
      [`mbid-${mbid}/mbid-${mbid}-1_thumb250.jpg`, 'image/jpeg', 'image/jpeg', 'public, max-age=31536000, immutable'],
      [`mbid-${mbid}/index.json`, 'application/json; charset=utf-8', 'application/json', 'public, no-cache'],
      ['other/notes.txt', 'text/plain; charset=utf-8', 'text/plain; charset=utf-8', null],
    ];
    for (const [key, given] of cases) await store.put(key, Buffer.from(key), given);
    for (const [key, , type, cache] of cases) {
      const res = await s3.fetchObject(key, 'special');
      assert.equal(res.status, 200, key);
      assert.equal(res.headers.get('content-type'), type, key);
      assert.equal(res.headers.get('cache-control'), cache, key);
      assert.equal(await res.text(), key);
    }
  });

  it('lists past S3 pages (continuation tokens), sorted, whatever the page size', async () => {
    await s3.createBucket('many');
    const writer = storeOn('many');
    const keys = Array.from({ length: 57 }, (_, i) => `mbid-x/k${String((i * 37) % 57).padStart(3, '0')}.jpg`);
    keys.push('mbid-y/index.json', 'top.txt');
    for (let i = 0; i < keys.length; i += 10) await Promise.all(keys.slice(i, i + 10).map((k) => writer.put(k, Buffer.from('x'), 'image/jpeg')));
    const sorted = [...keys].sort();
    for (const pageSize of [1, 7, 1000]) {
      const s = storeOn('many', { listPageSize: pageSize });
      assert.deepEqual(await s.list(''), sorted, `page size ${pageSize}`);
      assert.deepEqual(await s.list('mbid-x/'), sorted.filter((k) => k.startsWith('mbid-x/')), `page size ${pageSize}`);
      await s.close();
    }
    await writer.close();
  });

  it('lists more than 1000 keys (more than one page at S3 page size)', async () => {
    await s3.createBucket('thousand');
    const writer = storeOn('thousand');
    const keys = Array.from({ length: 1010 }, (_, i) => `p/${randomBytes(6).toString('hex')}-${i}`);
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => writer.put(k, Buffer.alloc(1), 'application/octet-stream')));
    assert.deepEqual(await writer.list('p/'), [...keys].sort());
    assert.equal((await s3.listKeys('p/', 'thousand')).length, 1010, 'the bucket really holds them all');
    await writer.close();
  });

  it('a key prefix is a fence: objects are stored under it, and nothing outside it is seen or touched', async () => {
    await s3.createBucket('fenced');
    const outside = storeOn('fenced');
    const inside = storeOn('fenced', { prefix: 'covers/v1' });
    await outside.put('mbid-a/index.json', Buffer.from('outside'), 'application/json');
    await inside.put('mbid-a/index.json', Buffer.from('inside'), 'application/json');
    assert.deepEqual(await s3.listKeys('', 'fenced'), ['covers/v1/mbid-a/index.json', 'mbid-a/index.json']);
    assert.deepEqual(await inside.list(''), ['mbid-a/index.json']);
    assert.deepEqual(await outside.list(''), ['covers/v1/mbid-a/index.json', 'mbid-a/index.json']);
    const got = await inside.get('mbid-a/index.json');
    assert.ok(got);
    assert.equal((await readAll(got.body)).toString(), 'inside');
    await inside.delete('mbid-a/index.json');
    assert.deepEqual(await s3.listKeys('', 'fenced'), ['mbid-a/index.json']);
    await inside.close();
    await outside.close();
  });

  it('does not list keys of other tools that the layout could not have written', async () => {
    await s3.createBucket('foreign');
    const s = storeOn('foreign');
    await s.put('mbid-a/index.json', Buffer.from('{}'), 'application/json');
    // Written around the store: names a sleeve key can never have.
    for (const key of ['mbid-a/.DS_Store', 'mbid-a/with%20space.jpg', '.hidden']) {
      const res = await fetch(`${s3.endpoint}/foreign/${key}`, { method: 'PUT', body: 'x' });
      assert.equal(res.status, 200);
    }
    assert.deepEqual(await s.list(''), ['mbid-a/index.json']);
    await s.close();
  });

  it('ready() resolves for a bucket that answers and names a missing bucket', async () => {
    await store.ready();
    const missing = storeOn('no-such-bucket');
    await assert.rejects(missing.ready(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'STORE_UNAVAILABLE');
      assert.match(err.message, /s3:\/\/no-such-bucket at http:\/\/127\.0\.0\.1:\d+ is unavailable: .*the bucket no-such-bucket does not exist/);
      return true;
    });
    await assert.rejects(missing.put('a', Buffer.from('x'), 'text/plain'), /the bucket no-such-bucket does not exist/);
    await missing.close();
  });

  it('closing a store that was never used loads nothing and does not fail', async () => {
    const idle: ObjectStore = storeOn('special');
    await idle.close();
    await assert.rejects(idle.head('a'), /closed/);
  });
});

describe('S3ObjectStore while the store is away', () => {
  let store: S3ObjectStore;
  const key = 'mbid-a/mbid-a-1.jpg';
  const bytes = randomBytes(200_000);

  before(async () => {
    await s3.createBucket('faults');
    store = storeOn('faults');
    await store.put(key, bytes, 'image/jpeg');
  });

  after(async () => {
    await s3.start();
    await store?.close();
  });

  it('every operation fails fast with a STORE_UNAVAILABLE error naming the store, then works again when it is back', async () => {
    await s3.stop();
    const ops: [string, () => Promise<unknown>][] = [
      ['put', () => store.put('mbid-a/other.jpg', Buffer.from('x'), 'image/jpeg')],
      ['head', () => store.head(key)],
      ['get', () => store.get(key)],
      ['get range', () => store.get(key, { start: 0, end: 9 })],
      ['delete', () => store.delete(key)],
      ['list', () => store.list('mbid-a/')],
      ['ready', () => store.ready()],
    ];
    for (const [name, op] of ops) {
      const started = Date.now();
      await assert.rejects(op(), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'STORE_UNAVAILABLE', `${name}: ${err.stack}`);
        assert.match(err.message, /^object store s3:\/\/faults at http:\/\/127\.0\.0\.1:\d+ is unavailable: could not .*ECONNREFUSED/, name);
        return true;
      });
      assert.ok(Date.now() - started < 5_000, `${name} gave up within 5 s (took ${Date.now() - started} ms)`);
    }

    await s3.start();
    // The same store object (and its connection pool) recovers: nothing was lost or half-done.
    await store.ready();
    assert.equal((await store.head(key))?.size, bytes.length);
    const got = await store.get(key);
    assert.ok(got);
    assert.ok((await readAll(got.body)).equals(bytes));
    assert.deepEqual(await store.list('mbid-a/'), [key], 'the put made while it was away left nothing');
  });

  it('a store that takes connections but never answers is given up after its answer timeout and retries, not waited on for ever', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => {
      sockets.push(socket);
      socket.on('data', () => {});
    });
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as AddressInfo).port;
    // An answer timeout of 300 ms instead of 5 s: three attempts of it (the default's would take 15 s).
    const hung = new S3ObjectStore({ bucket: 'faults', endpoint: `http://127.0.0.1:${port}`, region: s3.region, forcePathStyle: true, credentials: s3.credentials, answerTimeoutMs: 300 });
    try {
      const started = Date.now();
      await assert.rejects(hung.head(key), (err: Error & { code?: string }) => {
        assert.equal(err.code, 'STORE_UNAVAILABLE');
        assert.match(err.message, /could not look up mbid-a\/mbid-a-1\.jpg: no answer in time .*\(after 3 attempts\)$/);
        return true;
      });
      const took = Date.now() - started;
      // Its retries are in the message (3 attempts); only the upper bound is the clock's.
      assert.ok(took < 10_000, `took ${took} ms`);
    } finally {
      await hung.close();
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  it('a body cut off by the store going away errors instead of ending short', async () => {
    // Larger than what the kernels' socket buffers can hold, so some of it is still to come when the store dies.
    const big = randomBytes(32 * 1024 * 1024);
    await store.put('mbid-a/big.png', big, 'image/png');
    const got = await store.get('mbid-a/big.png');
    assert.ok(got);
    const first = await new Promise<Buffer>((resolve) => got.body.once('data', resolve));
    assert.ok(first.length > 0);
    got.body.pause();
    await s3.stop();
    await assert.rejects(readAll(got.body));
    await s3.start();
  });
});

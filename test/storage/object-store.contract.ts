import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { ObjectStore } from '../../src/storage/index.js';

/**
 * The behaviour every ObjectStore owes its callers (src/storage/object-store.ts), as one
 * suite each implementation runs: the file store now, an S3 store later. `makeStore`
 * gives a fresh, empty store for every test; the suite closes it afterwards.
 */
export function runObjectStoreContract(name: string, makeStore: () => Promise<ObjectStore>): void {
  describe(`ObjectStore contract: ${name}`, () => {
    let store: ObjectStore;

    beforeEach(async () => {
      store = await makeStore();
    });

    afterEach(async () => {
      await store.close();
    });

    it('is ready for use, fresh and after a put', async () => {
      await store.ready();
      await store.put('mbid-a/index.json', Buffer.from('{}'), 'application/json');
      await store.ready();
    });

    describe('put, get and head', () => {
      it('gives back exactly the bytes put, with a size, a strong quoted etag and a modification date', async () => {
        const bytes = randomBytes(4096);
        const before = Date.now();
        await store.put('mbid-a/mbid-a-1.jpg', bytes, 'image/jpeg');
        const info = await store.head('mbid-a/mbid-a-1.jpg');
        assert.ok(info, 'head finds the object just put');
        assert.equal(info.size, bytes.length);
        assert.match(info.etag, /^"[\x21\x23-\x7e]+"$/, 'a strong entity tag, quoted, as it goes in an ETag header');
        assert.ok(info.lastModified instanceof Date && !Number.isNaN(info.lastModified.getTime()));
        // Allow for coarse timestamps (whole seconds on some stores) and a little clock skew.
        assert.ok(Math.abs(info.lastModified.getTime() - before) < 60_000, `lastModified ${info.lastModified.toISOString()} is about now`);

        const got = await store.get('mbid-a/mbid-a-1.jpg');
        assert.ok(got, 'get finds the object just put');
        assert.deepEqual(await readAll(got.body), bytes);
        assert.deepEqual(got.info, info, 'get describes the object as head does');
      });

      it('keeps an empty object', async () => {
        await store.put('empty.bin', Buffer.alloc(0), 'application/octet-stream');
        assert.equal((await store.head('empty.bin'))?.size, 0);
        const got = await store.get('empty.bin');
        assert.ok(got);
        assert.equal((await readAll(got.body)).length, 0);
      });

      it('keeps a large binary object intact', async () => {
        const bytes = randomBytes(3 * 1024 * 1024 + 7);
        await store.put('big/blob.bin', bytes, 'application/octet-stream');
        const got = await store.get('big/blob.bin');
        assert.ok(got);
        assert.ok((await readAll(got.body)).equals(bytes));
        assert.equal((await store.head('big/blob.bin'))?.size, bytes.length);
      });

      it('accepts every shape of key the archive layout uses, nested folders included', async () => {
        const mbid = '0b1c2d3e-4f50-4617-8899-aabbccddeeff';
        const keys = [
          `mbid-${mbid}/index.json`,
          `mbid-${mbid}/mbid-${mbid}-4242424242.png`,
          `mbid-${mbid}/mbid-${mbid}-4242424242_thumb1200.jpg`,
          'A_b-c.d.e',
          '_leading_underscore',
          'x/y/z/deep.txt',
        ];
        for (const [i, key] of keys.entries()) await store.put(key, Buffer.from(`object ${i}`), 'text/plain');
        for (const [i, key] of keys.entries()) {
          const got = await store.get(key);
          assert.ok(got, key);
          assert.equal((await readAll(got.body)).toString(), `object ${i}`, key);
        }
      });

      it('keeps objects apart: a key is not a prefix match of another', async () => {
        await store.put('a/b', Buffer.from('ab'), 'text/plain');
        await store.put('a/bc', Buffer.from('abc'), 'text/plain');
        await store.put('a/b.c', Buffer.from('a-b.c'), 'text/plain');
        assert.equal((await store.head('a/b'))?.size, 2);
        assert.equal((await store.head('a/bc'))?.size, 3);
        assert.equal((await store.head('a/b.c'))?.size, 5);
      });
    });

    describe('read: a small object whole, a larger one only described', () => {
      it('reads an object of at most maxBytes whole, described as head does', async () => {
        const bytes = randomBytes(5000);
        await store.put('mbid-a/mbid-a-2.jpg', bytes, 'image/jpeg');
        for (const max of [5000, 1 << 20]) {
          const read = await store.read('mbid-a/mbid-a-2.jpg', max);
          assert.ok(read, `read with maxBytes ${max} finds the object`);
          assert.ok(read.bytes?.equals(bytes), `read with maxBytes ${max} gives back the bytes`);
          assert.deepEqual(read.info, await store.head('mbid-a/mbid-a-2.jpg'));
        }
        await store.put('empty.bin', Buffer.alloc(0), 'application/octet-stream');
        assert.equal((await store.read('empty.bin', 10))?.bytes?.length, 0);
      });

      it('only describes an object larger than maxBytes, and finds no missing one', async () => {
        const bytes = randomBytes(300 * 1024);
        await store.put('mbid-a/mbid-a-3.jpg', bytes, 'image/jpeg');
        const read = await store.read('mbid-a/mbid-a-3.jpg', bytes.length - 1);
        assert.ok(read);
        assert.equal(read.bytes, undefined);
        assert.deepEqual(read.info, await store.head('mbid-a/mbid-a-3.jpg'));
        // Above the size read on the calling thread by the file store: read through the pool.
        assert.ok((await store.read('mbid-a/mbid-a-3.jpg', bytes.length))?.bytes?.equals(bytes));
        assert.equal(await store.read('mbid-a/mbid-a-4.jpg', 1000), undefined);
        assert.equal(await store.read('mbid-zz/index.json', 1000), undefined);
      });
    });

    describe('missing keys', () => {
      it('head and get answer undefined for a key never put', async () => {
        assert.equal(await store.head('mbid-x/index.json'), undefined);
        assert.equal(await store.get('mbid-x/index.json'), undefined);
        assert.equal(await store.get('mbid-x/index.json', { start: 0, end: 10 }), undefined);
      });

      it('a folder that holds objects is not itself an object', async () => {
        await store.put('mbid-a/index.json', Buffer.from('{}'), 'application/json');
        assert.equal(await store.head('mbid-a'), undefined);
        assert.equal(await store.get('mbid-a'), undefined);
      });

      it('removing the name of a folder removes nothing', async () => {
        await store.put('mbid-a/index.json', Buffer.from('{}'), 'application/json');
        await store.delete('mbid-a');
        assert.deepEqual(await store.list(''), ['mbid-a/index.json']);
      });

      it('a key under an object is missing, not an error', async () => {
        await store.put('plain', Buffer.from('x'), 'text/plain');
        assert.equal(await store.head('plain/child'), undefined);
        assert.equal(await store.get('plain/child'), undefined);
        await store.delete('plain/child');
        assert.equal((await store.head('plain'))?.size, 1);
      });
    });

    describe('replacing an object', () => {
      it('a rewrite replaces the bytes and changes the etag, even at the same size', async () => {
        const first = Buffer.alloc(1000, 0x61);
        const second = Buffer.alloc(1000, 0x62);
        await store.put('mbid-a/index.json', first, 'application/json');
        const a = await store.head('mbid-a/index.json');
        assert.ok(a);
        assert.deepEqual(await store.head('mbid-a/index.json'), a, 'the etag is stable while nothing changes');
        await store.put('mbid-a/index.json', second, 'application/json');
        const b = await store.head('mbid-a/index.json');
        assert.ok(b);
        assert.notEqual(b.etag, a.etag);
        assert.equal(b.size, 1000);
        const got = await store.get('mbid-a/index.json');
        assert.ok(got);
        assert.deepEqual(await readAll(got.body), second);
      });

      it('a rewrite to another size reports the new size', async () => {
        await store.put('k', Buffer.alloc(10), 'application/octet-stream');
        await store.put('k', Buffer.alloc(3), 'application/octet-stream');
        assert.equal((await store.head('k'))?.size, 3);
      });

      it('readers during rewrites see the old object or the new one, never a mix or a part', async () => {
        const versions = [Buffer.alloc(256 * 1024, 0x41), Buffer.alloc(300 * 1024, 0x42), Buffer.alloc(200 * 1024, 0x43)];
        await store.put('hot/index.json', versions[0] as Buffer, 'application/json');
        let writing = true;
        const writer = (async () => {
          try {
            for (let i = 1; i <= 24; i++) await store.put('hot/index.json', versions[i % versions.length] as Buffer, 'application/json');
          } finally {
            writing = false;
          }
        })();
        const seen: Buffer[] = [];
        const reader = async () => {
          while (writing) {
            const got = await store.get('hot/index.json');
            assert.ok(got, 'the object never goes missing while being replaced');
            seen.push(await readAll(got.body));
          }
        };
        await Promise.all([writer, reader(), reader(), reader()]);
        assert.ok(seen.length > 0);
        for (const body of seen) {
          assert.ok(
            versions.some((v) => v.equals(body)),
            `a read of ${body.length} bytes matches one whole version`,
          );
        }
      });
    });

    describe('ranges', () => {
      const bytes = Buffer.from(Array.from({ length: 1000 }, (_, i) => i % 251));

      beforeEach(async () => {
        await store.put('r/obj.bin', bytes, 'application/octet-stream');
      });

      for (const [start, end] of [
        [0, 99],
        [100, 199],
        [990, 999],
        [0, 0],
        [999, 999],
        [0, 999],
      ] as const) {
        it(`get with bytes ${start}-${end} streams exactly those bytes and describes the whole object`, async () => {
          const got = await store.get('r/obj.bin', { start, end });
          assert.ok(got);
          assert.deepEqual(await readAll(got.body), bytes.subarray(start, end + 1));
          const info = await store.head('r/obj.bin');
          assert.deepEqual(got.info, info);
          assert.equal(got.info.size, 1000);
        });
      }
    });

    describe('delete', () => {
      it('removes the object', async () => {
        await store.put('mbid-a/mbid-a-1.jpg', Buffer.from('x'), 'image/jpeg');
        await store.put('mbid-a/mbid-a-2.jpg', Buffer.from('y'), 'image/jpeg');
        await store.delete('mbid-a/mbid-a-1.jpg');
        assert.equal(await store.head('mbid-a/mbid-a-1.jpg'), undefined);
        assert.equal(await store.get('mbid-a/mbid-a-1.jpg'), undefined);
        assert.deepEqual(await store.list('mbid-a/'), ['mbid-a/mbid-a-2.jpg'], 'its neighbour stays');
      });

      it('removing a missing object is not an error, nor is removing twice', async () => {
        await store.delete('never/was.jpg');
        await store.delete('nofolder');
        await store.put('once', Buffer.from('1'), 'text/plain');
        await store.delete('once');
        await store.delete('once');
        assert.equal(await store.head('once'), undefined);
      });

      it('an object can be put again after its removal', async () => {
        await store.put('again', Buffer.from('first'), 'text/plain');
        await store.delete('again');
        await store.put('again', Buffer.from('second'), 'text/plain');
        const got = await store.get('again');
        assert.ok(got);
        assert.equal((await readAll(got.body)).toString(), 'second');
      });
    });

    describe('list', () => {
      beforeEach(async () => {
        for (const key of ['mbid-a/index.json', 'mbid-a/mbid-a-1.jpg', 'mbid-a/mbid-a-1_thumb250.jpg', 'mbid-ab/index.json', 'mbid-b/index.json', 'top.txt', 'x/y/z.txt']) {
          await store.put(key, Buffer.from(key), 'application/octet-stream');
        }
      });

      it('lists the keys under a folder prefix, sorted', async () => {
        assert.deepEqual(await store.list('mbid-a/'), ['mbid-a/index.json', 'mbid-a/mbid-a-1.jpg', 'mbid-a/mbid-a-1_thumb250.jpg']);
        assert.deepEqual(await store.list('x/'), ['x/y/z.txt']);
        assert.deepEqual(await store.list('x/y/'), ['x/y/z.txt']);
      });

      it('treats the prefix as a string prefix, not as a folder name', async () => {
        assert.deepEqual(await store.list('mbid-a'), ['mbid-a/index.json', 'mbid-a/mbid-a-1.jpg', 'mbid-a/mbid-a-1_thumb250.jpg', 'mbid-ab/index.json']);
        assert.deepEqual(await store.list('mbid-a/mbid-a-1'), ['mbid-a/mbid-a-1.jpg', 'mbid-a/mbid-a-1_thumb250.jpg']);
        assert.deepEqual(await store.list('mbid-a/i'), ['mbid-a/index.json']);
        assert.deepEqual(await store.list('t'), ['top.txt']);
      });

      it('lists every key for the empty prefix and none for a prefix nothing starts with', async () => {
        const all = await store.list('');
        assert.deepEqual(all, ['mbid-a/index.json', 'mbid-a/mbid-a-1.jpg', 'mbid-a/mbid-a-1_thumb250.jpg', 'mbid-ab/index.json', 'mbid-b/index.json', 'top.txt', 'x/y/z.txt']);
        assert.deepEqual(await store.list('mbid-c/'), []);
        assert.deepEqual(await store.list('zzz'), []);
      });

      it('moves an object to another key, and says when there was none', async () => {
        const bytes = randomBytes(2048);
        await store.put('uploads/7-ab/original.jpg', bytes, 'image/jpeg');
        assert.equal(await store.move('uploads/7-ab/original.jpg', 'mbid-c/mbid-c-7.jpg'), true);
        assert.equal(await store.head('uploads/7-ab/original.jpg'), undefined, 'gone from the old key');
        const got = await store.get('mbid-c/mbid-c-7.jpg');
        assert.ok(got);
        assert.deepEqual(await readAll(got.body), bytes);
        assert.equal(await store.move('uploads/7-ab/original.jpg', 'mbid-c/mbid-c-7.jpg'), false);
        assert.deepEqual(await store.list('uploads/'), []);
      });

      it('removes a folder with all it holds, and nothing beside it', async () => {
        await store.put('uploads/8-cd/original.jpg', Buffer.from('o'), 'image/jpeg');
        await store.put('uploads/8-cd/thumb250.jpg', Buffer.from('t'), 'image/jpeg');
        await store.put('uploads/8-cde/original.jpg', Buffer.from('n'), 'image/jpeg');
        await store.removeFolder('uploads/8-cd');
        assert.deepEqual(await store.list('uploads/'), ['uploads/8-cde/original.jpg']);
        // A folder that is not there: nothing to do.
        await store.removeFolder('uploads/9-ef');
      });

      it('makes a folder batch-put into durable where the store has batch writes, and sweeps what no writer left', async () => {
        const batch = store.batchWrites;
        if (batch === undefined) await store.put('mbid-d/mbid-d-1.jpg', Buffer.from('d'), 'image/jpeg');
        else {
          await batch.batchPut('mbid-d/mbid-d-1.jpg', Buffer.from('d'), 'image/jpeg');
          await batch.syncFolder('mbid-d');
          await batch.syncFolder('mbid-none');
          assert.deepEqual(await batch.batchList('mbid-d/'), ['mbid-d/mbid-d-1.jpg']);
        }
        assert.deepEqual((await store.read('mbid-d/mbid-d-1.jpg', 1024))?.bytes, Buffer.from('d'));
        assert.equal(await store.sweepTemporary(), 0);
        assert.equal(await store.removeStrayTemporary('mbid-d'), 0);
      });

      it('follows puts and deletes', async () => {
        await store.put('mbid-b/mbid-b-9.png', Buffer.from('p'), 'image/png');
        await store.delete('mbid-b/index.json');
        assert.deepEqual(await store.list('mbid-b/'), ['mbid-b/mbid-b-9.png']);
        await store.delete('mbid-b/mbid-b-9.png');
        assert.deepEqual(await store.list('mbid-b/'), []);
        assert.deepEqual(await store.list('mbid-b'), []);
      });
    });

    describe('invalid keys are refused by throwing', () => {
      const invalid = [
        '',
        '../x',
        '..',
        '.',
        '/abs',
        '/etc/passwd',
        'a//b',
        'a/',
        'a/../b',
        'a/./b',
        '.hidden',
        'mbid-a/.tmp-0123',
        'a\\b',
        '..\\x',
        'a\0b',
        'a b',
        'a/b?c',
        'ü.jpg',
        'x'.repeat(1025),
      ];

      for (const key of invalid) {
        it(`refuses ${JSON.stringify(key.length > 40 ? `${key.slice(0, 10)}… (${key.length} chars)` : key)} in put, get, head and delete`, async () => {
          await assert.rejects(store.put(key, Buffer.from('nope'), 'text/plain'));
          await assert.rejects(store.get(key));
          await assert.rejects(store.get(key, { start: 0, end: 1 }));
          await assert.rejects(store.head(key));
          await assert.rejects(store.delete(key));
          assert.deepEqual(await store.list(''), [], 'nothing was stored');
        });
      }

      it('a refused key does not touch the object a cleaned-up path would name', async () => {
        await store.put('b', Buffer.from('keep'), 'text/plain');
        await assert.rejects(store.put('a/../b', Buffer.from('evil'), 'text/plain'));
        await assert.rejects(store.delete('a/../b'));
        await assert.rejects(store.delete('./b'));
        const got = await store.get('b');
        assert.ok(got);
        assert.equal((await readAll(got.body)).toString(), 'keep');
      });
    });
  });
}

export async function readAll(body: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of body) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array));
  return Buffer.concat(chunks);
}

import assert from 'node:assert/strict';
import { link, mkdir, mkdtemp, readdir, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { FsObjectStore, type FastReads, type ObjectStore } from '../../src/storage/index.js';
import { readAll, runObjectStoreContract } from './object-store.contract.js';

const dirs: string[] = [];

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sleeve-fs-store-'));
  dirs.push(dir);
  return dir;
}

after(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

runObjectStoreContract('FsObjectStore', async () => new FsObjectStore(path.join(await tempDir(), 'files')));
// As on a network file system: every read through the thread pool.
runObjectStoreContract('FsObjectStore reading through the pool', async () => new FsObjectStore(path.join(await tempDir(), 'files'), { reads: 'pool' }));

/** Every file under dir, dot files included, as /-separated relative paths. */
async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

/** The store's read on the calling thread (FastReads), which a store reading on this thread has. */
function readNow(store: FsObjectStore, key: string): ReturnType<FastReads['readNow']> {
  assert.ok(store.fastReads !== undefined, 'reads on the calling thread');
  return store.fastReads.readNow(key);
}

/** How many file descriptors this process holds. */
function openFds(): number {
  return readdirSync('/dev/fd').length;
}

describe("FsObjectStore's ETags", () => {
  it('writes any modification time in its tag as toString(36) does: 1970 to 2255, whole microseconds up to 2^53', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put('a/time.jpg', Buffer.from('a file whose time changes'));
    const file = path.join(store.root, 'a/time.jpg');
    // The edges of the tag's base 36 (two numbers under 2^30, the low one five digits), microsecond
    // file times around now (~1.7e15 in 2026), and a spread over every size of number.
    const edges = [0, 1, 35, 36, 36 ** 4 - 1, 36 ** 4, 36 ** 5 - 1, 36 ** 5, 36 ** 5 + 1, 2 ** 30 - 1, 2 ** 30, 2 ** 31, 2 ** 32 + 7, 36 ** 10, 36 ** 10 - 1, 2 ** 53 - 2 ** 12];
    const times = Array.from({ length: 200 }, (_, i) => 1_764_936_000_000_000 + i * 7_919_003);
    const spread = Array.from({ length: 300 }, (_, i) => Math.floor(2 ** ((i % 53) + i / 300)));
    const seen = { small: 0, padded: 0, unpadded: 0, largest: 0 };
    for (const us of [...edges, ...times, ...spread]) {
      await utimes(file, 0, us / 1e6);
      const st = statSync(file);
      // The time the file system kept (exact to the microsecond below ~2^33 s; the tag's number either way).
      const n = Math.round(st.mtimeMs * 1000);
      assert.equal((await store.head('a/time.jpg'))?.etag, `"${st.ino.toString(36)}-${st.size.toString(36)}-${n.toString(36)}"`, String(n));
      if (n < 2 ** 30) seen.small++;
      else if (n % 36 ** 5 < 36 ** 4) seen.padded++;
      else seen.unpadded++;
      seen.largest = Math.max(seen.largest, n);
    }
    // Every way of writing a number was taken: one part, two parts whose low one needs leading zeros, two without.
    assert.ok(seen.small > 10 && seen.padded > 5 && seen.unpadded > 100, JSON.stringify(seen));
    assert.ok(seen.largest > 2 ** 52, JSON.stringify(seen));
  });

  it("tags a file with its inode, size and modification time in microseconds, base 36", async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put('a/b.jpg', Buffer.from('bytes of a file'));
    const st = statSync(path.join(store.root, 'a/b.jpg'));
    const info = await store.head('a/b.jpg');
    assert.equal(info?.etag, `"${st.ino.toString(36)}-${st.size.toString(36)}-${Math.round(st.mtimeMs * 1000).toString(36)}"`);
    assert.equal(store.fastReads?.readNow('a/b.jpg')?.info.etag, info?.etag);
  });
});

describe("FsObjectStore's memo of unchanging files (fastReads)", () => {
  const key = 'mbid-m/mbid-m-1_thumb250.jpg';
  let kept = 0;
  /**
   * The file of key replaced behind the store's back: written beside it and renamed over it. The
   * old file stays linked under another name, so the new one cannot be given its inode (and tag).
   */
  async function replaceOutside(store: FsObjectStore, bytes: Buffer): Promise<void> {
    const file = path.join(store.root, key);
    await link(file, `${file}.kept-${++kept}`).catch(() => {});
    await writeFile(`${file}.new`, bytes);
    await rename(`${file}.new`, file);
  }
  /** The tag a fresh fstat gives the file of key. */
  function statTag(store: FsObjectStore): string {
    const st = statSync(path.join(store.root, key));
    return `"${st.ino.toString(36)}-${st.size.toString(36)}-${Math.round(st.mtimeMs * 1000).toString(36)}"`;
  }

  it('reads a remembered file again with the same bytes, size, ETag and Last-Modified', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put(key, Buffer.from('first bytes'));
    const first = readNow(store, key);
    const again = store.fastReads?.readNow(key, { lend: (n) => Buffer.alloc(n) });
    assert.equal(first?.bytes?.toString(), 'first bytes');
    assert.equal(again?.bytes?.toString(), 'first bytes');
    assert.deepEqual(again?.info, first?.info);
    assert.equal(again?.info.etag, statTag(store));
    assert.equal(again?.info.lastModified.getTime(), Math.floor(statSync(path.join(store.root, key)).mtimeMs));
  });

  it('trusts a remembered file of the same size (an unchanging key is never rewritten), and only an unchanging one', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put(key, Buffer.from('aaaa'));
    const tag = readNow(store, key)?.info.etag;
    await replaceOutside(store, Buffer.from('bbbb'));
    // No fstat: the remembered tag, the file's bytes.
    const read = readNow(store, key);
    assert.equal(read?.info.etag, tag);
    assert.equal(read?.bytes?.toString(), 'bbbb');
    assert.notEqual(statTag(store), tag);
    // index.json changes: each read describes it afresh.
    const index = 'mbid-m/index.json';
    await store.put(index, Buffer.from('[1]'));
    const before = readNow(store, index)?.info.etag;
    await writeFile(path.join(store.root, `${index}.new`), '[2]');
    await rename(path.join(store.root, `${index}.new`), path.join(store.root, index));
    const after = readNow(store, index);
    assert.equal(after?.bytes?.toString(), '[2]');
    assert.notEqual(after?.info.etag, before);
  });

  it('describes afresh a remembered file that is now longer, shorter, gone or a folder', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put(key, Buffer.from('12345'));
    readNow(store, key);
    for (const bytes of ['123456', '1234', '']) {
      await replaceOutside(store, Buffer.from(bytes));
      const read = readNow(store, key);
      assert.equal(read?.bytes?.toString(), bytes);
      assert.equal(read?.info.size, bytes.length);
      assert.equal(read?.info.etag, statTag(store));
    }
    await rm(path.join(store.root, key));
    assert.equal(readNow(store, key), undefined);
    await mkdir(path.join(store.root, key));
    assert.equal(readNow(store, key), undefined);
    await rm(path.join(store.root, key), { recursive: true });
    await writeFile(path.join(store.root, key), 'back');
    assert.equal(readNow(store, key)?.info.etag, statTag(store));
  });

  it("forgets a file the store itself writes, moves or removes, even at the same size", async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    const remembered = async (): Promise<void> => {
      readNow(store, key);
      await replaceOutside(store, Buffer.from('zzzz'));
    };
    await store.put(key, Buffer.from('aaaa'));
    await remembered();
    await store.put(key, Buffer.from('cccc'));
    assert.equal(readNow(store, key)?.info.etag, statTag(store));

    await remembered();
    await store.put('mbid-m/other.jpg', Buffer.from('dddd'));
    assert.equal(await store.move('mbid-m/other.jpg', key), true);
    const moved = readNow(store, key);
    assert.equal(moved?.bytes?.toString(), 'dddd');
    assert.equal(moved?.info.etag, statTag(store));

    await remembered();
    await store.delete(key);
    await writeFile(path.join(store.root, key), 'eeee');
    assert.equal(readNow(store, key)?.info.etag, statTag(store));

    await remembered();
    await store.removeFolder('mbid-m');
    await mkdir(path.join(store.root, 'mbid-m'));
    await writeFile(path.join(store.root, key), 'ffff');
    assert.equal(readNow(store, key)?.info.etag, statTag(store));
  });

  it('never pairs a file the store writes with the tag of the one it replaced, when read while the write is under way', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    await store.put(key, Buffer.from('v000'));
    const tags = new Map([['v000', statTag(store)]]);
    const seen: [string, string][] = [];
    let reading = true;
    const read = (): void => {
      const got = readNow(store, key);
      if (got?.bytes !== undefined) seen.push([got.bytes.toString(), got.info.etag]);
      if (reading) setImmediate(read);
    };
    read();
    // Same size each time, renamed through the thread pool: the rename is done before this thread hears of it.
    for (let i = 1; i <= 60; i++) {
      const version = `v${String(i).padStart(3, '0')}`;
      await store.put(key, Buffer.from(version));
      tags.set(version, statTag(store));
    }
    reading = false;
    assert.ok(seen.length > 60, `${seen.length} reads`);
    for (const [bytes, etag] of seen) assert.equal(etag, tags.get(bytes), `the tag read with ${bytes}`);
  });

  it('keeps keys apart: many files remembered at once each read with their own tag', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    const keys = Array.from({ length: 300 }, (_, i) => `mbid-k${i % 7}/mbid-k${i % 7}-${i}.jpg`);
    await Promise.all(keys.map((k, i) => store.put(k, Buffer.from(`file ${i}`.repeat(1 + (i % 5))))));
    const tags = keys.map((k) => readNow(store, k)?.info.etag);
    for (const [i, k] of keys.entries()) {
      const read = readNow(store, k);
      assert.equal(read?.bytes?.toString(), `file ${i}`.repeat(1 + (i % 5)));
      assert.equal(read?.info.etag, tags[i]);
    }
    assert.equal(new Set(tags).size, keys.length);
  });
});

describe('FsObjectStore puts into one folder at once', () => {
  it('stores every file whole when many puts make and fill one folder together (the folder fsync shared)', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    const keys = Array.from({ length: 40 }, (_, i) => `mbid-x${i % 3}/file-${i}.jpg`);
    await Promise.all(keys.map((k, i) => store.put(k, Buffer.from(`bytes of ${i}`))));
    for (const [i, k] of keys.entries()) assert.equal((await store.read(k, 1024))?.bytes?.toString(), `bytes of ${i}`);
    assert.deepEqual(await store.list('mbid-x1/'), keys.filter((k) => k.startsWith('mbid-x1/')).sort());
    // Puts after the folder was removed make it again.
    await store.removeFolder('mbid-x1');
    await Promise.all([store.put('mbid-x1/again.jpg', Buffer.from('a')), store.put('mbid-x1/again2.jpg', Buffer.from('b'))]);
    assert.deepEqual(await store.list('mbid-x1/'), ['mbid-x1/again.jpg', 'mbid-x1/again2.jpg']);
  });

  it('puts with the folder fsync left for syncFolder, small (a batch put: written on the calling thread) and large (through the pool), from two stores on one root', async () => {
    const root = path.join(await tempDir(), 'files');
    const [a, b] = [new FsObjectStore(root), new FsObjectStore(root)];
    const large = Buffer.alloc(300 * 1024, 7);
    const puts = Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? a : b).batchPut(`mbid-y/f${i}.jpg`, i === 5 ? large : Buffer.from(`y${i}`), 'image/jpeg'));
    await Promise.all(puts);
    await a.syncFolder('mbid-y');
    for (let i = 0; i < 12; i++) assert.deepEqual((await a.read(`mbid-y/f${i}.jpg`, 1024 * 1024))?.bytes, i === 5 ? large : Buffer.from(`y${i}`));
    // A folder gone since has nothing left to make durable.
    await a.removeFolder('mbid-y');
    await a.syncFolder('mbid-y');
    await Promise.all([a.close(), b.close()]);
    assert.deepEqual(await allFiles(root), []);
  });

  it('lists a folder the same on the calling thread (the bulk mirror) as through the pool, a missing folder as empty', async () => {
    const store = new FsObjectStore(path.join(await tempDir(), 'files'));
    for (const key of ['mbid-z/b.jpg', 'mbid-z/a.jpg', 'mbid-z/sub/c.jpg', 'mbid-zz/d.jpg']) await store.put(key, Buffer.from(key));
    const pooled = await store.list('mbid-z/');
    assert.deepEqual(pooled, ['mbid-z/a.jpg', 'mbid-z/b.jpg', 'mbid-z/sub/c.jpg']);
    assert.deepEqual(await store.batchList('mbid-z/'), pooled);
    assert.deepEqual(await store.batchList('mbid-none/'), []);
    await store.close();
  });
});

describe('FsObjectStore on disk', () => {
  let base: string;
  let root: string;
  let store: ObjectStore;

  before(async () => {
    base = await tempDir();
    root = path.join(base, 'files');
    store = new FsObjectStore(root);
  });

  it('keeps an object as the file its key names under the root', async () => {
    const bytes = Buffer.from('layout');
    await store.put('mbid-a/mbid-a-1.jpg', bytes, 'image/jpeg');
    assert.deepEqual(await readFile(path.join(root, 'mbid-a', 'mbid-a-1.jpg')), bytes);
  });

  it('works before its root directory exists', async () => {
    const fresh: ObjectStore = new FsObjectStore(path.join(base, 'not-yet', 'files'));
    assert.deepEqual(await fresh.list(''), []);
    assert.equal(await fresh.head('a/b'), undefined);
    assert.equal(await fresh.get('a/b'), undefined);
    await fresh.delete('a/b');
    await fresh.put('a/b', Buffer.from('made'), 'text/plain');
    assert.equal((await readFile(path.join(base, 'not-yet', 'files', 'a', 'b'))).toString(), 'made');
  });

  it('is ready when its root can be used (made when missing), and not when the root is a file', async () => {
    const fresh: ObjectStore = new FsObjectStore(path.join(base, 'ready', 'files'));
    await fresh.ready();
    assert.deepEqual(readdirSync(path.join(base, 'ready')), ['files']);
    await writeFile(path.join(base, 'a-file'), 'not a directory');
    const broken: ObjectStore = new FsObjectStore(path.join(base, 'a-file'));
    await assert.rejects(broken.ready(), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'STORE_UNAVAILABLE');
      assert.match(err.message, /^storage directory .*a-file is not usable: .*(EEXIST|ENOTDIR)/);
      return true;
    });
  });

  it('leaves no temporary file behind after puts, rewrites and concurrent puts', async () => {
    const dir = path.join(await tempDir(), 'files');
    const s: ObjectStore = new FsObjectStore(dir);
    await s.put('mbid-a/index.json', Buffer.from('1'), 'application/json');
    await s.put('mbid-a/index.json', Buffer.from('22'), 'application/json');
    await Promise.all(Array.from({ length: 20 }, (_, i) => s.put('mbid-a/index.json', Buffer.alloc(100 + i, i), 'application/json')));
    await Promise.all(Array.from({ length: 5 }, (_, i) => s.put(`mbid-b/f${i}.jpg`, Buffer.alloc(10, i), 'image/jpeg')));
    assert.deepEqual(await allFiles(dir), ['mbid-a/index.json', 'mbid-b/f0.jpg', 'mbid-b/f1.jpg', 'mbid-b/f2.jpg', 'mbid-b/f3.jpg', 'mbid-b/f4.jpg']);
  });

  it('a put that fails while writing leaves the old object intact and no temporary file', async () => {
    const dir = path.join(await tempDir(), 'files');
    const s: ObjectStore = new FsObjectStore(dir);
    const old = Buffer.from('the old index');
    await s.put('mbid-a/index.json', old, 'application/json');
    const before = await s.head('mbid-a/index.json');
    // A body that fails half way through, as a full disk would: part of it reaches the temporary file.
    async function* failing(): AsyncGenerator<Buffer> {
      yield Buffer.alloc(64 * 1024, 0x78);
      throw new Error('disk on fire');
    }
    await assert.rejects(s.put('mbid-a/index.json', failing() as unknown as Buffer, 'application/json'), /disk on fire/);
    const got = await s.get('mbid-a/index.json');
    assert.ok(got);
    assert.deepEqual(await readAll(got.body), old);
    assert.deepEqual(await s.head('mbid-a/index.json'), before, 'the object was not touched');
    assert.deepEqual(await allFiles(dir), ['mbid-a/index.json']);
  });

  it('a put that fails at the rename (a folder is in the way) leaves everything as it was', async () => {
    const dir = path.join(await tempDir(), 'files');
    const s: ObjectStore = new FsObjectStore(dir);
    await s.put('a/b', Buffer.from('inside'), 'text/plain');
    await assert.rejects(s.put('a', Buffer.from('over the folder'), 'text/plain'));
    const got = await s.get('a/b');
    assert.ok(got);
    assert.equal((await readAll(got.body)).toString(), 'inside');
    assert.deepEqual(await allFiles(dir), ['a/b']);
  });

  it('does not list leftovers of an interrupted put nor other dot files', async () => {
    const dir = path.join(await tempDir(), 'files');
    const s: ObjectStore = new FsObjectStore(dir);
    await s.put('mbid-a/index.json', Buffer.from('{}'), 'application/json');
    await writeFile(path.join(dir, 'mbid-a', '.tmp-0123456789abcdef'), 'half');
    await writeFile(path.join(dir, '.DS_Store'), 'x');
    await mkdir(path.join(dir, '.trash'));
    await writeFile(path.join(dir, '.trash', 'old.jpg'), 'x');
    assert.deepEqual(await s.list(''), ['mbid-a/index.json']);
    assert.deepEqual(await s.list('mbid-a/'), ['mbid-a/index.json']);
    assert.deepEqual(await s.list('.'), []);
  });

  it('a refused key creates and removes nothing outside the root', async () => {
    const b = await tempDir();
    const s: ObjectStore = new FsObjectStore(path.join(b, 'files'));
    await writeFile(path.join(b, 'victim'), 'precious');
    await assert.rejects(s.put('../escape', Buffer.from('x'), 'text/plain'));
    await assert.rejects(s.put('../../escape', Buffer.from('x'), 'text/plain'));
    await assert.rejects(s.put(path.join(b, 'abs-escape'), Buffer.from('x'), 'text/plain'));
    await assert.rejects(s.delete('../victim'));
    await assert.rejects(s.get('../victim'));
    await assert.rejects(s.head('../victim'));
    assert.deepEqual((await readdir(b)).sort(), ['victim']);
    assert.equal(await readFile(path.join(b, 'victim'), 'utf8'), 'precious');
  });

  it('a body opened before a rewrite still streams the old bytes in full', async () => {
    const old = Buffer.alloc(512 * 1024, 0x6f);
    await store.put('swap/index.json', old, 'application/json');
    const got = await store.get('swap/index.json');
    assert.ok(got);
    await store.put('swap/index.json', Buffer.alloc(10, 0x6e), 'application/json');
    assert.deepEqual(await readAll(got.body), old);
    assert.equal(got.info.size, old.length);
  });

  it('closes the file of every body read to the end', async () => {
    await store.put('fd/obj.bin', Buffer.alloc(100_000, 1), 'application/octet-stream');
    const warmup = await store.get('fd/obj.bin');
    assert.ok(warmup);
    await readAll(warmup.body);
    const before = openFds();
    for (let i = 0; i < 40; i++) {
      const got = await store.get('fd/obj.bin', i % 2 === 0 ? undefined : { start: 10, end: 5000 });
      assert.ok(got);
      await readAll(got.body);
    }
    await new Promise((r) => setTimeout(r, 50));
    const leaked = openFds() - before;
    assert.ok(leaked < 5, `${leaked} file descriptors left open after 40 reads`);
  });

  it('closes the file of a body given up before its end', async () => {
    await store.put('fd/big.bin', Buffer.alloc(2_000_000, 2), 'application/octet-stream');
    const before = openFds();
    for (let i = 0; i < 40; i++) {
      const got = await store.get('fd/big.bin');
      assert.ok(got);
      got.body.destroy();
    }
    await new Promise((r) => setTimeout(r, 50));
    const leaked = openFds() - before;
    assert.ok(leaked < 5, `${leaked} file descriptors left open after 40 abandoned reads`);
  });
});

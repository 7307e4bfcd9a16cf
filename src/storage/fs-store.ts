import { access, constants, mkdir, open, readdir, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { closeSync, fstatSync, openSync, read as readCb, readSync, close as closeCb, type BigIntStats } from 'node:fs';
import { promisify } from 'node:util';
import { storeUnavailable } from '../shared/errors.js';
import { isValidKey, type ByteRange, type ObjectBody, type ObjectInfo, type ObjectRead, type ObjectStore } from './object-store.js';

const readAsync = promisify(readCb);
const closeAsync = promisify(closeCb);

/**
 * Files up to this size are opened, described and read by read() with plain system calls on
 * the calling thread, as nginx does, rather than through libuv's thread pool: four pool trips
 * (open, fstat, read, close), each a hand-over to another thread and back, cost more than the
 * calls themselves on files the page cache holds (bench/RESULTS.md, "Session 4"). Larger files
 * are read through the pool, so a slow disk stalls the event loop at most for one small file.
 */
const SYNC_READ_MAX = 256 * 1024;

/** Fills `bytes` from the start of the file. */
async function readAll(fd: number, bytes: Buffer, sync: boolean): Promise<void> {
  let at = 0;
  while (at < bytes.length) {
    const n = sync ? readSync(fd, bytes, at, bytes.length - at, at) : (await readAsync(fd, bytes, at, bytes.length - at, at)).bytesRead;
    // Files are replaced by rename, never truncated in place: a short file is not one of ours.
    if (n === 0) throw new Error(`file shrank while it was read (${at} of ${bytes.length} bytes)`);
    at += n;
  }
}

function infoOf(st: BigIntStats): ObjectInfo {
  // inode + size + mtime in ns: an atomic rename always brings a new inode, so a rewrite changes the tag.
  return {
    size: Number(st.size),
    etag: `"${st.ino.toString(36)}-${st.size.toString(36)}-${st.mtimeNs.toString(36)}"`,
    lastModified: new Date(Number(st.mtimeMs)),
  };
}

/** Objects as files under one root directory. */
export class FsObjectStore implements ObjectStore {
  readonly root: string;

  constructor(root: string) {
    this.root = path.resolve(root);
  }

  private file(key: string): string {
    if (!isValidKey(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
    return path.join(this.root, key);
  }

  async put(key: string, body: Buffer): Promise<void> {
    const target = this.file(key);
    const dir = path.dirname(target);
    await mkdir(dir, { recursive: true });
    const tmp = path.join(dir, `.tmp-${randomBytes(8).toString('hex')}`);
    let fh: FileHandle | undefined = await open(tmp, 'wx', 0o644);
    try {
      await fh.writeFile(body);
      await fh.sync();
      await fh.close();
      fh = undefined;
      await rename(tmp, target);
    } catch (err) {
      await fh?.close().catch(() => {});
      await rm(tmp, { force: true });
      throw err;
    }
    await syncDir(dir);
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const st = await stat(this.file(key), { bigint: true });
      return st.isFile() ? infoOf(st) : undefined;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<ObjectBody | undefined> {
    let fh: FileHandle;
    try {
      fh = await open(this.file(key), 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    try {
      const st = await fh.stat({ bigint: true });
      if (!st.isFile()) {
        await fh.close();
        return undefined;
      }
      // The stream owns the handle from here and closes it at the end, on error or when destroyed.
      const body = fh.createReadStream({ start: range?.start, end: range?.end });
      return { info: infoOf(st), body };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  async read(key: string, maxBytes: number, alloc?: (size: number) => Buffer): Promise<ObjectRead | undefined> {
    let fd: number;
    try {
      fd = openSync(this.file(key), 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    let sync = true;
    try {
      const st = fstatSync(fd, { bigint: true });
      if (!st.isFile()) return undefined;
      const info = infoOf(st);
      if (info.size > maxBytes) return { info, bytes: undefined };
      // Its own memory, not a slice of Node's shared pool, as it may be kept for long.
      const bytes = alloc === undefined ? Buffer.allocUnsafeSlow(info.size) : alloc(info.size);
      sync = info.size <= SYNC_READ_MAX;
      if (sync) await readAll(fd, bytes, true);
      else {
        try {
          await readAll(fd, bytes, false);
        } finally {
          await closeAsync(fd);
        }
      }
      return { info, bytes };
    } finally {
      if (sync) closeSync(fd);
    }
  }

  async delete(key: string): Promise<void> {
    try {
      await rm(this.file(key), { force: true });
    } catch (err) {
      // A folder's name, or a key under an object (a file where a folder would be), names no object either.
      if (!isMissing(err) && (err as NodeJS.ErrnoException).code !== 'ERR_FS_EISDIR') throw err;
    }
  }

  async list(prefix: string): Promise<string[]> {
    const out: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(path.join(this.root, rel), { withFileTypes: true });
      } catch (err) {
        if (isMissing(err)) return;
        throw err;
      }
      for (const e of entries) {
        if (e.name.startsWith('.')) continue;
        const key = rel === '' ? e.name : `${rel}/${e.name}`;
        if (e.isDirectory()) {
          if (prefix.startsWith(`${key}/`) || key.startsWith(prefix) || `${key}/`.startsWith(prefix)) await walk(key);
        } else if (key.startsWith(prefix)) out.push(key);
      }
    };
    await walk('');
    return out.sort();
  }

  async ready(): Promise<void> {
    try {
      // The first put would make the root anyway; making it here proves it can be made.
      await mkdir(this.root, { recursive: true });
      await access(this.root, constants.R_OK | constants.W_OK | constants.X_OK);
    } catch (err) {
      throw storeUnavailable(`storage directory ${this.root} is not usable: ${(err as Error).message}`, err);
    }
  }

  async close(): Promise<void> {}
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

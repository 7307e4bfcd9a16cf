import { access, constants, mkdir, open, readdir, rename, rm, rmdir, stat, type FileHandle } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { closeSync, fstatSync, readdirSync, fsync as fsyncCb, mkdirSync, openSync, read as readCb, readSync, renameSync, close as closeCb, statfsSync, statSync, writeSync, type BigIntStats, type Stats } from 'node:fs';
import { promisify } from 'node:util';
import { storeUnavailable } from '../shared/errors.js';
import { failpoint, failpointOn } from '../shared/failpoint.js';
import { hostTag, processAlive } from '../shared/process.js';
import { remoteFileSystemName } from './file-systems.js';
import { MEMO_ROWS, StatMemo } from './stat-memo.js';
import { isValidKey, unchangingKey, type BatchWrites, type ByteRange, type FastReads, type ObjectBody, type ObjectInfo, type ObjectRead, type ObjectStore, type ReadMemory } from './object-store.js';

const readAsync = promisify(readCb);
const closeAsync = promisify(closeCb);
const fsyncAsync = promisify(fsyncCb);

/**
 * Files up to this size are written by a batch put (BatchWrites.batchPut) with plain system calls on the calling thread (open,
 * write, close, rename: page-cache work, no disk wait), and only the fsyncs go through libuv's
 * thread pool: a pool trip per call cost the bulk mirror more than the calls themselves
 * (docs/decisions.md, "Bulk mirror: put's calls on the main thread, one folder fsync per release"). Larger files go through the pool.
 */
const SYNC_WRITE_MAX = 256 * 1024;

/** Creates `file` and writes `body` with calls on this thread; only the fsync goes through the pool. */
async function writeSmall(file: string, body: Buffer): Promise<void> {
  const fd = openSync(file, 'wx', 0o644);
  try {
    for (let at = 0; at < body.length; ) at += writeSync(fd, body, at, body.length - at, at);
    await fsyncAsync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Creates `file` and writes `body` through the pool; with `halfway` (a key), stops at the failpoint half way through. */
async function writeThroughPool(file: string, body: Buffer, halfway: string | undefined): Promise<void> {
  const fh = await open(file, 'wx', 0o644);
  try {
    if (halfway !== undefined) {
      // For the test of an upload killed while its original is being written.
      await fh.write(body.subarray(0, body.length >> 1));
      await failpoint('upload-original-half', halfway);
      await fh.write(body.subarray(body.length >> 1));
    } else await fh.writeFile(body);
    await fh.sync();
  } catch (err) {
    await fh.close().catch(() => {});
    throw err;
  }
  await fh.close();
}

/**
 * Files up to this size are opened, described and read by read() with plain system calls on
 * the calling thread, as nginx does, rather than through libuv's thread pool: four pool trips
 * (open, fstat, read, close), each a hand-over to another thread and back, cost more than the
 * calls themselves on files the page cache holds (bench/RESULTS-archive.md, "Session 4: serving files"). Larger files
 * are read through the pool, so a slow disk stalls the event loop at most for one small file.
 */
const SYNC_READ_MAX = 256 * 1024;

/**
 * How the store reads: `inline` (files of up to SYNC_READ_MAX bytes with calls on this thread),
 * `pool` (every call through libuv's thread pool), `auto` (inline unless the root is on a
 * network or user-space file system, where each call may wait on a network and stall every
 * request with it). docs/decisions.md, "File store: reads on the serving thread, except on
 * network file systems".
 */
export type FsReads = 'auto' | 'inline' | 'pool';

/** The network file system `dir` (or, while it does not exist yet, its nearest existing parent) is on; undefined for a local one. */
function remoteFileSystemOf(dir: string): string | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    try {
      return remoteFileSystemName(statfsSync(d).type);
    } catch (err) {
      if (!isMissing(err) || path.dirname(d) === d) return undefined;
    }
  }
}

/** Fills `bytes` from the start of the file through the thread pool. */
async function readAll(fd: number, bytes: Buffer): Promise<void> {
  let at = 0;
  while (at < bytes.length) at += counted((await readAsync(fd, bytes, at, bytes.length - at, at)).bytesRead, at, bytes.length);
}

/** Fills `bytes` from the start of the file on this thread (no promise: small files, one call as a rule). */
function readAllSync(fd: number, bytes: Buffer): void {
  let at = 0;
  while (at < bytes.length) at += counted(readSync(fd, bytes, at, bytes.length - at, at), at, bytes.length);
}

/** `n` bytes read at `at` of `size`, refusing a file that came to an end early. */
function counted(n: number, at: number, size: number): number {
  // Files are replaced by rename, never truncated in place: a short file is not one of ours.
  if (n === 0) throw new Error(`file shrank while it was read (${at} of ${size} bytes)`);
  return n;
}

/** A described file of at most SYNC_READ_MAX bytes read on this thread, or one over `maxBytes` described only. */
function readDescribed(fd: number, info: ObjectInfo, maxBytes: number, memory: ReadMemory | undefined): ObjectRead {
  if (info.size > maxBytes) return { info, bytes: undefined };
  // Its own memory, not a slice of Node's shared pool, as it may be kept for long.
  const bytes = memory === undefined ? Buffer.allocUnsafeSlow(info.size) : memory.lend(info.size);
  readAllSync(fd, bytes);
  return { info, bytes };
}

/** 36^5: the low five base-36 digits of a number. */
const DIGITS5 = 36 ** 5;

/**
 * `n.toString(36)` for a whole number from 0 to 2^53, made from two numbers under 2^30: V8
 * converts a double past its small integers digit by digit with `fmod`, ~0.4 µs for a time in
 * microseconds, once per file read for its ETag (docs/decisions.md, "The file server's stat:
 * plain numbers").
 */
function base36(n: number): string {
  if (n < 0x40000000) return n.toString(36);
  const high = Math.floor(n / DIGITS5);
  return high.toString(36) + (n - high * DIGITS5).toString(36).padStart(5, '0');
}

/**
 * What a file's stat says of it. The ETag is inode + size + modification time in whole
 * microseconds: a file is replaced by an atomic rename, which always brings another inode while
 * the old file is still open or linked, so a rewrite changes the tag. (An inode freed and given
 * to a rewrite of the same size within one tick of the kernel's coarse file clock would keep
 * the tag; the nanosecond tag had the same limit, as those times come from the same clock.)
 * Plain stats, not bigint ones: a bigint stat made ~1.5 KB of objects per read (a BigInt per
 * field, the nanosecond times, four dates), the largest part of what a request for a file the
 * cache lacks allocated (docs/decisions.md, "The file server's stat: plain numbers").
 */
function infoOf(st: Stats, exact: () => BigIntStats): ObjectInfo {
  // An inode number above 2^53 (some XFS, NFS or FUSE file systems) is not exact as a double: the
  // tag takes it from a bigint stat of the same file instead.
  return infoFrom(st.ino <= Number.MAX_SAFE_INTEGER ? base36(st.ino) : exact().ino.toString(36), st.size, st.mtimeMs);
}

/** infoOf's answer from its numbers: the inode in base 36, the size and the modification time in milliseconds. */
function infoFrom(ino: string, size: number, mtimeMs: number): ObjectInfo {
  return {
    size,
    etag: `"${ino}-${base36(size)}-${base36(Math.round(mtimeMs * 1000))}"`,
    // Whole milliseconds, rounded down as the bigint stat's were (Stats#mtime rounds to the
    // nearest, which can put Last-Modified a second ahead of the file).
    lastModified: new Date(Math.floor(mtimeMs)),
  };
}

/** Objects as files under one root directory. */
export class FsObjectStore implements ObjectStore, FastReads, BatchWrites {
  readonly root: string;
  /** The root with one separator after it. */
  private readonly rootSlash: string;
  private temp: Promise<string> | undefined;
  /** Names of temporary files: a prefix drawn once per store, then a count. */
  private readonly tempPrefix = randomBytes(6).toString('hex');
  private tempCount = 0;
  /** Folders a put of this process is making, until their entries in their parents are fsynced (an entry lives only that long). */
  private readonly newFolders = new Map<string, Promise<void>>();
  /** Folder fsyncs in flight and queued, by folder (syncDirShared); an entry lives only while one is. */
  private readonly dirSyncs = new Map<string, { inFlight: Promise<void> | undefined; queued: Promise<void> | undefined }>();

  /** The network file system the root is on (by statfs at construction), or undefined for a local one. */
  readonly remoteFileSystem: string | undefined;
  /** Whether small files are read, and folders opened for their fsync, with calls on this thread (FsReads). */
  readonly inlineReads: boolean;
  /** This store itself while it reads on the calling thread (inlineReads), else absent: every read through the pool. */
  readonly fastReads: FastReads | undefined;
  /** This store itself, wherever its folder is: a batch process (the bulk mirror) waits on no one. */
  readonly batchWrites: BatchWrites = this;
  /** What fstat said of unchanging files read on this thread (readNow), for their next read. */
  private readonly memo: StatMemo;
  /**
   * Renames of this store under way (put, move). A rename through the pool is done in the file
   * system before this thread hears of it, and a read in between would see the new file: so
   * the key is forgotten before its rename starts, and nothing is remembered until it is done.
   */
  private writing = 0;

  constructor(root: string, options: { reads?: FsReads } = {}) {
    this.root = path.resolve(root);
    this.rootSlash = this.root.endsWith(path.sep) ? this.root : this.root + path.sep;
    const reads = options.reads ?? 'auto';
    this.remoteFileSystem = reads === 'auto' ? remoteFileSystemOf(this.root) : undefined;
    this.inlineReads = reads === 'inline' || (reads === 'auto' && this.remoteFileSystem === undefined);
    this.memo = new StatMemo(this.inlineReads ? MEMO_ROWS : 1);
    this.fastReads = this.inlineReads ? this : undefined;
  }

  private file(key: string): string {
    if (!isValidKey(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
    // A valid key has no empty, `.` or `..` segment, so joining it needs no normalising.
    return this.rootSlash + key;
  }

  /**
   * This process's folder for files being written: `.tmp/{host}-{pid}` under the root, on the
   * same file system as the objects so a finished file is renamed into place. A process
   * killed mid-write leaves its part-written files there, and sweepTemporary removes the
   * folder once that process is gone, whatever key it was writing.
   */
  private tempDir(): Promise<string> {
    this.temp ??= (async () => {
      const dir = path.join(this.root, TEMP_DIR, `${hostTag()}-${process.pid}`);
      // The root first, with the usual mode: a recursive mkdir gives 0700 to every folder it makes,
      // and the root holds public files a web server running as another user may serve.
      await mkdir(this.root, { recursive: true });
      // Another process closing may remove an empty .tmp between the two levels being made: again then.
      for (let attempt = 1; ; attempt++) {
        try {
          await mkdir(dir, { recursive: true, mode: 0o700 });
          return dir;
        } catch (err) {
          if (!isMissing(err) || attempt === 3) throw err;
        }
      }
    })().catch((err: unknown) => {
      this.temp = undefined;
      throw err;
    });
    return this.temp;
  }

  async put(key: string, body: Buffer, _contentType?: string): Promise<void> {
    await this.write(key, body, false);
  }

  /** BatchWrites: a put whose folder fsync is left for syncFolder, a small file written on this thread. */
  async batchPut(key: string, body: Buffer, _contentType?: string): Promise<void> {
    await this.write(key, body, true);
  }

  /** A put: `batch`, as BatchWrites.batchPut, else as ObjectStore.put. */
  private async write(key: string, body: Buffer, batch: boolean): Promise<void> {
    const target = this.file(key);
    const dir = path.dirname(target);
    const halfway = failpointOn('upload-original-half') && /(^|\/)original\.[a-z0-9]+$/.test(key);
    const small = batch && !halfway && Buffer.isBuffer(body) && body.length <= SYNC_WRITE_MAX;
    let made: string | undefined;
    let newFolder: { done: Promise<void>; settle: (err?: unknown) => void } | undefined;
    const tmp = await this.writeTemporary(small ? (file) => writeSmall(file, body) : (file) => writeThroughPool(file, body, halfway ? key : undefined));
    this.memo.forget(key);
    this.writing++;
    try {
      // Into its folder, made first only when it is missing (one call less per file otherwise).
      try {
        await (small ? renameSync : rename)(tmp, target);
      } catch (err) {
        if (!isMissing(err)) throw err;
        // Announced before the folder exists, so that a put whose rename finds it waits for its entry's fsync.
        if (!this.newFolders.has(dir)) {
          let settle!: (err?: unknown) => void;
          const done = new Promise<void>((resolve, reject) => (settle = (e) => (e === undefined ? resolve() : reject(e))));
          done.catch(() => {});
          newFolder = { done, settle };
          this.newFolders.set(dir, done);
        }
        made = await (small ? mkdirSync : mkdir)(dir, { recursive: true });
        await (small ? renameSync : rename)(tmp, target);
      }
    } catch (err) {
      this.settleNewFolder(dir, newFolder, err);
      await rm(tmp, { force: true });
      throw err;
    } finally {
      this.writing--;
    }
    // A folder made for this file: the entries of the new folders in their parents are made
    // durable too (the file's own entry is the folder fsync below or the caller's syncFolder);
    // a put into a folder another put of this process is making waits for the same.
    if (made !== undefined || newFolder !== undefined) {
      try {
        // Up to the first folder made; when this put's mkdir found the folder made (by another
        // put of this process, say), the folder's own entry only.
        const top = made ?? dir;
        for (let d = dir; ; d = path.dirname(d)) {
          await this.syncDirShared(path.dirname(d));
          if (d === top || d === path.dirname(d)) break;
        }
        this.settleNewFolder(dir, newFolder);
      } catch (err) {
        this.settleNewFolder(dir, newFolder, err);
        throw err;
      }
    }
    if (newFolder === undefined) await this.newFolders.get(dir);
    if (!batch) await this.syncDirShared(dir);
  }

  /** Ends the announcement of a new folder by this put (newFolders), with the outcome of its fsyncs. */
  private settleNewFolder(dir: string, folder: { done: Promise<void>; settle: (err?: unknown) => void } | undefined, err?: unknown): void {
    if (folder === undefined) return;
    if (this.newFolders.get(dir) === folder.done) this.newFolders.delete(dir);
    folder.settle(err);
  }

  /** A new file in this process's temporary folder, made, filled and fsynced by `write`; its path. Nothing is left of it on failure. */
  private async writeTemporary(write: (file: string) => Promise<void>): Promise<string> {
    for (let attempt = 1; ; attempt++) {
      // Unique without a random draw per file: this store's random prefix and a count, in this process's own folder.
      const tmp = path.join(await this.tempDir(), `${this.tempPrefix}${(++this.tempCount).toString(36)}`);
      try {
        await write(tmp);
        return tmp;
      } catch (err) {
        await rm(tmp, { force: true });
        if (!isMissing(err) || attempt === 2) throw err;
        // The folder went (another machine's sweep found it idle for an hour): make it again.
        this.temp = undefined;
      }
    }
  }

  async syncFolder(folder: string): Promise<void> {
    // A folder removed since (its release deleted) has no entries left to make durable.
    await this.syncDirShared(this.file(folder)).catch((err: unknown) => {
      if (!isMissing(err)) throw err;
    });
  }

  /**
   * fsyncs `dir` after a rename into it, sharing the fsync with the other puts into that folder
   * (a group commit): a caller joins the fsync queued to start after the one in flight, which
   * may have begun before its rename, so every put still returns only once its entry is durable.
   * The bulk mirror stores a release's files into one folder at once (docs/decisions.md, "Bulk mirror speed").
   */
  private syncDirShared(dir: string): Promise<void> {
    let state = this.dirSyncs.get(dir);
    if (state === undefined) {
      state = { inFlight: undefined, queued: undefined };
      this.dirSyncs.set(dir, state);
    }
    const s = state;
    if (s.queued !== undefined) return s.queued;
    const start = (): Promise<void> => {
      const p: Promise<void> = syncDir(dir, this.inlineReads).finally(() => {
        if (s.inFlight === p) s.inFlight = undefined;
        if (s.inFlight === undefined && s.queued === undefined && this.dirSyncs.get(dir) === s) this.dirSyncs.delete(dir);
      });
      s.inFlight = p;
      return p;
    };
    if (s.inFlight === undefined) return start();
    s.queued = s.inFlight
      .catch(() => {})
      .then(() => {
        s.queued = undefined;
        return start();
      });
    return s.queued;
  }

  /** Renames an object (atomic, one file system); false when `from` is not there. */
  async move(from: string, to: string): Promise<boolean> {
    const target = this.file(to);
    await mkdir(path.dirname(target), { recursive: true });
    this.memo.forget(from);
    this.memo.forget(to);
    this.writing++;
    try {
      await rename(this.file(from), target);
    } catch (err) {
      if (isMissing(err)) return false;
      throw err;
    } finally {
      this.writing--;
    }
    await syncDir(path.dirname(target), this.inlineReads);
    return true;
  }

  /** Removes every object under `folder/` (and the folder). */
  async removeFolder(folder: string): Promise<void> {
    try {
      await rm(this.file(folder), { recursive: true, force: true });
    } finally {
      // A release's folder may have held remembered files (an upload's staging folder holds none).
      if (folder.startsWith('mbid-')) this.memo.clear();
    }
  }

  /**
   * Removes `.tmp-*` files an hour old from a folder: where earlier versions of sleeve wrote part-written
   * files, beside their targets (a killed writer's stayed there). Returns how many went.
   */
  async removeStrayTemporary(folder: string, now: number = Date.now()): Promise<number> {
    let names: string[];
    try {
      names = await readdir(this.file(folder));
    } catch (err) {
      if (isMissing(err)) return 0;
      throw err;
    }
    let removed = 0;
    for (const name of names) {
      if (!/^\.tmp-[0-9a-f]{16}$/.test(name)) continue;
      const file = path.join(this.file(folder), name);
      const old = await stat(file).then((st) => st.isFile() && now - st.mtimeMs > FOREIGN_TEMP_AGE_MS, () => false);
      if (!old) continue;
      await rm(file, { force: true });
      removed++;
    }
    return removed;
  }

  /**
   * Removes the part-written files of processes that are gone: on this machine, those whose
   * process no longer runs; from other machines sharing the directory, those untouched for
   * an hour (no write takes that long). Returns how many folders went.
   */
  async sweepTemporary(now: number = Date.now()): Promise<number> {
    const base = path.join(this.root, TEMP_DIR);
    let entries: string[];
    try {
      entries = await readdir(base);
    } catch (err) {
      if (isMissing(err)) return 0;
      throw err;
    }
    const host = hostTag();
    let removed = 0;
    for (const name of entries) {
      const m = /^(.*)-(\d+)$/.exec(name);
      const dir = path.join(base, name);
      let gone: boolean;
      if (m !== null && m[1] === host) gone = !processAlive(Number(m[2]));
      else gone = await stat(dir).then((st) => now - st.mtimeMs > FOREIGN_TEMP_AGE_MS, () => false);
      if (!gone) continue;
      await rm(dir, { recursive: true, force: true });
      removed++;
    }
    return removed;
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    try {
      const st = await stat(this.file(key));
      return st.isFile() ? infoOf(st, () => statSync(this.file(key), { bigint: true })) : undefined;
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async get(key: string, range?: ByteRange): Promise<ObjectBody | undefined> {
    const fh = await this.openFile(key);
    if (fh === undefined) return undefined;
    try {
      const st = await fh.stat();
      if (!st.isFile()) {
        await fh.close();
        return undefined;
      }
      // The stream owns the handle from here and closes it at the end, on error or when destroyed.
      const body = fh.createReadStream({ start: range?.start, end: range?.end });
      return { info: infoOf(st, () => fstatSync(fh.fd, { bigint: true })), body };
    } catch (err) {
      await fh.close();
      throw err;
    }
  }

  async read(key: string, maxBytes: number, memory?: ReadMemory): Promise<ObjectRead | undefined> {
    if (!this.inlineReads) return this.readThroughPool(key, maxBytes, memory);
    const file = this.describe(key);
    if (file === undefined) return undefined;
    const { fd, info } = file;
    if (info.size > maxBytes || info.size <= SYNC_READ_MAX) {
      try {
        return readDescribed(fd, info, maxBytes, memory);
      } finally {
        closeSync(fd);
      }
    }
    // Larger than a read on this thread may be: read through the pool.
    try {
      const bytes = memory === undefined ? Buffer.allocUnsafeSlow(info.size) : memory.lend(info.size);
      await readAll(fd, bytes);
      return { info, bytes };
    } finally {
      await closeAsync(fd);
    }
  }

  /**
   * FastReads: a file of up to SYNC_READ_MAX bytes read, a larger one described, with plain
   * system calls on this thread: open, fstat, read, close. Reached through `fastReads` only
   * while this store reads on the calling thread (inlineReads). A key that never names other
   * bytes (an image's: unchangingKey) has what its fstat said remembered, and its next read is
   * open, read, close (StatMemo).
   */
  readNow(key: string, memory?: ReadMemory): ObjectRead | undefined {
    const unchanging = unchangingKey(key);
    if (unchanging) {
      const row = this.memo.find(key);
      if (row >= 0) {
        const read = this.readRemembered(key, row, memory);
        if (read !== false) return read;
      }
    }
    // Not remembered while a write of this store is under way: see `writing`.
    const file = this.describe(key, unchanging && this.writing === 0);
    if (file === undefined) return undefined;
    const { fd, info } = file;
    try {
      return readDescribed(fd, info, SYNC_READ_MAX, memory);
    } finally {
      closeSync(fd);
    }
  }

  /** The file of `key` opened through the pool, or undefined when there is none. */
  private async openFile(key: string): Promise<FileHandle | undefined> {
    try {
      return await open(this.file(key), 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  /** read() with every call (open, fstat, read, close) through the thread pool. */
  private async readThroughPool(key: string, maxBytes: number, memory?: ReadMemory): Promise<ObjectRead | undefined> {
    const fh = await this.openFile(key);
    if (fh === undefined) return undefined;
    try {
      const st = await fh.stat();
      if (!st.isFile()) return undefined;
      const info = infoOf(st, () => fstatSync(fh.fd, { bigint: true }));
      if (info.size > maxBytes) return { info, bytes: undefined };
      const bytes = memory === undefined ? Buffer.allocUnsafeSlow(info.size) : memory.lend(info.size);
      await readAll(fh.fd, bytes);
      return { info, bytes };
    } finally {
      await fh.close();
    }
  }

  /**
   * readNow of a file the memo describes (at `row`): open, one read of its size and a byte,
   * close. False, the file forgotten, when it is not that size any more or cannot be read so (a
   * folder now): the caller describes it afresh. Undefined when it is gone.
   */
  private readRemembered(key: string, row: number, memory: ReadMemory | undefined): ObjectRead | undefined | false {
    const memo = this.memo;
    const size = memo.size(row);
    let fd: number;
    try {
      fd = openSync(this.file(key), 'r');
    } catch (err) {
      memo.forget(key);
      if (isMissing(err)) return undefined;
      throw err;
    }
    try {
      // The byte past the end says the file is longer; fewer bytes, shorter. (Memory asked for
      // again by the caller's describing read when not: rare, and only garbage.)
      const bytes = memory === undefined ? Buffer.allocUnsafeSlow(size + 1) : memory.lend(size + 1);
      if (readSync(fd, bytes, 0, size + 1, 0) === size) {
        return { info: infoFrom(base36(memo.ino(row)), size, memo.mtimeMs(row)), bytes: bytes.length === size ? bytes : bytes.subarray(0, size) };
      }
    } catch {
      // Described afresh, which says what is wrong.
    } finally {
      closeSync(fd);
    }
    memo.forget(key);
    return false;
  }

  /**
   * The file of `key` opened (the caller closes it) and described; undefined when there is none
   * (or it is no file). `unchanging`: what fstat said is remembered (readNow).
   */
  private describe(key: string, unchanging = false): { fd: number; info: ObjectInfo } | undefined {
    let fd: number;
    try {
      fd = openSync(this.file(key), 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    try {
      const st = fstatSync(fd);
      if (st.isFile()) {
        if (unchanging && st.size < SYNC_READ_MAX) this.memo.remember(key, st);
        return { fd, info: infoOf(st, () => fstatSync(fd, { bigint: true })) };
      }
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    closeSync(fd);
    return undefined;
  }

  async delete(key: string): Promise<void> {
    try {
      await rm(this.file(key), { force: true });
    } catch (err) {
      // A folder's name, or a key under an object (a file where a folder would be), names no object either.
      if (!isMissing(err) && (err as NodeJS.ErrnoException).code !== 'ERR_FS_EISDIR') throw err;
    } finally {
      // (A read meanwhile finds no file, and forgets it itself.)
      this.memo.forget(key);
    }
  }

  async list(prefix: string): Promise<string[]> {
    return this.listWith(prefix, readdir);
  }

  /** BatchWrites: the bulk mirror lists one small release folder per release (most often missing): no pool trip for it. */
  async batchList(prefix: string): Promise<string[]> {
    return this.listWith(prefix, readdirSync);
  }

  /** Keys under `prefix`, its folders read with `read`. */
  private async listWith(prefix: string, read: typeof readdir | typeof readdirSync): Promise<string[]> {
    const out: string[] = [];
    const walk = async (rel: string): Promise<void> => {
      let entries;
      try {
        entries = await read(path.join(this.root, rel), { withFileTypes: true });
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
    // From the deepest folder the prefix names: listing uploads/ must not read a root of a million release folders.
    const base = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    if (base !== '' && !isValidKey(base)) return [];
    await walk(base);
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

  async close(): Promise<void> {
    // This process's temporary folder, when empty (a write still under way keeps it).
    const temp = this.temp;
    this.temp = undefined;
    const dir = await temp?.catch(() => undefined);
    if (dir === undefined) return;
    // And .tmp itself when no other process has a folder there: a store at rest holds only objects.
    if (await rmdir(dir).then(() => true, () => false)) await rmdir(path.dirname(dir)).catch(() => {});
  }
}

/** Where part-written files live (a dot folder: never a key, never listed, never served). */
const TEMP_DIR = '.tmp';
/** Part-written files of another machine's process are left alone this long. */
const FOREIGN_TEMP_AGE_MS = 60 * 60 * 1000;

/** fsyncs a folder; `inline`: opened and closed on this thread (no disk wait on a local disk), else every call in the pool. */
async function syncDir(dir: string, inline: boolean): Promise<void> {
  if (!inline) {
    const fh = await open(dir, 'r');
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    return;
  }
  // The fsync, which waits for the disk, in the pool.
  const fd = openSync(dir, 'r');
  try {
    await fsyncAsync(fd);
  } finally {
    closeSync(fd);
  }
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

import type { Readable } from 'node:stream';

/** What a store knows of one object without reading it. */
export interface ObjectInfo {
  size: number;
  /** A strong validator, quoted as it goes in an ETag header. Changes whenever the bytes may have. */
  etag: string;
  lastModified: Date;
}

/** An inclusive byte range, as in HTTP. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface ObjectBody {
  info: ObjectInfo;
  body: Readable;
}

/** A whole object read at once: its bytes when it has at most the bytes asked for, else only its description. */
export interface ObjectRead {
  info: ObjectInfo;
  bytes: Buffer | undefined;
}

/**
 * Memory a read goes into, lent by its caller (the file server's ReadPool, or the file cache's
 * own memory for a file it will keep): `lend(size)` gives exactly `size` bytes to read into. A
 * store may read into memory of its own instead (S3 joins the chunks it receives).
 */
export interface ReadMemory {
  lend(size: number): Buffer;
}

/**
 * Where originals, thumbnails and index.json live. A store that cannot be reached
 * (rather than one refusing a caller's key) fails with a STORE_UNAVAILABLE AppError. Keys are `/`-separated relative
 * paths of safe characters (see isValidKey); the layout is archive.org's (docs/file-serving.md, "The built-in file server").
 * Every store has all of it; a store that can also read small objects on the calling thread
 * says so with `fastReads`, one that writes a batch faster another way with `batchWrites`.
 */
export interface ObjectStore {
  /** Stores the bytes atomically and durably: readers see the old object or the new one, never a part. */
  put(key: string, body: Buffer, contentType: string): Promise<void>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Opens the object (or the byte range of it); undefined when there is no such object. */
  get(key: string, range?: ByteRange): Promise<ObjectBody | undefined>;
  /**
   * Reads the whole object in one go when it has at most `maxBytes` bytes (the file server's
   * small files: one request, no stream); a larger one is only described (bytes undefined),
   * for the caller to stream with get(). Undefined when there is no such object. `memory`,
   * when given, provides the memory to read into.
   */
  read(key: string, maxBytes: number, memory?: ReadMemory): Promise<ObjectRead | undefined>;
  /** Removes the object; removing a missing object is not an error. */
  delete(key: string): Promise<void>;
  /** Keys that start with `prefix`, sorted. */
  list(prefix: string): Promise<string[]>;
  /**
   * Resolves when the store can be used (a directory that exists or can be made and is
   * writable; a bucket that answers); rejects with a STORE_UNAVAILABLE AppError saying why.
   * Cheap enough for a readiness probe.
   */
  ready(): Promise<void>;
  close(): Promise<void>;
  /** Moves an object to another key (a rename; a server-side copy and a delete); false when `from` is not there. */
  move(from: string, to: string): Promise<boolean>;
  /** Removes everything under `folder/` (in a folder of files, also what list() does not show). */
  removeFolder(folder: string): Promise<void>;
  /** Removes what writers that died left half-written (where the store has such things); how many went. */
  sweepTemporary(now?: number): Promise<number>;
  /** Removes part-written files an older version left inside a folder (where the store has such things); how many went. */
  removeStrayTemporary(folder: string, now?: number): Promise<number>;
  /** The fast-read capability, where the store has it (FsObjectStore reading on the calling thread); absent otherwise. */
  readonly fastReads?: FastReads | undefined;
  /** The batch-write capability, where the store has it (FsObjectStore); absent where put and list are all there is (S3, whose every PUT is durable whole). */
  readonly batchWrites?: BatchWrites | undefined;
}

/**
 * Writes for a batch process that stores many objects into one folder and that no one waits on
 * (the bulk mirror; docs/decisions.md, "Bulk mirror: put's calls on the main thread, one folder
 * fsync per release"): the folder's entries made durable once for all its objects, and small
 * objects written and folders listed with calls on the calling thread. A server never uses them:
 * its store may be on a network file system, where such a call would stall every request.
 */
export interface BatchWrites {
  /**
   * As ObjectStore.put, except that the object's entry in its folder is durable only after
   * syncFolder (its own bytes are when this resolves: a crash before may lose the whole object,
   * never leave part of it), and a small object may be written with calls on the calling thread.
   */
  batchPut(key: string, body: Buffer, contentType: string): Promise<void>;
  /** Makes durable the entries of the objects batchPut into `folder/`. */
  syncFolder(folder: string): Promise<void>;
  /** As ObjectStore.list, its folders read with calls on the calling thread. */
  batchList(prefix: string): Promise<string[]>;
}

/**
 * Reads of small objects made entirely on the calling thread: no promise, no thread-pool trip
 * (local files; docs/decisions.md, "File store: reads on the serving thread, except on network
 * file systems"). The file server answers its misses through it where the store has it.
 */
export interface FastReads {
  /**
   * The object, read whole when it is small enough to be read on this thread (FsObjectStore:
   * up to 256 KiB), else only described (bytes undefined: read() or get() reads it); undefined
   * when there is none. What the store learnt of an object whose key names bytes that never
   * change (unchangingKey) may describe it at its next read (the stat memo).
   */
  readNow(key: string, memory?: ReadMemory): ObjectRead | undefined;
}

const KEY_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*(\/[A-Za-z0-9_][A-Za-z0-9._-]*)*$/;

/** True for keys made of safe segments: no empty, dot-led, `..` or absolute parts. */
export function isValidKey(key: string): boolean {
  return key.length <= 1024 && KEY_RE.test(key);
}

/**
 * The content type of a suffix of the layout (docs/file-serving.md, "The built-in file server"), or undefined
 * for another. A switch, not an object's property, which a suffix such as `constructor` would
 * find inherited (no measurable difference in speed: bench/RESULTS-archive.md, "Session 17").
 */
function typeOfSuffix(ext: string): string | undefined {
  switch (ext) {
    case 'jpg':
      return 'image/jpeg';
    case 'png':
      return 'image/png';
    case 'gif':
      return 'image/gif';
    case 'webp':
      return 'image/webp';
    case 'avif':
      return 'image/avif';
    case 'pdf':
      return 'application/pdf';
    case 'json':
      return 'application/json';
    default:
      return undefined;
  }
}

function suffixOf(key: string): string {
  return key.slice(key.lastIndexOf('.') + 1);
}

/** The content type a file of the layout is served with, or undefined for a suffix outside it. */
export function layoutContentType(key: string): string | undefined {
  return typeOfSuffix(suffixOf(key));
}

/**
 * Whether a key of the layout names bytes that never change: every one but index.json (what
 * layoutCacheControl calls immutable). A store may remember what it learnt of such a file
 * (FastReads.readNow).
 */
export function unchangingKey(key: string): boolean {
  return !key.endsWith('.json');
}

/**
 * How long a file of the layout may be cached: index.json changes with every edit (revalidate);
 * every other name is written once (ids are never reused), so it is immutable.
 */
export function layoutCacheControl(key: string): string | undefined {
  const ext = suffixOf(key);
  if (ext === 'json') return 'public, no-cache';
  return typeOfSuffix(ext) === undefined ? undefined : 'public, max-age=31536000, immutable';
}

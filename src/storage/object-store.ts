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

export interface PutOptions {
  /** False: the folder's entry is made durable by a later syncFolder, not by this put (true by default). */
  syncFolder?: boolean;
  /**
   * True: a small file may be written with calls on the calling thread, for a batch process
   * (the bulk mirror) that no one else waits on. A server leaves it false: its store may be on a
   * network file system, where such a call would stall every request (false by default).
   */
  callingThread?: boolean;
}

/**
 * Where originals, thumbnails and index.json live. A store that cannot be reached
 * (rather than one refusing a caller's key) fails with a STORE_UNAVAILABLE AppError. Keys are `/`-separated relative
 * paths of safe characters (see isValidKey); the layout is archive.org's (docs/file-serving.md, "The built-in file server").
 */
export interface ObjectStore {
  /**
   * Stores the bytes atomically and durably: readers see the old object or the new one, never a
   * part. With `syncFolder: false` the object's own bytes are durable when this resolves, but its
   * entry in its folder only after syncFolder (a crash before may lose the whole object, never leave
   * part of it); for callers that store many objects into one folder (the bulk mirror).
   */
  put(key: string, body: Buffer, contentType: string, options?: PutOptions): Promise<void>;
  head(key: string): Promise<ObjectInfo | undefined>;
  /** Opens the object (or the byte range of it); undefined when there is no such object. */
  get(key: string, range?: ByteRange): Promise<ObjectBody | undefined>;
  /**
   * Reads the whole object in one go when it has at most `maxBytes` bytes (the file server's
   * small files: one request, no stream); a larger one is only described (bytes undefined),
   * for the caller to stream with get(). Undefined when there is no such object. `alloc`, when
   * given, provides the memory to read into (exactly `size` bytes; a store may ignore it).
   */
  read(key: string, maxBytes: number, alloc?: (size: number) => Buffer): Promise<ObjectRead | undefined>;
  /**
   * read() done entirely on the calling thread, for stores that can (local files): the object,
   * undefined when there is none, or null when it is too large for that (then call read()).
   */
  readSync?(key: string, maxBytes: number, alloc?: (size: number) => Buffer, unchanging?: boolean): ObjectRead | undefined | null;
  /** Removes the object; removing a missing object is not an error. */
  delete(key: string): Promise<void>;
  /** Keys that start with `prefix`, sorted. `callingThread`: folders may be read with calls on the calling thread (as PutOptions.callingThread). */
  list(prefix: string, options?: { callingThread?: boolean }): Promise<string[]>;
  /**
   * Resolves when the store can be used (a directory that exists or can be made and is
   * writable; a bucket that answers); rejects with a STORE_UNAVAILABLE AppError saying why.
   * Cheap enough for a readiness probe.
   */
  ready(): Promise<void>;
  close(): Promise<void>;
  /**
   * Moves an object to another key (atomically where the store can: a rename); false when
   * `from` is not there. Absent: callers copy and delete.
   */
  move?(from: string, to: string): Promise<boolean>;
  /** Makes durable the entries of the objects put into `folder/` with `syncFolder: false`. Absent: puts are durable whole. */
  syncFolder?(folder: string): Promise<void>;
  /** Removes everything under `folder/`, also what list() does not show. Absent: callers list and delete. */
  removeFolder?(folder: string): Promise<void>;
  /** Removes what writers that died left half-written (where the store has such things); how many went. */
  sweepTemporary?(now?: number): Promise<number>;
  /** Removes part-written files an older version left inside a folder (where the store has such things). */
  removeStrayTemporary?(folder: string, now?: number): Promise<number>;
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
 * (FsObjectStore.readSync).
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

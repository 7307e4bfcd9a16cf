import { ServerResponse } from 'node:http';
import { pipeline, type Readable } from 'node:stream';
import type { Outcome, PlainReply, PlainRequest } from '../../shared/plain-http.js';
import { isStoreUnavailable } from '../../shared/errors.js';
import type { ByteRange, ObjectInfo, ObjectRead, ObjectStore, ReadMemory } from '../../storage/index.js';
import { cachedFile, commonOf, contentTypeOf, fileHeaders, notModifiedOf, okLines, refill, type CachedFile, type FileCache } from './file-cache.js';
import { isImageKey } from './keys.js';
import { ReadPool } from './read-pool.js';
import { etagMatches } from '../api/responses.js';

/** Answer of the file server: a stream for 200/206, nothing otherwise. */
export interface FileResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable | string | undefined;
}

/**
 * Headers of every answer of the file server (and of the pull-through's failures): CORS, and
 * never a page. A stored original is the uploaded bytes, and a GIF can also be an HTML page:
 * nosniff keeps browsers from guessing, and the sandbox policy gives a document opened from
 * here no scripts, no forms and an origin of its own, whatever the type (docs/decisions.md,
 * "Files are never pages").
 */
export const FILE_SAFETY: Readonly<Record<string, string>> = { 'access-control-allow-origin': '*', 'x-content-type-options': 'nosniff', 'content-security-policy': 'sandbox' };

const INDEX_RE = /^mbid-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/index\.json$/;

/**
 * The storage key a /download path names, or undefined. Only the archive layout is
 * accepted, so no path (dot segments, encoded slashes, NULs) can leave the store.
 */
export function keyForDownloadPath(rest: string): string | undefined {
  let key = rest;
  const q = key.indexOf('?');
  if (q !== -1) key = key.slice(0, q);
  if (key.length > 200) return undefined;
  // Nothing encoded (every name of the layout, as the archive's URLs spell it): nothing to decode.
  if (key.includes('%')) {
    // An encoded slash is part of a name, not a separator (RFC 3986 §2.2): no file of the layout has one.
    if (/%2f/i.test(key)) return undefined;
    try {
      key = decodeURIComponent(key);
    } catch {
      return undefined;
    }
  }
  return isImageKey(key) || INDEX_RE.test(key) ? key : undefined;
}

/** Parses a single `bytes=` range against a size; 'unsatisfiable', or undefined to send it all. */
function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return undefined; // several ranges or another unit: a 200 with everything is allowed
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  let start: number;
  let end: number;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
    if (b !== '' && Number(b) < start) return undefined;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}

/**
 * The answer while the store cannot be reached: a 503 that clients and caches retry, never
 * a 404 (the file may well exist) nor anything stale.
 */
export function storeUnavailableResponse(): FileResponse {
  return {
    status: 503,
    headers: { ...FILE_SAFETY, 'retry-after': '5', 'content-type': 'text/plain; charset=utf-8' },
    body: 'The file store is unavailable; try again later.\n',
  };
}

/** Serves one stored file with validators, conditional requests and ranges. */
export async function serveFile(
  store: ObjectStore,
  key: string | undefined,
  method: string,
  headers: { ifNoneMatch?: string; ifModifiedSince?: string; range?: string; ifRange?: string },
  attempt = 1,
): Promise<FileResponse> {
  const base = FILE_SAFETY;
  if (method !== 'GET' && method !== 'HEAD') {
    return { status: 405, headers: { ...base, allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }, body: 'Method Not Allowed\n' };
  }
  const notFound: FileResponse = { status: 404, headers: { ...base, 'content-type': 'text/plain; charset=utf-8' }, body: 'Not Found\n' };
  if (key === undefined) return notFound;
  const info = await store.head(key);
  if (info === undefined) return notFound;

  const list = fileHeaders(key, info);
  const common: Record<string, string> = {};
  for (let i = 0; i < list.length; i += 2) common[list[i] as string] = list[i + 1] as string;
  const fresh =
    headers.ifNoneMatch !== undefined
      ? etagMatches(headers.ifNoneMatch, info.etag)
      : headers.ifModifiedSince !== undefined && Math.floor(info.lastModified.getTime() / 1000) <= Date.parse(headers.ifModifiedSince) / 1000;
  if (fresh) return { status: 304, headers: common, body: undefined };

  const contentType = contentTypeOf(key);
  const rangeAllowed = headers.ifRange === undefined || headers.ifRange === info.etag;
  const range = rangeAllowed ? parseRange(headers.range, info.size) : undefined;
  if (range === 'unsatisfiable') {
    return { status: 416, headers: { ...common, 'content-range': `bytes */${info.size}`, 'content-type': 'text/plain; charset=utf-8' }, body: 'Range Not Satisfiable\n' };
  }
  const length = range === undefined ? info.size : range.end - range.start + 1;
  const out: Record<string, string> = { ...common, 'content-type': contentType, 'content-length': String(length) };
  if (range !== undefined) out['content-range'] = `bytes ${range.start}-${range.end}/${info.size}`;
  const status = range === undefined ? 200 : 206;
  if (method === 'HEAD') return { status, headers: out, body: undefined };
  const object = await store.get(key, range);
  if (object === undefined) return notFound;
  if (object.info.etag !== info.etag) {
    // Replaced between the two looks (index.json rewritten): describe what is being sent.
    object.body.destroy();
    if (attempt < 3) return serveFile(store, key, method, headers, attempt + 1);
    return { status: 503, headers: { ...base, 'retry-after': '1', 'content-type': 'text/plain; charset=utf-8' }, body: 'The file is changing; try again.\n' };
  }
  return { status, headers: out, body: object.body };
}

/** Where the file server says what went wrong (the listener's logger). */
export interface FileServerLog {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface FileServerOptions {
  store: ObjectStore;
  cache: FileCache;
  /** Whether the catalogue lets a file be kept (file-cache.ts, catalogueKeeps); absent: whatever was read. */
  keeps?: (key: string) => Promise<boolean>;
  /** The same question answered on the calling thread (file-cache.ts, catalogueKeepsNow), asked first when given; when it throws (SQLite busy), the awaited one (by a reply given now or not at all, none: the file is not kept that time). */
  keepsNow?: (key: string) => boolean;
  /**
   * Asked when the store lacks a file (listings written on demand, pull-through: see
   * cover-art/files/fill.ts): 'stored' when the file is there now (it is read again), an answer to
   * give instead, or undefined for a 404. Absent: a 404.
   */
  fill?: FileFill;
}

export type FileFill = (key: string, log: FileServerLog) => Promise<'stored' | FileResponse | undefined>;

/** Files up to this size are read whole and answered in one write, even when the cache does not keep them. */
const SMALL_FILE = 256 * 1024;
const PREFIX = '/download/'.length;
const TEXT = 'text/plain; charset=utf-8';
const WHOOPS = 'Whoops. Our bad.\n';
/** Headers of every answer of the file server (FILE_SAFETY's), as a list. */
const BASE = Object.entries(FILE_SAFETY).flat();

/**
 * The built-in file server on the raw request, in front of the router: a file the cache
 * holds is answered at once, head and body in one write; another is read whole (small
 * files; large ones are streamed) and, when the catalogue lets it, kept for the next
 * request. Same answers either way: both are written from the same prepared entry.
 */
export class FileServer {
  readonly store: ObjectStore;
  readonly cache: FileCache;
  private readonly keeps: ((key: string) => Promise<boolean>) | undefined;
  private readonly keepsNow: ((key: string) => boolean) | undefined;
  private readonly fill: FileFill | undefined;
  private readonly readMax: number;
  private readonly pool = new ReadPool();
  /** Reads of the store for files the memory cache lacked: found, or not (GET /metrics). */
  readonly storeReads = { hits: 0, misses: 0 };

  constructor(opts: FileServerOptions) {
    this.store = opts.store;
    this.cache = opts.cache;
    this.keeps = opts.keeps;
    this.keepsNow = opts.keepsNow;
    this.fill = opts.fill;
    this.readMax = Math.max(SMALL_FILE, opts.cache.maxEntryBytes);
  }

  /**
   * Answers a GET or HEAD whose target starts with /download/, with `requestId` in
   * X-Request-Id: from the cache, 404 for a name outside the layout, else from the store
   * (answerMiss). Declined (false, nothing written) only where `res` is given now or not at all
   * (PlainReply.nowOnly) and the answer would wait.
   */
  answer(req: PlainRequest, res: PlainReply, requestId: string, log: FileServerLog): Outcome {
    const rest = (req.url as string).slice(PREFIX);
    // Only keys of the layout are ever kept, so a target that is one needs no other check.
    let hit = this.cache.get(rest);
    let key: string | undefined;
    if (hit === undefined) {
      key = keyForDownloadPath(rest);
      if (key !== undefined && key !== rest) hit = this.cache.get(key);
    }
    if (hit !== undefined) this.sendKept(req, res, hit, requestId, undefined);
    else if (key === undefined) sendText(req, res, 404, BASE, 'Not Found\n', requestId);
    else return this.answerMiss(req, res, key, requestId, log, undefined);
    return true;
  }

  /**
   * Answers a GET or HEAD of an image endpoint with the file of `key` itself
   * (SLEEVE_IMAGE_RESPONSE=bytes): the same answers as /download/{key} (ETag, ranges, 304,
   * fetched through on a miss), with the endpoint's own Cache-Control (`/front` may change).
   */
  answerImage(req: PlainRequest, res: PlainReply, key: string, cacheControl: string | undefined, requestId: string, log: FileServerLog): Outcome {
    const hit = this.cache.get(key);
    if (hit === undefined) return this.answerMiss(req, res, key, requestId, log, cacheControl);
    this.sendKept(req, res, hit, requestId, cacheControl);
    return true;
  }

  /**
   * A file the cache lacks. Where the store reads on this thread (FastReads) and no question
   * must be awaited first, the whole answer is made now, with no promise and no thread-pool
   * trip: the file is read into lent memory, then the doorkeeper and the catalogue (its answer
   * of this generation, or its question asked on this thread: keepsNow) say whether it is kept,
   * and a kept file is copied into the cache's memory. Otherwise (a store without fast reads, a
   * file too large to read now, a file to fetch or make first, the catalogue's question to await)
   * the answer waits, and a reply that is given now or not at all declines it before anything is
   * asked (so that node:http, asked next, asks the doorkeeper once). A file larger than the
   * server reads whole is streamed.
   */
  private answerMiss(req: PlainRequest, res: PlainReply, key: string, requestId: string, log: FileServerLog, cacheControl: string | undefined): Outcome {
    const fast = this.store.fastReads;
    const nowOnly = res.nowOnly === true;
    // The catalogue's question to await (PostgreSQL): a reply that cannot wait declines at once.
    if (fast === undefined || (nowOnly && this.keeps !== undefined && this.keepsNow === undefined && this.cache.answered(key) === undefined)) {
      return nowOnly ? false : this.awaited(req, res, key, requestId, log, cacheControl);
    }
    const pool = this.pool;
    const generation = this.cache.generation;
    let read: ObjectRead | undefined;
    try {
      read = fast.readNow(key, pool);
    } catch (err) {
      pool.giveAfter(res, pool.taken());
      this.failed(req, res, err, requestId, log);
      return true;
    }
    // Memory may have been lent even when the answer is to read another way (a remembered file that grew).
    const lent = pool.taken();
    if ((read === undefined && this.fill !== undefined) || (read !== undefined && read.bytes === undefined && (nowOnly || read.info.size <= this.readMax))) {
      // Nothing was written from it.
      pool.give(lent);
      return nowOnly ? false : this.awaited(req, res, key, requestId, log, cacheControl);
    }
    this.countRead(read);
    if (read === undefined || read.bytes === undefined) {
      this.answerRead(req, res, key, read, false, generation, requestId, cacheControl, lent);
      return true;
    }
    let keep = this.cache.mayKeep(key) ? this.knownKeeps(key) : false;
    if (keep === undefined && this.keepsNow !== undefined) keep = this.askNow(this.keepsNow, key, generation);
    if (keep === undefined) {
      // The catalogue's question to await (PostgreSQL, or SQLite busy), where the reply may wait.
      if (!nowOnly) return this.keptLater(req, res, key, read, generation, requestId, cacheControl, lent).catch((err: unknown) => this.failed(req, res, err, requestId, log));
      // SQLite busy in the lane (PostgreSQL's question declined it above): not kept this time.
      keep = false;
    }
    if (keep) this.answerKept(req, res, key, read, generation, requestId, cacheControl, lent);
    else this.answerRead(req, res, key, read, false, generation, requestId, cacheControl, lent);
    return true;
  }

  /** answerMiss's answer once the catalogue has said whether the file just read is kept. */
  private async keptLater(req: PlainRequest, res: PlainReply, key: string, read: ObjectRead, generation: number, requestId: string, cacheControl: string | undefined, lent: Buffer | undefined): Promise<void> {
    if (await this.catalogueKeeps(key, generation)) this.answerKept(req, res, key, read, generation, requestId, cacheControl, lent);
    else this.answerRead(req, res, key, read, false, generation, requestId, cacheControl, lent);
  }

  /** A file read into lent memory and to be kept: copied into the cache's memory (FileCache.alloc), the lent memory given back at once (nothing was written from it). */
  private answerKept(req: PlainRequest, res: PlainReply, key: string, read: ObjectRead, generation: number, requestId: string, cacheControl: string | undefined, lent: Buffer | undefined): void {
    const from = read.bytes as Buffer;
    const bytes = this.cache.alloc(from.length);
    from.copy(bytes);
    this.pool.give(lent);
    this.answerRead(req, res, key, { info: read.info, bytes }, true, generation, requestId, cacheControl, bytes);
  }

  /**
   * answerMiss's answer made with its read awaited (miss), its failure answered. Whether the
   * file may be kept is decided first: the doorkeeper, then the catalogue's answer of this
   * generation, or its question asked on this thread where the catalogue allows (keepsNow),
   * else awaited by miss.
   */
  private awaited(req: PlainRequest, res: PlainReply, key: string, requestId: string, log: FileServerLog, cacheControl: string | undefined): Promise<void> {
    const generation = this.cache.generation;
    const mayKeep = this.cache.mayKeep(key);
    let known = mayKeep ? this.knownKeeps(key) : false;
    if (known === undefined && this.keepsNow !== undefined) known = this.askNow(this.keepsNow, key, generation);
    return this.miss(req, res, key, requestId, log, cacheControl, mayKeep && known !== false, generation).catch((err: unknown) => this.failed(req, res, err, requestId, log));
  }

  /** Answers from a file the cache holds (or has just been given), holding its memory while the answer is still being written. */
  private sendKept(req: PlainRequest, res: PlainReply, file: CachedFile, requestId: string, cacheControl: string | undefined): void {
    sendFile(req, res, file, requestId, cacheControl);
    if (res.writableLength !== 0) this.cache.hold(file, res);
  }

  private failed(req: PlainRequest, res: PlainReply, err: unknown, requestId: string, log: FileServerLog): void {
    if (isStoreUnavailable(err)) {
      log.warn({ err, reqId: requestId }, 'file store unavailable');
      sendResponse(req, res, storeUnavailableResponse(), requestId);
      return;
    }
    log.error({ err, reqId: requestId }, 'cover art request failed');
    if (res.headersSent) res.destroy();
    else sendText(req, res, 500, BASE, WHOOPS, requestId);
  }

  private countRead(read: ObjectRead | undefined): void {
    if (read === undefined) this.storeReads.misses++;
    else this.storeReads.hits++;
  }

  /**
   * Answers with what the store read: a 404, a stream for a large file, or the bytes (kept
   * when `keep`). `lent` is the memory given for the read: the cache's when `keep`, else the
   * pool's, given back once the answer is done with it.
   */
  private answerRead(
    req: PlainRequest,
    res: PlainReply,
    key: string,
    read: ObjectRead | undefined,
    keep: boolean,
    generation: number,
    requestId: string,
    cacheControl: string | undefined,
    lent: Buffer | undefined,
  ): void {
    if (read === undefined) sendText(req, res, 404, BASE, 'Not Found\n', requestId);
    else if (read.bytes === undefined) void this.stream(req, res, key, requestId, cacheControl);
    else if (keep) {
      const file = this.cache.fileOf(key, read.info, read.bytes, lent);
      this.cache.set(key, file, generation);
      return this.sendKept(req, res, file, requestId, cacheControl);
    } else sendFile(req, res, this.passing(key, read.info, read.bytes), requestId, cacheControl);
    if (!keep) this.pool.giveAfter(res, lent);
  }

  /** A file the cache lacks, every step awaited: whether it may be kept, its read, and a fill when the store lacks it. */
  private async miss(
    req: PlainRequest,
    res: PlainReply,
    key: string,
    requestId: string,
    log: FileServerLog,
    cacheControl: string | undefined,
    mayKeep: boolean,
    generation: number,
  ): Promise<void> {
    // Before the read (see catalogueKeeps); a catalogue that cannot answer keeps nothing.
    const keep = mayKeep && (await this.catalogueKeeps(key, generation));
    let lent: Buffer | undefined;
    const memory: ReadMemory = keep ? { lend: (size: number): Buffer => (lent = this.cache.alloc(size)) } : this.pool.lendTo((buf) => (lent = buf));
    let read;
    try {
      read = await this.store.read(key, this.readMax, memory);
      this.countRead(read);
      if (read === undefined && this.fill !== undefined) {
        // Not in the store: made or fetched now, then read like any other file.
        const filled = await this.fill(key, log);
        if (filled !== undefined && filled !== 'stored') return sendResponse(req, res, filled, requestId);
        if (filled === 'stored') read = await this.store.read(key, this.readMax, memory);
      }
    } catch (err) {
      if (!keep) this.pool.giveAfter(res, lent);
      throw err;
    }
    this.answerRead(req, res, key, read, keep, generation, requestId, cacheControl, lent);
  }

  /**
   * The entry of a file answered once and not kept: one object, its header list written over
   * for each such file (refill), as nothing holds on to it past sendFile (the answer's head is
   * made from the list at once; the body is the bytes). On a set larger than the cache nearly
   * every request is one: an entry and a header list made for each was ~0.4 KB of garbage per
   * request (bench/RESULTS-archive.md, "Session 13: cold set, allocation per request (branch files6)").
   */
  private passing(key: string, info: ObjectInfo, bytes: Buffer): CachedFile {
    const f = this.passer;
    return f === undefined ? (this.passer = cachedFile(key, info, bytes)) : refill(f, key, info, bytes);
  }

  private passer: CachedFile | undefined;

  /** The catalogue's answer about keeping `key` in this generation if known (true without a catalogue), else undefined. */
  private knownKeeps(key: string): boolean | undefined {
    return this.keeps === undefined ? true : this.cache.answered(key);
  }

  /** The catalogue's answer asked on this thread, remembered as catalogueKeeps' is; undefined when it cannot answer now (the awaited question is asked instead). */
  private askNow(keepsNow: (key: string) => boolean, key: string, generation: number): boolean | undefined {
    let yes: boolean;
    try {
      yes = keepsNow(key);
    } catch {
      return undefined;
    }
    this.cache.answer(key, yes, generation);
    return yes;
  }

  /** Whether the catalogue lets `key` be kept: asked once per generation (FileCache.answer), true without a catalogue. */
  private async catalogueKeeps(key: string, generation: number): Promise<boolean> {
    const known = this.knownKeeps(key);
    if (known !== undefined || this.keeps === undefined) return known ?? true;
    let yes: boolean;
    try {
      yes = await this.keeps(key);
    } catch {
      return false;
    }
    this.cache.answer(key, yes, generation);
    return yes;
  }

  /** A file too large to read whole: described, then streamed (ranges too) from the store. */
  private async stream(req: PlainRequest, res: PlainReply, key: string, requestId: string, cacheControl: string | undefined): Promise<void> {
    const h = req.headers;
    const r = await serveFile(this.store, key, req.method as string, {
      ifNoneMatch: header(req, 'if-none-match'),
      ifModifiedSince: h['if-modified-since'],
      range: h.range,
      ifRange: header(req, 'if-range'),
    });
    if (cacheControl !== undefined && r.headers['cache-control'] !== undefined) r.headers['cache-control'] = cacheControl;
    sendResponse(req, res, r, requestId);
  }
}

/** Writes a FileResponse: a text, nothing, or a stream (to node:http's response only: the fast lane declines those). */
function sendResponse(req: PlainRequest, res: PlainReply, r: FileResponse, requestId: string): void {
  const body = r.body;
  const headers: Record<string, string> = { ...r.headers, 'x-request-id': requestId };
  if (typeof body === 'string') headers['content-length'] = String(Buffer.byteLength(body));
  res.writeHead(r.status, headers);
  if (typeof body === 'string' || body === undefined) res.end(req.method === 'HEAD' ? undefined : body);
  // A client that goes away destroys the stream, which closes the file.
  else if (res instanceof ServerResponse) pipeline(body, res, () => {});
  else {
    body.destroy();
    res.destroy();
  }
}

/** A request header as one value (Node's types allow several). */
function header(req: PlainRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * Answers from a file held in memory: 304, 206 or 416 for a range, else 200. `cacheControl`
 * replaces the file's own (an image endpoint answered with the file); the prepared lists are
 * then copied, never changed.
 */
function sendFile(req: PlainRequest, res: PlainReply, f: CachedFile, requestId: string, cacheControl?: string): void {
  const h = req.headers;
  const inm = header(req, 'if-none-match');
  const ims = h['if-modified-since'];
  if (inm !== undefined ? etagMatches(inm, f.etag) : ims !== undefined && f.modifiedS <= Date.parse(ims) / 1000) {
    const list = withCacheControl(notModifiedOf(f), cacheControl);
    list[list.length - 1] = requestId;
    res.writeHead(304, list);
    res.end();
    return;
  }
  const size = f.bytes.length;
  if (h.range !== undefined) {
    const ifRange = header(req, 'if-range');
    const range = ifRange === undefined || ifRange === f.etag ? parseRange(h.range, size) : undefined;
    const common = withCacheControl(commonOf(f), cacheControl);
    if (range === 'unsatisfiable') {
      sendText(req, res, 416, [...common, 'content-range', `bytes */${size}`], 'Range Not Satisfiable\n', requestId);
      return;
    }
    if (range !== undefined) {
      const part = f.bytes.subarray(range.start, range.end + 1);
      res.writeHead(206, [
        ...common,
        'content-type',
        f.contentType,
        'content-length',
        String(part.length),
        'content-range',
        `bytes ${range.start}-${range.end}/${size}`,
        'x-request-id',
        requestId,
      ]);
      res.end(req.method === 'HEAD' ? undefined : part);
      return;
    }
  }
  if (cacheControl === undefined && res.writeHeadLines !== undefined) res.writeHeadLines(200, `${okLines(f)}${requestId}\r\n`);
  else {
    const ok = withCacheControl(f.ok, cacheControl);
    ok[ok.length - 1] = requestId;
    // writeHead copies the list into the head at once, so one list serves every request.
    res.writeHead(200, ok);
  }
  res.end(req.method === 'HEAD' ? undefined : f.bytes);
}

/** `list` (name, value, …) itself, or a copy whose Cache-Control is `cacheControl`. */
function withCacheControl(list: string[], cacheControl: string | undefined): string[] {
  if (cacheControl === undefined) return list;
  const out = list.slice();
  const i = out.indexOf('cache-control');
  if (i !== -1) out[i + 1] = cacheControl;
  return out;
}

/** A short text answer (404, 416, 500) after `before`, which starts with BASE. */
function sendText(req: PlainRequest, res: PlainReply, status: number, before: string[], body: string, requestId: string): void {
  const headers = [...before];
  headers.push('content-type', TEXT, 'content-length', String(Buffer.byteLength(body)), 'x-request-id', requestId);
  res.writeHead(status, headers);
  res.end(req.method === 'HEAD' ? undefined : body);
}

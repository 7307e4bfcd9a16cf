import { createHash } from 'node:crypto';
import type { Freshness, FreshnessEvent } from '../../cluster/cache-freshness.js';
import type { UpstreamConfig } from '../../config/upstream.js';
import type { Db } from '../../db/schema.js';
import type { Clock } from '../../shared/clock.js';
import { isAppError } from '../../shared/errors.js';
import { singleFlight } from '../../shared/single-flight.js';
import type { BatchWrites, ObjectStore } from '../../storage/index.js';
import { FILE_SAFETY, type FileResponse } from '../files/file-server.js';
import { imageKey, isInterfaceSize, originalKey, parseImageKey, type ThumbnailSize } from '../files/keys.js';
import { discard, readBody, RedirectRefused, UpstreamCall, upstreamGet } from './upstream-http.js';
import { processImage, verifyImage } from '../images/thumbnails.js';

/*
 * Pull-through from an upstream archive in archive.org's layout (docs/mirroring.md,
 * "Pull-through"; docs/decisions.md, "Pull-through"): one file fetched, checked and stored
 * at a time, for the file server's misses and for anything else that fills the store.
 */

/** A file upstream may have: an imported image the catalogue names, an original or a thumbnail. */
export interface KnownFile {
  key: string;
  mbid: string;
  id: number;
  size: ThumbnailSize | undefined;
  /** The catalogue's media type of the original (`image/jpeg`, `application/pdf`…) and its suffix. */
  mime: string;
  suffix: string;
}

/**
 * Why a fetch failed, for the bulk mirror's summary: the upstream's 5xx or a broken connection,
 * no answer in time, larger than SLEEVE_UPSTREAM_MAX_BYTES, not the file the catalogue names,
 * an md5 other than the upstream's `_files.xml` publishes, too many waiting, or stopped.
 */
export type FailCode = 'upstream_error' | 'timeout' | 'too_large' | 'invalid' | 'checksum' | 'busy' | 'interrupted';

/** How one fetch ended: in the store (`bytes` long), not upstream (404), or failed with the status to answer. */
export type Fetched = { kind: 'stored'; bytes: number } | { kind: 'absent' } | { kind: 'failed'; status: 502 | 503 | 504; code: FailCode; reason: string };

/** What a caller of fetchFile may add: the md5s the upstream publishes, a signal that abandons the download. */
export interface FetchOptions {
  /** The file's. */
  md5?: string | undefined;
  /** For a thumbnail: its original's (checked when fetchOrMake fetches the original to make it). */
  originalMd5?: string | undefined;
  signal?: AbortSignal | undefined;
  /** The store's batch writes to store through (the bulk mirror's; the caller makes each folder durable with its syncFolder); the store's own put without. */
  batch?: BatchWrites | undefined;
}

export interface UpstreamLog {
  warn(obj: object, msg: string): void;
}

export interface UpstreamDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  config: UpstreamConfig;
  /** Pixel limit of the decode check and of thumbnails made here (SLEEVE_UPLOAD_MAX_PIXELS). */
  maxPixels: number;
  /** First wait before a retry, ms (doubled, then doubled again); 250 by default. */
  backoffMs?: number;
}

/** Tries per file for a 5xx answer or a broken connection. */
const ATTEMPTS = 3;
/** Most upstream 404s remembered at once (the oldest goes first). */
const NOT_FOUND_MAX = 10_000;
/** Requests that may wait for an upstream slot, per slot; more are answered 503 at once. */
const QUEUE_PER_SLOT = 64;
/** Seconds a client is told to wait after an upstream failure. */
const RETRY_AFTER_S = 30;
/** Largest `_files.xml` read (archive.org's lists a few hundred bytes per file). */
const FILES_XML_MAX_BYTES = 4 * 1024 * 1024;

/** One upstream attempt: the bytes, a 404, or a failure (retryable or not). */
type Attempt = { kind: 'bytes'; bytes: Buffer } | { kind: 'absent' } | { kind: 'failed'; status: 502 | 504; code: FailCode; reason: string; retry: boolean };

/** What the pull-through did for the file server's misses (GET /metrics: sleeve_pull_through_total). */
export interface PullThroughCounts {
  /** Fetched from the upstream (or made from the original) and stored. */
  stored: number;
  /** Not upstream (a 404, or one remembered). */
  notFound: number;
  /** Failed, by FailCode (answered 502, 503 or 504). */
  failed: Map<FailCode, number>;
}

/**
 * The upstream's 404s, by key: a file the upstream lacks is not asked for again for
 * SLEEVE_UPSTREAM_NOT_FOUND_TTL_MS (0: never remembered). Bounded (NOT_FOUND_MAX keys, the
 * oldest first).
 */
class NotFoundMemory implements Freshness {
  /**
   * What empties it (cluster/cache-freshness.ts): nothing but time. A catalogue change does not
   * make the upstream have a file; each key is asked again once its time is up.
   */
  readonly emptiedBy: readonly FreshnessEvent[] = [];
  /** Key → when it may be asked again (clock ms). */
  private readonly until = new Map<string, number>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
  ) {}

  /** Whether the upstream answered 404 for `key` less than the TTL ago (a key whose time is up is forgotten). */
  has(key: string): boolean {
    const until = this.until.get(key);
    if (until === undefined) return false;
    if (until > this.clock.now()) return true;
    this.until.delete(key);
    return false;
  }

  remember(key: string): void {
    if (this.ttlMs === 0) return;
    if (this.until.size >= NOT_FOUND_MAX) {
      const oldest = this.until.keys().next().value;
      if (oldest !== undefined) this.until.delete(oldest);
    }
    this.until.set(key, this.clock.now() + this.ttlMs);
  }
}

export class Upstream {
  /** Counted by fill, for the metrics listener. */
  readonly counts: PullThroughCounts = { stored: 0, notFound: 0, failed: new Map() };
  private readonly deps: UpstreamDeps;
  private readonly base: string;
  private readonly inflight = new Map<string, Promise<Fetched>>();
  private readonly making = new Map<string, Promise<Fetched>>();
  private readonly notFound: NotFoundMemory;
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(deps: UpstreamDeps) {
    this.deps = deps;
    this.base = deps.config.url.replace(/\/+$/, '');
    this.notFound = new NotFoundMemory(deps.clock, deps.config.notFoundTtlMs);
  }

  /**
   * What the catalogue says of a storage key: an imported image of a known release or event (an
   * original with the catalogue's suffix, or a thumbnail), under the catalogue's own spelling
   * of its name (keys.ts: an id without leading zeros), else undefined. Only such keys
   * are ever fetched, so nothing a client makes up reaches the upstream. Images made here
   * are never fetched: their files come from their upload.
   */
  async known(key: string): Promise<KnownFile | undefined> {
    const parsed = parseImageKey(key);
    // Sizes and formats made on demand are never asked of the upstream (the real archive has none): derivatives.ts makes them.
    if (parsed === undefined || (parsed.size !== undefined && (!isInterfaceSize(parsed.size) || parsed.format !== 'jpeg'))) return undefined;
    const row =
      (await this.deps.db
        .selectFrom('cover_art as ca')
        .innerJoin('release as r', 'r.id', 'ca.release')
        .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
        .select(['ca.mime_type', 'it.suffix'])
        .where('ca.id', '=', parsed.id)
        .where('r.gid', '=', parsed.mbid)
        .where('ca.imported', '=', 1)
        .executeTakeFirst()) ??
      // An event's image (the Event Art Archive's items are `mbid-{event}` as well).
      (await this.deps.db
        .selectFrom('event_art as ea')
        .innerJoin('event as e', 'e.id', 'ea.event')
        .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
        .select(['ea.mime_type', 'it.suffix'])
        .where('ea.id', '=', parsed.id)
        .where('e.gid', '=', parsed.mbid)
        .where('ea.imported', '=', 1)
        .executeTakeFirst());
    // The catalogue's own name of the file, nothing else: an original with another suffix names
    // none (nor, to be sure, does a key spelled otherwise than keys.ts spells it).
    if (row === undefined || key !== imageKey(parsed.mbid, parsed.id, row.suffix, parsed.size)) return undefined;
    return { key, mbid: parsed.mbid, id: parsed.id, size: parsed.size as ThumbnailSize | undefined, mime: row.mime_type, suffix: row.suffix };
  }

  /**
   * The file server's miss of an image key: fetched through into the store ('stored', to be
   * read again), undefined for a 404, or the answer to give (502/504 with Retry-After, 503 when
   * too many wait). A thumbnail the upstream lacks is made here from the original.
   */
  async fill(key: string, log: UpstreamLog): Promise<'stored' | FileResponse | undefined> {
    const file = await this.known(key);
    if (file === undefined) return undefined;
    const result = await this.fetchOrMake(file);
    if (result.kind === 'stored') {
      this.counts.stored++;
      return 'stored';
    }
    if (result.kind === 'absent') {
      this.counts.notFound++;
      return undefined;
    }
    this.counts.failed.set(result.code, (this.counts.failed.get(result.code) ?? 0) + 1);
    log.warn({ key, upstream: this.base, status: result.status, reason: result.reason }, 'upstream fetch failed');
    return failedResponse(result);
  }

  /**
   * Fetches one file into the store: checked (status 200, an image Content-Type, at most
   * maxBytes, and it decodes as the type the catalogue says; thumbnails are JPEG), then put
   * whole (the store's put is atomic), so the store never holds part of a file. One request
   * per key at a time in this process; a 404 is remembered for SLEEVE_UPSTREAM_NOT_FOUND_TTL_MS.
   * Store failures are thrown (STORE_UNAVAILABLE).
   */
  fetchFile(file: KnownFile, options: FetchOptions = {}): Promise<Fetched> {
    if (this.notFound.has(file.key)) return Promise.resolve({ kind: 'absent' });
    return singleFlight(this.inflight, file.key, () => this.fetchAndStore(file, options));
  }

  /** fetchFile, and for a thumbnail the upstream lacks, one made here from the original. */
  async fetchOrMake(file: KnownFile, options: FetchOptions = {}): Promise<Fetched> {
    const result = await this.fetchFile(file, options);
    return result.kind === 'absent' && file.size !== undefined ? this.makeThumbnail(file, { md5: options.originalMd5, signal: options.signal }) : result;
  }

  /**
   * The md5 of each file the upstream publishes for a release (archive.org's
   * `mbid-{m}/mbid-{m}_files.xml`: `<file name="…"><md5>…</md5></file>`), by file name; undefined
   * when the upstream has no such list or it cannot be read (the files are then checked as
   * pull-through checks them, without a checksum).
   */
  async checksums(mbid: string, signal?: AbortSignal): Promise<Map<string, string> | undefined> {
    const got = await this.download(`${this.base}/mbid-${mbid}/mbid-${mbid}_files.xml`, 'application/xml', signal, FILES_XML_MAX_BYTES);
    if (got.kind !== 'bytes') return undefined;
    return parseFilesXml(got.bytes.toString('utf8'));
  }

  private async fetchAndStore(file: KnownFile, options: FetchOptions): Promise<Fetched> {
    const mime = file.size === undefined ? file.mime : 'image/jpeg';
    const got = await this.download(`${this.base}/${file.key}`, mime, options.signal);
    if (got.kind === 'absent') {
      this.notFound.remember(file.key);
      return got;
    }
    if (got.kind === 'failed') return got;
    if (options.md5 !== undefined) {
      const md5 = createHash('md5').update(got.bytes).digest('hex');
      if (md5 !== options.md5.toLowerCase()) return { kind: 'failed', status: 502, code: 'checksum', reason: `the upstream file's md5 is ${md5}, its _files.xml says ${options.md5}` };
    }
    // Bytes the upstream's md5 vouches for are the archive's own: their header is checked (the
    // type the catalogue says), not every pixel, which costs the bulk mirror most of its time.
    const why = await this.check(got.bytes, mime, options.md5 === undefined);
    if (why !== undefined) return { kind: 'failed', status: 502, code: 'invalid', reason: why };
    await (options.batch === undefined ? this.deps.store.put(file.key, got.bytes, mime) : options.batch.batchPut(file.key, got.bytes, mime));
    return { kind: 'stored', bytes: got.bytes.length };
  }

  /** Why the bytes are not the file the catalogue names, or undefined when they are. */
  private async check(bytes: Buffer, mime: string, decode: boolean): Promise<string | undefined> {
    if (mime === 'application/pdf') return bytes.subarray(0, 5).toString('latin1') === '%PDF-' ? undefined : 'the upstream file is not a PDF document';
    try {
      const facts = await verifyImage(bytes, this.deps.maxPixels, decode);
      return facts.mime === mime ? undefined : `the upstream file is ${facts.mime}, the catalogue says ${mime}`;
    } catch (err) {
      if (isAppError(err)) return `the upstream file is not a usable image: ${err.message}`;
      throw err;
    }
  }

  /** A thumbnail made here from the original (fetched through when the store lacks it). */
  private makeThumbnail(file: KnownFile, forOriginal: FetchOptions = {}): Promise<Fetched> {
    return singleFlight(this.making, file.key, () => this.thumbnailFromOriginal(file, forOriginal));
  }

  /** The thumbnail made from the original (`forOriginal`: the options to fetch that with). */
  private async thumbnailFromOriginal(file: KnownFile, forOriginal: FetchOptions): Promise<Fetched> {
    // No thumbnail is made of a PDF here (as for uploads): a 404, as the upstream said.
    if (file.size === undefined || file.mime === 'application/pdf') return { kind: 'absent' };
    const original: KnownFile = { ...file, key: originalKey(file.mbid, file.id, file.suffix), size: undefined };
    const { store, config } = this.deps;
    let read = await store.read(original.key, config.maxBytes);
    if (read === undefined) {
      const got = await this.fetchFile(original, forOriginal);
      if (got.kind !== 'stored') return got;
      read = await store.read(original.key, config.maxBytes);
    }
    if (read === undefined) return { kind: 'absent' };
    if (read.bytes === undefined) return { kind: 'failed', status: 502, code: 'too_large', reason: `the original is larger than ${config.maxBytes} bytes (SLEEVE_UPSTREAM_MAX_BYTES)` };
    let thumbnail: Buffer | undefined;
    try {
      thumbnail = (await processImage(read.bytes, this.deps.maxPixels)).thumbnails.get(file.size);
    } catch (err) {
      if (!isAppError(err)) throw err;
      return { kind: 'failed', status: 502, code: 'invalid', reason: `no thumbnail could be made of the original: ${err.message}` };
    }
    if (thumbnail === undefined) return { kind: 'absent' };
    await store.put(file.key, thumbnail, 'image/jpeg');
    return { kind: 'stored', bytes: thumbnail.length };
  }

  /**
   * GETs `url` (an image of type `mime`, or an XML list), retrying 5xx answers and broken
   * connections with backoff, within the concurrency cap; `signal` abandons it.
   */
  private async download(url: string, mime: string, signal?: AbortSignal, maxBytes = this.deps.config.maxBytes): Promise<Attempt | { kind: 'failed'; status: 503; code: FailCode; reason: string }> {
    let wait = this.deps.backoffMs ?? 250;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted === true) return { kind: 'failed', status: 503, code: 'interrupted', reason: 'stopped before the download' };
      if (!(await this.acquire())) return { kind: 'failed', status: 503, code: 'busy', reason: 'too many requests wait for the upstream' };
      let got: Attempt;
      try {
        got = await this.attempt(url, mime, maxBytes, signal);
      } finally {
        this.release();
      }
      if (got.kind !== 'failed' || !got.retry || attempt === ATTEMPTS) return got;
      await new Promise((resolve) => setTimeout(resolve, wait));
      wait *= 2;
    }
  }

  /** One GET: the headers within timeoutMs, the whole body within three times that, at most maxBytes. */
  private async attempt(url: string, mime: string, maxBytes: number, signal: AbortSignal | undefined): Promise<Attempt> {
    const { timeoutMs } = this.deps.config;
    const xml = mime === 'application/xml';
    const call = new UpstreamCall();
    const stop = () => call.stop();
    signal?.addEventListener('abort', stop, { once: true });
    let timedOut: string | undefined;
    const headersTimer = setTimeout(() => {
      timedOut = `no answer from the upstream within ${timeoutMs} ms`;
      call.stop();
    }, timeoutMs);
    const bodyTimer = setTimeout(() => {
      timedOut = `the upstream did not send the whole file within ${3 * timeoutMs} ms`;
      call.stop();
    }, 3 * timeoutMs);
    try {
      const res = await upstreamGet(url, { accept: mime, 'user-agent': 'sleeve (pull-through)' }, call, this.deps.config.redirectAllowPrivate);
      clearTimeout(headersTimer);
      if (res.status === 404 || res.status === 410) {
        discard(res);
        return { kind: 'absent' };
      }
      if (res.status !== 200) {
        discard(res);
        return { kind: 'failed', status: 502, code: 'upstream_error', reason: `the upstream answered ${res.status}`, retry: res.status >= 500 };
      }
      const type = (res.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
      const wanted = xml ? type.endsWith('/xml') : type.startsWith('image/') || (type === 'application/pdf' && mime === type);
      if (!wanted) {
        discard(res);
        return { kind: 'failed', status: 502, code: 'invalid', reason: `the upstream sent ${JSON.stringify(type)}, not ${xml ? 'XML' : 'an image'}`, retry: false };
      }
      const declared = res.header('content-length');
      if (declared !== undefined && Number(declared) > maxBytes) {
        res.body.destroy();
        return { kind: 'failed', status: 502, code: 'too_large', reason: `the upstream file has ${declared} bytes, more than ${maxBytes} (SLEEVE_UPSTREAM_MAX_BYTES)`, retry: false };
      }
      const bytes = await readBody(res.body, maxBytes);
      if (bytes === 'too_large') return { kind: 'failed', status: 502, code: 'too_large', reason: `the upstream file has more than ${maxBytes} bytes (SLEEVE_UPSTREAM_MAX_BYTES)`, retry: false };
      // A body cut short by the timer or the signal is a failure of that kind, not a short file.
      if (call.stopped !== undefined) throw call.stopped;
      if (declared !== undefined && Number(declared) !== bytes.length) {
        return { kind: 'failed', status: 502, code: 'upstream_error', reason: `the upstream sent ${bytes.length} of ${declared} bytes`, retry: true };
      }
      return { kind: 'bytes', bytes };
    } catch (err) {
      if (timedOut !== undefined) return { kind: 'failed', status: 504, code: 'timeout', reason: timedOut, retry: false };
      if (signal?.aborted === true) return { kind: 'failed', status: 502, code: 'interrupted', reason: 'the download was stopped', retry: false };
      // Where the upstream sends sleeve does not change on a second try.
      if (err instanceof RedirectRefused) return { kind: 'failed', status: 502, code: 'upstream_error', reason: `the upstream's redirect was not followed: ${err.message}`, retry: false };
      const e = err as NodeJS.ErrnoException;
      return { kind: 'failed', status: 502, code: 'upstream_error', reason: `the upstream could not be read: ${e.code ?? e.message}`, retry: true };
    } finally {
      signal?.removeEventListener('abort', stop);
      clearTimeout(headersTimer);
      clearTimeout(bodyTimer);
    }
  }

  /** Waits for an upstream slot; false when too many wait already. */
  private async acquire(): Promise<boolean> {
    const { concurrency } = this.deps.config;
    if (this.active < concurrency) {
      this.active++;
      return true;
    }
    if (this.waiting.length >= concurrency * QUEUE_PER_SLOT) return false;
    // The slot is handed over by release(), still counted as active.
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    return true;
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next !== undefined) next();
    else this.active--;
  }
}

const XML_ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'" };

/** `_files.xml`'s md5 by file name (archive.org's layout; files without an md5 are left out). */
function parseFilesXml(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(/<file\s[^>]*?\bname="([^"]*)"[^>]*>([\s\S]*?)<\/file>/g)) {
    const md5 = /<md5>\s*([0-9a-fA-F]{32})\s*<\/md5>/.exec(m[2] as string)?.[1];
    const name = (m[1] as string).replace(/&(amp|lt|gt|quot|apos);/g, (_, e: string) => XML_ENTITIES[e] as string);
    if (md5 !== undefined) out.set(name, md5.toLowerCase());
  }
  return out;
}

/** The answer to an upstream failure: 502, 504 (or 503 when too many wait), with Retry-After. */
function failedResponse(result: { status: number; reason: string }): FileResponse {
  return {
    status: result.status,
    headers: {
      ...FILE_SAFETY,
      'retry-after': String(RETRY_AFTER_S),
      'content-type': 'text/plain; charset=utf-8',
      'cache-control': 'no-store',
    },
    body: `${result.reason}; try again later.\n`,
  };
}

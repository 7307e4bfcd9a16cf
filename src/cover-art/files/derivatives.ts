/*
 * Thumbnails made on demand (docs/file-serving.md, "Sizes and formats made on demand"): a size
 * the operator added (SLEEVE_THUMBNAIL_SIZES) or a WebP/AVIF thumbnail (SLEEVE_THUMBNAIL_FORMATS),
 * made from the original the first time the file server is asked for it, stored, and from then
 * on served like any thumbnail. One resize per file however many ask at once (per process; the
 * store's put is atomic, so two processes making it store the same bytes and none is ever seen
 * half-written), a bounded number at once, a bounded number waiting: beyond, 503 with Retry-After.
 */
import { failpoint } from '../../shared/failpoint.js';
import { singleFlight } from '../../shared/single-flight.js';
import { isStoreUnavailable } from '../../shared/errors.js';
import type { Db } from '../../db/schema.js';
import type { ObjectStore, ReadMemory } from '../../storage/index.js';
import { FILE_SAFETY, type FileResponse, type FileServerLog } from './file-server.js';
import { isInterfaceSize, originalKey, parseImageKey, type ImageKeyParts, type ThumbnailFormat } from './keys.js';
import { sharpModule } from '../images/thumbnails.js';

export interface DerivativeOptions {
  /** Every size answered (SLEEVE_THUMBNAIL_SIZES: the interface's three among them). */
  sizes: readonly number[];
  /** Every format made (SLEEVE_THUMBNAIL_FORMATS: JPEG among them). */
  formats: readonly ThumbnailFormat[];
  /** Pixel limit of the decode (SLEEVE_UPLOAD_MAX_PIXELS). */
  maxPixels: number;
  /** The largest original read (SLEEVE_UPLOAD_MAX_BYTES, or the upstream's limit when larger). */
  maxBytes: number;
  /** Resizes at once (default: MAX_ACTIVE). */
  maxActive?: number;
  /** Files waiting for a resize; more are answered 503 (default: MAX_WAITING). */
  maxWaiting?: number;
}

export interface DerivativeDeps {
  db: Db;
  store: ObjectStore;
  /** The file server's miss for the original (pull-through when configured): 'stored' once the store has it. */
  original: (key: string, log: FileServerLog) => Promise<'stored' | FileResponse | undefined>;
  /**
   * Told of each file made and stored, once (not once per request that waited for it), with its
   * real dimensions as the resize reported them; the answers wait for it. Must not throw.
   */
  made?: (key: string, parts: ImageKeyParts, dims: { width: number; height: number }, log: FileServerLog) => Promise<void>;
}

/** Resizes at once per process: sharp's own work runs on libuv's pool, four threads by default. */
const MAX_ACTIVE = 2;
/** Files waiting for a resize per process (requests for one file share its place). */
const MAX_WAITING = 32;
/** Seconds a client is told to wait when too many resizes wait. */
const RETRY_AFTER_S = 2;

/** An original's memory is kept for the next resize only up to this size (most cover art is smaller). */
const KEPT_ORIGINAL_BYTES = 8 * 1024 * 1024;
/** Memory for an original is made in steps of this size, so that the next, slightly larger one fits in it. */
const ORIGINAL_STEP = 1024 * 1024;

const JPEG_QUALITY = 85;
const WEBP_QUALITY = 80;
/** AVIF at sharp's default quality, effort 4 of 9: libaom's slow end costs seconds per thumbnail. */
const AVIF = { quality: 50, effort: 4 } as const;

const MIME: Record<ThumbnailFormat, string> = { jpeg: 'image/jpeg', webp: 'image/webp', avif: 'image/avif' };

/**
 * Resizes an original the way sleeve's thumbnails are made (thumbnails.ts): EXIF orientation
 * applied, the longest side at most `size` and never upscaled, the first frame of an animation,
 * alpha flattened on white, sRGB (a CMYK JPEG or a 16-bit PNG comes out as 8-bit sRGB), then
 * encoded as `format`. Answers the file and its dimensions (sharp's own account of what it
 * wrote: nothing is read back). Throws for bytes that do not decode.
 */
async function resizeImage(bytes: Buffer, size: number, format: ThumbnailFormat, maxPixels: number): Promise<{ data: Buffer; width: number; height: number }> {
  const sharp = await sharpModule();
  const pipeline = sharp(bytes, { limitInputPixels: maxPixels, failOn: 'truncated' })
    .rotate()
    .resize(size, size, { fit: 'inside', withoutEnlargement: true })
    .flatten({ background: '#ffffff' })
    .toColourspace('srgb');
  const encoded = format === 'webp' ? pipeline.webp({ quality: WEBP_QUALITY }) : format === 'avif' ? pipeline.avif(AVIF) : pipeline.jpeg({ quality: JPEG_QUALITY });
  const { data, info } = await encoded.toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height };
}

/**
 * The memory originals are read into, kept for the next resize (docs/decisions.md, "Originals
 * read into kept memory"): a fresh buffer per original is external memory that makes V8 start
 * a full collection every few resizes. Bounded: at most `kept` buffers of up to
 * KEPT_ORIGINAL_BYTES wait free (one per resize at once); a larger original gets memory of its own.
 */
class OriginalMemory {
  private readonly free: Buffer[] = [];
  private readonly kept: number;

  constructor(kept: number) {
    this.kept = kept;
  }

  /** A ReadMemory for one read: a free buffer that fits (or a new one), told to `lent`, to give back once the resize is done with it. */
  lendTo(lent: (buf: Buffer) => void): ReadMemory {
    return {
      lend: (size: number): Buffer => {
        const buf = this.take(size);
        lent(buf);
        return buf.subarray(0, size);
      },
    };
  }

  /** Takes back `buf` (nothing reads it any more); the smallest goes when more than `kept` would wait. */
  give(buf: Buffer | undefined): void {
    if (buf === undefined || buf.length > KEPT_ORIGINAL_BYTES) return;
    this.free.push(buf);
    if (this.free.length > this.kept) {
      const smallest = this.free.reduce((a, b, i) => (b.length < (this.free[a] as Buffer).length ? i : a), 0);
      this.free.splice(smallest, 1);
    }
  }

  private take(size: number): Buffer {
    let best = -1;
    for (const [i, buf] of this.free.entries()) {
      if (buf.length >= size && (best < 0 || buf.length < (this.free[best] as Buffer).length)) best = i;
    }
    if (best >= 0) return this.free.splice(best, 1)[0] as Buffer;
    return Buffer.allocUnsafeSlow(size > KEPT_ORIGINAL_BYTES ? size : Math.ceil(size / ORIGINAL_STEP) * ORIGINAL_STEP);
  }
}

/** The 503 when too many resizes wait (the file server's other 503s have the same headers). */
function busy(): FileResponse {
  return {
    status: 503,
    headers: { ...FILE_SAFETY, 'retry-after': String(RETRY_AFTER_S), 'content-type': 'text/plain; charset=utf-8' },
    body: 'Too many thumbnails are being made; try again shortly.\n',
  };
}

/** What `make` answers: stored (read it), a 404, or an answer to give (503). */
type Made = 'stored' | FileResponse | undefined;

/** Makes the thumbnails of sizes and formats beyond the interface's JPEG ones, on the file server's miss. */
export class Derivatives {
  private readonly deps: DerivativeDeps;
  private readonly sizes: ReadonlySet<number>;
  private readonly formats: ReadonlySet<ThumbnailFormat>;
  private readonly opts: DerivativeOptions;
  private readonly inflight = new Map<string, Promise<Made>>();
  private active = 0;
  private readonly waiting: (() => void)[] = [];
  private readonly memory: OriginalMemory;
  /** Files made, and misses refused for want of room (GET /metrics could show them). */
  readonly counts = { made: 0, busy: 0 };

  constructor(deps: DerivativeDeps, opts: DerivativeOptions) {
    this.deps = deps;
    this.opts = opts;
    this.sizes = new Set(opts.sizes);
    this.formats = new Set(opts.formats);
    this.memory = new OriginalMemory(opts.maxActive ?? MAX_ACTIVE);
  }

  /**
   * The parts of `key` when it names a thumbnail made on demand here (a size or format the
   * operator turned on, other than the interface's JPEG ones), else undefined.
   */
  madeHere(key: string): ImageKeyParts | undefined {
    const parsed = parseImageKey(key);
    if (parsed?.size === undefined || parsed.format === undefined) return undefined;
    if (isInterfaceSize(parsed.size) && parsed.format === 'jpeg') return undefined;
    return this.sizes.has(parsed.size) && this.formats.has(parsed.format) ? parsed : undefined;
  }

  /** The file server's miss of a derivative key (madeHere): made and stored once, however many ask. */
  make(key: string, parts: ImageKeyParts, log: FileServerLog): Promise<Made> {
    return singleFlight(this.inflight, key, () => this.queued(key, parts, log));
  }

  private async queued(key: string, parts: ImageKeyParts, log: FileServerLog): Promise<Made> {
    if (this.active >= (this.opts.maxActive ?? MAX_ACTIVE)) {
      if (this.waiting.length >= (this.opts.maxWaiting ?? MAX_WAITING)) {
        this.counts.busy++;
        return busy();
      }
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    } else this.active++;
    try {
      return await this.makeNow(key, parts, log);
    } finally {
      // The slot goes to the next waiting file, or is given back.
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.active--;
    }
  }

  private async makeNow(key: string, parts: ImageKeyParts, log: FileServerLog): Promise<Made> {
    const { db, store } = this.deps;
    const row = await db
      .selectFrom('cover_art as ca')
      .innerJoin('release as r', 'r.id', 'ca.release')
      .innerJoin('image_type as it', 'it.mime_type', 'ca.mime_type')
      .select(['it.suffix'])
      .where('ca.id', '=', parts.id)
      .where('r.gid', '=', parts.mbid)
      .executeTakeFirst();
    // No such image, or a PDF: no thumbnail (as for uploads).
    if (row === undefined || row.suffix === 'pdf') return undefined;
    const source = originalKey(parts.mbid, parts.id, row.suffix);
    // The original's memory is lent, and given back once the resize is done with it.
    let lent: Buffer | undefined;
    const memory = this.memory.lendTo((buf) => (lent = buf));
    let made: Awaited<ReturnType<typeof resizeImage>>;
    try {
      let read = await store.read(source, this.opts.maxBytes, memory);
      if (read === undefined) {
        // Not stored: fetched through (pull-through), when it can be.
        const got = await this.deps.original(source, log);
        if (got !== 'stored') return got;
        read = await store.read(source, this.opts.maxBytes, memory);
      }
      if (read?.bytes === undefined) return undefined;
      try {
        made = await resizeImage(read.bytes, parts.size as number, parts.format as ThumbnailFormat, this.opts.maxPixels);
      } catch (err) {
        if (isStoreUnavailable(err)) throw err;
        log.warn({ key, err: (err as Error).message }, 'no thumbnail could be made of the stored original');
        return undefined;
      }
    } finally {
      // Nothing reads the original any more (sharp has answered, or it was never read).
      this.memory.give(lent);
    }
    // Tests stop here (made, not stored) to show an interrupted resize leaves no file.
    await failpoint('derivative-made', key);
    await store.put(key, made.data, MIME[parts.format as ThumbnailFormat]);
    this.counts.made++;
    await this.deps.made?.(key, parts, { width: made.width, height: made.height }, log);
    return 'stored';
  }
}

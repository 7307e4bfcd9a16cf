import type { FollowingCache, FreshnessEvent } from '../../cluster/cache-freshness.js';
import type { ReadsNow } from '../../db/connect.js';
import { preparedQuery } from '../../db/prepared.js';
import type { Db } from '../../db/schema.js';
import { layoutCacheControl, layoutContentType, type ObjectInfo } from '../../storage/index.js';
import { HashWindow } from './hash-window.js';
import { parseImageKey } from './keys.js';
import { flatLatin1 } from '../../edge/flat-string.js';

/**
 * A file of the layout held in memory with everything its answers need, prepared once.
 *
 * A class, not an object literal: V8 tracks each literal's allocation site and, once most of
 * what a site made outlived a young-generation collection (the cache's first fill keeps every
 * file read), makes that site's objects in the old generation from then on. The same site then
 * made the files answered and not kept too (nearly every read on a set larger than the cache),
 * each a dead object in the old generation holding its young header list, strings and buffer
 * alive through the next scavenges into the old generation as well: ~0.5 MB per scavenge that
 * only a full collection frees. Objects made by `new` have no such site (docs/decisions.md,
 * "The file server's entries: no allocation site to pretenure").
 */
export class CachedFile {
  bytes: Buffer;
  etag: string;
  /** Modification time in whole seconds, for If-Modified-Since. */
  modifiedS: number;
  contentType: string;
  /** The 200 answer's headers for writeHead, the request id's value last (set per request). */
  ok: string[];
  /**
   * The 200 answer's header lines as text up to the request id's value (okLines), for the fast
   * lane: made when first needed.
   */
  okText: string | undefined = undefined;
  /** Headers every answer about the file carries (validators, caching, CORS), as name, value, …: made when first needed (commonOf). */
  common: string[] | undefined = undefined;
  /** The 304 answer's headers, the request id's value last: made when first needed (notModifiedOf). */
  notModified: string[] | undefined = undefined;
  /** Read since the eviction hand last passed (the clock algorithm's second chance). */
  used = false;
  /**
   * The cache's own memory (FileCache.alloc: a buffer no one else shares), so it may be read
   * into again once the entry is pushed out and no answer is still being written from it.
   */
  own = false;
  /** Answers still being written from `bytes` (FileCache.hold). */
  writing = 0;
  /** Pushed out while answers were still being written from it: its memory is spare once they are done. */
  retired = false;
  /** The shape of `ok` (its Cache-Control and Content-Type), kept so okLines need not find it again per answer. */
  shape: Shape;

  constructor(bytes: Buffer, etag: string, modifiedS: number, contentType: string, ok: string[], shape: Shape) {
    this.bytes = bytes;
    this.etag = etag;
    this.modifiedS = modifiedS;
    this.contentType = contentType;
    this.ok = ok;
    this.shape = shape;
  }
}

/** What an entry costs beyond its bytes (header lists, strings, the map's slot), roughly. */
const ENTRY_OVERHEAD = 1024;
/** The most slots of FileCache's table of hash counts (2^20, 4 MiB: as many as a budget of 512 MiB has). */
const HELD_SLOTS_MAX = 1 << 20;
/** The doorkeeper's smallest window, in keys. */
const WINDOW_MIN = 512;
/**
 * Its largest (2^19 keys: 4 MiB of slots), the half of the entries of a budget of 1 GiB. Past it
 * the window is smaller than half the entries: a table sized from a budget of up to 2^40 bytes
 * would be gigabytes, each of its restarts a zeroing of all of it.
 */
const WINDOW_MAX = 1 << 19;
/** Lookups (hits and misses) over which the cache's hit ratio is taken (FileCache.mayKeep). */
const RATIO_WINDOW = 1024;
/** Once full and missing on most lookups, one in this many files the doorkeeper lets in is kept. */
const SPARSE_ONE_IN = 16;

/**
 * The headers of every answer about a file: CORS, never a page (a stored file is as uploaded:
 * an image may also be HTML; FILE_SAFETY), validators, caching.
 */
export function fileHeaders(key: string, info: ObjectInfo): string[] {
  return [
    'access-control-allow-origin',
    '*',
    'x-content-type-options',
    'nosniff',
    'content-security-policy',
    'sandbox',
    'etag',
    info.etag,
    'last-modified',
    httpDate(info.lastModified),
    'cache-control',
    layoutCacheControl(key) ?? 'no-cache',
    'accept-ranges',
    'bytes',
  ];
}

/** Where fileHeaders puts the values that differ from file to file, and how many names and values it has. */
const ETAG_AT = 7;
const LAST_MODIFIED_AT = 9;
const CACHE_CONTROL_AT = 11;
const COMMON_LENGTH = 14;
/** Where a 200 list (okShape) has the length's value. */
const LENGTH_AT = COMMON_LENGTH + 3;

let lastSecond = Number.NaN;
let lastDate = '';

/** `date` as an HTTP date; the last one is remembered (files written together share their second). */
function httpDate(date: Date): string {
  const s = Math.floor(date.getTime() / 1000);
  if (s !== lastSecond) {
    lastDate = date.toUTCString();
    lastSecond = s;
  }
  return lastDate;
}

export function contentTypeOf(key: string): string {
  return layoutContentType(key) ?? 'application/octet-stream';
}

/**
 * The 200 answer's list for each (Cache-Control, Content-Type) seen, with the per-file values
 * blank: a file's list is a copy with its ETag, Last-Modified and length filled in; and, once
 * asked for (okLines), its header lines as text around those values. A handful of shapes exist
 * (the layout's suffixes), found by Cache-Control, then Content-Type: no name made per file.
 */
export interface Shape {
  list: string[];
  /** The header lines before the ETag's value, before Last-Modified's, before the length's, before the request id's. */
  texts: [string, string, string, string] | undefined;
}

const shapes = new Map<string, Map<string, Shape>>();
let shapeCount = 0;

function shapeOf(cacheControl: string, contentType: string): Shape {
  let byType = shapes.get(cacheControl);
  let shape = byType?.get(contentType);
  if (shape === undefined) {
    const list = fileHeaders('', { size: 0, etag: '', lastModified: new Date(0) });
    list[CACHE_CONTROL_AT] = cacheControl;
    list.push('content-type', contentType, 'content-length', '', 'x-request-id', '');
    shape = { list, texts: undefined };
    if (shapeCount < 64) {
      if (byType === undefined) shapes.set(cacheControl, (byType = new Map()));
      byType.set(contentType, shape);
      shapeCount++;
    }
  }
  return shape;
}

function okShape(key: string, contentType: string): Shape {
  return shapeOf(layoutCacheControl(key) ?? 'no-cache', contentType);
}

/** A file read whole, ready to answer from (whether or not the cache keeps it). */
export function cachedFile(key: string, info: ObjectInfo, bytes: Buffer): CachedFile {
  const contentType = contentTypeOf(key);
  const shape = okShape(key, contentType);
  const ok = shape.list.slice();
  ok[ETAG_AT] = info.etag;
  ok[LAST_MODIFIED_AT] = httpDate(info.lastModified);
  ok[LENGTH_AT] = String(bytes.length);
  return new CachedFile(bytes, info.etag, Math.floor(info.lastModified.getTime() / 1000), contentType, ok, shape);
}

/**
 * `f`, an entry pushed out whose answers are all written (FileCache.fileOf), made the entry of
 * another file read into its memory: its header list is written over in place (every shape has
 * the same length), the rest set as the constructor sets it. Also the file server's entry for
 * files answered and not kept (FileServer.passing), made anew for each.
 */
export function refill(f: CachedFile, key: string, info: ObjectInfo, bytes: Buffer): CachedFile {
  const contentType = contentTypeOf(key);
  const shape = okShape(key, contentType);
  const list = shape.list;
  const ok = f.ok;
  for (let i = 0; i < list.length; i++) ok[i] = list[i] as string;
  ok[ETAG_AT] = info.etag;
  ok[LAST_MODIFIED_AT] = httpDate(info.lastModified);
  ok[LENGTH_AT] = String(bytes.length);
  f.bytes = bytes;
  f.etag = info.etag;
  f.modifiedS = Math.floor(info.lastModified.getTime() / 1000);
  f.contentType = contentType;
  f.shape = shape;
  f.common = undefined;
  f.notModified = undefined;
  f.okText = undefined;
  f.used = false;
  f.writing = 0;
  f.retired = false;
  return f;
}

/** The text of fileHeaders' list from `from` to `to` as header lines. */
function lines(list: readonly string[], from: number, to: number): string {
  let out = '';
  for (let i = from; i < to; i += 2) out += `${list[i] as string}: ${list[i + 1] as string}\r\n`;
  return out;
}

/**
 * The 200 answer's header lines of `f` (its `ok` list as text), up to the request id's value:
 * the shape's text with the file's values put in, a few strings joined rather than two made
 * per header (PlainReply.writeHeadLines).
 */
export function okLines(f: CachedFile): string {
  if (f.okText !== undefined) return f.okText;
  const ok = f.ok;
  const shape = f.shape;
  const list = shape.list;
  const t = (shape.texts ??= [
    flatLatin1(`${lines(list, 0, ETAG_AT - 1)}${list[ETAG_AT - 1] as string}: `),
    flatLatin1(`\r\n${list[LAST_MODIFIED_AT - 1] as string}: `),
    flatLatin1(`\r\n${lines(list, LAST_MODIFIED_AT + 1, LENGTH_AT - 1)}${list[LENGTH_AT - 1] as string}: `),
    flatLatin1(`\r\n${list[list.length - 2] as string}: `),
  ]);
  f.okText = `${t[0]}${ok[ETAG_AT] as string}${t[1]}${ok[LAST_MODIFIED_AT] as string}${t[2]}${ok[LENGTH_AT] as string}${t[3]}`;
  return f.okText;
}

/** The headers every answer about `f` carries (fileHeaders'). */
export function commonOf(f: CachedFile): string[] {
  f.common ??= f.ok.slice(0, COMMON_LENGTH);
  return f.common;
}

/** The 304 answer's headers of `f`, the request id's value last. */
export function notModifiedOf(f: CachedFile): string[] {
  f.notModified ??= [...commonOf(f), 'x-request-id', ''];
  return f.notModified;
}

/**
 * A 30-bit hash of a key (FNV-1a), what the doorkeeper remembers: a small integer is no object,
 * whereas each key remembered would be a string kept past a collection or two, moved to the
 * old generation and left there as garbage when the window starts again (a read of nearly
 * every request on a set larger than the cache). Two keys of one hash only let a file in on
 * its first read now and then.
 */
function keyHash(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 0x01000193);
  return h & 0x3fffffff;
}

/**
 * Files of the built-in file server kept in memory, bounded in bytes, filled on use (once
 * full, on a file's second use: see mayKeep). Eviction is the clock algorithm: a hit only sets a flag (no
 * reordering on the hot path); the hand passes over the oldest entries, giving each one read
 * since a second chance.
 * `generation` keeps a read that began before a change from storing what it read.
 */
export class FileCache implements FollowingCache {
  /** What empties it (cluster/cache-freshness.ts): listings were rewritten, images may be gone; a refreshed listing forgets its index.json. */
  readonly emptiedBy: readonly FreshnessEvent[] = ['catalogue-changed', 'watch-blind', 'listing-refreshed'];
  private readonly entries = new Map<string, CachedFile>();
  /** Keys read once while the cache was full, not kept yet, by their hash (keyHash; bounded: emptied when it grows past half the entries). */
  private readonly seen: HashWindow;
  /**
   * The catalogue's answers (catalogueKeeps) in this generation, so a file pushed out and let
   * in again costs no second question; emptied by `clear` with everything else, and when full.
   */
  private readonly answers = new Map<string, boolean>();
  private readonly maxAnswers: number;
  /** Has had to push a file out since it was last emptied. */
  private full = false;
  readonly maxBytes: number;
  /** The largest file kept: an eighth of the budget, so one big file cannot flush the hot set. */
  readonly maxEntryBytes: number;
  private used = 0;
  generation = 0;
  /**
   * Memory of entries pushed out, for the next files read to be kept (alloc): on a set larger
   * than the cache every fill pushes one out, and a fresh buffer per fill leaves the old one as
   * garbage that only a full collection frees (docs/decisions.md, "Evicted entries' memory read
   * into again"). Bounded in count and bytes.
   */
  private readonly spare: CachedFile[] = [];
  private spareBytes = 0;
  /**
   * The entry pushed out whose memory alloc handed out last: the file read into it is made from
   * the same object and header list (fileOf), which would otherwise be garbage left in the old
   * generation at each fill (bench/RESULTS-archive.md, "Session 12: cold set peak RSS").
   */
  private lentFrom: CachedFile | undefined;
  /** Lookups (get) in the current ratio window, and how many of them were hits. */
  private lookups = 0;
  private hits = 0;
  /**
   * Full, and the last ratio window's lookups mostly missed: the files asked for are many
   * more than fit, and a fill only replaces one cold file with another (sampled: see mayKeep).
   */
  private sparse = false;
  /** Files the doorkeeper let in while sparse, counted to keep one in SPARSE_ONE_IN. */
  private passed = 0;
  /**
   * How many entries there are of each keyHash, by its low bits: a key whose count is 0 is not
   * kept. While sparse, `get` asks this first, and most lookups (misses) then need no lookup in
   * the Map, which hashes the key its own way and reads a stored key cold in the CPU's caches
   * (docs/decisions.md, "The file cache's misses found without its Map; kept header text made flat
   * once").
   */
  private readonly held: Int32Array;
  private readonly heldMask: number;
  /** The key last hashed (keyHash) and its hash: `get`, then `mayKeep`, ask about the same key. */
  private hashedKey: string | undefined;
  private hashed = 0;

  /** `windowMax`: the doorkeeper's largest window (WINDOW_MAX; smaller in tests). */
  constructor(maxBytes: number, options: { windowMax?: number } = {}) {
    this.maxBytes = maxBytes;
    this.maxEntryBytes = Math.floor(maxBytes / 8);
    // About 130 bytes each (key and slot): at most ~1/8 of the budget, 4,096 to 65,536 of them.
    this.maxAnswers = Math.min(65_536, Math.max(4096, Math.floor(maxBytes / 1024)));
    // Every entry costs at least ENTRY_OVERHEAD, so the window (half the entries) never needs more.
    this.seen = new HashWindow(Math.min(options.windowMax ?? WINDOW_MAX, Math.max(WINDOW_MIN, Math.floor(maxBytes / ENTRY_OVERHEAD) >> 1)));
    // Every entry costs at least ENTRY_OVERHEAD: at least twice as many slots as entries can be,
    // up to HELD_SLOTS_MAX (past it, more keys share a slot: more lookups in the Map, none missed).
    let slots = 16;
    while (slots < 2 * Math.floor(maxBytes / ENTRY_OVERHEAD) && slots < HELD_SLOTS_MAX) slots *= 2;
    this.held = new Int32Array(maxBytes === 0 ? 1 : slots);
    this.heldMask = this.held.length - 1;
  }

  /** keyHash(key), remembered for the key last asked about. */
  private hashOf(key: string): number {
    if (key !== this.hashedKey) {
      this.hashed = keyHash(key);
      this.hashedKey = key;
    }
    return this.hashed;
  }

  get(key: string): CachedFile | undefined {
    // Sparse: most keys asked for are not kept, and the count of their hash says so.
    const entry = this.sparse && this.held[this.hashOf(key) & this.heldMask] === 0 ? undefined : this.entries.get(key);
    if (entry !== undefined) {
      entry.used = true;
      this.hits++;
    }
    if (++this.lookups >= RATIO_WINDOW) this.endWindow();
    return entry;
  }

  /** A ratio window's end: sparse when full and fewer than half its lookups were hits. */
  private endWindow(): void {
    this.sparse = this.full && this.hits * 2 < this.lookups;
    this.lookups = 0;
    this.hits = 0;
  }

  /** Whether fills are sampled now (full, most lookups missing: see mayKeep). */
  get sampling(): boolean {
    return this.sparse;
  }

  /**
   * Whether a file about to be read may be kept, asked before the read (and before the
   * catalogue is asked). Until the cache first has to push a file out, yes; from then on a
   * file gets in on its second read within a window as long as the cache has entries (a
   * doorkeeper): requests spread over more files than fit would otherwise replace an entry
   * at every miss, each entry pushed out being memory that only a full garbage collection
   * gives back, and a refused read costs no question to the catalogue. The window is half as
   * many keys as the cache holds entries: on reads spread evenly over more files than fit,
   * what gets in is then half of what a window of all the entries lets in, at the same hit
   * ratio (which no admission changes there), while a file read again within that window
   * still gets in (docs/decisions.md, "The file cache's fill").
   *
   * And while most lookups miss (fewer than half of the last RATIO_WINDOW were hits, the cache
   * full), only one in SPARSE_ONE_IN of the files the doorkeeper lets in is kept: reads spread
   * over many more files than fit miss as often whatever is kept, and each fill is an entry
   * promoted to the old generation and one pushed out (docs/decisions.md, "The file cache's
   * admission once most lookups miss"). A set that fits is hit, and ends the sampling in a window.
   */
  mayKeep(key: string): boolean {
    if (this.maxEntryBytes === 0) return false;
    if (!this.full) return true;
    const h = this.hashOf(key);
    if (this.seen.delete(h)) return !this.sparse || ++this.passed % SPARSE_ONE_IN === 0;
    if (this.seen.size >= Math.min(this.seen.max, Math.max(WINDOW_MIN, this.entries.size >> 1))) this.seen.clear();
    this.seen.add(h);
    return false;
  }

  /**
   * Memory to read a file of `size` bytes into, to be kept: an evicted entry's when one of
   * about that size is spare (at most an eighth larger), else new. The file made from it is
   * marked `own` by the file server, so that its memory is reused in turn.
   */
  alloc(size: number): Buffer {
    this.lentFrom = undefined;
    const spare = this.spare;
    for (let i = spare.length - 1; i >= 0; i--) {
      const file = spare[i] as CachedFile;
      const whole = file.bytes.buffer.byteLength;
      if (whole >= size && whole - size <= size >> 3) {
        spare[i] = spare[spare.length - 1] as CachedFile;
        spare.pop();
        this.spareBytes -= whole;
        this.lentFrom = file;
        return file.bytes.length === size ? file.bytes : Buffer.from(file.bytes.buffer, 0, size);
      }
    }
    return Buffer.allocUnsafeSlow(size);
  }

  /**
   * The entry for `bytes`, read from the store for `key`, to answer from and offer to `set`:
   * the object of the entry whose memory `lent` (alloc's, handed out just before) was, when the
   * store read into it, else a new one. Marked `own` when the bytes are in `lent`: a store may
   * read into memory of its own (S3 concatenates its chunks), and only the cache's is reused.
   */
  fileOf(key: string, info: ObjectInfo, bytes: Buffer, lent: Buffer | undefined): CachedFile {
    const from = this.lentFrom;
    this.lentFrom = undefined;
    const own = lent !== undefined && bytes.buffer === lent.buffer;
    const file = own && from !== undefined && from.bytes.buffer === bytes.buffer ? refill(from, key, info, bytes) : cachedFile(key, info, bytes);
    file.own = own;
    return file;
  }

  /**
   * Holds `file`'s memory for `res`, whose answer from it is still being written (the
   * socket did not take all of it at once): an entry pushed out meanwhile is not read into
   * again until the answer is closed.
   */
  hold(file: CachedFile, res: { once(event: 'close', listener: () => void): unknown }): void {
    file.writing++;
    res.once('close', () => {
      if (--file.writing === 0 && file.retired) this.toSpare(file);
    });
  }

  /** An evicted entry's memory, spare for the next fill when no answer is being written from it. */
  private retire(file: CachedFile): void {
    if (!file.own) return;
    if (file.writing > 0) file.retired = true;
    else this.toSpare(file);
  }

  private toSpare(file: CachedFile): void {
    const whole = file.bytes.buffer.byteLength;
    if (this.spare.length >= 64 || this.spareBytes + whole > this.maxEntryBytes) return;
    this.spare.push(file);
    this.spareBytes += whole;
  }

  /** What `file` costs while kept: its memory (all of it when the cache's own) and the overhead. */
  private cost(file: CachedFile): number {
    return (file.own ? file.bytes.buffer.byteLength : file.bytes.length) + ENTRY_OVERHEAD;
  }

  /** Keeps `file` under `key` unless the catalogue changed since `generation` or it is too big. */
  set(key: string, file: CachedFile, generation: number): void {
    const cost = this.cost(file);
    if (generation !== this.generation || file.bytes.length > this.maxEntryBytes || this.entries.has(key)) return;
    // Each entry is looked at most twice (a second chance, then out), so this ends.
    while (this.used + cost > this.maxBytes) {
      this.full = true;
      const next = this.entries.entries().next();
      if (next.done === true) break;
      const [oldest, entry] = next.value;
      this.entries.delete(oldest);
      if (entry.used) {
        entry.used = false;
        this.entries.set(oldest, entry);
      } else {
        this.used -= this.cost(entry);
        this.held[keyHash(oldest) & this.heldMask]--;
        this.retire(entry);
      }
    }
    // Its header lines written at every hit: made flat once (flatLatin1).
    file.okText = flatLatin1(okLines(file));
    this.entries.set(key, file);
    this.held[this.hashOf(key) & this.heldMask]++;
    this.used += cost;
  }

  /** What the catalogue answered about keeping `key` in this generation, if it was asked. */
  answered(key: string): boolean | undefined {
    return this.answers.get(key);
  }

  /**
   * Remembers the catalogue's answer about `key`, asked after `generation` was taken. An
   * answer stays true until the catalogue mark moves (which empties the cache and these):
   * what makes it false (an image removed, a listing marked dirty) is a change, and what
   * makes a no a yes (a listing rewritten) is published as one.
   */
  answer(key: string, keep: boolean, generation: number): void {
    if (generation !== this.generation) return;
    if (this.answers.size >= this.maxAnswers) this.answers.clear();
    this.answers.set(key, keep);
  }

  /**
   * Forgets `gid`'s index.json (its listing was refreshed with new measures: cluster/listing-refresh.ts);
   * a read begun before is not kept (the generation moves), every other file stays.
   */
  forgetRelease(gid: string): void {
    this.generation++;
    const key = `mbid-${gid}/index.json`;
    this.answers.delete(key);
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.used -= this.cost(entry);
    this.held[keyHash(key) & this.heldMask]--;
    this.retire(entry);
  }

  /** Forgets everything (the catalogue changed: listings were rewritten, images may be gone). */
  clear(): void {
    this.generation++;
    if (this.entries.size !== 0) this.held.fill(0);
    this.entries.clear();
    this.seen.clear();
    this.answers.clear();
    this.full = false;
    this.sparse = false;
    this.lookups = 0;
    this.hits = 0;
    this.used = 0;
  }

  /** Bytes held, entry overheads included. */
  get bytes(): number {
    return this.used;
  }

  get size(): number {
    return this.entries.size;
  }
}

const imageNamed = preparedQuery(['id', 'gid'] as const, (db, p) =>
  db.selectFrom('cover_art as ca').innerJoin('release as r', 'r.id', 'ca.release').select('ca.id').where('ca.id', '=', p.id).where('r.gid', '=', p.gid),
);
const listingClean = preparedQuery(['gid'] as const, (db, p) => db.selectFrom('release').select('index_dirty').where('gid', '=', p.gid));

/**
 * Whether the catalogue lets a file be kept: an image it still names, or the index.json of
 * a release whose listing has been rewritten since its last change. A change empties the
 * cache once it commits, but its files are rewritten or removed only after that: a read in
 * between would keep the old listing, or an image about to be removed, past the change.
 * Asked before the file is read (and after the cache's generation is taken): a yes means
 * the file read is at least as new as the catalogue seen, and a change committed after
 * that yes empties the cache after the generation was taken, so what the read brings is
 * either refused or dropped.
 */
export function catalogueKeeps(db: Db): (key: string) => Promise<boolean> {
  return async (key) => {
    const image = parseImageKey(key);
    if (image !== undefined) return (await imageNamed(db, { id: image.id, gid: image.mbid })).rows.length > 0;
    const row = (await listingClean(db, { gid: listingGid(key) })).rows[0];
    return row !== undefined && Number(row.index_dirty) === 0;
  };
}

/** The release MBID of an index.json key. */
function listingGid(key: string): string {
  return key.slice('mbid-'.length, key.indexOf('/'));
}

/**
 * catalogueKeeps' question asked on the calling thread (SQLite: `reads`, its read-only
 * connection), the same statements: no promise, no turn of the writing connection, no
 * Kysely on the way. Throws when the file is busy; the caller then asks the awaited way.
 */
export function catalogueKeepsNow(db: Db, reads: ReadsNow): (key: string) => boolean {
  return (key) => {
    const image = parseImageKey(key);
    if (image !== undefined) {
      const q = imageNamed.statement(db, { id: image.id, gid: image.mbid });
      return reads.first(q.sql, q.parameters) !== undefined;
    }
    const q = listingClean.statement(db, { gid: listingGid(key) });
    const row = reads.first(q.sql, q.parameters) as { index_dirty: unknown } | undefined;
    return row !== undefined && Number(row.index_dirty) === 0;
  };
}

/*
 * What the listings' additive fields say of an image (docs/interface.md, "Image entry"), measured
 * from its stored files: the original's width and height as displayed (sharp's header read, which
 * applies the EXIF orientation without decoding a pixel), its size in bytes, and each stored
 * thumbnail's width and height from its JPEG header (image-header.ts). Recorded in the image's
 * row (db/migrations/20261206T0200_image_measures.ts); index.json is then rewritten (by
 * `sleeve art measure` at once; for a file stored while serving, soon after: listing-rewrites.ts).
 */
import { recordListingRefresh } from '../../cluster/listing-refresh.js';
import type { IndexDeps } from '../deps.js';
import { listEventImages } from '../catalogue/event-repo.js';
import { writeEventIndex } from '../catalogue/events.js';
import { writeIndex } from '../listings/indexer.js';
import { readImageHeader } from './image-header.js';
import { originalKey, parseImageKey, THUMBNAIL_SIZES, thumbnailKey } from '../files/keys.js';
import { parseThumbnailDimensions } from '../listings/listing.js';
import { listImages, type ImageRow } from '../catalogue/repo.js';
import { sharpModule } from './thumbnails.js';

/** The columns measure writes. */
export interface ImageMeasures {
  width: number | null;
  height: number | null;
  stored_size: number;
  thumbnail_dimensions: string | null;
}

/** Larger originals are not read to be measured (the upload limit's ceiling). */
const MAX_ORIGINAL_BYTES = 1024 * 1024 * 1024;
/** A thumbnail is at most 1200 px a side: its header is in its first bytes, and the whole file is small. */
const MAX_THUMBNAIL_BYTES = 16 * 1024 * 1024;

const FORMAT_OF_MIME: Record<string, string> = { 'image/jpeg': 'jpeg', 'image/png': 'png', 'image/gif': 'gif' };

/** `{"250": {"width": w, "height": h}, …}` of the thumbnails given (their JPEG headers), as stored in the column; null for none. */
export function thumbnailDimensionsOf(thumbnails: Iterable<[number, Buffer]>): string | null {
  const out: Record<string, { width: number; height: number }> = {};
  for (const [size, bytes] of thumbnails) {
    const header = readImageHeader(bytes);
    if (header !== undefined) out[String(size)] = { width: header.width, height: header.height };
  }
  return Object.keys(out).length > 0 ? JSON.stringify(out) : null;
}

/**
 * The original's width and height as displayed (EXIF orientation 5–8 swaps them), from its
 * header; undefined for a PDF. Throws when the bytes are not the image the row says.
 */
async function displayedSize(bytes: Buffer, mime: string): Promise<{ width: number; height: number } | undefined> {
  if (mime === 'application/pdf') {
    if (bytes.subarray(0, 5).toString('latin1') !== '%PDF-') throw new Error('the stored original is not a PDF');
    return undefined;
  }
  const sharp = await sharpModule();
  const meta = await sharp(bytes, { limitInputPixels: false }).metadata();
  if (meta.format !== FORMAT_OF_MIME[mime]) throw new Error(`the stored original is ${meta.format ?? 'not an image'}, not ${mime}`);
  const width = meta.autoOrient?.width ?? meta.width;
  const height = meta.autoOrient?.height ?? meta.height;
  if (!width || !height) throw new Error('the stored original has no dimensions');
  return { width, height };
}

/** Measures an image's stored files; undefined when the store has no original of it (nothing known). */
async function measureStoredImage(deps: Pick<IndexDeps, 'store'>, release: string, image: Pick<ImageRow, 'id' | 'suffix' | 'mime_type'>): Promise<ImageMeasures | undefined> {
  const original = await deps.store.read(originalKey(release, image.id, image.suffix), MAX_ORIGINAL_BYTES);
  if (original === undefined) return undefined;
  if (original.bytes === undefined) throw new Error(`the stored original is over ${MAX_ORIGINAL_BYTES} bytes`);
  const size = await displayedSize(original.bytes, image.mime_type);
  const thumbnails: [number, Buffer][] = [];
  for (const n of THUMBNAIL_SIZES) {
    const read = await deps.store.read(thumbnailKey(release, image.id, n), MAX_THUMBNAIL_BYTES);
    if (read?.bytes !== undefined) thumbnails.push([n, read.bytes]);
  }
  return { width: size?.width ?? null, height: size?.height ?? null, stored_size: original.bytes.length, thumbnail_dimensions: thumbnailDimensionsOf(thumbnails) };
}

/** One release's measuring: images measured, those whose original the store lacks, and per-image failures. */
export interface ReleaseMeasured {
  release: string;
  images: number;
  measured: number;
  missing: number;
  /** Whether any row changed (index.json was then rewritten). */
  changed: boolean;
  errors: { image: number; message: string }[];
}

/**
 * Measures every image of a release from its stored files, records what changed and rewrites
 * index.json when anything did. An image whose original is not stored keeps its fields unknown;
 * one whose file cannot be read as its row says is reported and left as it was.
 */
export async function measureRelease(deps: IndexDeps, release: { id: number; gid: string }, options: { onlyUnmeasured?: boolean; event?: boolean } = {}): Promise<ReleaseMeasured> {
  // An event's images (options.event): the same files, in event_art, its own listing (cover-art/catalogue/events.ts).
  const listed = options.event === true ? await listEventImages(deps.db, release.id) : await listImages(deps.db, release.id);
  // onlyUnmeasured (after a bulk mirror): images already measured with thumbnails are not read again.
  const images = listed.filter((i) => !options.onlyUnmeasured || i.stored_size == null || i.thumbnail_dimensions == null);
  const out: ReleaseMeasured = { release: release.gid, images: images.length, measured: 0, missing: 0, changed: false, errors: [] };
  for (const image of images) {
    let measures: ImageMeasures | undefined;
    try {
      measures = await measureStoredImage(deps, release.gid, image);
    } catch (err) {
      out.errors.push({ image: image.id, message: (err as Error).message });
      continue;
    }
    if (measures === undefined) {
      out.missing++;
      continue;
    }
    out.measured++;
    if (sameMeasures(image, measures)) continue;
    await deps.db
      .updateTable(options.event === true ? 'event_art' : 'cover_art')
      .set(measures)
      .where('id', '=', image.id)
      .execute();
    out.changed = true;
  }
  if (out.changed) await (options.event === true ? writeEventIndex(deps, release.id) : writeIndex(deps, release.id));
  return out;
}

function sameMeasures(row: ImageRow, m: ImageMeasures): boolean {
  return (
    (row.width ?? null) === m.width &&
    (row.height ?? null) === m.height &&
    (row.stored_size == null ? null : Number(row.stored_size)) === m.stored_size &&
    (row.thumbnail_dimensions ?? null) === m.thumbnail_dimensions
  );
}

/** One release's listing to rewrite after new measures (cover-art/listings/listing-rewrites.ts). */
export interface MeasuredRelease {
  id: number;
  gid: string;
}

/**
 * Records new measures of image `id` of release `mbid` in its row and marks the release's
 * index.json dirty, in one transaction that takes the locks in the order every change takes
 * them (the release row, then the image row: cover-art/catalogue/catalogue.ts, markChanged), so two
 * thumbnails of one image stored at once both land. The listing is rewritten afterwards
 * (ListingRewrites); until then the dirty mark keeps the file cache from keeping the old one,
 * and a process stopped first leaves the rewrite to the next start or the catalogue watch's
 * sweep. Answers the release (undefined when there is none).
 */
async function recordMeasures(
  db: IndexDeps['db'],
  image: { id: number; mbid: string },
  change: (current: { thumbnail_dimensions: string | null }) => Partial<ImageMeasures>,
  now: number,
): Promise<MeasuredRelease | undefined> {
  return db.transaction().execute(async (trx) => {
    // The oldest mark is kept: the sweep finishes listings dirty for long, whoever marked them.
    const release = await trx
      .updateTable('release')
      .set((eb) => ({ index_dirty: eb.case().when('index_dirty', '=', 0).then(Math.max(1, now)).else(eb.ref('index_dirty')).end() }))
      .where('gid', '=', image.mbid)
      .returning(['id', 'gid'])
      .executeTakeFirst();
    if (release === undefined) return undefined;
    const current = await trx.selectFrom('cover_art').select('thumbnail_dimensions').where('id', '=', image.id).where('release', '=', release.id).executeTakeFirst();
    // An image removed meanwhile: nothing to record, but the mark is made, so the listing is rewritten all the same.
    if (current !== undefined) await trx.updateTable('cover_art').set(change(current)).where('id', '=', image.id).execute();
    return { id: release.id, gid: release.gid };
  });
}

/** Merges one thumbnail's real dimensions into the image's `thumbnail_dimensions`. */
function withThumbnail(size: number, dims: { width: number; height: number }): (current: { thumbnail_dimensions: string | null }) => Partial<ImageMeasures> {
  const entry = { [String(size)]: { width: dims.width, height: dims.height } };
  return (current) => ({ thumbnail_dimensions: JSON.stringify({ ...parseThumbnailDimensions(current.thumbnail_dimensions), ...entry }) });
}

/**
 * After a JPEG thumbnail was made on demand (cover-art/files/derivatives.ts): its dimensions, as the
 * resize reported them (no read back), go into the image's row; answers the release whose
 * listing is then to be rewritten.
 */
export function recordThumbnailMade(db: IndexDeps['db'], image: { id: number; mbid: string }, size: number, dims: { width: number; height: number }, now: number): Promise<MeasuredRelease | undefined> {
  return recordMeasures(db, image, withThumbnail(size, dims), now);
}

/**
 * After a file was stored by pull-through (cover-art/files/fill.ts): records what it says of its image
 * (read back from the store: the original's displayed size and bytes, a thumbnail's header);
 * answers the release whose listing is then to be rewritten, or undefined when nothing was.
 */
export async function recordStoredFile(deps: IndexDeps, key: string, now: number): Promise<MeasuredRelease | undefined> {
  const parsed = parseImageKey(key);
  if (parsed === undefined) return undefined;
  const release = await deps.db
    .selectFrom('cover_art as ca')
    .innerJoin('release as r', 'r.id', 'ca.release')
    .select(['ca.mime_type'])
    .where('ca.id', '=', parsed.id)
    .where('r.gid', '=', parsed.mbid)
    .executeTakeFirst();
  // Else an event's image: measured into event_art, its index.json rewritten (cover-art/catalogue/events.ts).
  const event =
    release !== undefined
      ? undefined
      : await deps.db
          .selectFrom('event_art as ea')
          .innerJoin('event as e', 'e.id', 'ea.event')
          .select(['ea.event as owner', 'ea.mime_type'])
          .where('ea.id', '=', parsed.id)
          .where('e.gid', '=', parsed.mbid)
          .executeTakeFirst();
  const row = release ?? event;
  if (row === undefined) return undefined;
  const table = event === undefined ? 'cover_art' : 'event_art';
  const read = await deps.store.read(key, parsed.size === undefined ? MAX_ORIGINAL_BYTES : MAX_THUMBNAIL_BYTES);
  if (read?.bytes === undefined) return undefined;
  const bytes = read.bytes;
  let change: (current: { thumbnail_dimensions: string | null }) => Partial<ImageMeasures>;
  if (parsed.size === undefined) {
    const size = await displayedSize(bytes, row.mime_type);
    change = () => ({ width: size?.width ?? null, height: size?.height ?? null, stored_size: bytes.length });
  } else {
    const header = readImageHeader(bytes);
    if (header === undefined) return undefined;
    change = withThumbnail(parsed.size, header);
  }
  if (event === undefined) return recordMeasures(deps.db, parsed, change, now);
  await deps.db.transaction().execute(async (trx) => {
    // A write first: the row's lock (PostgreSQL) or the write lock (SQLite) before the read.
    await trx.updateTable(table).set((eb) => ({ thumbnail_dimensions: eb.ref('thumbnail_dimensions') })).where('id', '=', parsed.id).execute();
    const current = await trx.selectFrom(table).select('thumbnail_dimensions').where('id', '=', parsed.id).executeTakeFirst();
    if (current === undefined) return;
    await trx.updateTable(table).set(change(current)).where('id', '=', parsed.id).execute();
  });
  // An event's listing is rewritten at once (events are few), then forgotten by every process.
  await writeEventIndex(deps, event.owner);
  await recordListingRefresh(deps.db, parsed.mbid);
  return undefined;
}

/**
 * After a bulk mirror (`sleeve mirror images`): measures the images not yet measured (or without
 * thumbnails) of these releases, or of every release with such images; returns how many releases
 * were looked at and how many images failed. Unknown MBIDs are the mirror's to report.
 */
export async function measureUnmeasured(deps: IndexDeps, releases: string[] | 'all'): Promise<{ releases: number; failed: number }> {
  let q = deps.db
    .selectFrom('release')
    .select(['id', 'gid'])
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom('cover_art')
          .select('id')
          .whereRef('cover_art.release', '=', 'release.id')
          .where((w) => w.or([w('stored_size', 'is', null), w('thumbnail_dimensions', 'is', null)])),
      ),
    );
  if (releases !== 'all') {
    if (releases.length === 0) return { releases: 0, failed: 0 };
    q = q.where('gid', 'in', releases);
  }
  let failed = 0;
  const rows = await q.orderBy('id').execute();
  for (const release of rows) failed += (await measureRelease(deps, release, { onlyUnmeasured: true })).errors.length;
  return { releases: rows.length, failed };
}

/** measureUnmeasured for events (after a bulk mirror): these events, or every event with such images. */
export async function measureUnmeasuredEvents(deps: IndexDeps, events: string[] | 'all'): Promise<{ events: number; failed: number }> {
  let q = deps.db
    .selectFrom('event')
    .select(['id', 'gid'])
    .where((eb) =>
      eb.exists(
        eb
          .selectFrom('event_art')
          .select('id')
          .whereRef('event_art.event', '=', 'event.id')
          .where((w) => w.or([w('stored_size', 'is', null), w('thumbnail_dimensions', 'is', null)])),
      ),
    );
  if (events !== 'all') {
    if (events.length === 0) return { events: 0, failed: 0 };
    q = q.where('gid', 'in', events);
  }
  let failed = 0;
  const rows = await q.orderBy('id').execute();
  for (const event of rows) failed += (await measureRelease(deps, event, { onlyUnmeasured: true, event: true })).errors.length;
  return { events: rows.length, failed };
}

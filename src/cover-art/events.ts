/*
 * Changes to the Event Art Archive (docs/decisions.md, "Events beside releases"): adding an
 * event, adding an image to one, and writing an event's index.json. An image is added as a
 * release's is (cover-art/catalogue.ts, addArt): checked, thumbnailed, staged under a lease,
 * committed, moved into place, listed; its id comes from the same counter as cover art ids,
 * so the file layout and the upload sweep never see one id twice.
 */
import { AppError, invalidInput, isStoreUnavailable, notFound } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import type { CoverArtDeps, IndexDeps } from './deps.js';
import { FIRST_EDIT_ID } from './edits.js';
import { eventHasImages, findEvent, listEventImages, loadEventArtKinds, POSTER_TYPE, type EventRef } from './event-repo.js';
import { idForTime } from './ids.js';
import { indexKey, THUMBNAIL_SIZES, type ThumbnailSize } from './keys.js';
import { buildEventListing, serializeListing, type EventListingImage } from './listing.js';
import { thumbnailDimensionsOf } from './measure.js';
import { readPublishedUrls } from './public-urls.js';
import { addToCounters, allocateImageId, bumpCatalogueVersion, coversNeedApproval, type Queryable } from './repo.js';
import { processImage } from './thumbnails.js';
import { Upload } from './uploads.js';

function requireMbid(text: string, what: string): string {
  const mbid = parseMbid(text);
  if (mbid === undefined) throw invalidInput(`${what} ${JSON.stringify(text)} is not a valid MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd)`);
  return mbid;
}

/** Adds an event (`sleeve event add MBID [--name NAME]`). */
export async function addEvent(deps: Pick<CoverArtDeps, 'db'>, input: { mbid: string; name?: string }): Promise<{ mbid: string }> {
  const mbid = requireMbid(input.mbid, 'event');
  return deps.db.transaction().execute(async (trx) => {
    if ((await findEvent(trx, mbid)) !== undefined) throw new AppError('CONFLICT', `event ${mbid} already exists`);
    await trx.insertInto('event').values({ gid: mbid, name: input.name ?? '' }).execute();
    await bumpCatalogueVersion(trx);
    return { mbid };
  });
}

export async function requireEvent(db: Queryable, text: string): Promise<EventRef> {
  const mbid = requireMbid(text, 'event');
  const event = await findEvent(db, mbid);
  if (event === undefined) throw notFound(`no event ${mbid}; add it first with: sleeve event add ${mbid}`);
  return event;
}

/** Whether an MBID names an event (or a merged one) rather than a release: for `sleeve art add`. */
export async function isEvent(db: Queryable, mbid: string): Promise<boolean> {
  return (await findEvent(db, mbid)) !== undefined;
}

/** Event art type names (any case) to their ids, ascending; an unknown one is refused with the known ones named. */
export async function resolveKinds(db: Queryable, names: string[]): Promise<{ ids: number[] }> {
  const all = await loadEventArtKinds(db);
  const ids = new Set<number>();
  for (const name of names) {
    const hit = all.find((t) => t.name.toLowerCase() === name.trim().toLowerCase());
    if (hit === undefined) throw invalidInput(`unknown event art type ${JSON.stringify(name)}; known types: ${all.map((t) => t.name).join(', ')}`);
    ids.add(hit.id);
  }
  return { ids: [...ids].sort((a, b) => a - b) };
}

export interface AddEventArtInput {
  event: string;
  bytes: Buffer;
  types?: string[];
  comment?: string;
  /** The listing's `edit`: a MusicBrainz edit (below 1,000,000,000); default 0, none. */
  edit?: number;
  /** Default: approved. */
  approved?: boolean;
}

/** Adds an image to an event (the operator's: `sleeve art add EVENT_MBID FILE`). */
export async function addEventArt(deps: CoverArtDeps, input: AddEventArtInput): Promise<EventListingImage> {
  if (input.bytes.length > deps.limits.maxBytes) {
    throw invalidInput(`file of ${input.bytes.length} bytes exceeds the limit of ${deps.limits.maxBytes} bytes (SLEEVE_UPLOAD_MAX_BYTES)`);
  }
  const external = input.edit;
  if (external !== undefined && (!Number.isSafeInteger(external) || external < 0 || external >= FIRST_EDIT_ID - 1)) {
    throw invalidInput(`edit must be a whole number from 0 to ${FIRST_EDIT_ID - 2}`);
  }
  const event = await requireEvent(deps.db, input.event);
  const typeIds = (await resolveKinds(deps.db, input.types ?? [])).ids;
  const image = await processImage(input.bytes, deps.limits.maxPixels);
  const id = await allocateImageId(deps.db, idForTime(deps.clock.now()));
  const upload = await Upload.begin(deps, id, image.suffix);
  try {
    const files: [ThumbnailSize | undefined, Buffer, string][] = [
      [undefined, input.bytes, image.mime],
      ...THUMBNAIL_SIZES.map((size): [ThumbnailSize, Buffer, string] => [size, image.thumbnails.get(size) as Buffer, 'image/jpeg']),
    ];
    const puts = await Promise.allSettled(files.map(([size, bytes, mime]) => deps.store.put(upload.stagedKey(size), bytes, mime)));
    const failed = puts.find((p): p is PromiseRejectedResult => p.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    if (!(await upload.held())) throw new AppError('CONFLICT', `the upload of image ${id} was given up while this process was stopped; try again`);
    await deps.db.transaction().execute(async (trx) => {
      // The event's row first, so concurrent additions take turns and read each other's orderings.
      const row = await trx
        .updateTable('event')
        .set((eb) => ({ index_dirty: Math.max(1, deps.clock.now()), revision: eb('revision', '+', 1) }))
        .where('id', '=', event.id)
        .returning('id')
        .executeTakeFirst();
      if (row === undefined) throw new AppError('CONFLICT', `event ${event.gid} changed during the upload (merged?); try again`);
      await bumpCatalogueVersion(trx);
      const last = await trx.selectFrom('event_art').select((eb) => eb.fn.max('ordering').as('max')).where('event', '=', event.id).executeTakeFirst();
      await trx
        .insertInto('event_art')
        .values({
          id,
          event: event.id,
          comment: input.comment ?? '',
          edit: external ?? 0,
          ordering: Number(last?.max ?? 0) + 1,
          approved: (input.approved ?? true) ? 1 : 0,
          mime_type: image.mime,
          date_uploaded: deps.clock.now(),
          filesize: input.bytes.length,
          thumb_250_filesize: image.thumbnails.get(250)?.length ?? null,
          thumb_500_filesize: image.thumbnails.get(500)?.length ?? null,
          thumb_1200_filesize: image.thumbnails.get(1200)?.length ?? null,
          width: image.width,
          height: image.height,
          stored_size: input.bytes.length,
          thumbnail_dimensions: thumbnailDimensionsOf(image.thumbnails),
        })
        .execute();
      if (typeIds.length > 0) await trx.insertInto('event_art_type').values(typeIds.map((type_id) => ({ id, type_id }))).execute();
      await addToCounters(trx, { uploads_total: 1, upload_bytes_total: input.bytes.length });
    });
  } catch (err) {
    await upload.abandon();
    throw err;
  }
  try {
    await upload.finish(event.gid);
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`image ${id} is saved, but its files could not be moved into place: ${(err as Error).message}. The next sleeve command or a running sleeve serve finishes it once the store is back.`);
  }
  await rewriteEventIndex(deps, event);
  const listing = buildEventListing(deps.urls, event.gid, await listEventImages(deps.db, event.id), coversNeedApproval(deps.approval), POSTER_TYPE);
  const entry = listing.images.find((i) => i.id === String(id));
  if (entry === undefined) throw notFound(`event image with id ${id} not found`);
  return entry;
}

/**
 * Rewrites an event's index.json from the database and clears its dirty mark, under the
 * event's row lock (as writeIndex does for a release, cover-art/indexer.ts).
 */
export async function writeEventIndex(deps: IndexDeps, eventId: number): Promise<void> {
  await deps.db.transaction().execute(async (trx) => {
    const event = await trx.updateTable('event').set({ index_dirty: 0 }).where('id', '=', eventId).returning('gid').executeTakeFirst();
    if (event === undefined) return;
    const published = await readPublishedUrls(trx);
    // The event archive's URL is this writer's (SLEEVE_EVENT_BASE_URL): the published URLs carry none.
    const urls = { ...(published?.urls ?? deps.urls), fields: deps.urls.fields, eventBaseUrl: deps.urls.eventBaseUrl };
    const listing = buildEventListing(urls, event.gid, await listEventImages(trx, eventId), coversNeedApproval(deps.approval), POSTER_TYPE);
    await deps.store.put(indexKey(event.gid), Buffer.from(serializeListing(listing), 'utf8'), 'application/json; charset=utf-8');
    await trx.updateTable('event').set({ index_urls: published?.version ?? 0 }).where('id', '=', eventId).execute();
  });
}

/** Rewrites an event's index.json after its change committed; false (and a warning) with the store away, the dirty mark kept. */
export async function rewriteEventIndex(deps: CoverArtDeps, event: EventRef): Promise<boolean> {
  try {
    await writeEventIndex(deps, event.id);
    return true;
  } catch (err) {
    if (!isStoreUnavailable(err)) throw err;
    deps.warn?.(`the change is saved, but index.json of event ${event.gid} could not be rewritten: ${(err as Error).message}. The next sleeve command or a running sleeve serve rewrites it once the store is back.`);
    return false;
  }
}

/** Events whose index.json an interrupted change left dirty (older than `olderThan`), rewritten. */
export async function finishPendingEventIndexes(deps: IndexDeps, olderThan = Number.MAX_SAFE_INTEGER): Promise<number> {
  const dirty = await deps.db.selectFrom('event').select('id').where('index_dirty', '>', 0).where('index_dirty', '<', olderThan).execute();
  for (const { id } of dirty) await writeEventIndex(deps, id);
  return dirty.length;
}

/** The file server's miss of an event's index.json: written when the event has images. */
export async function eventIndexFill(deps: IndexDeps, gid: string): Promise<'stored' | undefined> {
  const event = await deps.db.selectFrom('event').select('id').where('gid', '=', gid).executeTakeFirst();
  if (event === undefined || !(await eventHasImages(deps.db, event.id))) return undefined;
  await writeEventIndex(deps, event.id);
  return 'stored';
}

/** Before `/event/{mbid}/` redirects: writes the listing when sleeve never did. */
export async function ensureEventListing(deps: IndexDeps, eventId: number): Promise<void> {
  const row = await deps.db.selectFrom('event').select('index_urls').where('id', '=', eventId).executeTakeFirst();
  if (row === undefined || row.index_urls !== null) return;
  await writeEventIndex(deps, eventId).catch((err: unknown) => {
    if (!isStoreUnavailable(err)) throw err;
  });
}

/*
 * The operator's changes to an event's images (`sleeve art list|edit|remove|reorder` given an
 * event's MBID; docs/decisions.md, "Events beside releases"): as a release's, under the event's
 * row lock, its revision moved, index.json rewritten after the commit and, for a removal, the
 * image's files removed once the listing no longer names them. They apply at once: the edit
 * history and its review are the Cover Art Archive's (releases) only.
 */
import { AppError, invalidInput, isStoreUnavailable, notFound } from '../shared/errors.js';
import type { CoverArtDeps, IndexDeps } from './deps.js';
import { findEventImage, listEventImages, POSTER_TYPE, type EventRef } from './event-repo.js';
import { requireEvent, resolveKinds, rewriteEventIndex } from './events.js';
import { parseId } from './ids.js';
import { imageKey, THUMBNAIL_SIZES, thumbnailPrefix } from './keys.js';
import { buildEventListing, type EventListing, type EventListingImage } from './listing.js';
import { addToCounters, bumpCatalogueVersion, coversNeedApproval, type Queryable } from './repo.js';

/** What `sleeve art list EVENT` shows. */
export interface EventArt {
  event: string;
  revision: number;
  listing: EventListing;
}

export async function eventArt(deps: Pick<IndexDeps, 'db' | 'urls' | 'approval'>, eventText: string): Promise<EventArt> {
  const event = await requireEvent(deps.db, eventText);
  const row = await deps.db.selectFrom('event').select('revision').where('id', '=', event.id).executeTakeFirstOrThrow();
  const listing = buildEventListing(deps.urls, event.gid, await listEventImages(deps.db, event.id), coversNeedApproval(deps.approval), POSTER_TYPE);
  return { event: event.gid, revision: Number(row.revision), listing };
}

/**
 * Takes the event's row (its lock orders concurrent changes), marks its listing for rewriting
 * and moves its revision; refuses the change when `expected` is not the revision it had.
 */
async function takeEvent(trx: Queryable, event: EventRef, now: number, expected: number | undefined): Promise<void> {
  const row = await trx
    .updateTable('event')
    .set((eb) => ({ index_dirty: Math.max(1, now), revision: eb('revision', '+', 1) }))
    .where('id', '=', event.id)
    .returning('revision')
    .executeTakeFirst();
  if (row === undefined) throw new AppError('CONFLICT', `event ${event.gid} changed meanwhile (merged?); try again`);
  const previous = Number(row.revision) - 1;
  if (expected !== undefined && previous !== expected) {
    throw new AppError('CONFLICT', `event ${event.gid} changed since revision ${expected} (it is at ${previous}): reload its images and try again`);
  }
  await bumpCatalogueVersion(trx);
}

function parseImageId(text: string): number {
  const id = parseId(text);
  if (id === undefined) throw invalidInput(`image id ${JSON.stringify(text.slice(0, 40))} must be a number as the listing writes it (digits, no leading zero)`);
  return id;
}

async function requireEventImage(db: Queryable, event: EventRef, idText: string): Promise<{ id: number; suffix: string }> {
  const id = parseImageId(idText);
  const image = await findEventImage(db, event.id, id);
  if (image === undefined) throw notFound(`event image with id ${id} not found on event ${event.gid}`);
  return image;
}

async function entryOf(deps: CoverArtDeps, event: EventRef, id: number): Promise<EventListingImage> {
  const listing = buildEventListing(deps.urls, event.gid, await listEventImages(deps.db, event.id), coversNeedApproval(deps.approval), POSTER_TYPE);
  const entry = listing.images.find((i) => i.id === String(id));
  if (entry === undefined) throw notFound(`event image with id ${id} not found`);
  return entry;
}

export interface EditEventArtInput {
  event: string;
  imageId: string;
  types?: string[];
  comment?: string;
  approved?: boolean;
}

/** Changes an event image's types (replaced when given), comment or approval. */
export async function editEventArt(deps: CoverArtDeps, input: EditEventArtInput, options: { expectRevision?: number } = {}): Promise<EventListingImage> {
  if (input.types === undefined && input.comment === undefined && input.approved === undefined) throw invalidInput('nothing to change: give types, a comment or approved');
  const event = await requireEvent(deps.db, input.event);
  const typeIds = input.types === undefined ? undefined : (await resolveKinds(deps.db, input.types)).ids;
  const image = await deps.db.transaction().execute(async (trx) => {
    await takeEvent(trx, event, deps.clock.now(), options.expectRevision);
    const image = await requireEventImage(trx, event, input.imageId);
    const set: { comment?: string; approved?: number } = {};
    if (input.comment !== undefined) set.comment = input.comment;
    if (input.approved !== undefined) set.approved = input.approved ? 1 : 0;
    if (Object.keys(set).length > 0) await trx.updateTable('event_art').set(set).where('id', '=', image.id).execute();
    if (typeIds !== undefined) {
      await trx.deleteFrom('event_art_type').where('id', '=', image.id).execute();
      if (typeIds.length > 0) await trx.insertInto('event_art_type').values(typeIds.map((type_id) => ({ id: image.id, type_id }))).execute();
    }
    return image;
  });
  await rewriteEventIndex(deps, event);
  return entryOf(deps, event, image.id);
}

/** Renumbers an event's orderings 1..n in the order given (only those that change are written). */
async function setEventOrdering(trx: Queryable, ids: number[], current: number[] = []): Promise<void> {
  for (const [i, id] of ids.entries()) {
    if (current[i] !== i + 1) await trx.updateTable('event_art').set({ ordering: i + 1 }).where('id', '=', id).execute();
  }
}

async function eventOrder(db: Queryable, eventId: number): Promise<{ id: number; ordering: number }[]> {
  const rows = await db.selectFrom('event_art').select(['id', 'ordering']).where('event', '=', eventId).orderBy('ordering').orderBy('id').execute();
  return rows.map((r) => ({ id: Number(r.id), ordering: r.ordering }));
}

/** Removes an event's image: the rows, then the listing, then its files (while the old listing may name them they stay). */
export async function removeEventArt(deps: CoverArtDeps, eventText: string, idText: string, options: { expectRevision?: number } = {}): Promise<{ id: string }> {
  const event = await requireEvent(deps.db, eventText);
  const image = await deps.db.transaction().execute(async (trx) => {
    await takeEvent(trx, event, deps.clock.now(), options.expectRevision);
    const image = await requireEventImage(trx, event, idText);
    await trx.deleteFrom('event_art_type').where('id', '=', image.id).execute();
    await trx.deleteFrom('event_art').where('id', '=', image.id).execute();
    const rest = await eventOrder(trx, event.id);
    await setEventOrdering(
      trx,
      rest.map((r) => r.id),
      rest.map((r) => r.ordering),
    );
    await addToCounters(trx, { image_removals_total: 1 });
    return image;
  });
  if (await rewriteEventIndex(deps, event)) {
    const keys = [undefined, ...THUMBNAIL_SIZES].map((size) => imageKey(event.gid, image.id, image.suffix, size));
    try {
      for (const key of await deps.store.list(thumbnailPrefix(event.gid, image.id))) if (!keys.includes(key)) keys.push(key);
      for (const key of keys) await deps.store.delete(key);
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      deps.warn?.(`the change is saved, but the files of image ${image.id} could not be removed: ${(err as Error).message}. Remove mbid-${event.gid}/mbid-${event.gid}-${image.id}* from the store once it is back.`);
    }
  }
  return { id: String(image.id) };
}

/** Puts an event's images in the given order; every image of the event must be named once. */
export async function reorderEventArt(deps: CoverArtDeps, eventText: string, idTexts: string[], options: { expectRevision?: number } = {}): Promise<{ order: string[] }> {
  const event = await requireEvent(deps.db, eventText);
  const ids = idTexts.map(parseImageId);
  await deps.db.transaction().execute(async (trx) => {
    await takeEvent(trx, event, deps.clock.now(), options.expectRevision);
    const existing = (await eventOrder(trx, event.id)).map((r) => r.id);
    const given = new Set(ids);
    if (given.size !== ids.length) throw invalidInput('an image id is named more than once');
    const unknown = ids.filter((id) => !existing.includes(id));
    if (unknown.length > 0) throw notFound(`event image with id ${unknown.join(', ')} not found on event ${event.gid}`);
    const missing = existing.filter((id) => !given.has(id));
    if (missing.length > 0) throw invalidInput(`every image of the event must be named; missing: ${missing.join(' ')}`);
    await setEventOrdering(trx, ids);
  });
  await rewriteEventIndex(deps, event);
  return { order: ids.map(String) };
}

/*
 * The Event Art Archive (docs/decisions.md, "Events beside releases"): adding an event, and
 * writing an event's index.json. Its images change as a release's do (art-changes.ts, given
 * EVENT_ART: entity.ts); their ids come from the same counter as cover art ids, so the file
 * layout and the upload sweep never see one id twice.
 */
import { AppError, invalidInput, isStoreUnavailable, notFound } from '../../shared/errors.js';
import { parseMbid } from '../../shared/uuid.js';
import type { CoverArtDeps, IndexDeps } from '../deps.js';
import { eventHasImages, findEvent, listEventImages, POSTER_TYPE, type EventRef } from './event-repo.js';
import { indexKey } from '../files/keys.js';
import { buildEventListing, serializeListing } from '../listings/listing.js';
import { readPublishedUrls } from '../listings/public-urls.js';
import { bumpCatalogueVersion, coversNeedApproval, type Queryable } from './repo.js';

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

/**
 * Rewrites an event's index.json from the database and clears its dirty mark, under the
 * event's row lock (as writeIndex does for a release, cover-art/listings/indexer.ts).
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

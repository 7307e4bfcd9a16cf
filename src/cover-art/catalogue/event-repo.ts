/*
 * The Event Art Archive's lookups (docs/decisions.md, "Events beside releases"): an event's
 * images, in tables shaped as the release's (migration 20261207T0500). `front` is the
 * lowest-ordered image typed Poster, as artwork-redirect and the indexer choose it.
 */
import { withTypes, type ImageWithTypes, type Queryable } from './repo.js';

/** event_art_kind (event_art_archive.art_type) 1: what `/event/{mbid}/front` answers. */
export const POSTER_TYPE = 1;

export interface EventRef {
  id: number;
  gid: string;
}

/** The event with this MBID, or the one it was merged into. */
export async function findEvent(db: Queryable, gid: string): Promise<EventRef | undefined> {
  const direct = await db.selectFrom('event').select(['id', 'gid']).where('gid', '=', gid).executeTakeFirst();
  if (direct !== undefined) return direct;
  return db.selectFrom('event_gid_redirect as x').innerJoin('event as e', 'e.id', 'x.new_id').select(['e.id', 'e.gid']).where('x.gid', '=', gid).executeTakeFirst();
}

export async function eventHasImages(db: Queryable, eventId: number): Promise<boolean> {
  return (await db.selectFrom('event_art').select('id').where('event', '=', eventId).limit(1).executeTakeFirst()) !== undefined;
}

export async function findEventImage(db: Queryable, eventId: number, imageId: number): Promise<{ id: number; suffix: string } | undefined> {
  return db
    .selectFrom('event_art as ea')
    .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
    .select(['ea.id', 'it.suffix'])
    .where('ea.id', '=', imageId)
    .where('ea.event', '=', eventId)
    .executeTakeFirst();
}

/** The event's poster: its lowest-ordered image typed Poster and not a PDF (the index_listing view's is_front), only among approved ones when `approvedOnly`. */
export async function findEventFront(db: Queryable, eventId: number, approvedOnly: boolean): Promise<{ id: number; suffix: string } | undefined> {
  return db
    .selectFrom('event_art as ea')
    .innerJoin('event_art_type as t', (j) => j.onRef('t.id', '=', 'ea.id').on('t.type_id', '=', POSTER_TYPE))
    .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
    .select(['ea.id', 'it.suffix'])
    .where('ea.event', '=', eventId)
    // The event art archive's index_listing view: a PDF is never an event's front.
    .where('ea.mime_type', '<>', 'application/pdf')
    .where('ea.approved', '>=', approvedOnly ? 1 : 0)
    .orderBy('ea.ordering')
    .orderBy('ea.id')
    .limit(1)
    .executeTakeFirst();
}

/** The event's images in listing order, with their types (typeIds are event_art_kind ids). */
export async function listEventImages(db: Queryable, eventId: number): Promise<ImageWithTypes[]> {
  const rows = await db
    .selectFrom('event_art as ea')
    .innerJoin('image_type as it', 'it.mime_type', 'ea.mime_type')
    .select(['ea.id', 'ea.ordering', 'ea.comment', 'ea.edit', 'ea.approved', 'ea.mime_type', 'it.suffix', 'ea.filesize', 'ea.width', 'ea.height', 'ea.stored_size', 'ea.thumbnail_dimensions'])
    .where('ea.event', '=', eventId)
    .orderBy('ea.ordering')
    .orderBy('ea.id')
    .execute();
  if (rows.length === 0) return [];
  const types = await db
    .selectFrom('event_art_type as t')
    .innerJoin('event_art as ea', 'ea.id', 't.id')
    .innerJoin('event_art_kind as k', 'k.id', 't.type_id')
    .select(['t.id', 't.type_id', 'k.name'])
    .where('ea.event', '=', eventId)
    .orderBy('t.type_id')
    .execute();
  return withTypes(rows, types);
}

/** An event's name, for pages ('' when it has none). */
export async function eventName(db: Queryable, eventId: number): Promise<string> {
  const row = await db.selectFrom('event').select('name').where('id', '=', eventId).executeTakeFirst();
  return row?.name ?? '';
}

/*
 * Writes what the mirror holds for some events (read.ts, readEventBatch) into sleeve's event
 * tables, as `sleeve import musicbrainz` of the same rows would have (import/apply-events.ts:
 * imported = 1, by MusicBrainz id), in one transaction, by the rules write.ts follows for
 * releases: only what differs is written; an event or image made here whose id or MBID the
 * mirror uses stays, and the mirror's row is skipped; an event the mirror no longer has goes,
 * unless images uploaded here hang on it. Each event whose listing changed gets a new
 * revision, its index.json (if written before) is marked for rewriting, and the catalogue
 * version moves.
 */
import { sql, type Transaction } from 'kysely';
import type { Database, Db } from '../../db/schema.js';
import type { LiveEventBatch, SkipRow } from './read.js';
import { chunks, EVENT_ART_TABLES, imagesDiffer, replaceImages, sleeveImages, upsertMany, type Rewrite } from './write-images.js';
import { idsByGid, redirectsOf, sameRedirects, writeRedirects } from './write.js';

type Trx = Transaction<Database>;

/** Applies the batch to sleeve's event tables in one transaction; answers the events whose answers changed (`deferred`: as for writeBatch). */
export async function writeEventBatch(db: Db, batch: LiveEventBatch, now: number, skip: SkipRow, deferred?: Set<number>): Promise<number[]> {
  return db.transaction().execute(async (trx) => {
    const changed = new Set<number>();
    const refused = await writeEvents(trx, batch, changed, skip);
    // Before the merged MBIDs: a merged event's MBID is free for its redirect only once the event is gone.
    await removeEvents(trx, batch, changed);
    const ids = [...batch.events.keys()].filter((id) => !refused.has(id));
    const have = await redirectsOf(trx, 'event_gid_redirect', ids);
    for (const id of ids) {
      if (sameRedirects(have.get(id), batch.redirects.get(id))) continue;
      await writeRedirects(trx, 'event_gid_redirect', 'event', id, batch.redirects.get(id) ?? [], skip, deferred);
      changed.add(id);
    }
    const events = [...changed].sort((a, b) => a - b);
    for (const part of chunks(events)) {
      await trx
        .updateTable('event')
        .set((eb) => ({ revision: eb('revision', '+', 1) }))
        .where('id', 'in', part)
        .execute();
      // A listing sleeve wrote before is rewritten; one never written is written when first asked for.
      await trx.updateTable('event').set({ index_dirty: Math.max(1, now) }).where('id', 'in', part).where('index_urls', 'is not', null).execute();
    }
    if (events.length > 0) await trx.updateTable('counter').set({ value: sql`value + 1` }).where('name', '=', 'catalogue_version').execute();
    return events;
  });
}

/** The events of the batch and their images; answers the events refused (an id or MBID held by an event made here). */
async function writeEvents(trx: Trx, batch: LiveEventBatch, changed: Set<number>, skip: SkipRow): Promise<Set<number>> {
  const ids = [...batch.events.keys()];
  const have = new Map<number, { gid: string; name: string; imported: number }>();
  for (const part of chunks(ids)) for (const e of await trx.selectFrom('event').select(['id', 'gid', 'name', 'imported']).where('id', 'in', part).execute()) have.set(e.id, e);
  const holders = await idsByGid(trx, 'event', [...batch.events.values()].map((e) => e.gid));
  const images = await sleeveImages(trx, EVENT_ART_TABLES, ids);
  const refused = new Set<number>();
  const rows: Record<string, unknown>[] = [];
  const rewrite: Rewrite[] = [];
  for (const e of batch.events.values()) {
    const h = have.get(e.id);
    if (h !== undefined && h.imported === 0 && h.gid !== e.gid) {
      skip('event: id held by an event made in sleeve', e.gid);
      refused.add(e.id);
      continue;
    }
    if ((holders.get(e.gid) ?? e.id) !== e.id) {
      skip('event: MBID held by another event in sleeve', e.gid);
      refused.add(e.id);
      continue;
    }
    if (h === undefined || h.gid !== e.gid || h.name !== e.name || h.imported !== 1) {
      rows.push({ id: e.id, gid: e.gid, name: e.name, imported: 1 });
      changed.add(e.id);
    }
    const live = batch.images.get(e.id) ?? [];
    const mine = images.get(e.id) ?? [];
    if (imagesDiffer(live, mine)) {
      rewrite.push([e.id, live, mine]);
      changed.add(e.id);
    }
  }
  await upsertMany(trx, 'event', 'id', rows);
  const r = await replaceImages(trx, EVENT_ART_TABLES, rewrite, skip);
  for (const id of r.movedFrom) changed.add(id);
  return refused;
}

/** Events asked for that the mirror no longer has: gone (their merged MBIDs with them), unless images uploaded here hang on them. */
async function removeEvents(trx: Trx, batch: LiveEventBatch, changed: Set<number>): Promise<void> {
  const gone = [...batch.asked].filter((id) => !batch.events.has(id));
  for (const part of chunks(gone)) {
    for (const e of await trx.selectFrom('event').select('id').where('id', 'in', part).where('imported', '=', 1).execute()) {
      await trx.deleteFrom('event_art').where('event', '=', e.id).where('imported', '=', 1).execute();
      await trx.deleteFrom('event_gid_redirect').where('new_id', '=', e.id).where('imported', '=', 1).execute();
      const local = await trx.selectFrom('event_art').select('id').where('event', '=', e.id).limit(1).executeTakeFirst();
      if (local !== undefined) await trx.updateTable('event').set({ imported: 0 }).where('id', '=', e.id).execute();
      else await trx.deleteFrom('event').where('id', '=', e.id).execute();
      changed.add(e.id);
    }
  }
}

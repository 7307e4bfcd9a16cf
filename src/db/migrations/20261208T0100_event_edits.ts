import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Edits of the Event Art Archive (docs/decisions.md, "Events beside releases"): an event's
 * changes are edits as a release's are, in the same table (one id counter, one history per
 * editor, one review queue), naming the event's MBID here where a release's edit names the
 * release's in release_gid. An edit names one or the other.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('cover_art_edit').addColumn('event_gid', 'text').execute();
  await db.schema.createIndex('cover_art_edit_event').on('cover_art_edit').columns(['event_gid', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('cover_art_edit_event').execute();
  await db.schema.alterTable('cover_art_edit').dropColumn('event_gid').execute();
}

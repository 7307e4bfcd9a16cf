import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * The editor's own note on an edit (the upload page's edit note, one for a batch of images,
 * stored with each of its edits; docs/website.md, "Uploading on the website"). Null: none.
 * The closing note of an approver stays in `note`.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('cover_art_edit').addColumn('edit_note', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('cover_art_edit').dropColumn('edit_note').execute();
}

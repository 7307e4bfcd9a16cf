import { sql, type Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Cover art edits (docs/decisions.md, "Cover art edits and approval"): one row per change, by
 * the operator's CLI or by an editor; a revision per release that every change and every
 * pending edit moves, so a change based on a stale listing is refused; a role per account
 * (editor or approver); and the counter sleeve's edit ids are drawn from. Those start above
 * 1,000,000,000, a range no MusicBrainz edit id reaches, so they never collide with the ids
 * imported releases carry in cover_art.edit.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('cover_art_edit')
    .addColumn('id', 'bigint', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('release_gid', 'text')
    .addColumn('release_group_gid', 'text')
    .addColumn('image', 'bigint')
    .addColumn('editor_id', 'integer')
    .addColumn('editor_name', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('before', 'text')
    .addColumn('after', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('closed_by_id', 'integer')
    .addColumn('closed_by_name', 'text')
    .addColumn('closed_at', 'bigint')
    .addColumn('note', 'text')
    .execute();
  await db.schema.createIndex('cover_art_edit_release').on('cover_art_edit').columns(['release_gid', 'id']).execute();
  await db.schema.createIndex('cover_art_edit_editor').on('cover_art_edit').columns(['editor_id', 'id']).execute();
  await db.schema.createIndex('cover_art_edit_status').on('cover_art_edit').columns(['status', 'id']).execute();
  await db.schema.alterTable('release').addColumn('revision', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('account').addColumn('role', 'text', (c) => c.notNull().defaultTo('editor')).execute();
  await sql`INSERT INTO counter (name, value) VALUES ('edit_id', 1000000000)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DELETE FROM counter WHERE name = 'edit_id'`.execute(db);
  await db.schema.alterTable('account').dropColumn('role').execute();
  await db.schema.alterTable('release').dropColumn('revision').execute();
  await db.schema.dropTable('cover_art_edit').execute();
}

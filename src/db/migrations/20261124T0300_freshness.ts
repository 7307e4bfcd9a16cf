import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * What read-your-writes and shared public URLs need (docs/decisions.md, "Freshness"):
 *
 * - `serving_process`: one row per running `sleeve serve` with a cover art listener, so a
 *   catalogue command knows whom to wait for: where to signal it (`signal`, a loopback
 *   address, with SQLite), how to tell it is alive (`lock_key`, the advisory lock its
 *   notification session holds, with PostgreSQL), and what it has acknowledged (`acked`).
 * - the `catalogue_published` counter, bumped by a command once all its work (index.json
 *   files included) is done; servers follow `catalogue_version + catalogue_published`.
 * - `setting`: the public URLs the serving processes publish (`listing_base_url`,
 *   `musicbrainz_url`, and their `listing_urls_version`), which every process writes into
 *   index.json; `release.index_urls` is the version a release's index.json was written
 *   with (null: never written by this version of sleeve), so a change of URLs rewrites
 *   exactly the listings written with others.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('serving_process')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('host', 'text', (c) => c.notNull())
    .addColumn('pid', 'integer', (c) => c.notNull())
    .addColumn('address', 'text', (c) => c.notNull())
    .addColumn('signal', 'text')
    .addColumn('lock_key', 'integer')
    .addColumn('acked', 'bigint', (c) => c.notNull())
    .addColumn('started_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('setting')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
  await db.schema.alterTable('release').addColumn('index_urls', 'integer').execute();
  await db.insertInto('counter').values({ name: 'catalogue_published', value: 0 }).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.deleteFrom('counter').where('name', '=', 'catalogue_published').execute();
  await db.schema.alterTable('release').dropColumn('index_urls').execute();
  await db.schema.dropTable('setting').execute();
  await db.schema.dropTable('serving_process').execute();
}

import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Listings rewritten with what a fetched or made file said of its image (its measures), one row
 * per rewrite, numbered by the counter `listing_refreshed`: serving processes forget that
 * release's cached answers only, instead of emptying every cache as a catalogue change does
 * (docs/decisions.md, "A listing refreshed is forgotten per release"). Trimmed to the newest rows.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('listing_refresh')
    .addColumn('seq', 'bigint', (c) => c.primaryKey())
    .addColumn('gid', 'text', (c) => c.notNull())
    .execute();
  await db.insertInto('counter').values({ name: 'listing_refreshed', value: 0 }).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.deleteFrom('counter').where('name', '=', 'listing_refreshed').execute();
  await db.schema.dropTable('listing_refresh').execute();
}

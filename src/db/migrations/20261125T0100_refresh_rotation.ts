import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Refresh token rotation (docs/decisions.md, "Refresh token rotation"): an application may be
 * registered with rotation; the hashes of a grant's refresh tokens that were rotated away are
 * kept (with when), so that a second use is recognised: within the grace window it gets the
 * same answer again, after it the grant ends.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('oauth_application')
    .addColumn('rotate_refresh', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db.schema
    .createTable('oauth_refresh_used')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('grant_id', 'integer', (c) => c.notNull().references('oauth_grant.id').onDelete('cascade'))
    .addColumn('used_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('oauth_refresh_used_grant').on('oauth_refresh_used').columns(['grant_id', 'used_at']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('oauth_refresh_used').execute();
  await db.schema.alterTable('oauth_application').dropColumn('rotate_refresh').execute();
}

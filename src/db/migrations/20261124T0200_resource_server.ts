import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Applications the operator marks as resource servers may introspect any application's
 * tokens; every other client sees only its own (docs/oauth.md).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('oauth_application')
    .addColumn('resource_server', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_application').dropColumn('resource_server').execute();
}

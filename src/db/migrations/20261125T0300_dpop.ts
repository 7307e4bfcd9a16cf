import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * DPoP, RFC 9449 (docs/decisions.md, "DPoP"): a grant records the JWK SHA-256 thumbprint its
 * access token is bound to, and the one its refresh token is bound to (public applications);
 * an application may be required to send a DPoP proof with every token request.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_grant').addColumn('access_jkt', 'text').execute();
  await db.schema.alterTable('oauth_grant').addColumn('refresh_jkt', 'text').execute();
  await db.schema
    .alterTable('oauth_application')
    .addColumn('require_dpop', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_application').dropColumn('require_dpop').execute();
  await db.schema.alterTable('oauth_grant').dropColumn('refresh_jkt').execute();
  await db.schema.alterTable('oauth_grant').dropColumn('access_jkt').execute();
}

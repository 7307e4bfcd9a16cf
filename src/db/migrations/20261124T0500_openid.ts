import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * OpenID Connect for the code flow (docs/decisions.md, "OpenID Connect"): the authorization
 * request's nonce and the session's sign-in time travel with the code into the id_token; an
 * application names the algorithm its id_tokens are signed with (RS256 unless registered
 * otherwise, as OpenID Connect Dynamic Client Registration's default).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_code').addColumn('nonce', 'text').execute();
  await db.schema.alterTable('oauth_code').addColumn('auth_time', 'bigint').execute();
  await db.schema
    .alterTable('oauth_application')
    .addColumn('id_token_alg', 'text', (c) => c.notNull().defaultTo('RS256'))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_application').dropColumn('id_token_alg').execute();
  await db.schema.alterTable('oauth_code').dropColumn('auth_time').execute();
  await db.schema.alterTable('oauth_code').dropColumn('nonce').execute();
}

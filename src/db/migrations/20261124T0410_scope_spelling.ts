import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * The scope list as the client wrote it, when it used today's MetaBrainz names
 * (`musicbrainz:tag`…; docs/decisions.md, "Scope names"): kept with the code and the grant so
 * the token response can echo it. Null for the classic names (their responses carry no scope).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_code').addColumn('scope_text', 'text').execute();
  await db.schema.alterTable('oauth_grant').addColumn('scope_text', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_grant').dropColumn('scope_text').execute();
  await db.schema.alterTable('oauth_code').dropColumn('scope_text').execute();
}

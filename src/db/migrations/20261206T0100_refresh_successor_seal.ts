import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Refresh token rotation without derivation (docs/decisions.md, "Refresh token rotation"): the
 * row of a used refresh token keeps, for the grace window only, the random pair its first use
 * gave, sealed with AES-256-GCM under that refresh token's own random bytes, so that a second
 * use within the window gets the same answer. NULL outside the window, and for older rows.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_refresh_used').addColumn('successor_sealed', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('oauth_refresh_used').dropColumn('successor_sealed').execute();
}

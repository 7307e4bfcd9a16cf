import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Authorization codes by expiry: each new code removes the codes that expired a day ago
 * (auth/grants/authorization-code.ts issueCode), which without this index read the whole table at every
 * authorization (docs/decisions.md, "Group commit").
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.createIndex('oauth_code_idx_expires').on('oauth_code').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('oauth_code_idx_expires').execute();
}

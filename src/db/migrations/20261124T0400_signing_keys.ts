import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * The keys the authorization service signs OpenID Connect id_tokens with (docs/decisions.md,
 * "Signing keys"): one row per key, its private and public JWK as JSON.
 *
 * - `active_alg` is the key's algorithm while it signs, null once retired; its unique index
 *   lets at most one key per algorithm sign, however many processes create keys at once.
 * - `retired_at`: when it stopped signing; `expires_at`: when the last token it signed has
 *   expired, so it may leave the JWKS (null while active).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('signing_key')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('alg', 'text', (c) => c.notNull())
    .addColumn('active_alg', 'text')
    .addColumn('private_jwk', 'text', (c) => c.notNull())
    .addColumn('public_jwk', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('retired_at', 'bigint')
    .addColumn('expires_at', 'bigint')
    .execute();
  await db.schema.createIndex('signing_key_idx_active').on('signing_key').column('active_alg').unique().execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('signing_key').execute();
}

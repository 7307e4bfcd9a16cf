import type { Kysely } from 'kysely';

// Frozen in time: this file imports nothing of sleeve's own.

/**
 * Sign-in throttling that reserves an attempt before the password is checked, and device
 * cookies (docs/decisions.md, "Sign-in throttling"):
 * - `login_throttle.failures` becomes `attempts` (failures in the window plus checks in
 *   progress); `locked_until` goes (a key is locked while `attempts` is at its limit and its
 *   window lasts), and `window_start` is indexed for the purge of ended windows.
 * - `signin_device`: the hashed nonces of device cookies, each bound to one account.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('login_throttle').renameColumn('failures', 'attempts').execute();
  await db.schema.alterTable('login_throttle').dropColumn('locked_until').execute();
  await db.schema.createIndex('login_throttle_idx_window').on('login_throttle').column('window_start').execute();

  await db.schema
    .createTable('signin_device')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'integer', (c) => c.notNull().references('account.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('signin_device_idx_account').on('signin_device').columns(['account_id', 'created_at']).execute();
  await db.schema.createIndex('signin_device_idx_expiry').on('signin_device').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('signin_device').execute();
  await db.schema.dropIndex('login_throttle_idx_window').execute();
  await db.schema.alterTable('login_throttle').addColumn('locked_until', 'bigint', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('login_throttle').renameColumn('attempts', 'failures').execute();
}

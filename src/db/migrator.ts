import { Migrator, sql, type Migration, type MigrationResultSet } from 'kysely';
import type { DatabaseHandle } from './connect.js';
import type { Db } from './schema.js';
import * as m20261121T0300 from './migrations/20261121T0300_cover_art.js';
import * as m20261121T0400 from './migrations/20261121T0400_auth.js';
import * as m20261122T0100 from './migrations/20261122T0100_musicbrainz_import.js';
import * as m20261122T0200 from './migrations/20261122T0200_metric_counters.js';
import * as m20261124T0100 from './migrations/20261124T0100_signin_devices.js';
import * as m20261124T0200 from './migrations/20261124T0200_resource_server.js';
import * as m20261124T0300 from './migrations/20261124T0300_freshness.js';
import * as m20261124T0400 from './migrations/20261124T0400_signing_keys.js';
import * as m20261124T0410 from './migrations/20261124T0410_scope_spelling.js';
import * as m20261124T0500 from './migrations/20261124T0500_openid.js';
import * as m20261125T0100 from './migrations/20261125T0100_refresh_rotation.js';
import * as m20261125T0200 from './migrations/20261125T0200_device_codes.js';
import * as m20261125T0300 from './migrations/20261125T0300_dpop.js';
import * as m20261125T0400 from './migrations/20261125T0400_edits.js';
import * as m20261126T0100 from './migrations/20261126T0100_code_expiry_index.js';
import * as m20261206T0100 from './migrations/20261206T0100_refresh_successor_seal.js';
import * as m20261206T0200 from './migrations/20261206T0200_image_measures.js';
import * as m20261207T0100 from './migrations/20261207T0100_client_documents.js';
import * as m20261207T0200 from './migrations/20261207T0200_listing_refresh.js';
import * as m20261207T0300 from './migrations/20261207T0300_edit_note.js';
import * as m20261207T0500 from './migrations/20261207T0500_events.js';
import * as m20261208T0100 from './migrations/20261208T0100_event_edits.js';

/** Every migration, in order. A static list, so a bundled build finds them too. */
const MIGRATIONS: Record<string, Migration> = {
  '20261121T0300_cover_art': m20261121T0300,
  '20261121T0400_auth': m20261121T0400,
  '20261122T0100_musicbrainz_import': m20261122T0100,
  '20261122T0200_metric_counters': m20261122T0200,
  '20261124T0100_signin_devices': m20261124T0100,
  '20261124T0200_resource_server': m20261124T0200,
  '20261124T0300_freshness': m20261124T0300,
  '20261124T0400_signing_keys': m20261124T0400,
  '20261124T0410_scope_spelling': m20261124T0410,
  '20261124T0500_openid': m20261124T0500,
  '20261125T0100_refresh_rotation': m20261125T0100,
  '20261125T0200_device_codes': m20261125T0200,
  '20261125T0300_dpop': m20261125T0300,
  '20261125T0400_edits': m20261125T0400,
  '20261126T0100_code_expiry_index': m20261126T0100,
  '20261206T0100_refresh_successor_seal': m20261206T0100,
  '20261206T0200_image_measures': m20261206T0200,
  '20261207T0100_client_documents': m20261207T0100,
  '20261207T0200_listing_refresh': m20261207T0200,
  '20261207T0300_edit_note': m20261207T0300,
  '20261207T0500_events': m20261207T0500,
  '20261208T0100_event_edits': m20261208T0100,
};

const MIGRATION_TABLE = 'sleeve_migration';

function migrator(db: Db): Migrator {
  return new Migrator({
    db,
    provider: { getMigrations: async () => MIGRATIONS },
    migrationTableName: MIGRATION_TABLE,
    migrationLockTableName: 'sleeve_migration_lock',
  });
}

/**
 * Applies every pending migration under the database's schema lock (another process
 * starting at the same moment waits, then finds nothing left to do); returns the names
 * applied. Throws on failure.
 */
export async function migrateToLatest(handle: DatabaseHandle): Promise<string[]> {
  // With nothing to do, Kysely's Migrator (which lists every table first) is not asked at all.
  // With migrations to apply it is, and that listing can still fail if another process drops
  // a table meanwhile (an upgrade started beside a running import): the next start retries.
  const result: MigrationResultSet = await handle.withSchemaLock(async () =>
    (await pendingMigrations(handle)).length === 0 ? { results: [] } : migrator(handle.db).migrateToLatest(),
  );
  if (result.error !== undefined) {
    throw new Error(`migration failed: ${(result.error as Error).message ?? String(result.error)}`, { cause: result.error });
  }
  return (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

/** Names of every migration, applied or not. */
export function allMigrations(): string[] {
  return Object.keys(MIGRATIONS);
}

/**
 * Names of migrations not yet applied. It asks about sleeve_migration alone: Kysely's
 * Migrator first lists every table of the database, and on PostgreSQL that listing fails
 * when a table is dropped while it runs (another process's import dropping its staging
 * tables, say), which would stop a process starting beside a running import.
 */
export async function pendingMigrations(handle: Pick<DatabaseHandle, 'db' | 'dialect'>): Promise<string[]> {
  const exists =
    handle.dialect === 'postgres'
      ? (await sql<{ found: string | null }>`SELECT to_regclass(${MIGRATION_TABLE})::text AS found`.execute(handle.db)).rows[0]?.found != null
      : (await sql<{ n: number }>`SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ${MIGRATION_TABLE}`.execute(handle.db)).rows[0]?.n === 1;
  const applied = new Set<string>();
  if (exists) for (const row of (await sql<{ name: string }>`SELECT name FROM ${sql.table(MIGRATION_TABLE)}`.execute(handle.db)).rows) applied.add(row.name);
  return Object.keys(MIGRATIONS).filter((name) => !applied.has(name));
}

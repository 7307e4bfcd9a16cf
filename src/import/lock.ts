import { sql } from 'kysely';
import type { Db } from '../db/schema.js';

/**
 * The import lock: one `sleeve import musicbrainz` at a time per database. On PostgreSQL a
 * session-level advisory lock, on SQLite a small database of its own beside the catalogue
 * (`{file}.import-lock`) held in exclusive mode. Either is let go when the importing process
 * ends, however it ends, so whether it is held says whether an import is running now.
 */
export const PG_IMPORT_LOCK_KEY = 0x736c656576650001n;

export function sqliteImportLockFile(catalogueFile: string): string {
  return `${catalogueFile}.import-lock`;
}

export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: string }).code ?? '';
  return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED');
}

/** Where to look for the lock. */
export type ImportLockPlace = { dialect: 'postgres'; db: Db } | { dialect: 'sqlite'; file: string };

/** Whether some process holds the import lock of this database now. */
export async function importLockHeld(place: ImportLockPlace): Promise<boolean> {
  if (place.dialect === 'postgres') {
    // pg_locks shows a bigint advisory key as its high and low 32 bits, objsubid 1.
    const hi = Number(PG_IMPORT_LOCK_KEY >> 32n);
    const lo = Number(PG_IMPORT_LOCK_KEY & 0xffffffffn);
    const r = await sql<{ held: boolean }>`
      SELECT EXISTS (
        SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database
        WHERE d.datname = current_database() AND l.locktype = 'advisory' AND l.granted
          AND l.classid = ${hi} AND l.objid = ${lo} AND l.objsubid = 1
      ) AS held`.execute(place.db);
    return r.rows[0]?.held === true;
  }
  if (place.file === ':memory:') return false;
  const { default: Sqlite } = await import('better-sqlite3');
  let probe: InstanceType<typeof Sqlite>;
  try {
    probe = new Sqlite(sqliteImportLockFile(place.file), { readonly: true, fileMustExist: true });
  } catch {
    return false; // never made: no import has run here
  }
  try {
    probe.pragma('busy_timeout = 0');
    probe.prepare('SELECT count(*) FROM sqlite_master').get();
    return false;
  } catch (err) {
    if (isSqliteBusy(err)) return true;
    throw err;
  } finally {
    probe.close();
  }
}

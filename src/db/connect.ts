import { mkdirSync } from 'node:fs';
import path from 'node:path';
import SqliteDatabase from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import type { DatabaseConfig } from '../config/load.js';
import type { Database, Db } from './schema.js';

export type DialectName = 'sqlite' | 'postgres';

/** An open database: the Kysely instance plus the little the rest of sleeve must know of the dialect. */
export interface DatabaseHandle {
  db: Db;
  dialect: DialectName;
  close(): Promise<void>;
}

const INT8_OID = 20;

/** Opens SQLite (creating its directory) or a PostgreSQL pool, with the type parsers of db/schema.ts. */
export function openDatabase(cfg: DatabaseConfig, options: { poolSize?: number } = {}): DatabaseHandle {
  if (cfg.kind === 'sqlite') {
    if (cfg.file !== ':memory:') mkdirSync(path.dirname(cfg.file), { recursive: true });
    const sqlite = new SqliteDatabase(cfg.file);
    sqlite.pragma('journal_mode = WAL');
    // FULL: a committed upload survives power loss, not just a crash of the process.
    sqlite.pragma('synchronous = FULL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 15000');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
    return { db, dialect: 'sqlite', close: () => db.destroy() };
  }
  const pool = new pg.Pool({
    connectionString: cfg.url,
    max: options.poolSize ?? 10,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client that loses its server must not crash the process; the next query reports the failure.
  pool.on('error', () => {});
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

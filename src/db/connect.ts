import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type SqliteDatabase from 'better-sqlite3';
import { CompiledQuery, Kysely, PostgresDialect, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
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

/**
 * SQLite transactions that take the write lock at BEGIN (waiting up to busy_timeout).
 * A deferred transaction that reads first and writes later fails at once with
 * "database is locked" when another process committed in between, instead of waiting.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class ImmediateSqliteDialect extends SqliteDialect {
  readonly #config: SqliteDialectConfig;
  constructor(config: SqliteDialectConfig) {
    super(config);
    this.#config = config;
  }
  override createDriver(): Driver {
    return new ImmediateSqliteDriver(this.#config);
  }
}

/**
 * Opens SQLite (creating its directory) or a PostgreSQL pool, with the type parsers of
 * db/schema.ts. `durability: 'full'` (the default, for the CLI's changes to the catalogue) makes SQLite
 * sync every commit; 'normal' (for a serving process, whose writes are sessions and
 * tokens) syncs at checkpoints: a power cut may lose the last moments' tokens, never
 * corrupt the file. PostgreSQL keeps its own settings.
 */
export async function openDatabase(cfg: DatabaseConfig, options: { poolSize?: number; durability?: 'full' | 'normal' } = {}): Promise<DatabaseHandle> {
  if (cfg.kind === 'sqlite') {
    if (cfg.file !== ':memory:') mkdirSync(path.dirname(cfg.file), { recursive: true });
    // Each driver is loaded only when its database is used: start-up time matters for the CLI.
    const { default: Sqlite } = await import('better-sqlite3');
    const sqlite = new Sqlite(cfg.file);
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma(options.durability === 'normal' ? 'synchronous = NORMAL' : 'synchronous = FULL');
    if (options.durability === 'normal') {
      // A serving process writes many small commits (tokens, sessions): checkpoint (and fsync) the
      // WAL every ~40 MB instead of every ~4 MB.
      sqlite.pragma('wal_autocheckpoint = 10000');
      // Lookups read through a memory map of the file rather than SQLite's small page cache, so a
      // catalogue of millions of releases costs little more per lookup than a small one.
      sqlite.pragma(`mmap_size = ${2 ** 30}`);
    }
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 15000');
    // Statements are prepared once per SQL text and reused (better-sqlite3 statements are reusable).
    const statements = new Map<string, SqliteDatabase.Statement>();
    const database = {
      close: () => sqlite.close(),
      prepare(sql: string): SqliteDatabase.Statement {
        let stmt = statements.get(sql);
        if (stmt === undefined) {
          if (statements.size >= 1000) statements.clear();
          stmt = sqlite.prepare(sql);
          statements.set(sql, stmt);
        }
        return stmt;
      },
    };
    const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database }) });
    return { db, dialect: 'sqlite', close: () => db.destroy() };
  }
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({
    connectionString: cfg.url,
    max: options.poolSize ?? 10,
    // While the server is unreachable, a request fails after this wait (500) instead of hanging;
    // it also bounds the wait for a free connection under overload.
    connectionTimeoutMillis: 5000,
    // A connection whose server vanished (no FIN, e.g. a network cut) is noticed and dropped.
    keepAlive: true,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
    },
  });
  // A client that loses its server (a restart ends every session) must not crash the process.
  // Idle clients report it to the pool, which drops them. A checked-out client between two
  // queries has no listener of the pool's (found by the PostgreSQL restart test: an unhandled
  // 'error' event); its next query fails instead, and the pool drops it on release. Later
  // queries open new connections once the server is back.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

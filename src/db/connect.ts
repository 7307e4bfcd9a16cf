import { chmodSync, closeSync, existsSync, fstatSync, mkdirSync, openSync, statSync } from 'node:fs';
import { open, rm, stat } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import type SqliteDatabase from 'better-sqlite3';
import { CompiledQuery, Kysely, sql, PostgresDialect, SqliteDialect, SqliteDriver, type DatabaseConnection, type Driver, type SqliteDialectConfig } from 'kysely';
import type { DatabaseConfig } from '../config/load.js';
import { OperatorError } from '../shared/errors.js';
import type { DialectName } from './dialect.js';
import type { Database, Db } from './schema.js';

/** An open database: the Kysely instance plus the little the rest of sleeve must know of the dialect. */
export interface DatabaseHandle {
  db: Db;
  dialect: DialectName;
  /**
   * Runs `fn` while holding a lock that every process on this database takes for schema
   * changes, so processes started at once on a fresh database migrate it one at a time.
   */
  withSchemaLock<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Reads on the calling thread, for a question too small to be worth a promise (SQLite in a
   * file only; undefined on PostgreSQL and for an in-memory database).
   */
  readsNow: ReadsNow | undefined;
  close(): Promise<void>;
}

/** Statements run at once on the calling thread: the first row of a read, or undefined. */
export interface ReadsNow {
  first(sql: string, parameters: readonly unknown[]): unknown;
}

/**
 * A read-only connection of its own to the SQLite file, opened on first use: it sees what
 * was committed, never the middle of a transaction on the writing connection (whose turns
 * span awaits). It waits for no lock (busy_timeout 0): a read that finds the file busy
 * throws at once rather than stalling the thread, and the caller asks the awaited way.
 * Statements are prepared once per text (a handful: bounded all the same).
 */
class SqliteReadsNow implements ReadsNow {
  #sqlite: SqliteDatabase.Database | undefined;
  readonly #statements = new Map<string, SqliteDatabase.Statement>();

  constructor(
    private readonly Sqlite: typeof SqliteDatabase,
    private readonly file: string,
  ) {}

  first(sql: string, parameters: readonly unknown[]): unknown {
    let stmt = this.#statements.get(sql);
    if (stmt === undefined) {
      if (this.#sqlite === undefined) {
        const sqlite = new this.Sqlite(this.file, { readonly: true, fileMustExist: true });
        sqlite.pragma('busy_timeout = 0');
        // As the serving connection reads: through a memory map of the file, not a page cache of its own.
        sqlite.pragma(`mmap_size = ${2 ** 30}`);
        this.#sqlite = sqlite;
      }
      if (this.#statements.size >= 64) this.#statements.clear();
      stmt = this.#sqlite.prepare(sql);
      this.#statements.set(sql, stmt);
    }
    return stmt.get(...parameters);
  }

  close(): void {
    this.#statements.clear();
    this.#sqlite?.close();
    this.#sqlite = undefined;
  }
}

/** SQL texts of the hot-path queries (db/prepared.ts), each with its statement name. */
const hotStatements = new Map<string, string>();

/**
 * Marks a query text as one of the few run over and over, so that on PostgreSQL each
 * connection parses and plans it once (a named prepared statement) instead of per request.
 */
export function registerHotStatement(text: string): void {
  if (!hotStatements.has(text)) hotStatements.set(text, `sleeve_hot_${hotStatements.size + 1}`);
}

/** Sends registered texts as named statements (Kysely calls client.query(text, values)). */
function nameHotStatements(client: { query: (...args: any[]) => any }): void {
  const query = client.query.bind(client);
  client.query = (...args: any[]) => {
    const [text, values] = args;
    if (args.length === 2 && typeof text === 'string' && Array.isArray(values)) {
      const name = hotStatements.get(text);
      if (name !== undefined) return query({ name, text, values });
    }
    return query(...args);
  };
}

/** The key of PostgreSQL's session-level advisory lock for schema changes ("sleeveSC"; the import holds another). */
const SCHEMA_LOCK_KEY = 0x736c6565_7665_5343n;

/**
 * A lock file beside the SQLite database, created exclusively: SQLite's own locks cannot
 * span the several statements and transactions of a migration run.
 */
async function withLockFile<T>(file: string, fn: () => Promise<T>): Promise<T> {
  const lock = `${file}.schema-lock`;
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      const fh = await open(lock, 'wx');
      await fh.writeFile(`${process.pid}\n`);
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      // A lock left by a process that died (migrations take seconds, not minutes) is taken over.
      const age = await stat(lock).then((st) => Date.now() - st.mtimeMs, () => 0);
      if (age > 300_000) await rm(lock, { force: true });
      else if (Date.now() > deadline) throw new Error(`another process holds ${lock}; if none is running, remove that file`);
      else await sleep(50 + Math.random() * 50);
    }
  }
  try {
    return await fn();
  } finally {
    await rm(lock, { force: true });
  }
}

/** The files SQLite keeps beside a database: they hold the same data as the database itself. */
const SQLITE_SIDE_FILES = ['-wal', '-shm', '-journal'];

/**
 * Makes a SQLite database file private to its owner before SQLite opens it (password and
 * token hashes, e-mail addresses): a new file is created here with mode 0600, and SQLite gives
 * its -wal, -shm and -journal files the main file's mode. Existing files that others may
 * read (an older sleeve made them 0644) are made 0600 too.
 * The directory is made as usual (0755 under the default umask): it also holds the image
 * files, which are public. See docs/decisions.md, "Files at rest".
 */
export function preparePrivateDatabaseFile(file: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const fd = openSync(file, 'a', 0o600);
  try {
    if ((fstatSync(fd).mode & 0o077) !== 0) chmodSync(file, 0o600);
  } finally {
    closeSync(fd);
  }
  for (const suffix of SQLITE_SIDE_FILES) {
    let mode: number;
    try {
      mode = statSync(file + suffix).mode;
    } catch {
      continue;
    }
    if ((mode & 0o077) !== 0) chmodSync(file + suffix, 0o600);
  }
}

const INT8_OID = 20;

/**
 * SQLite transactions that take the write lock at BEGIN (waiting up to busy_timeout).
 * A deferred transaction that reads first and writes later fails at once with
 * "database is locked" when another process committed in between, instead of waiting.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  readonly #turns = new Turns();

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }

  /**
   * The one connection, in turns: Kysely's own lock wakes every waiter at each release (each
   * looks, one takes it, the rest wait again), so with n statements waiting (a server's
   * concurrent requests) each release cost n wake-ups. Taken in turns first, Kysely's lock is
   * always free when reached. See docs/decisions.md, "SQLite's one connection taken in turns".
   */
  override async acquireConnection(): Promise<DatabaseConnection> {
    await this.#turns.take();
    try {
      return await super.acquireConnection();
    } catch (err) {
      this.#turns.pass();
      throw err;
    }
  }

  override async releaseConnection(): Promise<void> {
    try {
      await super.releaseConnection();
    } finally {
      this.#turns.pass();
    }
  }
}

/** A lock handed to its waiters one at a time, in the order they asked. */
class Turns {
  #held = false;
  readonly #waiting: (() => void)[] = [];

  take(): Promise<void> {
    if (!this.#held) {
      this.#held = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  /** Gives the lock to the next waiter, or frees it. */
  pass(): void {
    const next = this.#waiting.shift();
    if (next === undefined) this.#held = false;
    else next();
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
 * corrupt the file. PostgreSQL keeps its own settings. `create: false` (the CLI's commands
 * other than serve, migrate and demo) refuses a SQLite file that does not exist yet
 * (NO_DATABASE) instead of making one.
 */
export async function openDatabase(cfg: DatabaseConfig, options: { poolSize?: number; durability?: 'full' | 'normal'; create?: boolean } = {}): Promise<DatabaseHandle> {
  return cfg.kind === 'sqlite' ? openSqlite(cfg.file, options.durability ?? 'full', options.create ?? true) : openPostgres(cfg.url, options.poolSize ?? 10);
}

async function openSqlite(file: string, durability: 'full' | 'normal', create: boolean): Promise<DatabaseHandle> {
  if (!create && file !== ':memory:' && !existsSync(file)) throw new OperatorError('NO_DATABASE', `no sleeve database at ${file}`);
  if (file !== ':memory:') preparePrivateDatabaseFile(file);
  // Each driver is loaded only when its database is used: start-up time matters for the CLI.
  const { default: Sqlite } = await import('better-sqlite3');
  const sqlite = new Sqlite(file, { fileMustExist: !create && file !== ':memory:' });
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(durability === 'normal' ? 'synchronous = NORMAL' : 'synchronous = FULL');
  if (durability === 'normal') {
    // A serving process writes many small commits (tokens, sessions): checkpoint (and fsync) the
    // WAL every ~40 MB instead of every ~4 MB.
    sqlite.pragma('wal_autocheckpoint = 10000');
    // Lookups read through a memory map of the file rather than SQLite's small page cache, so a
    // catalogue of millions of releases costs little more per lookup than a small one.
    sqlite.pragma(`mmap_size = ${2 ** 30}`);
  }
  sqlite.pragma('foreign_keys = ON');
  sqlite.pragma('busy_timeout = 15000');
  const statements = withStatementCache(sqlite);
  const db = new Kysely<Database>({ dialect: new ImmediateSqliteDialect({ database: statements }) });
  sqliteStatements.set(db, statements);
  const readsNow = file === ':memory:' ? undefined : new SqliteReadsNow(Sqlite, file);
  return {
    db,
    dialect: 'sqlite',
    withSchemaLock: (fn) => (file === ':memory:' ? fn() : withLockFile(file, fn)),
    readsNow,
    close: async () => {
      readsNow?.close();
      await db.destroy();
    },
  };
}

/** A SQLite database's statements, each prepared once per SQL text (the cache its Kysely driver prepares through). */
export interface SqliteStatements {
  prepare(sql: string): SqliteDatabase.Statement;
}

/** The statements of each SQLite database opened here, by its Kysely instance. */
const sqliteStatements = new WeakMap<Kysely<any>, SqliteStatements>();

/**
 * The statement cache under a SQLite database's Kysely instance (undefined for PostgreSQL, or a
 * transaction): for the write batch, which runs its jobs' hot statements on them directly while
 * its transaction holds the one connection (db/write-batch.ts).
 */
export function sqliteStatementsOf(db: Kysely<any>): SqliteStatements | undefined {
  return sqliteStatements.get(db);
}

/** Statements are prepared once per SQL text and reused (better-sqlite3 statements are reusable). */
function withStatementCache(sqlite: SqliteDatabase.Database): SqliteDialectConfig['database'] & SqliteStatements {
  const statements = new Map<string, SqliteDatabase.Statement>();
  return {
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
}

async function openPostgres(url: string, poolSize: number): Promise<DatabaseHandle> {
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
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
  pool.on('connect', (client) => {
    client.on('error', () => {});
    nameHotStatements(client);
  });
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    withSchemaLock: (fn) => withAdvisoryLock(db, fn),
    readsNow: undefined,
    close: () => db.destroy(),
  };
}

/** A session-level advisory lock on one pooled connection; the work itself may use the others. */
function withAdvisoryLock<T>(db: Db, fn: () => Promise<T>): Promise<T> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${SCHEMA_LOCK_KEY.toString()}::bigint)`.execute(conn);
    try {
      return await fn();
    } finally {
      await sql`select pg_advisory_unlock(${SCHEMA_LOCK_KEY.toString()}::bigint)`.execute(conn);
    }
  });
}

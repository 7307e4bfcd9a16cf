/*
 * SQLite: staging lives in a file of its own beside the database ("{db}.import-staging",
 * attached as `stage`), so it can be deleted afterwards and its space comes back.
 * Rows go in through one prepared statement per file, in transactions of a chunk,
 * each committed with the file's progress row. A small "{db}.import-lock" database is
 * held exclusively for as long as the import runs: a second import is refused.
 */
import { rmSync } from 'node:fs';
import type SqliteDatabase from 'better-sqlite3';
import { preparePrivateDatabaseFile } from '../db/connect.js';
import { AppError } from '../shared/errors.js';
import { applyStaging } from './apply.js';
import {
  emptyProgress,
  Int32List,
  loadQuery,
  progressFromRow,
  type ApplyDialect,
  type ApplyOptions,
  type ApplyResult,
  type FileProgress,
  type FileStager,
  type ImportBackend,
  type Omission,
  type RunOutcome,
  type RunRecord,
  type SqlRunner,
  type StagingState,
} from './backend.js';
import { isSqliteBusy, sqliteImportLockFile } from './lock.js';
import { DUMP_TABLES, keptIndexes, stagingColumns, type DumpTable } from './tables.js';

/**
 * Page caches (KiB): big enough for fast bulk work, small enough to keep the process
 * well under 300 MB. Staging is written and read in order and needs little.
 */
const MAIN_CACHE_KIB = 16 * 1024;
const TEMP_CACHE_KIB = 16 * 1024;
const STAGE_CACHE_KIB = 4 * 1024;

/** The apply step's temporary tables (apply-dump.ts, apply-catalogue.ts). */
const APPLY_TEMP_TABLES = ['in_at', 'in_it', 'in_rg', 'in_rel', 'in_rr', 'in_rgr', 'in_ca', 'in_cat', 'in_rgca', 'in_ek', 'in_ev', 'in_evr', 'in_ea', 'in_eat'];

type Sqlite = SqliteDatabase.Database;

export function stagingFile(dbFile: string): string {
  return `${dbFile}.import-staging`;
}

function progressValues(p: FileProgress): unknown[] {
  return [p.file, p.size, p.mtimeMs, p.bytesDone, p.linesDone, p.rowsStaged, p.rowsSkipped, p.done ? 1 : 0, JSON.stringify(p.skipped)];
}

export async function openSqliteBackend(file: string): Promise<ImportBackend> {
  const { default: Sqlite } = await import('better-sqlite3');
  if (file !== ':memory:') for (const f of [file, stagingFile(file), sqliteImportLockFile(file)]) preparePrivateDatabaseFile(f);
  const db: Sqlite = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 15000');
  db.pragma(`cache_size = -${MAIN_CACHE_KIB}`);
  db.pragma(`temp.cache_size = -${TEMP_CACHE_KIB}`);
  const stage = file === ':memory:' ? ':memory:' : stagingFile(file);
  db.prepare('ATTACH DATABASE ? AS stage').run(stage);
  return new SqliteBackend(db, file, stage);
}

function sqliteRunner(db: Sqlite): SqlRunner {
  return {
    async run(sql) {
      return db.prepare(sql).run().changes;
    },
    async all<T>(sql: string) {
      return db.prepare(sql).all() as T[];
    },
    async attempt(sql) {
      try {
        db.prepare(sql).run();
        return true;
      } catch (err) {
        const code = (err as { code?: string }).code;
        if (code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return false;
        throw err;
      }
    },
    async deleteReturning(sql): Promise<Omission> {
      const examples: string[] = [];
      let count = 0;
      for (const row of db.prepare(sql).raw().iterate() as Iterable<unknown[]>) {
        if (count < 3) examples.push(String(row[0]));
        count++;
      }
      return { count, examples };
    },
  };
}

/** The apply step's SQLite SQL. */
const sqliteApplyDialect: ApplyDialect = {
  stagingTable: (name) => `stage.${name}`,
  uuidText: (column) => column,
  createTempTable: (name, columns) => `CREATE TEMP TABLE ${name} (${columns})`,

  async begin(db) {
    // Any an earlier apply step on this connection left.
    for (const t of [...APPLY_TEMP_TABLES, 'mv']) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  },

  async end(db) {
    for (const t of APPLY_TEMP_TABLES) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  },

  /** Inserts in file order into a table keyed from the start, so the first row of a repeated key wins. */
  async loadKeyed(db, spec) {
    const { select, from } = loadQuery(spec, sqliteApplyDialect.stagingTable(spec.stage));
    await db.run(sqliteApplyDialect.createTempTable(spec.table, `${spec.columns.map(([name, type]) => `${name} ${type}`).join(', ')}, PRIMARY KEY (${spec.key.join(', ')})`));
    return db.run(`INSERT INTO ${spec.table} SELECT ${select} ${from} WHERE true ORDER BY s.rowid ON CONFLICT DO NOTHING`);
  },

  /** A unique index (the joins that follow look gids up). */
  async uniqueGid(db, table) {
    if (await db.attempt(`CREATE UNIQUE INDEX ${table}_gid ON ${table} (gid)`)) return { count: 0, examples: [] };
    await db.run(`CREATE INDEX ${table}_gid_all ON ${table} (gid)`);
    const gone = await db.deleteReturning(`DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${table} b WHERE b.gid = ${table}.gid AND b.id < ${table}.id) RETURNING gid AS x`);
    await db.run(`DROP INDEX ${table}_gid_all`);
    await db.run(`CREATE UNIQUE INDEX ${table}_gid ON ${table} (gid)`);
    return gone;
  },

  /** The table's indexes. */
  async setAsideIndexes(db, table) {
    const indexes = await db.all<{ name: string; sql: string }>(`SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = '${table}' AND sql IS NOT NULL`);
    for (const i of indexes) await db.run(`DROP INDEX main."${i.name}"`);
    return indexes.map((i) => i.sql);
  },

  async resetIdSequences() {
    // An integer primary key takes the next id past the largest: nothing to move.
  },
};

/**
 * Takes the import lock: a database of its own, held in exclusive mode for as long as
 * this process runs: a second import is refused at once; a dead process holds nothing.
 * Resolves to what lets it go.
 */
async function takeImportLock(file: string): Promise<() => void> {
  const { default: Sqlite } = await import('better-sqlite3');
  const lockDb = new Sqlite(sqliteImportLockFile(file));
  try {
    // A short wait: a serving process's metrics may be reading this file for a moment
    // (import/lock.ts); an import holding it never lets go, so a second one is still refused.
    lockDb.pragma('busy_timeout = 200');
    lockDb.pragma('locking_mode = EXCLUSIVE');
    lockDb.exec('BEGIN EXCLUSIVE');
    lockDb.exec('CREATE TABLE IF NOT EXISTS holder (pid integer)');
    lockDb.exec(`DELETE FROM holder; INSERT INTO holder VALUES (${process.pid})`);
    lockDb.exec('COMMIT');
  } catch (err) {
    lockDb.close();
    if (isSqliteBusy(err)) throw new AppError('CONFLICT', 'another "sleeve import musicbrainz" is running on this database; wait for it to finish');
    throw err;
  }
  return () => lockDb.close();
}

class SqliteBackend implements ImportBackend {
  #releaseLock = () => {};

  constructor(
    private readonly db: Sqlite,
    /** The catalogue's file, or ':memory:'. */
    private readonly file: string,
    /** The staging file attached as `stage`, or ':memory:'. */
    private readonly stage: string,
  ) {}

  #tableNames(): string[] {
    return (this.db.prepare(`SELECT name FROM stage.sqlite_master WHERE type = 'table'`).all() as { name: string }[]).map((r) => r.name);
  }

  async lock(): Promise<void> {
    if (this.file !== ':memory:') this.#releaseLock = await takeImportLock(this.file);
    const db = this.db;
    db.pragma('stage.journal_mode = WAL');
    db.pragma('stage.synchronous = NORMAL');
    db.pragma(`stage.cache_size = -${STAGE_CACHE_KIB}`);
    db.prepare(`UPDATE import_run SET status = 'interrupted', finished_at = ?, message = 'the importing process ended without finishing' WHERE status = 'running'`).run(Date.now());
  }

  async startRun(run: RunRecord): Promise<number> {
    const r = this.db
      .prepare(`INSERT INTO import_run (source, dir, dump_timestamp, replication_sequence, started_at, status, rows_read, rows_skipped) VALUES (?, ?, ?, ?, ?, 'running', 0, 0)`)
      .run(run.source, run.dir, run.dumpTimestamp, run.replicationSequence, run.startedAt);
    return Number(r.lastInsertRowid);
  }

  async finishRun(id: number, o: RunOutcome): Promise<void> {
    this.db
      .prepare(`UPDATE import_run SET status = ?, finished_at = ?, rows_read = ?, rows_skipped = ?, details = ?, message = ? WHERE id = ?`)
      .run(o.status, o.finishedAt, o.rowsRead, o.rowsSkipped, JSON.stringify(o.details), o.message, id);
  }

  async readStaging(): Promise<StagingState | undefined> {
    const present = new Set(this.#tableNames());
    if (!['meta', 'progress', ...DUMP_TABLES.map((t) => t.name)].every((t) => present.has(t))) return undefined;
    const meta = this.db.prepare(`SELECT value FROM stage.meta WHERE key = 'identity'`).get() as { value: string } | undefined;
    if (meta === undefined) return undefined;
    const files = new Map<string, FileProgress>();
    for (const r of this.db.prepare('SELECT * FROM stage.progress').all() as Record<string, unknown>[]) {
      files.set(String(r.file), progressFromRow(r));
    }
    return { identity: meta.value, files };
  }

  async createStaging(identity: string, files: { table: DumpTable; size: number; mtimeMs: number }[]): Promise<void> {
    const db = this.db;
    db.exec('BEGIN');
    try {
      for (const name of this.#tableNames()) db.exec(`DROP TABLE stage."${name}"`);
      db.exec('CREATE TABLE stage.meta (key text PRIMARY KEY, value text NOT NULL)');
      db.exec(
        'CREATE TABLE stage.progress (file text PRIMARY KEY, size integer NOT NULL, mtime_ms integer NOT NULL, bytes_done integer NOT NULL, lines_done integer NOT NULL, rows_staged integer NOT NULL, rows_skipped integer NOT NULL, done integer NOT NULL, skipped text NOT NULL)',
      );
      for (const table of DUMP_TABLES) {
        db.exec(`CREATE TABLE stage.${table.name} (${stagingColumns(table, 'integer').join(', ')})`);
      }
      db.prepare(`INSERT INTO stage.meta (key, value) VALUES ('identity', ?)`).run(identity);
      const ins = db.prepare('INSERT INTO stage.progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
      for (const f of files) ins.run(...progressValues(emptyProgress(f.table, f.size, f.mtimeMs)));
      db.exec('COMMIT');
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw err;
    }
  }

  async resetFile(table: DumpTable, size: number, mtimeMs: number): Promise<void> {
    const db = this.db;
    db.exec('BEGIN');
    db.exec(`DELETE FROM stage.${table.name}`);
    db.prepare('DELETE FROM stage.progress WHERE file = ?').run(table.name);
    db.prepare('INSERT INTO stage.progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)').run(...progressValues(emptyProgress(table, size, mtimeMs)));
    db.exec('COMMIT');
  }

  async stager(table: DumpTable): Promise<FileStager> {
    return sqliteStager(this.db, table);
  }

  async coverArtEdits(): Promise<Int32Array> {
    const out = new Int32List();
    for (const [edit] of this.db.prepare('SELECT edit FROM stage.cover_art UNION SELECT edit FROM stage.event_art ORDER BY 1').raw().iterate() as Iterable<[number]>) out.push(edit);
    return out.values();
  }

  async apply(options: ApplyOptions): Promise<ApplyResult> {
    const db = this.db;
    const staged: Record<string, number> = {};
    for (const r of db.prepare('SELECT file, rows_staged FROM stage.progress').all() as { file: string; rows_staged: number }[]) staged[r.file] = r.rows_staged;
    // The write lock from the start (a reader may go on reading the catalogue as it was, WAL).
    db.exec('BEGIN IMMEDIATE');
    try {
      const result = await applyStaging(sqliteRunner(db), sqliteApplyDialect, { ...options, staged });
      await this.finishRun(options.runId, options.outcome(result));
      db.exec('COMMIT');
      return result;
    } catch (err) {
      if (db.inTransaction) db.exec('ROLLBACK');
      throw err;
    }
  }

  async dropStaging(): Promise<void> {
    this.db.exec('DETACH DATABASE stage');
    if (this.stage !== ':memory:') for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${this.stage}${suffix}`, { force: true });
    // Give back the pages the apply step used in the write-ahead log.
    this.db.pragma('wal_checkpoint(TRUNCATE)');
  }

  async close(): Promise<void> {
    this.db.close();
    this.#releaseLock();
  }
}

/** One file's rows through one prepared insert, one transaction per chunk. */
function sqliteStager(db: Sqlite, table: DumpTable): FileStager {
  const kept = keptIndexes(table);
  const insert = db.prepare(`INSERT INTO stage.${table.name} VALUES (${kept.map(() => '?').join(', ')})`);
  const progress = db.prepare(
    'UPDATE stage.progress SET size = ?, mtime_ms = ?, bytes_done = ?, lines_done = ?, rows_staged = ?, rows_skipped = ?, done = ?, skipped = ? WHERE file = ?',
  );
  const row: unknown[] = new Array(kept.length);
  const begin = () => {
    if (!db.inTransaction) db.exec('BEGIN');
  };
  return {
    add(values) {
      begin();
      for (let i = 0; i < kept.length; i++) row[i] = values[kept[i] as number];
      insert.run(row);
    },
    async flush() {},
    async commit(p) {
      begin();
      const [file, ...rest] = progressValues(p);
      progress.run(...rest, file);
      db.exec('COMMIT');
    },
    async abort() {
      if (db.inTransaction) db.exec('ROLLBACK');
    },
  };
}

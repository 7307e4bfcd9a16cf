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
import { applyStaging, type SqlRunner } from './apply.js';
import { emptyProgress, progressFromRow, type ApplyOptions, type ApplyResult, type FileProgress, type FileStager, type ImportBackend, type Omission, type RunOutcome, type StagingState } from './backend.js';
import { isSqliteBusy, sqliteImportLockFile } from './lock.js';
import { DUMP_TABLES, keptIndexes, sqlType, type DumpTable } from './tables.js';

/**
 * Page caches (KiB): big enough for fast bulk work, small enough to keep the process
 * well under 300 MB. Staging is written and read in order and needs little.
 */
const MAIN_CACHE_KIB = 16 * 1024;
const TEMP_CACHE_KIB = 16 * 1024;
const STAGE_CACHE_KIB = 4 * 1024;

export function stagingFile(dbFile: string): string {
  return `${dbFile}.import-staging`;
}

function progressValues(p: FileProgress): unknown[] {
  return [p.file, p.size, p.mtimeMs, p.bytesDone, p.linesDone, p.rowsStaged, p.rowsSkipped, p.done ? 1 : 0, JSON.stringify(p.skipped)];
}

export async function openSqliteBackend(file: string): Promise<ImportBackend> {
  const { default: Sqlite } = await import('better-sqlite3');
  if (file !== ':memory:') for (const f of [file, stagingFile(file), sqliteImportLockFile(file)]) preparePrivateDatabaseFile(f);
  const db: SqliteDatabase.Database = new Sqlite(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 15000');
  db.pragma(`cache_size = -${MAIN_CACHE_KIB}`);
  db.pragma(`temp.cache_size = -${TEMP_CACHE_KIB}`);
  const stage = file === ':memory:' ? ':memory:' : stagingFile(file);
  db.prepare('ATTACH DATABASE ? AS stage').run(stage);

  const runner: SqlRunner = {
    dialect: 'sqlite',
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

  const tableNames = () => (db.prepare(`SELECT name FROM stage.sqlite_master WHERE type = 'table'`).all() as { name: string }[]).map((r) => r.name);
  let closeLock = () => {};

  const backend: ImportBackend = {
    dialect: 'sqlite',

    async lock() {
      if (file !== ':memory:') {
        // A database of its own for the lock, held in exclusive mode for as long as this
        // process runs: a second import is refused at once; a dead process holds nothing.
        const { default: Sqlite2 } = await import('better-sqlite3');
        const lockDb = new Sqlite2(sqliteImportLockFile(file));
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
        closeLock = () => lockDb.close();
      }
      db.pragma('stage.journal_mode = WAL');
      db.pragma('stage.synchronous = NORMAL');
      db.pragma(`stage.cache_size = -${STAGE_CACHE_KIB}`);
      db.prepare(`UPDATE import_run SET status = 'interrupted', finished_at = ?, message = 'the importing process ended without finishing' WHERE status = 'running'`).run(Date.now());
    },

    async startRun(run) {
      const r = db
        .prepare(`INSERT INTO import_run (source, dir, dump_timestamp, replication_sequence, started_at, status, rows_read, rows_skipped) VALUES (?, ?, ?, ?, ?, 'running', 0, 0)`)
        .run(run.source, run.dir, run.dumpTimestamp, run.replicationSequence, run.startedAt);
      return Number(r.lastInsertRowid);
    },

    async finishRun(id: number, o: RunOutcome) {
      db.prepare(`UPDATE import_run SET status = ?, finished_at = ?, rows_read = ?, rows_skipped = ?, details = ?, message = ? WHERE id = ?`).run(
        o.status,
        o.finishedAt,
        o.rowsRead,
        o.rowsSkipped,
        JSON.stringify(o.details),
        o.message,
        id,
      );
    },

    async readStaging(): Promise<StagingState | undefined> {
      const present = new Set(tableNames());
      if (!['meta', 'progress', ...DUMP_TABLES.map((t) => t.name)].every((t) => present.has(t))) return undefined;
      const meta = db.prepare(`SELECT value FROM stage.meta WHERE key = 'identity'`).get() as { value: string } | undefined;
      if (meta === undefined) return undefined;
      const files = new Map<string, FileProgress>();
      for (const r of db.prepare('SELECT * FROM stage.progress').all() as Record<string, unknown>[]) {
        files.set(String(r.file), progressFromRow(r));
      }
      return { identity: meta.value, files };
    },

    async createStaging(identity, files) {
      db.exec('BEGIN');
      try {
        for (const name of tableNames()) db.exec(`DROP TABLE stage."${name}"`);
        db.exec('CREATE TABLE stage.meta (key text PRIMARY KEY, value text NOT NULL)');
        db.exec(
          'CREATE TABLE stage.progress (file text PRIMARY KEY, size integer NOT NULL, mtime_ms integer NOT NULL, bytes_done integer NOT NULL, lines_done integer NOT NULL, rows_staged integer NOT NULL, rows_skipped integer NOT NULL, done integer NOT NULL, skipped text NOT NULL)',
        );
        for (const table of DUMP_TABLES) {
          const cols = keptIndexes(table).map((i) => {
            const c = table.columns[i] as (typeof table.columns)[number];
            // Timestamps are staged as epoch milliseconds.
            return `${c.name} ${c.type === 'timestamptz' ? 'integer' : sqlType(c.type)}`;
          });
          db.exec(`CREATE TABLE stage.${table.name} (${cols.join(', ')})`);
        }
        db.prepare(`INSERT INTO stage.meta (key, value) VALUES ('identity', ?)`).run(identity);
        const ins = db.prepare('INSERT INTO stage.progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)');
        for (const f of files) ins.run(...progressValues(emptyProgress(f.table, f.size, f.mtimeMs)));
        db.exec('COMMIT');
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw err;
      }
    },

    async resetFile(table, size, mtimeMs) {
      db.exec('BEGIN');
      db.exec(`DELETE FROM stage.${table.name}`);
      db.prepare('DELETE FROM stage.progress WHERE file = ?').run(table.name);
      db.prepare('INSERT INTO stage.progress VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)').run(...progressValues(emptyProgress(table, size, mtimeMs)));
      db.exec('COMMIT');
    },

    async stager(table: DumpTable): Promise<FileStager> {
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
    },

    async coverArtEdits() {
      let out = new Int32Array(1 << 16);
      let n = 0;
      for (const [edit] of db.prepare('SELECT DISTINCT edit FROM stage.cover_art ORDER BY 1').raw().iterate() as Iterable<[number]>) {
        if (n === out.length) {
          const bigger = new Int32Array(out.length * 2);
          bigger.set(out);
          out = bigger;
        }
        out[n++] = edit;
      }
      return out.subarray(0, n);
    },

    async apply(options: ApplyOptions): Promise<ApplyResult> {
      const staged: Record<string, number> = {};
      for (const r of db.prepare('SELECT file, rows_staged FROM stage.progress').all() as { file: string; rows_staged: number }[]) staged[r.file] = r.rows_staged;
      // The write lock from the start (a reader may go on reading the catalogue as it was, WAL).
      db.exec('BEGIN IMMEDIATE');
      try {
        const result = await applyStaging(runner, { ...options, staged });
        await backend.finishRun(options.runId, options.outcome(result));
        db.exec('COMMIT');
        return result;
      } catch (err) {
        if (db.inTransaction) db.exec('ROLLBACK');
        throw err;
      }
    },

    async dropStaging() {
      db.exec('DETACH DATABASE stage');
      if (stage !== ':memory:') for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(`${stage}${suffix}`, { force: true });
      // Give back the pages the apply step used in the write-ahead log.
      db.pragma('wal_checkpoint(TRUNCATE)');
    },

    async close() {
      db.close();
      closeLock();
    },
  };
  return backend;
}

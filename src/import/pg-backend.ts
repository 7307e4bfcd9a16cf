/*
 * PostgreSQL: the kept columns of every dump file are streamed through COPY FROM STDIN
 * (the fields as the file has them, timestamps as epoch milliseconds) into an UNLOGGED
 * staging table; each chunk is committed with the file's progress row. Progress and staging are both unlogged, so
 * a crash of the server empties them together and the import starts over, never
 * resuming from a progress row whose rows are gone.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type { Client, QueryResult } from 'pg';
import { AppError } from '../shared/errors.js';
import { applyStaging } from './apply.js';
import {
  emptyProgress,
  Int32List,
  keyExpressions,
  loadQuery,
  progressFromRow,
  type ApplyDialect,
  type ApplyOptions,
  type ApplyResult,
  type FileProgress,
  type FileStager,
  type ImportBackend,
  type KeyedLoad,
  type Omission,
  type RunOutcome,
  type RunRecord,
  type SqlRunner,
  type StagingState,
} from './backend.js';
import { PG_IMPORT_LOCK_KEY } from './lock.js';
import { DUMP_TABLES, keptIndexes, stagingColumns, type DumpTable } from './tables.js';

const PREFIX = 'import_mb_';
const INT8_OID = 20;

type CopyStreams = typeof import('pg-copy-streams');
type Query = (text: string, values?: unknown[]) => Promise<QueryResult>;

/** A row PostgreSQL refused while staging (it passed sleeve's own checks). */
export class StageRowError extends Error {
  constructor(
    readonly line: number | undefined,
    message: string,
  ) {
    super(message);
  }
}

function stagingName(table: DumpTable): string {
  return `${PREFIX}${table.name}`;
}

function progressRow(p: FileProgress): unknown[] {
  return [p.file, p.size, p.mtimeMs, p.bytesDone, p.linesDone, p.rowsStaged, p.rowsSkipped, p.done, JSON.stringify(p.skipped)];
}

export async function openPgBackend(url: string): Promise<ImportBackend> {
  const { default: pgModule } = await import('pg');
  const copyStreams = await import('pg-copy-streams');
  const client = new pgModule.Client({
    connectionString: url,
    types: {
      getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
        oid === INT8_OID ? (v: string) => Number(v) : pgModule.types.getTypeParser(oid, format)) as typeof pgModule.types.getTypeParser,
    },
  });
  await client.connect();
  // An error on an idle connection must not crash the process; the next query reports it.
  client.on('error', () => {});
  // The apply step's temporary tables hold up to a few hundred MB: keep them in memory
  // (server side) rather than in the default 8 MB. Only settable before their first use.
  await client.query(`SET temp_buffers = '256MB'`);
  return new PgBackend(client, copyStreams);
}

function pgRunner(q: Query): SqlRunner {
  return {
    async run(sql) {
      return (await q(sql)).rowCount ?? 0;
    },
    async all<T>(sql: string) {
      return (await q(sql)).rows as T[];
    },
    async attempt(sql) {
      await q('SAVEPOINT attempt');
      try {
        await q(sql);
        await q('RELEASE SAVEPOINT attempt');
        return true;
      } catch (err) {
        await q('ROLLBACK TO SAVEPOINT attempt');
        await q('RELEASE SAVEPOINT attempt');
        if ((err as { code?: string }).code === '23505') return false;
        throw err;
      }
    },
    async deleteReturning(sql): Promise<Omission> {
      const r = await q(`WITH d AS (${sql}) SELECT (SELECT count(*) FROM d) AS n, (SELECT array_agg(x) FROM (SELECT x FROM d LIMIT 3) s) AS ex`);
      const row = r.rows[0] as { n: number; ex: string[] | null };
      return { count: Number(row.n), examples: (row.ex ?? []).map(String) };
    },
  };
}

async function count(db: SqlRunner, sql: string): Promise<number> {
  const rows = await db.all<{ n: number | string }>(sql);
  return Number(rows[0]?.n ?? 0);
}

/** The apply step's PostgreSQL SQL. */
const pgApplyDialect: ApplyDialect = {
  stagingTable: (name) => `${PREFIX}${name}`,
  uuidText: (column) => `${column}::text`,
  createTempTable: (name, columns) => `CREATE TEMP TABLE ${name} (${columns}) ON COMMIT DROP`,

  async begin(db) {
    // Server-side memory for the big hash joins and sorts of this transaction only.
    await db.run(`SET LOCAL work_mem = '128MB'`);
    await db.run(`SET LOCAL maintenance_work_mem = '256MB'`);
  },

  async end() {
    // The temporary tables go at commit (ON COMMIT DROP).
  },

  /**
   * Copies the rows as they are and then adds the key (a sorted build, far faster than
   * keeping a key during the load); only when that finds a repeated key is the table
   * made again with the first row of each key (in file order).
   */
  async loadKeyed(db, spec: KeyedLoad, staged) {
    const { select, from } = loadQuery(spec, pgApplyDialect.stagingTable(spec.stage));
    let rows = staged;
    await db.run(`CREATE TEMP TABLE ${spec.table} ON COMMIT DROP AS SELECT ${select} ${from}`);
    if (!(await db.attempt(`ALTER TABLE ${spec.table} ADD PRIMARY KEY (${spec.key.join(', ')})`))) {
      const keys = keyExpressions(spec).join(', ');
      await db.run(`DROP TABLE ${spec.table}`);
      await db.run(`CREATE TEMP TABLE ${spec.table} ON COMMIT DROP AS SELECT DISTINCT ON (${keys}) ${select} ${from} ORDER BY ${keys}, s.ctid`);
      await db.run(`ALTER TABLE ${spec.table} ADD PRIMARY KEY (${spec.key.join(', ')})`);
      rows = await count(db, `SELECT count(*) AS n FROM ${spec.table}`);
    }
    // Temporary tables get no statistics otherwise, and the plans that follow need them.
    await db.run(`ANALYZE ${spec.table}`);
    return rows;
  },

  /** Joins by hashing, so only counts (a hash aggregate is several times faster than building a unique index). */
  async uniqueGid(db, table) {
    if ((await count(db, `SELECT count(*) AS n FROM (SELECT gid FROM ${table} GROUP BY gid HAVING count(*) > 1) x`)) === 0) return { count: 0, examples: [] };
    return db.deleteReturning(`DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${table} b WHERE b.gid = ${table}.gid AND b.id < ${table}.id) RETURNING gid AS x`);
  },

  /**
   * Foreign keys of the table, its secondary indexes, and its primary key and unique
   * constraints that no foreign key leans on (those stay: the table's rows may be
   * referenced meanwhile). Put back keys first; each foreign key is checked again as it is added.
   */
  async setAsideIndexes(db, table) {
    const constraints = await db.all<{ name: string; def: string; kind: string }>(
      `SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS def, c.contype AS kind FROM pg_constraint c WHERE c.conrelid = '${table}'::regclass
         AND (c.contype = 'f' OR (c.contype IN ('p', 'u') AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = c.conindid)))
         ORDER BY c.contype = 'f' DESC, c.conname`,
    );
    const indexes = await db.all<{ name: string; def: string }>(
      `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND tablename = '${table}'
         AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = '${table}'::regclass)`,
    );
    for (const c of constraints) await db.run(`ALTER TABLE ${table} DROP CONSTRAINT "${c.name}"`);
    for (const i of indexes) await db.run(`DROP INDEX "${i.name}"`);
    const add = (c: { name: string; def: string }) => `ALTER TABLE ${table} ADD CONSTRAINT "${c.name}" ${c.def}`;
    return [...indexes.map((i) => i.def), ...constraints.filter((c) => c.kind !== 'f').map(add), ...constraints.filter((c) => c.kind === 'f').map(add)];
  },

  async resetIdSequences(db, tables) {
    for (const table of tables) {
      await db.all(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT coalesce(max(id), 0) + 1 FROM ${table}), false) AS n`);
    }
  },
};

class PgBackend implements ImportBackend {
  readonly #q: Query;

  constructor(
    private readonly client: Client,
    private readonly copy: CopyStreams,
  ) {
    this.#q = (text, values) => client.query(text, values);
  }

  async #stagingTables(): Promise<string[]> {
    const r = await this.#q(`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'import\\_mb\\_%'`);
    return r.rows.map((row: { tablename: string }) => row.tablename);
  }

  async #dropAll(): Promise<void> {
    for (const t of await this.#stagingTables()) await this.#q(`DROP TABLE IF EXISTS ${t}`);
  }

  async lock(): Promise<void> {
    const r = await this.#q('SELECT pg_try_advisory_lock($1) AS ok', [PG_IMPORT_LOCK_KEY.toString()]);
    if (r.rows[0]?.ok !== true) throw new AppError('CONFLICT', 'another "sleeve import musicbrainz" is running on this database; wait for it to finish');
    await this.#q(`UPDATE import_run SET status = 'interrupted', finished_at = $1, message = 'the importing process ended without finishing' WHERE status = 'running'`, [Date.now()]);
  }

  async startRun(run: RunRecord): Promise<number> {
    const r = await this.#q(
      `INSERT INTO import_run (source, dir, dump_timestamp, replication_sequence, started_at, status, rows_read, rows_skipped) VALUES ($1, $2, $3, $4, $5, 'running', 0, 0) RETURNING id`,
      [run.source, run.dir, run.dumpTimestamp, run.replicationSequence, run.startedAt],
    );
    return Number(r.rows[0].id);
  }

  async finishRun(id: number, o: RunOutcome): Promise<void> {
    await this.#q(`UPDATE import_run SET status = $2, finished_at = $3, rows_read = $4, rows_skipped = $5, details = $6, message = $7 WHERE id = $1`, [
      id,
      o.status,
      o.finishedAt,
      o.rowsRead,
      o.rowsSkipped,
      JSON.stringify(o.details),
      o.message,
    ]);
  }

  async readStaging(): Promise<StagingState | undefined> {
    const present = new Set(await this.#stagingTables());
    const wanted = [`${PREFIX}meta`, `${PREFIX}progress`, ...DUMP_TABLES.map(stagingName)];
    if (!wanted.every((t) => present.has(t))) return undefined;
    const meta = await this.#q(`SELECT value FROM ${PREFIX}meta WHERE key = 'identity'`);
    if (meta.rows.length === 0) return undefined;
    const rows = await this.#q(`SELECT * FROM ${PREFIX}progress`);
    const files = new Map<string, FileProgress>();
    for (const r of rows.rows as Record<string, unknown>[]) {
      files.set(String(r.file), progressFromRow(r));
    }
    return { identity: String(meta.rows[0].value), files };
  }

  async createStaging(identity: string, files: { table: DumpTable; size: number; mtimeMs: number }[]): Promise<void> {
    const q = this.#q;
    await q('BEGIN');
    try {
      await this.#dropAll();
      await q(`CREATE UNLOGGED TABLE ${PREFIX}meta (key text PRIMARY KEY, value text NOT NULL)`);
      await q(
        `CREATE UNLOGGED TABLE ${PREFIX}progress (file text PRIMARY KEY, size bigint NOT NULL, mtime_ms bigint NOT NULL, bytes_done bigint NOT NULL, lines_done bigint NOT NULL, rows_staged bigint NOT NULL, rows_skipped bigint NOT NULL, done boolean NOT NULL, skipped text NOT NULL)`,
      );
      for (const table of DUMP_TABLES) {
        // No keys or indexes: rows go in as fast as COPY takes them; the apply step dedupes.
        await q(`CREATE UNLOGGED TABLE ${stagingName(table)} (${stagingColumns(table, 'bigint').join(', ')})`);
      }
      await q(`INSERT INTO ${PREFIX}meta (key, value) VALUES ('identity', $1)`, [identity]);
      for (const f of files) {
        await q(`INSERT INTO ${PREFIX}progress VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, progressRow(emptyProgress(f.table, f.size, f.mtimeMs)));
      }
      await q('COMMIT');
    } catch (err) {
      await q('ROLLBACK').catch(() => {});
      throw err;
    }
  }

  async resetFile(table: DumpTable, size: number, mtimeMs: number): Promise<void> {
    const q = this.#q;
    await q('BEGIN');
    await q(`TRUNCATE ${stagingName(table)}`);
    await q(`DELETE FROM ${PREFIX}progress WHERE file = $1`, [table.name]);
    await q(`INSERT INTO ${PREFIX}progress VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, progressRow(emptyProgress(table, size, mtimeMs)));
    await q('COMMIT');
  }

  async stager(table: DumpTable): Promise<FileStager> {
    return new PgStager(this.client, this.copy, table);
  }

  async coverArtEdits(): Promise<Int32Array> {
    const stream = this.client.query(this.copy.to(`COPY (SELECT edit FROM ${PREFIX}cover_art UNION SELECT edit FROM ${PREFIX}event_art ORDER BY 1) TO STDOUT`));
    const out = new Int32List();
    let carry = '';
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const text = carry + chunk.toString('latin1');
      const lines = text.split('\n');
      carry = lines.pop() ?? '';
      for (const line of lines) out.push(Number(line));
    }
    return out.values();
  }

  async apply(options: ApplyOptions): Promise<ApplyResult> {
    const q = this.#q;
    const staged: Record<string, number> = {};
    for (const r of (await q(`SELECT file, rows_staged FROM ${PREFIX}progress`)).rows as { file: string; rows_staged: number }[]) staged[r.file] = Number(r.rows_staged);
    // Statistics for the planner: the staging tables are new and autovacuum has not looked yet.
    for (const t of DUMP_TABLES) await q(`ANALYZE ${stagingName(t)}`);
    await q('BEGIN');
    try {
      const result = await applyStaging(pgRunner(q), pgApplyDialect, { ...options, staged });
      await this.finishRun(options.runId, options.outcome(result));
      await q('COMMIT');
      return result;
    } catch (err) {
      await q('ROLLBACK').catch(() => {});
      throw err;
    }
  }

  async dropStaging(): Promise<void> {
    await this.#dropAll();
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => {});
  }
}

/** Streams one file's rows into its staging table through COPY, one transaction per chunk. */
class PgStager implements FileStager {
  readonly #target: string;
  readonly #kept: number[];
  /** Whether each kept column is a timestamp (staged as epoch milliseconds). */
  readonly #stamp: boolean[];
  #inTx = false;
  #copy: ReturnType<CopyStreams['from']> | undefined;
  #copyError: Error | undefined;
  /** COPY text of rows not yet written. */
  #pending = '';
  /** File line of each row sent in this COPY, to name the line PostgreSQL may refuse. */
  #sentLines: number[] = [];

  constructor(
    private readonly client: Client,
    private readonly streams: CopyStreams,
    table: DumpTable,
  ) {
    this.#target = stagingName(table);
    this.#kept = keptIndexes(table);
    this.#stamp = this.#kept.map((i) => table.columns[i]?.type === 'timestamptz');
  }

  async #begin(): Promise<void> {
    if (this.#inTx) return;
    await this.client.query('BEGIN');
    this.#inTx = true;
  }

  #translate(err: unknown): Error {
    const e = err as { message?: string; where?: string };
    const m = /line (\d+)/.exec(e.where ?? '');
    const line = m === null ? undefined : this.#sentLines[Number(m[1]) - 1];
    return new StageRowError(line, `PostgreSQL refused the row: ${e.message ?? String(err)}`);
  }

  add(values: readonly (string | number | null)[], raw: readonly string[], line: number): void {
    // The raw fields are valid COPY text already (escapes and \N as in the file).
    const kept = this.#kept;
    let out = '';
    for (let k = 0; k < kept.length; k++) {
      const i = kept[k] as number;
      const field = this.#stamp[k] ? (values[i] === null ? '\\N' : String(values[i])) : (raw[i] as string);
      out += k === 0 ? field : `\t${field}`;
    }
    this.#pending += `${out}\n`;
    this.#sentLines.push(line);
  }

  async flush(): Promise<void> {
    if (this.#pending === '') return;
    await this.#begin();
    if (this.#copy === undefined) {
      this.#copy = this.client.query(this.streams.from(`COPY ${this.#target} FROM STDIN`));
      this.#copyError = undefined;
      this.#copy.on('error', (err: Error) => {
        this.#copyError = err;
      });
    }
    const piece = Buffer.from(this.#pending, 'utf8');
    this.#pending = '';
    if (this.#copyError !== undefined) throw this.#translate(this.#copyError);
    if (!this.#copy.write(piece)) {
      try {
        await once(this.#copy, 'drain');
      } catch (err) {
        throw this.#translate(err);
      }
    }
  }

  async commit(progress: FileProgress): Promise<void> {
    await this.flush();
    await this.#begin();
    if (this.#copy !== undefined) {
      const c = this.#copy;
      this.#copy = undefined;
      c.end();
      try {
        await finished(c);
      } catch (err) {
        throw this.#translate(err);
      }
      if (this.#copyError !== undefined) throw this.#translate(this.#copyError);
    }
    await this.client.query(
      `UPDATE ${PREFIX}progress SET size = $2, mtime_ms = $3, bytes_done = $4, lines_done = $5, rows_staged = $6, rows_skipped = $7, done = $8, skipped = $9 WHERE file = $1`,
      progressRow(progress),
    );
    await this.client.query('COMMIT');
    this.#inTx = false;
    this.#sentLines = [];
  }

  async abort(): Promise<void> {
    this.#pending = '';
    this.#sentLines = [];
    if (this.#copy !== undefined) {
      const c = this.#copy;
      this.#copy = undefined;
      c.destroy();
      await finished(c).catch(() => {});
    }
    if (this.#inTx) {
      this.#inTx = false;
      await this.client.query('ROLLBACK').catch(() => {});
    }
  }
}

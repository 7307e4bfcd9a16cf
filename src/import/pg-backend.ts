/*
 * PostgreSQL: the kept columns of every dump file are streamed through COPY FROM STDIN
 * (the fields as the file has them, timestamps as epoch milliseconds) into an UNLOGGED
 * staging table; each chunk is committed with the file's progress row. Progress and staging are both unlogged, so
 * a crash of the server empties them together and the import starts over, never
 * resuming from a progress row whose rows are gone.
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import { AppError } from '../shared/errors.js';
import { applyStaging, type SqlRunner } from './apply.js';
import { emptyProgress, progressFromRow, type ApplyOptions, type ApplyResult, type FileProgress, type FileStager, type ImportBackend, type Omission, type RunOutcome, type RunRecord, type StagingState } from './backend.js';
import { PG_IMPORT_LOCK_KEY } from './lock.js';
import { DUMP_TABLES, keptIndexes, sqlType, type DumpTable } from './tables.js';

const PREFIX = 'import_mb_';
const INT8_OID = 20;

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
  const { from: copyFrom, to: copyTo } = await import('pg-copy-streams');
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
  const q = (text: string, values?: unknown[]) => client.query(text, values);

  const runner: SqlRunner = {
    dialect: 'postgres',
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

  async function stagingTables(): Promise<string[]> {
    const r = await q(`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() AND tablename LIKE 'import\\_mb\\_%'`);
    return r.rows.map((row: { tablename: string }) => row.tablename);
  }

  async function dropAll(): Promise<void> {
    for (const t of await stagingTables()) await q(`DROP TABLE IF EXISTS ${t}`);
  }

  const backend: ImportBackend = {
    dialect: 'postgres',

    async lock() {
      const r = await q('SELECT pg_try_advisory_lock($1) AS ok', [PG_IMPORT_LOCK_KEY.toString()]);
      if (r.rows[0]?.ok !== true) throw new AppError('CONFLICT', 'another "sleeve import musicbrainz" is running on this database; wait for it to finish');
      await q(`UPDATE import_run SET status = 'interrupted', finished_at = $1, message = 'the importing process ended without finishing' WHERE status = 'running'`, [Date.now()]);
    },

    async startRun(run: RunRecord) {
      const r = await q(
        `INSERT INTO import_run (source, dir, dump_timestamp, replication_sequence, started_at, status, rows_read, rows_skipped) VALUES ($1, $2, $3, $4, $5, 'running', 0, 0) RETURNING id`,
        [run.source, run.dir, run.dumpTimestamp, run.replicationSequence, run.startedAt],
      );
      return Number(r.rows[0].id);
    },

    async finishRun(id: number, o: RunOutcome) {
      await q(`UPDATE import_run SET status = $2, finished_at = $3, rows_read = $4, rows_skipped = $5, details = $6, message = $7 WHERE id = $1`, [
        id,
        o.status,
        o.finishedAt,
        o.rowsRead,
        o.rowsSkipped,
        JSON.stringify(o.details),
        o.message,
      ]);
    },

    async readStaging(): Promise<StagingState | undefined> {
      const present = new Set(await stagingTables());
      const wanted = [`${PREFIX}meta`, `${PREFIX}progress`, ...DUMP_TABLES.map(stagingName)];
      if (!wanted.every((t) => present.has(t))) return undefined;
      const meta = await q(`SELECT value FROM ${PREFIX}meta WHERE key = 'identity'`);
      if (meta.rows.length === 0) return undefined;
      const rows = await q(`SELECT * FROM ${PREFIX}progress`);
      const files = new Map<string, FileProgress>();
      for (const r of rows.rows as Record<string, unknown>[]) {
        files.set(String(r.file), progressFromRow(r));
      }
      return { identity: String(meta.rows[0].value), files };
    },

    async createStaging(identity, files) {
      await q('BEGIN');
      try {
        await dropAll();
        await q(`CREATE UNLOGGED TABLE ${PREFIX}meta (key text PRIMARY KEY, value text NOT NULL)`);
        await q(
          `CREATE UNLOGGED TABLE ${PREFIX}progress (file text PRIMARY KEY, size bigint NOT NULL, mtime_ms bigint NOT NULL, bytes_done bigint NOT NULL, lines_done bigint NOT NULL, rows_staged bigint NOT NULL, rows_skipped bigint NOT NULL, done boolean NOT NULL, skipped text NOT NULL)`,
        );
        for (const table of DUMP_TABLES) {
          // No keys or indexes: rows go in as fast as COPY takes them; the apply step dedupes.
          const cols = keptIndexes(table).map((i) => {
            const c = table.columns[i] as (typeof table.columns)[number];
            return `${c.name} ${c.type === 'timestamptz' ? 'bigint' : sqlType(c.type)}`;
          });
          await q(`CREATE UNLOGGED TABLE ${stagingName(table)} (${cols.join(', ')})`);
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
    },

    async resetFile(table, size, mtimeMs) {
      await q('BEGIN');
      await q(`TRUNCATE ${stagingName(table)}`);
      await q(`DELETE FROM ${PREFIX}progress WHERE file = $1`, [table.name]);
      await q(`INSERT INTO ${PREFIX}progress VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, progressRow(emptyProgress(table, size, mtimeMs)));
      await q('COMMIT');
    },

    async stager(table): Promise<FileStager> {
      const target = stagingName(table);
      const kept = keptIndexes(table);
      const stamp = kept.map((i) => table.columns[i]?.type === 'timestamptz');
      let inTx = false;
      let copy: ReturnType<typeof copyFrom> | undefined;
      let copyError: Error | undefined;
      /** COPY text of rows not yet written. */
      let pending = '';
      /** File line of each row sent in this COPY, to name the line PostgreSQL may refuse. */
      let sentLines: number[] = [];

      const begin = async () => {
        if (inTx) return;
        await q('BEGIN');
        inTx = true;
      };
      const translate = (err: unknown): Error => {
        const e = err as { message?: string; where?: string };
        const m = /line (\d+)/.exec(e.where ?? '');
        const line = m === null ? undefined : sentLines[Number(m[1]) - 1];
        return new StageRowError(line, `PostgreSQL refused the row: ${e.message ?? String(err)}`);
      };
      const flush = async () => {
        if (pending === '') return;
        await begin();
        if (copy === undefined) {
          copy = client.query(copyFrom(`COPY ${target} FROM STDIN`));
          copyError = undefined;
          copy.on('error', (err: Error) => {
            copyError = err;
          });
        }
        const piece = Buffer.from(pending, 'utf8');
        pending = '';
        if (copyError !== undefined) throw translate(copyError);
        if (!copy.write(piece)) {
          try {
            await once(copy, 'drain');
          } catch (err) {
            throw translate(err);
          }
        }
      };
      return {
        add(values, raw, line) {
          // The raw fields are valid COPY text already (escapes and \N as in the file).
          let out = '';
          for (let k = 0; k < kept.length; k++) {
            const i = kept[k] as number;
            const field = stamp[k] ? (values[i] === null ? '\\N' : String(values[i])) : (raw[i] as string);
            out += k === 0 ? field : `\t${field}`;
          }
          pending += `${out}\n`;
          sentLines.push(line);
        },
        flush,
        async commit(progress) {
          await flush();
          await begin();
          if (copy !== undefined) {
            const c = copy;
            copy = undefined;
            c.end();
            try {
              await finished(c);
            } catch (err) {
              throw translate(err);
            }
            if (copyError !== undefined) throw translate(copyError);
          }
          await q(
            `UPDATE ${PREFIX}progress SET size = $2, mtime_ms = $3, bytes_done = $4, lines_done = $5, rows_staged = $6, rows_skipped = $7, done = $8, skipped = $9 WHERE file = $1`,
            progressRow(progress),
          );
          await q('COMMIT');
          inTx = false;
          sentLines = [];
        },
        async abort() {
          pending = '';
          sentLines = [];
          if (copy !== undefined) {
            const c = copy;
            copy = undefined;
            c.destroy();
            await finished(c).catch(() => {});
          }
          if (inTx) {
            inTx = false;
            await q('ROLLBACK').catch(() => {});
          }
        },
      };
    },

    async coverArtEdits() {
      const stream = client.query(copyTo(`COPY (SELECT DISTINCT edit FROM ${PREFIX}cover_art ORDER BY 1) TO STDOUT`));
      let out = new Int32Array(1 << 16);
      let n = 0;
      let carry = '';
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        const text = carry + chunk.toString('latin1');
        const lines = text.split('\n');
        carry = lines.pop() ?? '';
        for (const line of lines) {
          if (n === out.length) {
            const bigger = new Int32Array(out.length * 2);
            bigger.set(out);
            out = bigger;
          }
          out[n++] = Number(line);
        }
      }
      return out.subarray(0, n);
    },

    async apply(options: ApplyOptions): Promise<ApplyResult> {
      const staged: Record<string, number> = {};
      for (const r of (await q(`SELECT file, rows_staged FROM ${PREFIX}progress`)).rows as { file: string; rows_staged: number }[]) staged[r.file] = Number(r.rows_staged);
      // Statistics for the planner: the staging tables are new and autovacuum has not looked yet.
      for (const t of DUMP_TABLES) await q(`ANALYZE ${stagingName(t)}`);
      await q('BEGIN');
      try {
        const result = await applyStaging(runner, { ...options, staged });
        await backend.finishRun(options.runId, options.outcome(result));
        await q('COMMIT');
        return result;
      } catch (err) {
        await q('ROLLBACK').catch(() => {});
        throw err;
      }
    },

    async dropStaging() {
      await dropAll();
    },

    async close() {
      await client.end().catch(() => {});
    },
  };
  return backend;
}

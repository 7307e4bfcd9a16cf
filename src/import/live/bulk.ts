/*
 * The first whole read of the mirror's database into an empty catalogue (docs/mirror-database.md,
 * "The first read"): the mirror's tables streamed as COPY text (`COPY (SELECT …) TO STDOUT`, the
 * same text as the dump files), all in one REPEATABLE READ READ ONLY snapshot, straight into the
 * import's staging and applied by the import's own set-based step (import/musicbrainz.ts,
 * import/apply.ts). So the catalogue is, by construction, what `sleeve import musicbrainz` of the
 * same rows makes, at the speed of the import rather than release by release. Why:
 * docs/decisions.md, "The mirror's database: the first read is the import's".
 */
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import type { DatabaseConfig } from '../../config/load.js';
import type { Db } from '../../db/schema.js';
import type { Clock } from '../../shared/clock.js';
import { importDump, importLockHeld, openPgBackend, openSqliteBackend, DUMP_TABLES, type ImportReporter, type ImportSummary } from '../index.js';
import { countReleaseEvents, readSnapshot, RELEASE_EVENT_TABLES, type ReleaseEventRanges, type ReleaseEventTable, type SnapshotMark } from './changes.js';
import { readImageTypes, type SkipRow } from './read.js';
import { LIVE_TYPES, type LiveQuery } from './source.js';

export interface BulkLog {
  info(obj: object, msg: string): void;
}

export interface BulkReadOptions {
  url: string;
  /** The mirror as named in logs (no credentials). */
  name: string;
  database: DatabaseConfig;
  /** Whether the Event Art Archive's tables are read too. */
  eventArt: boolean;
  clock: Clock;
  log: BulkLog;
  skip: SkipRow;
  signal: AbortSignal;
}

export interface BulkRead {
  snap: SnapshotMark;
  events: Partial<Record<ReleaseEventTable, ReleaseEventRanges>>;
  /** The mirror's usable image types in the snapshot read (follow.ts, FollowState.imageTypes). */
  imageTypes: string[];
  withEdits: boolean;
  summary: ImportSummary;
}

/** Rows staged per committed chunk (as `sleeve import musicbrainz`'s default). */
const BATCH_ROWS = 50_000;

/**
 * Whether the whole read can be the import's: sleeve holds no release, group or event made here
 * (the import would move such a row out of the mirror's way, where the follower leaves it and
 * skips the mirror's row: docs/mirror-database.md, "Faults"). Images uploaded here may be there.
 */
export async function bulkReadable(db: Db): Promise<boolean> {
  for (const table of ['release', 'release_group', 'event'] as const) {
    if ((await db.selectFrom(table).select('id').where('imported', '=', 0).limit(1).executeTakeFirst()) !== undefined) return false;
  }
  return true;
}

/** Whether another process is reading the mirror whole now (it holds the import lock). */
export function bulkReadRunning(db: Db, database: DatabaseConfig): Promise<boolean> {
  return importLockHeld(database.kind === 'postgres' ? { dialect: 'postgres', db } : { dialect: 'sqlite', file: database.file });
}

/** The mirror's table a dump file is the COPY of. */
const mirrorTable = (file: string) => (file.includes('.') ? file : `musicbrainz.${file}`);

/** The SELECT whose COPY text is the dump file `file` (columns named, in the dump's order: a mirror with more columns reads the same). */
function selectFor(file: string, columns: readonly string[], eventArt: boolean): string {
  const cols = columns.map((c) => `"${c}"`).join(', ');
  if (file !== 'edit') return `SELECT ${cols} FROM ${mirrorTable(file)}`;
  // Only the add-edits of the images: the mirror's edit table is the biggest of all.
  const images = `SELECT edit FROM cover_art_archive.cover_art${eventArt ? ' UNION ALL SELECT edit FROM event_art_archive.event_art' : ''}`;
  return `SELECT ${cols} FROM musicbrainz.edit WHERE id IN (${images})`;
}

function reporter(log: BulkLog, name: string): ImportReporter {
  return {
    note: () => {},
    fileStart() {},
    fileProgress() {},
    fileDone: (file, rows, _skipped, ms) => log.info({ mirror: name, table: mirrorTable(file), rows, seconds: ms / 1000 }, "the mirror's table copied"),
    applyStart: () => log.info({ mirror: name }, "applying the mirror's rows to sleeve's catalogue (one transaction)"),
    applyStep() {},
    applyDone: (ms) => log.info({ mirror: name, seconds: ms / 1000 }, "the mirror's rows applied"),
    end() {},
  };
}

/**
 * Reads the mirror whole into sleeve's tables through the import; undefined (nothing changed)
 * when the mirror holds no releases yet. It runs on a thread of its own (bulk-thread.ts): the
 * import parses every row in JavaScript, and on SQLite its apply step holds the thread it runs
 * on for minutes at MusicBrainz's size, so the serving thread keeps answering meanwhile.
 */
export async function readWholeBulk(o: BulkReadOptions): Promise<BulkRead | undefined> {
  const read = await readOnThread(o);
  if (read !== undefined) noteSkipped(read.summary, o.skip);
  return read;
}

/** readWholeHere's options (the import's omissions are noted by readWholeBulk, from its summary). */
export type BulkThreadOptions = BulkReadOptions;

/** What bulk-thread.ts is given, as plain data. */
export interface BulkThreadInput {
  options: Omit<BulkThreadOptions, 'clock' | 'log' | 'signal' | 'skip'>;
  /** The caller's clock when the thread started: the thread's clock runs on from it. */
  startedAt: number;
}

/** What bulk-thread.ts sends back: log lines and rows skipped, then the read or the error. */
export type BulkThreadMessage =
  | { log: { obj: object; msg: string } }
  | { skip: { what: string; key: string } }
  | { done: BulkRead | undefined }
  | { error: { name: string; message: string; code?: string } };

/** The read on a thread of its own; `signal` stops it as it stops the import (between rows and steps). */
function readOnThread(o: BulkReadOptions): Promise<BulkRead | undefined> {
  const input: BulkThreadInput = { options: { url: o.url, name: o.name, database: o.database, eventArt: o.eventArt }, startedAt: o.clock.now() };
  const worker = new Worker(new URL('./bulk-thread.js', import.meta.url), { workerData: input });
  const abort = () => worker.postMessage('abort');
  o.signal.addEventListener('abort', abort, { once: true });
  if (o.signal.aborted) abort();
  return new Promise<BulkRead | undefined>((resolve, reject) => {
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      o.signal.removeEventListener('abort', abort);
      fn();
      void worker.terminate();
    };
    worker.on('message', (m: BulkThreadMessage) => {
      if ('log' in m) o.log.info(m.log.obj, m.log.msg);
      else if ('skip' in m) o.skip(m.skip.what, m.skip.key);
      else if ('done' in m) settle(() => resolve(m.done));
      else settle(() => reject(Object.assign(new Error(m.error.message), { name: m.error.name, code: m.error.code })));
    });
    worker.on('error', (err) => settle(() => reject(err)));
    worker.on('exit', (code) => settle(() => reject(new Error(`the thread reading the mirror whole stopped (exit code ${code})`))));
  });
}

/** readWholeBulk's work, on whatever thread calls it (bulk-thread.ts calls it on its own). */
export async function readWholeHere(o: BulkThreadOptions): Promise<BulkRead | undefined> {
  // A connection of its own, without the pool's statement timeout: a COPY lasts as long as the copy.
  const client = new pg.Client({ connectionString: o.url, application_name: 'sleeve', keepAlive: true, types: LIVE_TYPES });
  client.on('error', () => {});
  await client.connect();
  try {
    const q: LiveQuery = async <R>(text: string, values: unknown[] = []) => (await client.query({ text, values })).rows as R[];
    await q('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    // The text the dump files hold: timestamps in ISO form, in UTC.
    await q(`SET LOCAL statement_timeout = 0`);
    await q(`SET LOCAL timezone = 'UTC'`);
    await q(`SET LOCAL datestyle = 'ISO, YMD'`);
    const [any] = await q<{ any: boolean; edits: boolean }>(`SELECT EXISTS (SELECT 1 FROM musicbrainz.release) AS any, EXISTS (SELECT 1 FROM musicbrainz.edit) AS edits`);
    if (any?.any !== true) {
      await q('ROLLBACK');
      return undefined;
    }
    const withEdits = any.edits;
    const snap = await readSnapshot(q);
    const events: BulkRead['events'] = {};
    for (const table of RELEASE_EVENT_TABLES) events[table] = await countReleaseEvents(q, table);
    const imageTypes = [...(await readImageTypes(q, o.skip)).keys()];
    const tables = DUMP_TABLES.filter((t) => (t.events !== true || o.eventArt) && (t.onlyCoverArtEdits !== true || withEdits));
    const files = tables.map((table) => ({
      table,
      path: mirrorTable(table.file),
      size: 0,
      mtimeMs: 0,
      open: () => client.query(copyTo(`COPY (${selectFor(table.file, table.columns.map((c) => c.name), o.eventArt)}) TO STDOUT`)),
    }));
    const backend = o.database.kind === 'postgres' ? await openPgBackend(o.database.url) : await openSqliteBackend(o.database.file);
    let summary: ImportSummary;
    try {
      summary = await importDump(
        { backend, clock: o.clock, reporter: reporter(o.log, o.name), signal: o.signal },
        { dir: o.name, files, meta: {} },
        { dir: o.name, skipMalformed: true, restart: true, batchRows: BATCH_ROWS },
        'musicbrainz-database',
      );
    } finally {
      await backend.close();
    }
    await q('COMMIT');
    return { snap, events, imageTypes, withEdits, summary };
  } finally {
    await client.end().catch(() => {});
  }
}

/** The rows the import left out, logged once a kind (with how many and a few of them). */
function noteSkipped(summary: ImportSummary, skip: SkipRow): void {
  for (const [what, o] of Object.entries(summary.applied.omitted)) if (o.count > 0) skip(what, `${o.count} rows, e.g. ${o.examples.join('; ')}`);
  for (const r of summary.skipped_rows) skip(`${r.file}: ${r.reason}`, `${r.row} (${summary.rows_skipped} such rows in all)`);
}

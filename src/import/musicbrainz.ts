/*
 * `sleeve import musicbrainz DIR`: stream each dump file into staging (chunks committed
 * with the file's progress, so a killed import resumes), then apply staging to sleeve's
 * tables in one transaction and drop staging. Until that transaction commits, sleeve's
 * catalogue is exactly as it was.
 */
import { isUtf8 } from 'node:buffer';
import { invalidInput } from '../shared/errors.js';
import type { Clock } from '../shared/clock.js';
import { emptyProgress, type ApplyResult, type FileProgress, type ImportBackend, type SkippedRow } from './backend.js';
import { parseRow, RowError, showRow } from './copy-text.js';
import { dumpIdentity, openDumpDir, type DumpDir, type DumpFile } from './dump-dir.js';
import { LineTooLongError, readLineBatches } from './line-reader.js';
import { StageRowError } from './pg-backend.js';
import { DUMP_TABLES } from './tables.js';

/** Longest line accepted; the longest real rows are a few kilobytes. */
const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Skipped rows remembered per file (the count is exact). */
const SKIPPED_KEPT = 5;

export interface ImportReporter {
  note(message: string): void;
  fileStart(file: string, size: number, fromByte: number, fromLine: number): void;
  fileProgress(bytesDone: number, rowsThisRun: number): void;
  fileDone(file: string, rows: number, skipped: number, ms: number): void;
  applyStart(): void;
  applyStep(step: string): void;
  applyDone(ms: number): void;
  /** The import ended, whichever way. */
  end(): void;
}

export interface ImportDeps {
  backend: ImportBackend;
  clock: Clock;
  reporter: ImportReporter;
  /** Aborting stops the import at the next chunk boundary (or before the apply commits). */
  signal: AbortSignal;
  /** Each statement of the apply step with its duration in ms. */
  trace?: (sql: string, ms: number) => void;
}

export interface ImportOptions {
  dir: string;
  skipMalformed: boolean;
  /** Discard what an earlier run staged. */
  restart: boolean;
  /** Lines per committed chunk. */
  batchRows: number;
}

export interface FileSummary {
  file: string;
  /** Lines read in this run. */
  rows: number;
  /** Rows staged in all runs. */
  staged: number;
  /** Malformed rows skipped in all runs. */
  skipped: number;
  seconds: number;
  resumed_from_line?: number;
  resumed_from_byte?: number;
  already_staged?: true;
}

export interface ImportSummary {
  run: number;
  dir: string;
  dump: { timestamp: string | null; replication_sequence: string | null; schema_sequence: string | null };
  resumed: boolean;
  files: FileSummary[];
  rows_read: number;
  rows_skipped: number;
  /** The first few malformed rows skipped (--skip-malformed). */
  skipped_rows: SkippedRow[];
  applied: ApplyResult;
  /** Reading and staging the files, in this run. */
  staging_seconds: number;
  /** The one transaction that applied staging to sleeve's tables. */
  apply_seconds: number;
  seconds: number;
  rows_per_second: number;
}

/** The import stopped on a signal; what was staged is kept for the next run. */
export class ImportInterrupted extends Error {
  constructor(readonly where: string) {
    super(`import stopped ${where}`);
    this.name = 'ImportInterrupted';
  }
}

function interrupted(where: string): ImportInterrupted {
  return new ImportInterrupted(where);
}

/** Whether `id` is in the sorted array. */
function contains(sorted: Int32Array, id: number): boolean {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = sorted[mid] as number;
    if (v === id) return true;
    if (v < id) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

function malformedMessage(dump: DumpDir, file: string, line: number, reason: string, row: string | undefined): string {
  const lines = [`mbdump/${file} line ${line}: ${reason}`];
  if (row !== undefined) lines.push(`  row: ${row}`);
  if (line === 1 && /columns? where/.test(reason)) {
    lines.push(`  (is the dump from another MusicBrainz schema? its SCHEMA_SEQUENCE is ${dump.meta.SCHEMA_SEQUENCE ?? 'unknown'})`);
  }
  lines.push(
    "Nothing was changed in sleeve's catalogue. The rows before this line stay staged: after fixing the file, run the import again (a changed file is read again from its start), or add --skip-malformed to skip such rows and go on.",
  );
  return lines.join('\n');
}

export async function importMusicBrainz(deps: ImportDeps, options: ImportOptions): Promise<ImportSummary> {
  return importDump(deps, await openDumpDir(options.dir), options, 'musicbrainz');
}

/** Imports `dump` (files, or streams of COPY text: DumpFile.open); `source` is what import_run records. */
export async function importDump(deps: ImportDeps, dump: DumpDir, options: ImportOptions, source: string): Promise<ImportSummary> {
  const { backend, clock } = deps;
  const started = clock.now();
  await backend.lock();
  const runId = await backend.startRun({
    source,
    dir: dump.dir,
    dumpTimestamp: dump.meta.TIMESTAMP ?? null,
    replicationSequence: /^\d+$/.test(dump.meta.REPLICATION_SEQUENCE ?? '') ? Number(dump.meta.REPLICATION_SEQUENCE) : null,
    startedAt: started,
  });
  const tally: Tally = { files: [], rowsRead: 0 };
  try {
    const progress = await prepareStaging(deps, dump, options);
    const resumed = await stageFiles(deps, dump, options, progress, tally);
    return await applyStaged(deps, dump, { runId, started, resumed, progress, tally });
  } catch (err) {
    throw await recordFailure(deps, runId, tally, err);
  }
}

/** What the files of this run gave so far: written into import_run however the run ends. */
interface Tally {
  files: FileSummary[];
  rowsRead: number;
}

function rowsSkipped(tally: Tally): number {
  return tally.files.reduce((n, s) => n + s.skipped, 0);
}

/** Stages every file not staged yet; resolves to whether an earlier run had staged some. */
async function stageFiles(deps: ImportDeps, dump: DumpDir, options: ImportOptions, progress: Map<string, FileProgress>, tally: Tally): Promise<boolean> {
  let resumed = false;
  for (const f of dump.files) {
    const p = progress.get(f.table.name) as FileProgress;
    if (p.done) {
      resumed = true;
      tally.files.push({ file: f.table.file, rows: 0, staged: p.rowsStaged, skipped: p.rowsSkipped, seconds: 0, already_staged: true });
      deps.reporter.note(`mbdump/${f.table.file}: already staged (${p.rowsStaged} rows)`);
      continue;
    }
    if (p.linesDone > 0) resumed = true;
    const s = await stageFile(
      deps,
      dump,
      f,
      p,
      options,
      (n) => {
        tally.rowsRead += n;
      },
      progress,
    );
    tally.files.push(s);
    if (deps.signal.aborted) throw interrupted(`after mbdump/${f.table.file}`);
  }
  return resumed;
}

/** Applies the staged dump in one transaction (the run recorded in it), drops staging and sums up. */
async function applyStaged(
  deps: ImportDeps,
  dump: DumpDir,
  run: { runId: number; started: number; resumed: boolean; progress: Map<string, FileProgress>; tally: Tally },
): Promise<ImportSummary> {
  const { backend, clock, reporter } = deps;
  const { runId, started, progress, tally } = run;
  // A truncated or half-extracted dump must not empty the mirror.
  if ((progress.get('release')?.rowsStaged ?? 0) === 0) {
    throw invalidInput(`mbdump/release holds no rows; refusing to apply a dump without releases (it would remove every imported release)`);
  }
  reporter.applyStart();
  const t0 = clock.now();
  const skipped = rowsSkipped(tally);
  const applied = await backend.apply({
    withEdits: dump.files.some((f) => f.table.onlyCoverArtEdits === true),
    withEvents: dump.files.some((f) => f.table.events === true),
    now: clock.now(),
    signal: deps.signal,
    runId,
    onStep: (step) => reporter.applyStep(step),
    ...(deps.trace === undefined ? {} : { trace: deps.trace }),
    outcome: (result) => ({
      status: 'succeeded',
      finishedAt: clock.now(),
      rowsRead: tally.rowsRead,
      rowsSkipped: skipped,
      details: { files: tally.files, applied: result },
      message: null,
    }),
  });
  const applyMs = clock.now() - t0;
  reporter.applyDone(applyMs);
  await backend.dropStaging();

  const seconds = (clock.now() - started) / 1000;
  return {
    run: runId,
    dir: dump.dir,
    dump: { timestamp: dump.meta.TIMESTAMP ?? null, replication_sequence: dump.meta.REPLICATION_SEQUENCE ?? null, schema_sequence: dump.meta.SCHEMA_SEQUENCE ?? null },
    resumed: run.resumed,
    files: tally.files,
    rows_read: tally.rowsRead,
    rows_skipped: skipped,
    skipped_rows: [...progress.values()].flatMap((p) => p.skipped).slice(0, 10),
    applied,
    staging_seconds: (t0 - started) / 1000,
    apply_seconds: applyMs / 1000,
    seconds,
    rows_per_second: seconds > 0 ? Math.round(tally.rowsRead / seconds) : tally.rowsRead,
  };
}

/** Records a run that failed or was interrupted; resolves to the error to throw. */
async function recordFailure(deps: ImportDeps, runId: number, tally: Tally, err: unknown): Promise<unknown> {
  let e = err;
  if ((err as Error)?.name === 'AbortError') e = interrupted('before the changes were applied (all files are staged)');
  const status = e instanceof ImportInterrupted ? 'interrupted' : 'failed';
  await deps.backend
    .finishRun(runId, {
      status,
      finishedAt: deps.clock.now(),
      rowsRead: tally.rowsRead,
      rowsSkipped: rowsSkipped(tally),
      details: { files: tally.files },
      message: (e as Error)?.message ?? String(e),
    })
    .catch(() => {});
  return e;
}

/**
 * Compares what is staged with the dump: the same dump resumes (files that changed
 * since are read again from their start), another dump or --restart starts over.
 */
async function prepareStaging(deps: ImportDeps, dump: DumpDir, options: ImportOptions): Promise<Map<string, FileProgress>> {
  const { backend, reporter } = deps;
  const identity = dumpIdentity(dump);
  let state = await backend.readStaging();
  if (state !== undefined && state.identity !== identity) {
    reporter.note(`the rows staged by an earlier run are from another dump or version of sleeve (${state.identity}); starting over`);
    state = undefined;
  } else if (state !== undefined && options.restart) {
    reporter.note('--restart: discarding the rows staged by an earlier run');
    state = undefined;
  }
  if (state === undefined) {
    await backend.createStaging(
      identity,
      dump.files.map((f) => ({ table: f.table, size: f.size, mtimeMs: f.mtimeMs })),
    );
    return new Map(dump.files.map((f) => [f.table.name, emptyProgress(f.table, f.size, f.mtimeMs)]));
  }

  const progress = new Map<string, FileProgress>();
  let resetImages = false;
  for (const table of DUMP_TABLES) {
    const f = dump.files.find((x) => x.table === table);
    const p = state.files.get(table.name);
    const size = f?.size ?? 0;
    const mtimeMs = f?.mtimeMs ?? 0;
    const changed = p === undefined || p.size !== size || p.mtimeMs !== mtimeMs || (table.onlyCoverArtEdits === true && resetImages);
    if (changed) {
      if (f !== undefined && p !== undefined && p.linesDone > 0) reporter.note(`mbdump/${table.file} changed since it was staged; reading it again from its start`);
      await backend.resetFile(table, size, mtimeMs);
      if (table.name === 'cover_art' || table.name === 'event_art') resetImages = true;
      progress.set(table.name, emptyProgress(table, size, mtimeMs));
    } else progress.set(table.name, p);
  }
  return progress;
}

async function stageFile(
  deps: ImportDeps,
  dump: DumpDir,
  f: DumpFile,
  start: FileProgress,
  options: ImportOptions,
  countRows: (n: number) => void,
  progressOut: Map<string, FileProgress>,
): Promise<FileSummary> {
  const { backend, reporter, signal, clock } = deps;
  const table = f.table;
  const t0 = clock.now();
  const p: FileProgress = { ...start, skipped: [...start.skipped] };
  const summary: FileSummary = { file: table.file, rows: 0, staged: 0, skipped: 0, seconds: 0 };
  if (start.linesDone > 0) {
    summary.resumed_from_line = start.linesDone + 1;
    summary.resumed_from_byte = start.bytesDone;
    reporter.note(`mbdump/${table.file}: resuming at line ${start.linesDone + 1} (byte ${start.bytesDone} of ${f.size})`);
  }
  reporter.fileStart(table.file, f.size, start.bytesDone, start.linesDone + 1);

  const edits = table.onlyCoverArtEdits === true ? await backend.coverArtEdits() : undefined;
  const stager = await backend.stager(table);
  const values: (string | number | null)[] = new Array(table.columns.length);
  let inChunk = 0;
  let rowsThisRun = 0;
  let ended = false;
  let lastReport = 0;

  const bad = (line: number, reason: string, text: string | undefined) => {
    const row = text === undefined ? undefined : showRow(text);
    if (!options.skipMalformed) throw invalidInput(malformedMessage(dump, table.file, line, reason, row));
    p.rowsSkipped++;
    if (p.skipped.length < SKIPPED_KEPT) p.skipped.push({ file: `mbdump/${table.file}`, line, reason, row: row ?? '' });
  };

  try {
    for await (const batch of readLineBatches(f.open?.() ?? f.path, start.bytesDone, MAX_LINE_BYTES)) {
      const { buf, starts, ends, base } = batch;
      const count = starts.length;
      const allUtf8 = isUtf8(buf.subarray(starts[0], ends[count - 1]));
      for (let i = 0; i < count; i++) {
        const s = starts[i] as number;
        const e = ends[i] as number;
        const terminated = batch.terminated || i < count - 1;
        const lineNo = p.linesDone + 1;
        if (ended) {
          if (e > s) bad(lineNo, 'data after the end-of-data marker \\.', buf.toString('utf8', s, e));
        } else if (e - s === 2 && buf[s] === 92 && buf[s + 1] === 46) {
          // `\.` alone: PostgreSQL's end-of-data marker.
          ended = true;
        } else if (!allUtf8 && !isUtf8(buf.subarray(s, e))) {
          bad(lineNo, 'not valid UTF-8', buf.toString('utf8', s, e));
        } else {
          const text = buf.toString('utf8', s, e);
          let raw: string[] | undefined;
          let reason: string | undefined;
          try {
            raw = parseRow(text, table.columns, values);
          } catch (err) {
            if (!(err instanceof RowError)) throw err;
            reason = err.message;
          }
          if (raw === undefined) bad(lineNo, reason ?? 'malformed', text);
          else if (edits === undefined || contains(edits, values[0] as number)) {
            stager.add(values, raw, lineNo);
            p.rowsStaged++;
          }
        }
        p.linesDone = lineNo;
        p.bytesDone = base + e + (terminated ? 1 : 0);
        rowsThisRun++;
        if (++inChunk >= options.batchRows) {
          await stager.commit({ ...p, skipped: [...p.skipped] });
          inChunk = 0;
          if (signal.aborted) throw interrupted(`at mbdump/${table.file} line ${p.linesDone + 1}`);
        }
      }
      await stager.flush();
      const now = clock.now();
      if (now - lastReport >= 100) {
        lastReport = now;
        reporter.fileProgress(p.bytesDone, rowsThisRun);
      }
    }
    p.done = true;
    await stager.commit({ ...p, skipped: [...p.skipped] });
  } catch (err) {
    await stager.abort();
    countRows(rowsThisRun - inChunk);
    throw stagingError(dump, f, p, err);
  }
  countRows(rowsThisRun);
  summary.rows = rowsThisRun;
  summary.staged = p.rowsStaged;
  summary.skipped = p.rowsSkipped;
  summary.seconds = (clock.now() - t0) / 1000;
  reporter.fileProgress(p.bytesDone, rowsThisRun);
  reporter.fileDone(table.file, rowsThisRun, p.rowsSkipped, clock.now() - t0);
  progressOut.set(table.name, p);
  return summary;
}

/** A line too long or a row the database refused, as the operator's error; other errors as they are. */
function stagingError(dump: DumpDir, f: DumpFile, p: FileProgress, err: unknown): unknown {
  if (err instanceof LineTooLongError) {
    return invalidInput(malformedMessage(dump, f.table.file, p.linesDone + 1, `a line longer than ${err.limit} bytes (is this a MusicBrainz dump file?)`, undefined));
  }
  if (err instanceof StageRowError) {
    return invalidInput(malformedMessage(dump, f.table.file, err.line ?? p.linesDone, err.message, undefined));
  }
  return err;
}

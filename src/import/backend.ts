/*
 * What the import needs of a database, implemented once for PostgreSQL (COPY into
 * UNLOGGED staging tables) and once for SQLite (prepared inserts into a staging file).
 */
import type { DumpTable } from './tables.js';

/** A row left out with --skip-malformed, as shown to the operator. */
export interface SkippedRow {
  file: string;
  line: number;
  reason: string;
  row: string;
}

/** How far one file has been staged; committed together with its rows. */
export interface FileProgress {
  file: string;
  size: number;
  mtimeMs: number;
  /** Offset just past the last line staged: where a resumed import starts reading. */
  bytesDone: number;
  linesDone: number;
  rowsStaged: number;
  rowsSkipped: number;
  done: boolean;
  /** The first few rows skipped in this file. */
  skipped: SkippedRow[];
}

/** A row of a staging progress table (either database) as FileProgress. */
export function progressFromRow(r: Record<string, unknown>): FileProgress {
  return {
    file: String(r.file),
    size: Number(r.size),
    mtimeMs: Number(r.mtime_ms),
    bytesDone: Number(r.bytes_done),
    linesDone: Number(r.lines_done),
    rowsStaged: Number(r.rows_staged),
    rowsSkipped: Number(r.rows_skipped),
    // PostgreSQL answers a boolean, SQLite 0 or 1.
    done: r.done === true || Number(r.done) === 1,
    skipped: JSON.parse(String(r.skipped)) as SkippedRow[],
  };
}

export interface StagingState {
  /** dumpIdentity() of the dump being staged. */
  identity: string;
  /** The --skip-malformed choice and the like do not matter here; only what was read. */
  files: Map<string, FileProgress>;
}

/** Receives the valid rows of one file, chunk by chunk. */
export interface FileStager {
  /**
   * One valid row: its converted values and its raw (still escaped) fields, all
   * columns, and its line number in the file. Only the table's kept columns are
   * staged; timestamps as epoch milliseconds.
   */
  add(values: readonly (string | number | null)[], raw: readonly string[], line: number): void;
  /** Hands rows added so far to the database (PostgreSQL streams them into COPY); keeps memory bounded. */
  flush(): Promise<void>;
  /** Ends the chunk: its rows and `progress` are committed together. */
  commit(progress: FileProgress): Promise<void>;
  /** Drops the uncommitted chunk. */
  abort(): Promise<void>;
}

/** A kind of row the apply step left out, with how many and a few examples. */
export interface Omission {
  count: number;
  examples: string[];
}

export interface EntityCounts {
  added: number;
  changed: number;
  removed: number;
  /** Local rows an import would have removed, kept because images uploaded to sleeve hang on them. */
  keptLocal?: number;
  /** Local rows renumbered or taken over because the dump needed their id or has their MBID. */
  moved?: number;
}

export interface ApplyResult {
  release_group: EntityCounts;
  release: EntityCounts;
  cover_art: EntityCounts;
  cover_art_type: EntityCounts;
  release_gid_redirect: EntityCounts;
  release_group_gid_redirect: EntityCounts;
  release_group_cover_art: EntityCounts;
  art_type: EntityCounts;
  image_type: EntityCounts;
  /** Rows of the dump not applied because what they refer to is missing, or they repeat a key. */
  omitted: Record<string, Omission>;
  /** How `approved` was decided: from the edit table, or from edits_pending when it is absent. */
  approvedFrom: 'edit' | 'edits_pending';
}

export interface RunRecord {
  source: string;
  dir: string;
  dumpTimestamp: string | null;
  replicationSequence: number | null;
  startedAt: number;
}

export interface RunOutcome {
  status: 'succeeded' | 'failed' | 'interrupted';
  finishedAt: number;
  rowsRead: number;
  rowsSkipped: number;
  /** JSON with the per-file counts and the apply result. */
  details: unknown;
  message: string | null;
}

export interface ApplyOptions {
  /** Whether the edit table was staged. */
  withEdits: boolean;
  now: number;
  /** Checked between statements: a set signal rolls the apply back. */
  signal: AbortSignal;
  /** Written in the same transaction as the catalogue changes. */
  runId: number;
  outcome: (result: ApplyResult) => RunOutcome;
  onStep?: (step: string) => void;
  /** Each statement of the apply step with its duration in ms (tuning). */
  trace?: (sql: string, ms: number) => void;
}

export interface ImportBackend {
  readonly dialect: 'sqlite' | 'postgres';
  /** Takes the import lock (one import at a time per database) and marks runs left 'running' by a dead process as interrupted. */
  lock(): Promise<void>;
  startRun(run: RunRecord): Promise<number>;
  finishRun(id: number, outcome: RunOutcome): Promise<void>;
  /** The staging left by an earlier run, or undefined when there is none. */
  readStaging(): Promise<StagingState | undefined>;
  /** Creates empty staging for a dump, discarding any other. */
  createStaging(identity: string, files: { table: DumpTable; size: number; mtimeMs: number }[]): Promise<void>;
  /** Empties one file's staged rows and progress (the file changed since). */
  resetFile(table: DumpTable, size: number, mtimeMs: number): Promise<void>;
  stager(table: DumpTable): Promise<FileStager>;
  /** The distinct edit ids of the staged images, ascending. */
  coverArtEdits(): Promise<Int32Array>;
  apply(options: ApplyOptions): Promise<ApplyResult>;
  dropStaging(): Promise<void>;
  close(): Promise<void>;
}

export function emptyProgress(table: DumpTable, size: number, mtimeMs: number): FileProgress {
  return { file: table.name, size, mtimeMs, bytesDone: 0, linesDone: 0, rowsStaged: 0, rowsSkipped: 0, done: false, skipped: [] };
}

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
  /** The Event Art Archive's rows: only when the dump has its tables (docs/import.md, "Events"). */
  event?: EntityCounts;
  event_art?: EntityCounts;
  event_art_type?: EntityCounts;
  event_gid_redirect?: EntityCounts;
  event_art_kind?: EntityCounts;
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
  /** Whether the Event Art Archive's tables were staged: without them, events are left as they are. */
  withEvents: boolean;
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

/** The statements of the apply step, on either database. */
export interface SqlRunner {
  /** Runs a statement; resolves to the number of rows it changed. */
  run(sql: string): Promise<number>;
  /** A query with a small result. */
  all<T>(sql: string): Promise<T[]>;
  /** Runs `DELETE … RETURNING {label} AS x`; resolves to how many rows went, with the first three labels. */
  deleteReturning(sql: string): Promise<Omission>;
  /**
   * Runs a statement that may break a unique constraint; resolves to false when it
   * did (and nothing of it stays), true when it succeeded. Other errors throw.
   */
  attempt(sql: string): Promise<boolean>;
}

/** A staged dump table to be loaded, cleaned, into a keyed temporary table. */
export interface KeyedLoad {
  table: string;
  /** The staged dump table (its name in tables.ts), read as `s`. */
  stage: string;
  /** Output columns: name, SQLite declared type, expression over `s` (and joined tables). */
  columns: [string, string, string][];
  /** Joins after `FROM {stage} s`. */
  joins?: string;
  key: string[];
  /** How a repeated key is shown in the summary (an expression over `s`). */
  label: string;
}

/** The key columns of a load as expressions over `s`. */
export function keyExpressions(spec: KeyedLoad): string[] {
  return spec.key.map((k) => spec.columns.find(([name]) => name === k)?.[2] ?? k);
}

/** The select list and FROM clause that read a load's rows from its staged table. */
export function loadQuery(spec: KeyedLoad, stagingTable: string): { select: string; from: string } {
  return {
    select: spec.columns.map(([name, , expr]) => `${expr} AS ${name}`).join(', '),
    from: `FROM ${stagingTable} s ${spec.joins ?? ''}`,
  };
}

/**
 * What differs between the databases in the apply step (apply.ts), implemented by each
 * backend. Every statement goes through the `db` given, so a trace sees them all.
 */
export interface ApplyDialect {
  /** The name under which a dump table is staged. */
  stagingTable(name: string): string;
  /** A staged MBID column as text. */
  uuidText(column: string): string;
  /** A temporary table that lasts until the apply step ends. */
  createTempTable(name: string, columns: string): string;
  /** Before the first step (session settings, temporary tables left over). */
  begin(db: SqlRunner): Promise<void>;
  /** After the last step, in the same transaction. */
  end(db: SqlRunner): Promise<void>;
  /**
   * Creates the keyed temporary table of `spec` from its staged rows, the first row of a
   * repeated key kept (in file order); resolves to how many rows it holds.
   */
  loadKeyed(db: SqlRunner, spec: KeyedLoad, staged: number): Promise<number>;
  /** Makes gid unique in a loaded table: when the dump repeats a gid, the row with the lowest id keeps it. */
  uniqueGid(db: SqlRunner, table: string): Promise<Omission>;
  /**
   * Drops what makes a bulk load of `table` slow (secondary indexes and the like);
   * resolves to the statements that put them back.
   */
  setAsideIndexes(db: SqlRunner, table: string): Promise<string[]>;
  /** Moves the id counters of tables filled with explicit ids past their largest id. */
  resetIdSequences(db: SqlRunner, tables: string[]): Promise<void>;
}

export interface ImportBackend {
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
  /** The distinct edit ids of the staged images (cover art and event art), ascending. */
  coverArtEdits(): Promise<Int32Array>;
  apply(options: ApplyOptions): Promise<ApplyResult>;
  dropStaging(): Promise<void>;
  close(): Promise<void>;
}

export function emptyProgress(table: DumpTable, size: number, mtimeMs: number): FileProgress {
  return { file: table.name, size, mtimeMs, bytesDone: 0, linesDone: 0, rowsStaged: 0, rowsSkipped: 0, done: false, skipped: [] };
}

/** A growing list of 32-bit integers (the staged images' edit ids: millions of them). */
export class Int32List {
  #values = new Int32Array(1 << 16);
  #length = 0;

  push(value: number): void {
    if (this.#length === this.#values.length) {
      const bigger = new Int32Array(this.#values.length * 2);
      bigger.set(this.#values);
      this.#values = bigger;
    }
    this.#values[this.#length++] = value;
  }

  values(): Int32Array {
    return this.#values.subarray(0, this.#length);
  }
}

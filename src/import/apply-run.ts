/*
 * One apply step under way (apply.ts): its statements, its input, the result it builds,
 * and the helpers its steps share.
 */
import { performance } from 'node:perf_hooks';
import { keyExpressions, type ApplyDialect, type ApplyOptions, type ApplyResult, type EntityCounts, type KeyedLoad, type Omission, type SqlRunner } from './backend.js';

export interface ApplyInput extends Omit<ApplyOptions, 'runId' | 'outcome'> {
  /** Rows staged per dump table name (for the duplicate counts). */
  staged: Record<string, number>;
}

/** Reports each statement with its duration (for tuning). */
function traced(db: SqlRunner, trace: (sql: string, ms: number) => void): SqlRunner {
  const time = async <T>(sql: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      trace(sql, performance.now() - t0);
    }
  };
  return {
    run: (sql) => time(sql, () => db.run(sql)),
    all: (sql) => time(sql, () => db.all(sql)),
    deleteReturning: (sql) => time(sql, () => db.deleteReturning(sql)),
    attempt: (sql) => time(sql, () => db.attempt(sql)),
  };
}

class Interrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'AbortError';
  }
}

function counts(): EntityCounts {
  return { added: 0, changed: 0, removed: 0 };
}

function emptyResult(withEdits: boolean, withEvents: boolean): ApplyResult {
  const events = withEvents ? { event: counts(), event_art: counts(), event_art_type: counts(), event_gid_redirect: counts(), event_art_kind: counts() } : {};
  return {
    release_group: counts(),
    release: counts(),
    cover_art: counts(),
    cover_art_type: counts(),
    release_gid_redirect: counts(),
    release_group_gid_redirect: counts(),
    release_group_cover_art: counts(),
    art_type: counts(),
    image_type: counts(),
    ...events,
    omitted: {},
    approvedFrom: withEdits ? 'edit' : 'edits_pending',
  };
}

/** One apply step under way: its statements, its input and the result it builds. */
export class ApplyRun {
  readonly db: SqlRunner;
  readonly result: ApplyResult;

  constructor(
    raw: SqlRunner,
    readonly dialect: ApplyDialect,
    readonly input: ApplyInput,
  ) {
    this.db = input.trace === undefined ? raw : traced(raw, input.trace);
    this.result = emptyResult(input.withEdits, input.withEvents);
  }

  /** Runs one named step, unless the import was interrupted meanwhile. */
  async step<T>(name: string, fn: () => Promise<T>): Promise<T> {
    // A turn of the event loop, so a signal is seen even while SQLite works synchronously.
    await new Promise((resolve) => setImmediate(resolve));
    if (this.input.signal.aborted) throw new Interrupted();
    this.input.onStep?.(name);
    return fn();
  }

  /** Records rows left out, when there are any. */
  omit(what: string, o: Omission): void {
    if (o.count > 0) this.result.omitted[what] = o;
  }

  /** The number a `SELECT … AS n` query answers. */
  async number(sql: string): Promise<number> {
    const rows = await this.db.all<{ n: number | string }>(sql);
    return Number(rows[0]?.n ?? 0);
  }

  /** Whether `table` has a row matching `where`. */
  async exists(table: string, where: string): Promise<boolean> {
    return (await this.number(`SELECT count(*) AS n FROM (SELECT 1 FROM ${table} WHERE ${where} LIMIT 1) x`)) > 0;
  }

  /** The staged dump table `name`. */
  staged(name: string): string {
    return this.dialect.stagingTable(name);
  }

  /** A staged image's `approved` (cover art or event art, read as `s`). */
  approvedExpression(): string {
    // approved = the add-edit is closed (as the archives' index_listing views decide); without the
    // edit table, no edit is pending on the image (docs/decisions.md). An uncorrelated
    // IN: both databases build its set once (the staged edits have no index).
    return this.input.withEdits
      ? `CASE WHEN s.edit IN (SELECT id FROM ${this.staged('edit')} WHERE close_time IS NOT NULL) THEN 1 ELSE 0 END`
      : 'CASE WHEN s.edits_pending = 0 THEN 1 ELSE 0 END';
  }

  /** Loads a staged table into a keyed temporary table; repeated keys are counted as omitted. */
  async load(spec: KeyedLoad): Promise<void> {
    const staged = this.input.staged[spec.stage] ?? 0;
    const rows = await this.dialect.loadKeyed(this.db, spec, staged);
    const dups = staged - rows;
    if (dups > 0) {
      const ex = await this.db.all<{ k: unknown }>(`SELECT ${spec.label} AS k FROM ${this.staged(spec.stage)} s GROUP BY ${keyExpressions(spec).join(', ')} HAVING count(*) > 1 LIMIT 3`);
      this.omit(`${spec.stage}: repeated key (first row kept)`, { count: dups, examples: ex.map((r) => String(r.k)) });
    }
  }
}

import type { Db } from '../db/schema.js';
import { formatLabels, type Exposition } from './exposition.js';

/** Outcomes of a finished run of `sleeve import musicbrainz` (import_run.status). */
const IMPORT_RESULTS = ['succeeded', 'failed', 'interrupted'] as const;

/** What the metrics report of `sleeve import musicbrainz` runs (made by CLI processes, read from import_run). */
export interface ImportSummary {
  /** Finished runs, by outcome. */
  runs: Record<(typeof IMPORT_RESULTS)[number], number>;
  /**
   * Whether an import is running now: its lock is held (a killed import holds none). Without
   * a way to look at the lock, whether a run is recorded as running, which a killed import
   * stays until the next one starts (and marks it interrupted).
   */
  running: boolean;
  /** When the last successful run finished (epoch ms). */
  lastSuccessAt: number | undefined;
  /** Rows the last successful run read from the dump. */
  lastRows: number | undefined;
  /** How long the last finished run took (ms), whatever its outcome. */
  lastDurationMs: number | undefined;
}

/** Reads the summary of import runs from import_run (a handful of rows; the last ones by index). */
export async function readImportSummary(db: Db, lockHeld?: () => Promise<boolean>): Promise<ImportSummary> {
  const byStatus = await db
    .selectFrom('import_run')
    .select((eb) => ['status', eb.fn.countAll().as('n')])
    .groupBy('status')
    .execute();
  const count = (status: string): number => Number(byStatus.find((r) => r.status === status)?.n ?? 0);
  const lastSuccess = await db
    .selectFrom('import_run')
    .select(['finished_at', 'rows_read'])
    .where('status', '=', 'succeeded')
    .orderBy('started_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const lastFinished = await db
    .selectFrom('import_run')
    .select(['started_at', 'finished_at'])
    .where('status', '!=', 'running')
    .where('finished_at', 'is not', null)
    .orderBy('started_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return {
    runs: { succeeded: count('succeeded'), failed: count('failed'), interrupted: count('interrupted') },
    running: lockHeld === undefined ? count('running') > 0 : await lockHeld(),
    lastSuccessAt: lastSuccess?.finished_at === null || lastSuccess === undefined ? undefined : Number(lastSuccess.finished_at),
    lastRows: lastSuccess === undefined ? undefined : Number(lastSuccess.rows_read),
    lastDurationMs:
      lastFinished === undefined || lastFinished.finished_at === null ? undefined : Number(lastFinished.finished_at) - Number(lastFinished.started_at),
  };
}

/** The `sleeve_import_*` families. */
export function renderImportMetrics(out: Exposition, s: ImportSummary): void {
  out.family('sleeve_import_runs_total', 'counter', 'Finished runs of sleeve import musicbrainz, by result.');
  for (const result of IMPORT_RESULTS) out.sample('sleeve_import_runs_total', formatLabels([['result', result]]), s.runs[result]);
  out.single('sleeve_import_running', 'gauge', 'Whether an import of MusicBrainz data is running now (1) or not (0).', s.running ? 1 : 0);
  if (s.lastSuccessAt !== undefined) {
    out.single('sleeve_import_last_success_timestamp_seconds', 'gauge', 'When the last successful import finished (Unix time).', s.lastSuccessAt / 1000);
  }
  if (s.lastRows !== undefined) out.single('sleeve_import_last_success_rows_read', 'gauge', 'Rows the last successful import read from the dump.', s.lastRows);
  if (s.lastDurationMs !== undefined) out.single('sleeve_import_last_duration_seconds', 'gauge', 'How long the last finished import took, whatever its result.', s.lastDurationMs / 1000);
}

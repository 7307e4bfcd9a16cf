import type { Db } from '../db/schema.js';
import { formatLabels, type Exposition } from './exposition.js';

/** What the metrics report of `sleeve import musicbrainz` runs (made by CLI processes, read from the database). */
export interface ImportSummary {
  /** Finished runs, by outcome. */
  runs: { succeeded: number; failed: number };
  /** Whether a run is in progress now. */
  running: boolean;
  /** When the last successful run finished (epoch ms). */
  lastSuccessAt: number | undefined;
  /** How long the last finished run took (ms), successful or not. */
  lastDurationMs: number | undefined;
  /** Rows the last successful run loaded. */
  lastRows: number | undefined;
}

/**
 * Reads the summary of import runs from the database.
 *
 * TODO(merge of the import branch): PENDING. The import records each run in a table of its
 * own, which is not on this branch yet; until this reads it, no `sleeve_import_*` metric is
 * reported. Fill in one query over that table (finished runs by outcome, whether one is
 * running, the last success's end time, the last run's duration and rows) and return it;
 * everything after (caching, timeout, rendering below, tests of the rendering) is in place.
 */
export async function readImportSummary(_db: Db): Promise<ImportSummary | undefined> {
  return undefined;
}

/** The `sleeve_import_*` families. */
export function renderImportMetrics(out: Exposition, s: ImportSummary): void {
  out
    .family('sleeve_import_runs_total', 'counter', 'Finished runs of sleeve import musicbrainz, by result.')
    .sample('sleeve_import_runs_total', formatLabels([['result', 'succeeded']]), s.runs.succeeded)
    .sample('sleeve_import_runs_total', formatLabels([['result', 'failed']]), s.runs.failed);
  out.single('sleeve_import_running', 'gauge', 'Whether an import is running now (1) or not (0).', s.running ? 1 : 0);
  if (s.lastSuccessAt !== undefined) {
    out.single('sleeve_import_last_success_timestamp_seconds', 'gauge', 'When the last successful import finished (Unix time).', s.lastSuccessAt / 1000);
  }
  if (s.lastDurationMs !== undefined) out.single('sleeve_import_last_duration_seconds', 'gauge', 'How long the last finished import took.', s.lastDurationMs / 1000);
  if (s.lastRows !== undefined) out.single('sleeve_import_last_rows', 'gauge', 'Rows the last successful import loaded.', s.lastRows);
}

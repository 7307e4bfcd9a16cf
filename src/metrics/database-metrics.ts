import type { Db } from '../db/schema.js';
import type { Exposition } from './exposition.js';
import { readImportSummary, renderImportMetrics, type ImportSummary } from './import-metrics.js';

/** What the database holds for the metrics, as of `readAt` (epoch ms). */
export interface DatabaseSnapshot {
  counters: Map<string, number>;
  imports: ImportSummary;
  readAt: number;
}

export interface DatabaseMetricsOptions {
  /** How long a scrape waits for the database before answering with the last values read. */
  timeoutMs?: number;
  /** Values read less than this long ago are reused rather than read again. */
  maxAgeMs?: number;
  now?: () => number;
  /** Whether an import holds the import lock now (sleeve_import_running). */
  importLockHeld?: () => Promise<boolean>;
}

/**
 * Metrics kept in the database: changes to the catalogue are made by CLI processes
 * (`sleeve art add` …), which Prometheus never scrapes, so they count in counter rows of
 * the database and every serving process reports those. Read at scrape time, at most once
 * per `maxAgeMs`, never waiting more than `timeoutMs` for a slow database: then the last
 * values read are served and `sleeve_database_metrics_age_seconds` shows how old they are.
 */
export class DatabaseMetrics {
  private readonly db: Db;
  private readonly timeoutMs: number;
  private readonly maxAgeMs: number;
  private readonly now: () => number;
  private readonly importLockHeld: (() => Promise<boolean>) | undefined;
  private last: DatabaseSnapshot | undefined;
  private reading: Promise<void> | undefined;
  /** Reads that failed or took longer than the timeout. */
  failures = 0;

  constructor(db: Db, options: DatabaseMetricsOptions = {}) {
    this.db = db;
    this.timeoutMs = options.timeoutMs ?? 1000;
    this.maxAgeMs = options.maxAgeMs ?? 1000;
    this.now = options.now ?? Date.now;
    this.importLockHeld = options.importLockHeld;
  }

  /** The freshest values available within the timeout (undefined until a read has succeeded). */
  async snapshot(): Promise<DatabaseSnapshot | undefined> {
    if (this.last !== undefined && this.now() - this.last.readAt < this.maxAgeMs) return this.last;
    // One read at a time: scrapes arriving while the database is slow share it.
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), this.timeoutMs);
      timer.unref();
    });
    try {
      if ((await Promise.race([this.reading, timedOut])) === 'timeout') this.failures++;
    } finally {
      clearTimeout(timer);
    }
    return this.last;
  }

  private async read(): Promise<void> {
    try {
      const rows = await this.db.selectFrom('counter').select(['name', 'value']).execute();
      const imports = await readImportSummary(this.db, this.lockProbe());
      this.last = { counters: new Map(rows.map((r) => [r.name, Number(r.value)])), imports, readAt: this.now() };
    } catch {
      // The database is away: the last values stay, and their age tells.
      this.failures++;
    }
  }

  /** The import lock probe; where it fails, whether a run is recorded as running. */
  private lockProbe(): (() => Promise<boolean>) | undefined {
    const probe = this.importLockHeld;
    if (probe === undefined) return undefined;
    return () =>
      probe().catch(async () => {
        const running = await this.db.selectFrom('import_run').select('id').where('status', '=', 'running').limit(1).executeTakeFirst();
        return running !== undefined;
      });
  }

  async render(out: Exposition): Promise<void> {
    const snap = await this.snapshot();
    out.single('sleeve_database_metrics_failures_total', 'counter', 'Reads of the database-held metrics that failed or outlasted the scrape timeout.', this.failures);
    if (snap === undefined) return;
    const c = (name: string): number | undefined => snap.counters.get(name);
    const counter = (metric: string, row: string, help: string) => {
      const v = c(row);
      if (v !== undefined) out.single(metric, 'counter', help, v);
    };
    const gauge = (metric: string, row: string, help: string) => {
      const v = c(row);
      if (v !== undefined) out.single(metric, 'gauge', help, v);
    };
    out.single('sleeve_database_metrics_age_seconds', 'gauge', 'Age of the database-held values below (sleeve_uploads_total …) when this scrape was answered.', (this.now() - snap.readAt) / 1000);
    counter('sleeve_uploads_total', 'uploads_total', 'Images added to the catalogue (sleeve art add, the demo), by any process, since counting began.');
    counter('sleeve_upload_bytes_total', 'upload_bytes_total', 'Bytes of the original files of the images added, by any process, since counting began.');
    counter('sleeve_image_removals_total', 'image_removals_total', 'Images removed from the catalogue, by any process, since counting began.');
    counter('sleeve_catalogue_changes_total', 'catalogue_version', 'Committed changes to the catalogue (each empties the response caches of serving processes).');
    gauge('sleeve_releases', 'releases', 'Releases in the catalogue.');
    gauge('sleeve_images', 'images', 'Images in the catalogue.');
    renderImportMetrics(out, snap.imports);
  }
}

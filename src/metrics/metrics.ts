import { collectDefaultMetrics, Registry } from 'prom-client';
import type { Db } from '../db/schema.js';
import { DatabaseMetrics, type DatabaseMetricsOptions } from './database-metrics.js';
import { Exposition } from './exposition.js';
import { HttpMetrics } from './http-metrics.js';

/**
 * Every metric one serving process reports: its HTTP traffic (kept by the listeners'
 * observers), what the database holds (uploads and the like, made by other processes),
 * and the process itself (prom-client's default metrics, prefixed `sleeve_`, in a registry
 * of this instance's own rather than prom-client's global one).
 */
export class Metrics {
  readonly http = new HttpMetrics();
  private readonly database: DatabaseMetrics;
  private readonly process = new Registry();

  constructor(db: Db, options: DatabaseMetricsOptions = {}) {
    this.database = new DatabaseMetrics(db, options);
    collectDefaultMetrics({ register: this.process, prefix: 'sleeve_' });
  }

  /** The whole scrape, in the Prometheus text format. */
  async render(): Promise<string> {
    const out = new Exposition();
    this.http.render(out);
    await this.database.render(out);
    return `${out.toString()}${await this.process.metrics()}`;
  }
}

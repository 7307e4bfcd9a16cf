/** The metrics module's public surface. */
export { HttpMetrics, ListenerMetrics } from './http-metrics.js';
export { Metrics } from './metrics.js';
export { listenMetrics } from './server.js';
export { METRICS_CONTENT_TYPE } from './exposition.js';
export type { ImportSummary } from './import-metrics.js';

import http from 'node:http';
import type { ConnectionLimits, ListenAddress } from '../config/load.js';
import { limitConnections, serverTimeouts } from '../http/connections.js';
import { METRICS_CONTENT_TYPE } from './exposition.js';
import type { Metrics } from './metrics.js';

/**
 * The metrics listener (SLEEVE_METRICS_LISTEN): `GET /metrics` (and HEAD) in the Prometheus
 * text format; 404 elsewhere, 405 for other methods. A plain node:http server: it needs no
 * routing, and its scrapes are not counted in the HTTP metrics. Resolves once listening.
 */
export async function listenMetrics(metrics: Metrics, at: ListenAddress, limits: ConnectionLimits, onError: (err: unknown) => void): Promise<http.Server> {
  const server = http.createServer(serverTimeouts(limits), function metricsRequest(req, res) {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const path = q === -1 ? url : url.slice(0, q);
    const text = (status: number, body: string, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(Buffer.byteLength(body)), ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (path !== '/metrics') return text(404, 'Not found. Metrics are at /metrics\n');
    if (req.method !== 'GET' && req.method !== 'HEAD') return text(405, 'Method not allowed\n', { allow: 'GET, HEAD' });
    metrics.render().then(
      (body) => text(200, body, { 'content-type': METRICS_CONTENT_TYPE, 'cache-control': 'no-store' }),
      (err: unknown) => {
        onError(err);
        text(500, 'Metrics could not be collected; see the log\n');
      },
    );
  });
  limitConnections(server, limits);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(at.port, at.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

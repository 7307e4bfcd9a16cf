import type http from 'node:http';
import type https from 'node:https';
import type { ConnectionLimits } from '../config/load.js';

/**
 * How often Node looks for requests past their time: Node's default (30 s) would let a
 * 30 s header timeout run to 60 s, so a tenth of the shorter timeout, between 10 ms and 1 s.
 */
function checkingInterval(limits: ConnectionLimits): number {
  return Math.min(1000, Math.max(10, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 10)));
}

/**
 * The options for `http.createServer` / `https.createServer` that apply `limits`: Node's own
 * header and request timeouts (answered 408, then closed) and the keep-alive timeout. Node
 * applies the first two only to connections of a server that listens.
 */
export function serverTimeouts(limits: ConnectionLimits): http.ServerOptions {
  return {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: checkingInterval(limits),
  };
}

/**
 * What the server options cannot say. A connection on which no byte has moved either way for
 * the request timeout while a request is open (a client that stopped reading its answer) is
 * closed (Node's `server.timeout`; nginx's `send_timeout`). And the connections open at once are
 * capped: one past the cap is closed at once (Node's `maxConnections`); as nginx does when its
 * connections run out, the idle keep-alive connections are then closed too (at most once per
 * checking interval), so the next connection finds room unless every one is busy with a request.
 */
export function limitConnections(server: http.Server | https.Server, limits: ConnectionLimits): void {
  server.timeout = limits.requestTimeoutMs;
  server.maxConnections = limits.maxConnections;
  const every = checkingInterval(limits);
  let last = -Infinity;
  server.on('drop', function reclaimIdle() {
    const now = performance.now();
    if (now - last < every) return;
    last = now;
    server.closeIdleConnections();
  });
}

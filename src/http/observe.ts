import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpMetrics, ListenerMetrics } from '../metrics/http-metrics.js';
import type { RequestIds } from './request-id.js';

/**
 * What a listener does for every request besides answering it: give it an id
 * (X-Request-Id) and, when metrics are on, count it.
 */
export class RequestObserver {
  readonly ids: RequestIds;
  private readonly http: HttpMetrics | undefined;
  private readonly requests: ListenerMetrics | undefined;
  private readonly flat = new WeakMap<Record<string, string>, string[]>();

  constructor(listener: string, ids: RequestIds, metrics: HttpMetrics | undefined) {
    this.ids = ids;
    this.http = metrics;
    this.requests = metrics?.listener(listener);
  }

  /** Called first for every request: assigns its id; returns its start mark (ms, for `finished`). */
  begin(req: IncomingMessage): number {
    this.ids.assign(req);
    return performance.now();
  }

  /** Puts the request's id on its response, for answers that others (Fastify) write. */
  echo(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('x-request-id', req.headers['x-request-id'] as string);
  }

  /**
   * `headers` and the request's X-Request-Id as one flat list for writeHead, for answers
   * written directly (the cover art front door). Cheaper than `echo`: a header set before
   * writeHead sends Node down its slower path that merges and validates every header again
   * (measured on a bare node:http 307: about 9 % more CPU per request). One list per headers
   * object, made once; its last value is replaced per request (writeHead copies it at once).
   */
  headers(req: IncomingMessage, headers: Record<string, string>): string[] {
    let flat = this.flat.get(headers);
    if (flat === undefined) {
      flat = [...Object.entries(headers).flat(), 'x-request-id', ''];
      this.flat.set(headers, flat);
    }
    flat[flat.length - 1] = req.headers['x-request-id'] as string;
    return flat;
  }

  /** Counts a request answered that began at `start` (from `begin`); returns its duration in ms. */
  finished(route: string, method: string | undefined, status: number, start: number): number {
    const ms = performance.now() - start;
    this.requests?.record(route, method, status, ms / 1000);
    return ms;
  }

  cacheLookup(hit: boolean): void {
    if (this.http === undefined) return;
    if (hit) this.http.cacheHits++;
    else this.http.cacheMisses++;
  }

  rateLimited(): void {
    if (this.http !== undefined) this.http.rateLimited++;
  }
}

/** Status label of a request left unanswered because its client went away (nginx's convention). */
export const CLIENT_CLOSED = 499;

/** The status to count for a response: its own, or 499 when the connection closed before it was given. */
export function answeredStatus(res: ServerResponse): number {
  return res.writableEnded ? res.statusCode : CLIENT_CLOSED;
}

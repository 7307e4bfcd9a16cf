import type { IncomingMessage, ServerResponse } from 'node:http';
import type { IdentifiedRequest, RequestIds } from './request-id.js';

/**
 * The counters a listener's requests are counted into (metrics/http-metrics.ts's HttpMetrics
 * is the one in use). Declared here, as what this layer needs, so that src/http does not import
 * src/metrics, which sits above it (docs/decisions.md, "Layering").
 */
export interface RequestCounters {
  cacheHits: number;
  cacheMisses: number;
  fastLane: number;
  rateLimited: number;
  listener(name: string): ListenerCounters;
}

/** One listener's request counts and durations. */
export interface ListenerCounters {
  record(route: string, method: string | undefined, status: number, seconds: number): void;
}

/**
 * What a listener does for every request besides answering it: give it an id
 * (X-Request-Id) and, when metrics are on, count it.
 */
export class RequestObserver {
  readonly ids: RequestIds;
  private readonly http: RequestCounters | undefined;
  private readonly requests: ListenerCounters | undefined;

  constructor(listener: string, ids: RequestIds, metrics: RequestCounters | undefined) {
    this.ids = ids;
    this.http = metrics;
    this.requests = metrics?.listener(listener);
  }

  /** Called first for every request: assigns its id; returns its start mark (ms, for `finished`). */
  begin(req: IdentifiedRequest): number {
    this.ids.assign(req);
    return performance.now();
  }

  /** Whether answered requests are counted (metrics on). */
  get counting(): boolean {
    return this.requests !== undefined;
  }

  /** The request's id (given by `begin`). */
  id(req: IdentifiedRequest): string {
    return req.headers['x-request-id'] as string;
  }

  /** Puts the request's id on its response, for answers that others (Fastify) write. */
  echo(req: IncomingMessage, res: ServerResponse): void {
    res.setHeader('x-request-id', req.headers['x-request-id'] as string);
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

  /** Counts a request the fast lane answered (fast-lane.ts), as `finished` counts any. */
  laneFinished(route: string, method: string, status: number, start: number): void {
    if (this.requests === undefined) return;
    if (this.http !== undefined) this.http.fastLane++;
    this.finished(route, method, status, start);
  }

  rateLimited(): void {
    if (this.http !== undefined) this.http.rateLimited++;
  }
}

/** Status label of a request left unanswered because its client went away (nginx's convention). */
export const CLIENT_CLOSED = 499;

/**
 * The status to count for a response: its own, or 499 when the connection closed before all of
 * it was handed to the system (a body written in one go but never read counts as unanswered).
 */
export function answeredStatus(res: ServerResponse): number {
  return res.writableFinished ? res.statusCode : CLIENT_CLOSED;
}

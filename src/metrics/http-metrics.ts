import { Exposition, formatLabels } from './exposition.js';

/**
 * Upper bounds (seconds) of the request duration histogram: from replays of cached
 * redirects (a few microseconds in sleeve) through listings and database lookups to slow
 * uploads of files and failing backends.
 */
const DURATION_BUCKETS: readonly number[] = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

/** The method label values; any other method counts as `other`. */
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'other'] as const;

function methodIndex(method: string | undefined): number {
  switch (method) {
    case 'GET':
      return 0;
    case 'HEAD':
      return 1;
    case 'POST':
      return 2;
    case 'PUT':
      return 3;
    case 'DELETE':
      return 4;
    case 'PATCH':
      return 5;
    case 'OPTIONS':
      return 6;
    default:
      return 7;
  }
}

/** Most distinct route labels one listener keeps; further ones count as `other` (a guard: callers pass bounded sets). */
const MAX_ROUTES = 64;

/** One (listener, route, method) series: the histogram, and the request count by status. */
class Series {
  count = 0;
  sum = 0;
  /** Per bucket (not cumulative); over the last bound only in `count`. */
  readonly buckets = new Float64Array(DURATION_BUCKETS.length);
  readonly statuses = new Map<number, number>();
}

/** The request metrics of one listener. */
export class ListenerMetrics {
  readonly listener: string;
  private readonly routes = new Map<string, (Series | undefined)[]>();

  constructor(listener: string) {
    this.listener = listener;
  }

  /**
   * Counts one answered request. `route` must come from a bounded set of labels (route
   * templates), never from the URL. Plain number updates: this runs for every request,
   * including replays of cached answers that take a few microseconds in all.
   */
  record(route: string, method: string | undefined, status: number, seconds: number): void {
    let byMethod = this.routes.get(route);
    if (byMethod === undefined) byMethod = this.addRoute(route);
    const m = methodIndex(method);
    let series = byMethod[m];
    if (series === undefined) {
      series = new Series();
      byMethod[m] = series;
    }
    series.count++;
    series.sum += seconds;
    let b = 0;
    while (b < DURATION_BUCKETS.length && seconds > (DURATION_BUCKETS[b] as number)) b++;
    if (b < DURATION_BUCKETS.length) series.buckets[b]++;
    series.statuses.set(status, (series.statuses.get(status) ?? 0) + 1);
  }

  private addRoute(route: string): (Series | undefined)[] {
    if (this.routes.size >= MAX_ROUTES && route !== 'other') return this.routes.get('other') ?? this.addRoute('other');
    const byMethod: (Series | undefined)[] = new Array(METHODS.length).fill(undefined);
    this.routes.set(route, byMethod);
    return byMethod;
  }

  /** Each series with its labels, for rendering. */
  *series(): Generator<{ route: string; method: string; series: Series }> {
    for (const [route, byMethod] of this.routes) {
      for (let m = 0; m < METHODS.length; m++) {
        const series = byMethod[m];
        if (series !== undefined) yield { route, method: METHODS[m] as string, series };
      }
    }
  }
}

/**
 * HTTP metrics of every listener of the process, plus the cover art front door's counters.
 *
 * Kept in plain numbers and rendered by hand rather than with prom-client's labelled
 * Counter and Histogram: those hash their label object on every call, measured at about
 * 1.1 µs per request for a counter and a histogram, some 9 % of a cached redirect's whole
 * cost; this costs about a tenth of that.
 */
export class HttpMetrics {
  private readonly listeners: ListenerMetrics[] = [];
  cacheHits = 0;
  cacheMisses = 0;
  rateLimited = 0;
  /** Requests answered in the fast lane, before node:http (edge/fast-lane.ts). */
  fastLane = 0;
  /** Entries in the response cache now, when there is one. */
  cacheEntries: (() => number) | undefined;
  /** Estimated bytes the response cache holds now (what SLEEVE_RESPONSE_CACHE_BYTES bounds). */
  cacheBytes: (() => number) | undefined;
  /** Files and bytes in the file server's cache now, when there is one. */
  fileCache: { readonly size: number; readonly bytes: number } | undefined;
  /** The file server's reads of the store (what its memory cache missed), when there is one. */
  storeReads: { readonly hits: number; readonly misses: number } | undefined;
  /** What the pull-through did with the store's misses, when SLEEVE_UPSTREAM_URL is set. */
  pullThrough: { readonly stored: number; readonly notFound: number; readonly failed: ReadonlyMap<string, number> } | undefined;
  /** Thumbnails made on demand, and misses refused while too many waited (cover-art/files/derivatives.ts). */
  thumbnailsMade: { readonly made: number; readonly busy: number } | undefined;

  listener(name: string): ListenerMetrics {
    let l = this.listeners.find((x) => x.listener === name);
    if (l === undefined) {
      l = new ListenerMetrics(name);
      this.listeners.push(l);
    }
    return l;
  }

  render(out: Exposition): void {
    out.family('sleeve_http_requests_total', 'counter', 'HTTP requests answered, by listener, route template, method and status code.');
    for (const l of this.listeners) {
      for (const { route, method, series } of l.series()) {
        const statuses = [...series.statuses].sort((a, b) => a[0] - b[0]);
        for (const [status, n] of statuses) {
          out.sample('sleeve_http_requests_total', formatLabels([['listener', l.listener], ['route', route], ['method', method], ['status', String(status)]]), n);
        }
      }
    }
    out.family(
      'sleeve_http_request_duration_seconds',
      'histogram',
      "Time from a request's arrival in sleeve until its answer was handed to the connection, by listener, route template and method.",
    );
    for (const l of this.listeners) {
      for (const { route, method, series } of l.series()) {
        const base: [string, string][] = [['listener', l.listener], ['route', route], ['method', method]];
        let cumulative = 0;
        for (let b = 0; b < DURATION_BUCKETS.length; b++) {
          cumulative += series.buckets[b] as number;
          out.sample('sleeve_http_request_duration_seconds_bucket', formatLabels([...base, ['le', String(DURATION_BUCKETS[b])]]), cumulative);
        }
        out.sample('sleeve_http_request_duration_seconds_bucket', formatLabels([...base, ['le', '+Inf']]), series.count);
        out.sample('sleeve_http_request_duration_seconds_sum', formatLabels(base), series.sum);
        out.sample('sleeve_http_request_duration_seconds_count', formatLabels(base), series.count);
      }
    }
    out
      .family('sleeve_response_cache_total', 'counter', 'Lookups of cover art GET and HEAD requests in the response cache, by result (hit: answered from memory).')
      .sample('sleeve_response_cache_total', formatLabels([['result', 'hit']]), this.cacheHits)
      .sample('sleeve_response_cache_total', formatLabels([['result', 'miss']]), this.cacheMisses);
    if (this.cacheEntries !== undefined) out.single('sleeve_response_cache_entries', 'gauge', 'Answers held in the response cache.', this.cacheEntries());
    if (this.cacheBytes !== undefined) out.single('sleeve_response_cache_bytes', 'gauge', 'Estimated memory held by the response cache, bounded by SLEEVE_RESPONSE_CACHE_BYTES.', this.cacheBytes());
    if (this.fileCache !== undefined) {
      out.single('sleeve_file_cache_entries', 'gauge', 'Files held in memory by the built-in file server.', this.fileCache.size);
      out.single('sleeve_file_cache_bytes', 'gauge', 'Bytes those files take, with a fixed allowance per file (bounded by SLEEVE_FILE_CACHE_BYTES).', this.fileCache.bytes);
    }
    if (this.storeReads !== undefined) {
      out
        .family('sleeve_file_store_reads_total', 'counter', "The file server's reads of the store for files its memory cache lacked, by result (miss: not in the store).")
        .sample('sleeve_file_store_reads_total', formatLabels([['result', 'hit']]), this.storeReads.hits)
        .sample('sleeve_file_store_reads_total', formatLabels([['result', 'miss']]), this.storeReads.misses);
    }
    const p = this.pullThrough;
    if (p !== undefined) {
      out
        .family('sleeve_pull_through_total', 'counter', "Store misses of imported images sent to the upstream (SLEEVE_UPSTREAM_URL), by result and a failure's reason.")
        .sample('sleeve_pull_through_total', formatLabels([['result', 'stored']]), p.stored)
        .sample('sleeve_pull_through_total', formatLabels([['result', 'not_found']]), p.notFound);
      for (const [reason, n] of [...p.failed].sort((a, b) => a[0].localeCompare(b[0]))) {
        out.sample('sleeve_pull_through_total', formatLabels([['result', 'failed'], ['reason', reason]]), n);
      }
    }
    const d = this.thumbnailsMade;
    if (d !== undefined) {
      out
        .family('sleeve_thumbnails_made_total', 'counter', 'Thumbnails of sizes and formats made on demand (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS), by result (busy: refused with 503, too many waited).')
        .sample('sleeve_thumbnails_made_total', formatLabels([['result', 'made']]), d.made)
        .sample('sleeve_thumbnails_made_total', formatLabels([['result', 'busy']]), d.busy);
    }
    out.single(
      'sleeve_http_fast_lane_total',
      'counter',
      'Requests of sleeve_http_requests_total answered straight from the socket, before node:http: files and cached answers on the cover art listener, cached gallery pages and plain token requests on the auth listener (SLEEVE_FAST_LANE).',
      this.fastLane,
    );
    out.single('sleeve_rate_limited_total', 'counter', 'Requests refused with 503 by the rate limit (SLEEVE_RATE_LIMIT).', this.rateLimited);
  }
}

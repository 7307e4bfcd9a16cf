/** The route label of anything that matches no known route. */
const OTHER_ROUTE = 'other';

/** Every route label of the cover art listener: a bounded set, never the raw URL (docs/observability.md). */
export type CoverArtRoute =
  | '/'
  | '/robots.txt'
  | '/api'
  | '/release/:mbid/'
  | '/release/:mbid/:image'
  | '/release-group/:mbid/'
  | '/release-group/:mbid/:image'
  | '/download/*'
  | '/healthz'
  | '/readyz'
  | typeof OTHER_ROUTE;

const SLASH = 47;
const QUESTION = 63;
const DOT = 46;

/**
 * The route label of a cover art request target, from its path segments as the API reads
 * them (api.ts pathSegments: empty and `.` segments skipped, the query ignored, segments
 * past the filename ignored). Percent-escapes are not decoded: `/release%2F…` is labelled
 * `other` though the API decodes it. Runs for every request: the usual shapes take a few
 * native string searches, and only odd paths (empty or `.` segments, other entities) a scan
 * of the segments.
 */
export function coverArtRoute(url: string): CoverArtRoute {
  if (url.charCodeAt(0) !== SLASH) return OTHER_ROUTE; // `*` (OPTIONS *) and absolute-form targets
  if (url.startsWith('/download/')) return '/download/*';
  const q = url.indexOf('?');
  const end = q === -1 ? url.length : q;
  if (url.startsWith('/release/')) return entity(url, 9, end, '/release/:mbid/', '/release/:mbid/:image');
  if (url.startsWith('/release-group/')) return entity(url, 15, end, '/release-group/:mbid/', '/release-group/:mbid/:image');
  return bySegments(url);
}

/**
 * An entity path: the MBID from `from`, then maybe a filename. An MBID or filename segment
 * that starts with `/` or `.` (an empty or `.` segment, which the API skips) goes the long way.
 */
function entity(url: string, from: number, end: number, listing: CoverArtRoute, image: CoverArtRoute): CoverArtRoute {
  if (from >= end) return OTHER_ROUTE; // no MBID
  const c = url.charCodeAt(from);
  if (c === SLASH || c === DOT) return bySegments(url);
  const slash = url.indexOf('/', from);
  if (slash === -1 || slash + 1 >= end) return listing;
  const d = url.charCodeAt(slash + 1);
  return d === SLASH || d === DOT ? bySegments(url) : image;
}

/** The general case: counts segments as pathSegments does, without allocating. */
function bySegments(url: string): CoverArtRoute {
  const n = url.length;
  let first = -1;
  let firstEnd = -1;
  let count = 0;
  let i = 0;
  while (i < n && count < 3) {
    const c = url.charCodeAt(i);
    if (c === QUESTION) break;
    if (c === SLASH) {
      i++;
      continue;
    }
    const start = i;
    while (i < n) {
      const d = url.charCodeAt(i);
      if (d === SLASH || d === QUESTION) break;
      i++;
    }
    if (i - start === 1 && url.charCodeAt(start) === DOT) continue;
    if (count === 0) {
      first = start;
      firstEnd = i;
    }
    count++;
  }
  if (count === 0) return '/';
  const len = firstEnd - first;
  if (len === 7 && url.startsWith('release', first)) return count === 1 ? OTHER_ROUTE : count === 2 ? '/release/:mbid/' : '/release/:mbid/:image';
  if (len === 13 && url.startsWith('release-group', first)) {
    return count === 1 ? OTHER_ROUTE : count === 2 ? '/release-group/:mbid/' : '/release-group/:mbid/:image';
  }
  if (len === 3 && url.startsWith('api', first)) return '/api';
  if (count === 1) {
    if (len === 10 && url.startsWith('robots.txt', first)) return '/robots.txt';
    if (len === 7 && url.startsWith('healthz', first)) return '/healthz';
    if (len === 6 && url.startsWith('readyz', first)) return '/readyz';
  }
  return OTHER_ROUTE;
}

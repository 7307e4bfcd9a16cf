/** The route label of anything that matches no known route. */
export const OTHER_ROUTE = 'other';

/** Every route label of the cover art listener: a bounded set, never the raw URL. */
export const COVER_ART_ROUTES = [
  '/',
  '/robots.txt',
  '/api',
  '/release/:mbid/',
  '/release/:mbid/:image',
  '/release-group/:mbid/',
  '/release-group/:mbid/:image',
  '/download/*',
  '/healthz',
  '/readyz',
  OTHER_ROUTE,
] as const;

export type CoverArtRoute = (typeof COVER_ART_ROUTES)[number];

const SLASH = 47;
const QUESTION = 63;
const DOT = 46;

/**
 * The route label of a cover art request target, from its path segments as the API reads
 * them (api.ts pathSegments: empty and `.` segments skipped, the query ignored, segments
 * past the filename ignored), with a few string checks and no allocation. Percent-escapes
 * are not decoded: `/release%2F…` is labelled `other` though the API decodes it.
 */
export function coverArtRoute(url: string): CoverArtRoute {
  if (url.charCodeAt(0) !== SLASH) return OTHER_ROUTE; // `*` (OPTIONS *) and absolute-form targets
  if (url.startsWith('/download/')) return '/download/*';
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

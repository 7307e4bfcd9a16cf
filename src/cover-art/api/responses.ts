import { createHash } from 'node:crypto';
import { escapeHtml } from '../../shared/html.js';

/**
 * A finished cover art API response. Handlers build these as plain data, so the same
 * object can be sent by Fastify or replayed from the response cache.
 */
export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** Whether the response may be kept until the catalogue changes. */
  cacheable: boolean;
  /** When set, only a request whose Accept allows JSON may get this response from the cache. */
  needsJsonAccept?: boolean;
  /** A redirect to an image of the store: its key, for SLEEVE_IMAGE_RESPONSE=bytes (which answers with the file). */
  imageKey?: string;
  /**
   * The same redirect to a thumbnail in other formats (SLEEVE_THUMBNAIL_FORMATS), chosen by the
   * request's Accept (chooseVariant); every one of them, this one included, carries Vary: Accept.
   */
  variants?: Partial<Record<'webp' | 'avif', ApiResponse>>;
  /** The release whose listing the body shows (a release group's listing): forgotten when that listing is refreshed. */
  listingOf?: string;
}

export const ALLOW = 'GET, HEAD, OPTIONS';

/** Redirects whose target can change with curation (front, back, group choice, listing). */
export const CURATED_CACHE_CONTROL = 'public, max-age=60';
/** Redirects to an image id: ids never change, though an image may be removed. */
export const IMAGE_ID_CACHE_CONTROL = 'public, max-age=86400';

const REASONS: Record<number, [string, string]> = {
  400: ['Bad Request', 'The browser (or proxy) sent a request that this server could not understand.'],
  404: ['Not Found', 'The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.'],
  405: ['Method Not Allowed', 'The method is not allowed for the requested URL.'],
  406: ['Not Acceptable', 'The resource identified by the request is only capable of generating response entities which have content characteristics not acceptable according to the accept headers sent in the request.'],
  501: ['Not Implemented', 'The server does not support the action requested by the browser.'],
  503: ['Service Unavailable', 'The server is temporarily unable to service your request due to maintenance downtime or capacity problems. Please try again later.'],
};

function respond(status: number, contentType: string, body: string | Buffer, extra: Record<string, string> = {}, cacheable = false): ApiResponse {
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return {
    status,
    headers: {
      'content-type': contentType,
      'content-length': String(bytes.length),
      ...extra,
      'access-control-allow-origin': '*',
    },
    body: bytes,
    cacheable,
  };
}

/** The five-line HTML error page coverartarchive.org answers errors with (its Werkzeug default). */
export function errorPage(status: number, description?: string, extra: Record<string, string> = {}, cacheable = false): ApiResponse {
  const [name, fallback] = REASONS[status] ?? ['Error', ''];
  const html = `<!doctype html>\n<html lang=en>\n<title>${status} ${name}</title>\n<h1>${name}</h1>\n<p>${escapeHtml(description ?? fallback)}</p>\n`;
  return respond(status, 'text/html; charset=utf-8', html, extra, cacheable);
}

/** A redirect with the body `See: {location}\n`. */
export function redirect(status: 301 | 307, location: string, cacheControl: string | undefined, cacheable = true): ApiResponse {
  const extra: Record<string, string> = { location };
  if (cacheControl !== undefined) extra['cache-control'] = cacheControl;
  return respond(status, 'text/plain; charset=utf-8', `See: ${location}\n`, extra, cacheable);
}

export function plainText(status: number, text: string, extra: Record<string, string> = {}, cacheable = false): ApiResponse {
  return respond(status, 'text/plain; charset=utf-8', text, extra, cacheable);
}

/** A JSON body with a strong ETag of its bytes; revalidated on every use. */
export function jsonBody(json: string): ApiResponse {
  const bytes = Buffer.from(json, 'utf8');
  const etag = `"${createHash('sha256').update(bytes).digest('base64url').slice(0, 27)}"`;
  return respond(200, 'application/json', bytes, { etag, 'cache-control': 'public, no-cache' }, true);
}

export function html(status: number, page: string): ApiResponse {
  return respond(status, 'text/html; charset=utf-8', page, {}, true);
}

export function options(): ApiResponse {
  return respond(200, 'text/plain; charset=utf-8', '', { allow: ALLOW }, true);
}

/** True when an If-None-Match header names the ETag (or is `*`). */
export function etagMatches(ifNoneMatch: string | undefined, etag: string | undefined): boolean {
  if (ifNoneMatch === undefined || etag === undefined) return false;
  const opaque = (tag: string) => tag.trim().replace(/^W\//, '');
  const want = opaque(etag);
  return ifNoneMatch.split(',').some((t) => t.trim() === '*' || opaque(t) === want);
}

/** The 304 answer to a conditional request for `full`. */
export function notModified(full: ApiResponse): ApiResponse {
  const headers: Record<string, string> = {};
  for (const name of ['etag', 'cache-control', 'access-control-allow-origin']) {
    const v = full.headers[name];
    if (v !== undefined) headers[name] = v;
  }
  return { status: 304, headers, body: Buffer.alloc(0), cacheable: false };
}

/**
 * Whether an Accept header allows application/json (absent allows anything).
 * A media range with q=0 excludes what it names.
 */
export function acceptsJson(accept: string | undefined): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  let best = -1;
  let bestQ = 0;
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    let specificity: number;
    if (range === 'application/json') specificity = 2;
    else if (range === 'application/*') specificity = 1;
    else if (range === '*/*' || range === '*') specificity = 0;
    else continue;
    let q = 1;
    for (const p of params) {
      const m = /^q=([0-9.]+)$/.exec(p);
      if (m) q = Number(m[1]);
    }
    if (specificity > best) {
      best = specificity;
      bestQ = q;
    }
  }
  return best >= 0 && bestQ > 0;
}

/** The q of a media type in a parsed Accept: [q, specificity] of its most specific range (2 exact, 1 image/*, 0 *\/*), or undefined. */
function acceptQ(ranges: [string, number][], type: string): [number, number] | undefined {
  let best: [number, number] | undefined;
  for (const [range, q] of ranges) {
    const specificity = range === type ? 2 : range === 'image/*' ? 1 : range === '*/*' ? 0 : -1;
    if (specificity >= 0 && (best === undefined || specificity > best[1])) best = [q, specificity];
  }
  return best;
}

/**
 * The format a thumbnail request's Accept prefers among `offered` (JPEG always offered): the
 * highest q, then the most specific range (a type named beats image/* and *\/*), then JPEG (the
 * interface's), then AVIF over WebP. No Accept, or one naming no image type: JPEG. A q of 0
 * refuses (docs/decisions.md, "Thumbnail formats negotiated at the redirect").
 */
function preferredFormat(accept: string | undefined, offered: readonly ('webp' | 'avif')[]): 'jpeg' | 'webp' | 'avif' {
  if (accept === undefined || offered.length === 0) return 'jpeg';
  const ranges: [string, number][] = [];
  for (const part of accept.split(',', 64)) {
    const [range = '', ...params] = part.split(';').map((x) => x.trim().toLowerCase());
    let q = 1;
    for (const p of params) {
      const m = /^q=([0-9.]{1,8})$/.exec(p);
      if (m) q = Math.min(1, Number(m[1]) || 0);
    }
    ranges.push([range, q]);
  }
  // Ties keep the earlier: JPEG, then AVIF, then WebP.
  let chosen: 'jpeg' | 'webp' | 'avif' = 'jpeg';
  let best = acceptQ(ranges, 'image/jpeg') ?? [0, -1];
  for (const format of ['avif', 'webp'] as const) {
    if (!offered.includes(format)) continue;
    const got = acceptQ(ranges, `image/${format}`);
    if (got === undefined || got[0] <= 0) continue;
    if (got[0] > best[0] || (got[0] === best[0] && got[1] > best[1])) {
      chosen = format;
      best = got;
    }
  }
  return chosen;
}

/** The answer for a request with this Accept: `response` itself unless it has variants (a thumbnail redirect under SLEEVE_THUMBNAIL_FORMATS). */
export function chooseVariant(response: ApiResponse, accept: string | undefined): ApiResponse {
  const variants = response.variants;
  if (variants === undefined) return response;
  const format = preferredFormat(accept, Object.keys(variants) as ('webp' | 'avif')[]);
  return format === 'jpeg' ? response : (variants[format] ?? response);
}

import type { Readable } from 'node:stream';
import type { ByteRange, ObjectStore } from '../storage/index.js';
import { parseImageKey } from './keys.js';
import { etagMatches } from './responses.js';

/** Answer of the file server: a stream for 200/206, nothing otherwise. */
export interface FileResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable | string | undefined;
}

const TYPES: Record<string, string> = {
  jpg: 'image/jpeg',
  png: 'image/png',
  gif: 'image/gif',
  pdf: 'application/pdf',
  json: 'application/json',
};

const INDEX_RE = /^mbid-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\/index\.json$/;
/** Names never change (ids are never reused), so files other than index.json are immutable. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
const LISTING = 'public, no-cache';

/**
 * The storage key a /download path names, or undefined. Only the archive layout is
 * accepted, so no path (dot segments, encoded slashes, NULs) can leave the store.
 */
export function keyForDownloadPath(rest: string): string | undefined {
  let key = rest;
  const q = key.indexOf('?');
  if (q !== -1) key = key.slice(0, q);
  if (key.length > 200) return undefined;
  // An encoded slash is part of a name, not a separator (RFC 3986 §2.2): no file of the layout has one.
  if (/%2f/i.test(key)) return undefined;
  try {
    key = decodeURIComponent(key);
  } catch {
    return undefined;
  }
  return INDEX_RE.test(key) || parseImageKey(key) !== undefined ? key : undefined;
}

/** Parses a single `bytes=` range against a size; 'unsatisfiable', or undefined to send it all. */
export function parseRange(header: string | undefined, size: number): ByteRange | 'unsatisfiable' | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return undefined; // several ranges or another unit: a 200 with everything is allowed
  const [, a = '', b = ''] = m;
  if (a === '' && b === '') return undefined;
  let start: number;
  let end: number;
  if (a === '') {
    const suffix = Number(b);
    if (suffix === 0) return 'unsatisfiable';
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(a);
    end = b === '' ? size - 1 : Math.min(Number(b), size - 1);
    if (b !== '' && Number(b) < start) return undefined;
  }
  if (start >= size || size === 0) return 'unsatisfiable';
  return { start, end };
}

/**
 * The answer while the store cannot be reached: a 503 that clients and caches retry, never
 * a 404 (the file may well exist) nor anything stale.
 */
export function storeUnavailableResponse(): FileResponse {
  return {
    status: 503,
    headers: { 'access-control-allow-origin': '*', 'x-content-type-options': 'nosniff', 'retry-after': '5', 'content-type': 'text/plain; charset=utf-8' },
    body: 'The file store is unavailable; try again later.\n',
  };
}

/** Serves one stored file with validators, conditional requests and ranges. */
export async function serveFile(
  store: ObjectStore,
  key: string | undefined,
  method: string,
  headers: { ifNoneMatch?: string; ifModifiedSince?: string; range?: string; ifRange?: string },
  attempt = 1,
): Promise<FileResponse> {
  const base = { 'access-control-allow-origin': '*', 'x-content-type-options': 'nosniff' };
  if (method !== 'GET' && method !== 'HEAD') {
    return { status: 405, headers: { ...base, allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }, body: 'Method Not Allowed\n' };
  }
  const notFound: FileResponse = { status: 404, headers: { ...base, 'content-type': 'text/plain; charset=utf-8' }, body: 'Not Found\n' };
  if (key === undefined) return notFound;
  const info = await store.head(key);
  if (info === undefined) return notFound;

  const ext = key.slice(key.lastIndexOf('.') + 1);
  const common: Record<string, string> = {
    ...base,
    etag: info.etag,
    'last-modified': info.lastModified.toUTCString(),
    'cache-control': ext === 'json' ? LISTING : IMMUTABLE,
    'accept-ranges': 'bytes',
  };
  const fresh =
    headers.ifNoneMatch !== undefined
      ? etagMatches(headers.ifNoneMatch, info.etag)
      : headers.ifModifiedSince !== undefined && Math.floor(info.lastModified.getTime() / 1000) <= Date.parse(headers.ifModifiedSince) / 1000;
  if (fresh) return { status: 304, headers: common, body: undefined };

  const contentType = TYPES[ext] ?? 'application/octet-stream';
  const rangeAllowed = headers.ifRange === undefined || headers.ifRange === info.etag;
  const range = rangeAllowed ? parseRange(headers.range, info.size) : undefined;
  if (range === 'unsatisfiable') {
    return { status: 416, headers: { ...common, 'content-range': `bytes */${info.size}`, 'content-type': 'text/plain; charset=utf-8' }, body: 'Range Not Satisfiable\n' };
  }
  const length = range === undefined ? info.size : range.end - range.start + 1;
  const out: Record<string, string> = { ...common, 'content-type': contentType, 'content-length': String(length) };
  if (range !== undefined) out['content-range'] = `bytes ${range.start}-${range.end}/${info.size}`;
  const status = range === undefined ? 200 : 206;
  if (method === 'HEAD') return { status, headers: out, body: undefined };
  const object = await store.get(key, range);
  if (object === undefined) return notFound;
  if (object.info.etag !== info.etag) {
    // Replaced between the two looks (index.json rewritten): describe what is being sent.
    object.body.destroy();
    if (attempt < 3) return serveFile(store, key, method, headers, attempt + 1);
    return { status: 503, headers: { ...base, 'retry-after': '1', 'content-type': 'text/plain; charset=utf-8' }, body: 'The file is changing; try again.\n' };
  }
  return { status, headers: out, body: object.body };
}

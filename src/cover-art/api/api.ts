import { parseMbid } from '../../shared/uuid.js';
import type { ApiDeps, ThumbnailOptions } from '../deps.js';
import { parseId } from '../ids.js';
import { imageKey, indexKey } from '../files/keys.js';
import { eventHasImages, findEvent, findEventFront, findEventImage } from '../catalogue/event-repo.js';
import { buildListing, serializeListing } from '../listings/listing.js';
import {
  BACK_TYPE,
  chooseGroupRelease,
  coversNeedApproval,
  findImage,
  findPrimaryImage,
  findRelease,
  findReleaseAndPrimaryImage,
  findReleaseGroup,
  FRONT_TYPE,
  hasImages,
  listImages,
} from '../catalogue/repo.js';
import {
  acceptsJson,
  ALLOW,
  CURATED_CACHE_CONTROL,
  errorPage,
  html,
  IMAGE_ID_CACHE_CONTROL,
  jsonBody,
  options,
  plainText,
  redirect,
  type ApiResponse,
} from './responses.js';

export interface ApiRequest {
  method: string;
  /** The request target as received (path and query). */
  url: string;
  httpVersion: string;
  accept: string | undefined;
  /** The Host header: which archive is asked (hostArchive). Absent: the Cover Art Archive. */
  host?: string | undefined;
}

// The error texts of this file are coverartarchive.org's, kept byte-for-byte on purpose, odd
// wordings included (docs/interface.md, "What sleeve serves").
const ENTITIES = ['release', 'release-group'];
const ENTITY_MESSAGE = `Only the following entities are supported: ${ENTITIES.join(', ')}`;
const EVENT_ENTITIES = ['event'];
const EVENT_MESSAGE = `Only the following entities are supported: ${EVENT_ENTITIES.join(', ')}`;
const ALL_ENTITIES = [...ENTITIES, ...EVENT_ENTITIES];
const ALL_MESSAGE = `Only the following entities are supported: ${ALL_ENTITIES.join(', ')}`;
const BETA_HOST = /^beta\.(?:cover|event)artarchive\.org(?::[0-9]+)?$/;

export type Archive = 'cover' | 'event' | 'all';

/**
 * Which archive a request's Host asks, as artwork-redirect decides it, with sleeve's own names
 * (docs/decisions.md, "One listener for coverartarchive.org and eventartarchive.org"): the
 * Event Art Archive's host (SLEEVE_EVENT_BASE_URL's, or eventartarchive.org) answers events
 * only; beta.coverartarchive.org and beta.eventartarchive.org answer both; every other host
 * (coverartarchive.org, localhost, a mirror's own name) answers both too, in the Cover Art
 * Archive's words.
 */
export function hostArchive(host: string | undefined, eventHost: string | undefined): Archive {
  if (host === undefined) return 'cover';
  const h = host.toLowerCase();
  if (h !== eventHost && !h.includes('artarchive.')) return 'cover';
  if (h === eventHost) return 'event';
  const colon = h.lastIndexOf(':');
  const name = colon === -1 || h.endsWith(']') ? h : h.slice(0, colon);
  if (name === 'eventartarchive.org') return 'event';
  return BETA_HOST.test(h) ? 'all' : 'cover';
}

function entitiesOf(archive: Archive): [string[], string] {
  // Another host answers every entity (as artwork-redirect answers a host it does not know), its
  // refusal in coverartarchive.org's words: every answer the Cover Art Archive gives is unchanged.
  return archive === 'cover' ? [ALL_ENTITIES, ENTITY_MESSAGE] : archive === 'event' ? [EVENT_ENTITIES, EVENT_MESSAGE] : [ALL_ENTITIES, ALL_MESSAGE];
}
const DOCS_URL = 'https://musicbrainz.org/doc/Cover_Art_Archive/API';
const READ_METHODS = new Set(['GET', 'HEAD']);

/** The path as the real service sees it: decoded, query dropped, empty and `.` segments skipped. */
function pathSegments(url: string): string[] {
  let path = url;
  const q = path.indexOf('?');
  if (q !== -1) path = path.slice(0, q);
  try {
    path = decodeURIComponent(path);
  } catch {
    // Malformed escapes stay as they are; such a path matches nothing.
  }
  return path.split('/').filter((s) => s !== '' && s !== '.');
}

/**
 * What decides the answer to a GET or HEAD of the API (besides Accept, which the response
 * cache checks itself): the path as `pathSegments` reads it, of which only the first three
 * segments count (`/release/{mbid}/front/anything` answers as `/release/{mbid}/front`).
 * The response cache is keyed on this, so query strings (which the API ignores) and
 * spellings of one path (`//release/…`, `%2F`, a trailing slash) share one entry.
 */
export function answerKey(url: string): string {
  // Most targets are already in that form (bar a trailing slash): check in one pass, as
  // this runs for every request the front door sees (~40 ns against ~1 µs for the split).
  const n = url.length;
  let slashes = 0;
  let plain = n > 0 && url.charCodeAt(0) === 47;
  for (let i = 0; plain && i < n; i++) {
    const c = url.charCodeAt(i);
    if (c === 47) {
      const next = url.charCodeAt(i + 1);
      // A fourth segment, `//`, or a segment starting with `.` (`.` is skipped, others are rare).
      plain = ++slashes <= 3 || i === n - 1;
      if (next === 47 || next === 46) plain = false;
    } else if (c === 63 || c === 37) plain = false; // ? %
  }
  if (plain) return n > 1 && url.charCodeAt(n - 1) === 47 ? url.slice(0, -1) : url;
  const segments = pathSegments(url);
  if (segments.length > 3) segments.length = 3;
  return `/${segments.join('/')}`;
}

/** An image id as written (leading zeros dropped) and as a number when it can be one. */
type Kind = { kind: 'front' } | { kind: 'back' } | { kind: 'id'; digits: string; id: number | undefined };

/**
 * Filename rules as coverartarchive.org reads them: prefix match for front/back, leading digits
 * for ids, and a size after the last `-` by prefix (`-2500` is 250). A size the operator added is
 * matched exactly (`-600`, `-600.jpg`), and a format the operator turned on named after it
 * (`-600.webp`) asks for that format.
 */
function parseFilename(filename: string, thumbs?: ThumbnailOptions): (Kind & { size: number | undefined; format?: 'webp' | 'avif' }) | undefined {
  let kind: Kind;
  if (filename.startsWith('front')) kind = { kind: 'front' };
  else if (filename.startsWith('back')) kind = { kind: 'back' };
  else {
    const match = /^[0-9]+/.exec(filename)?.[0];
    if (match === undefined) return undefined;
    // Leading zeros dropped, as coverartarchive.org drops them: the redirect names the canonical
    // key, the only one the file server knows (keys.ts). Ids past 2^53 are simply not found.
    const digits = match.replace(/^0+(?=[0-9])/, '');
    kind = { kind: 'id', digits, id: parseId(digits) };
  }
  let size: number | undefined;
  let format: 'webp' | 'avif' | undefined;
  const dash = filename.lastIndexOf('-');
  if (dash !== -1) {
    const tail = filename.slice(dash + 1);
    const digits = /^[1-9][0-9]{0,4}(?=$|\.)/.exec(tail)?.[0];
    if (digits !== undefined && thumbs?.added.has(Number(digits)) === true) size = Number(digits);
    else if (tail.startsWith('250')) size = 250;
    else if (tail.startsWith('500')) size = 500;
    else if (tail.startsWith('1200')) size = 1200;
    const ext = size === undefined || thumbs === undefined ? '' : tail.slice(String(size).length);
    if (ext === '.webp' || ext === '.avif') {
      const named = ext.slice(1) as 'webp' | 'avif';
      if (thumbs?.formats.includes(named) === true) format = named;
    }
  }
  return format === undefined ? { ...kind, size } : { ...kind, size, format };
}

/** The stricter filename check OPTIONS applies on coverartarchive.org. */
function optionsFilenameValid(filename: string): boolean {
  const stem = filename.includes('.') ? filename.slice(0, filename.indexOf('.')) : filename;
  const parts = stem.split('-');
  if (parts.length > 2) return false;
  const [first = '', second] = parts;
  if (!(first === 'front' || first === 'back' || /^[0-9]+$/.test(first))) return false;
  return second === undefined || second === '250' || second === '500' || second === '1200';
}

const INDEX_PAGE = `<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Cover Art Archive</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem}code{background:#f3f3f3;padding:0 .2em}</style>
<h1>Cover Art Archive</h1>
<p>This is <strong>sleeve</strong>, a self-hosted Cover Art Archive. Images in the archive are curated by the people who run it.</p>
<ul>
<li><code>/release/{mbid}/</code>: the listing of a release's images</li>
<li><code>/release/{mbid}/front</code>, <code>/back</code>, <code>/{id}</code>, with <code>-250</code>, <code>-500</code> or <code>-1200</code> for thumbnails</li>
<li><code>/release-group/{mbid}/</code> and <code>/release-group/{mbid}/front</code></li>
</ul>
`;

/**
 * Answers one cover art API request (everything on the cover art listener but the
 * file server). Never throws for bad input: every answer is an ApiResponse.
 */
export async function handleApiRequest(deps: ApiDeps, req: ApiRequest): Promise<ApiResponse> {
  const method = req.method.toUpperCase();
  const [entities, entityMessage] = entitiesOf(hostArchive(req.host, deps.eventHost));
  if (method === 'OPTIONS') return handleOptions(req, entities, entityMessage);
  const segments = pathSegments(req.url);
  const [entity, mbidText, filename] = segments;

  if (entity === undefined) return READ_METHODS.has(method) ? html(200, INDEX_PAGE) : errorPage(405, undefined, { allow: ALLOW });
  if (entity === 'robots.txt' && segments.length === 1) return plainText(200, 'User-agent: *\nAllow: /', {}, true);
  if (entity === 'api') return redirect(301, DOCS_URL, 'public, max-age=86400');
  if (!entities.includes(entity)) return errorPage(400, entityMessage, {}, true);
  if (mbidText === undefined) return errorPage(400, 'no MBID specified', {}, true);
  const mbid = parseMbid(mbidText);
  if (mbid === undefined) return errorPage(400, 'invalid MBID specified', {}, true);

  if (!READ_METHODS.has(method)) {
    if (entity === 'release-group' && filename === undefined) return errorPage(501, undefined, { allow: ALLOW }, true);
    return errorPage(405, undefined, { allow: ALLOW }, true);
  }
  if (entity === 'event') return handleEvent(deps, req, mbid, filename);
  return entity === 'release' ? handleRelease(deps, req, mbid, filename) : handleReleaseGroup(deps, mbid, filename);
}

function handleOptions(req: ApiRequest, entities: string[], entityMessage: string): ApiResponse {
  if (req.httpVersion !== '1.1') return errorPage(501);
  if (req.url === '*') return options();
  const segments = pathSegments(req.url);
  const [entity, mbidText, filename] = segments;
  if (entity === undefined || entity === '*') return segments.length <= 1 ? options() : errorPage(400);
  if (!entities.includes(entity)) return errorPage(400, entityMessage);
  if (mbidText === undefined) return errorPage(400, 'no MBID specified');
  if (parseMbid(mbidText) === undefined) return errorPage(400, 'invalid MBID specified');
  if (filename !== undefined && !optionsFilenameValid(filename)) return errorPage(400);
  return options();
}

function imageUrl(deps: ApiDeps, key: string): string {
  return `${deps.imageBaseUrl}/${key}`;
}

/** The 307 to an image of the store, which names its key (SLEEVE_IMAGE_RESPONSE=bytes answers with the file instead). */
function imageRedirect(deps: ApiDeps, key: string, cacheControl: string, vary = false): ApiResponse {
  const answer = { ...redirect(307, imageUrl(deps, key), cacheControl), imageKey: key };
  if (vary) answer.headers.vary = 'Accept';
  return answer;
}

/**
 * The 307 to an image or its thumbnail. A thumbnail of an image (not a PDF) whose format the
 * path does not name, with formats besides JPEG on: the JPEG redirect with the others as its
 * variants, all with Vary: Accept (chooseVariant picks per request). Otherwise exactly the
 * interface's redirect.
 */
function fileRedirect(deps: ApiDeps, gid: string, image: { id: number; suffix: string }, parsed: { size: number | undefined; format?: 'webp' | 'avif' }, cacheControl: string): ApiResponse {
  const thumbs = deps.thumbnails;
  const key = imageKey(gid, image.id, image.suffix, parsed.size, parsed.format);
  if (parsed.size === undefined || parsed.format !== undefined || thumbs?.negotiate !== true || thumbs.formats.length === 0 || image.suffix === 'pdf') {
    return imageRedirect(deps, key, cacheControl);
  }
  const answer = imageRedirect(deps, key, cacheControl, true);
  answer.variants = {};
  for (const format of thumbs.formats) answer.variants[format] = imageRedirect(deps, imageKey(gid, image.id, image.suffix, parsed.size, format), cacheControl, true);
  return answer;
}

async function handleRelease(deps: ApiDeps, req: ApiRequest, mbid: string, filename: string | undefined): Promise<ApiResponse> {
  if (filename === undefined) {
    if (!acceptsJson(req.accept)) return errorPage(406);
    const release = await findRelease(deps.db, mbid);
    if (release === undefined || !(await hasImages(deps.db, release.id))) {
      return { ...errorPage(404, `No cover art found for release ${mbid}`, {}, true), needsJsonAccept: true };
    }
    await deps.ensureListing?.(release.id);
    return { ...redirect(307, imageUrl(deps, indexKey(release.gid)), CURATED_CACHE_CONTROL), needsJsonAccept: true };
  }
  const parsed = parseFilename(filename, deps.thumbnails);
  // "does not not" is kept on purpose: byte-for-byte as upstream (docs/interface.md, "What sleeve serves").
  if (parsed === undefined) return errorPage(400, `${filename} does not not contain a valid cover image id`, {}, true);
  if (parsed.kind === 'id') {
    const release = await findRelease(deps.db, mbid);
    const image = release === undefined || parsed.id === undefined ? undefined : await findImage(deps.db, release.id, parsed.id);
    if (release === undefined || image === undefined) return errorPage(404, `cover image with id ${parsed.digits} not found`, {}, true);
    return fileRedirect(deps, release.gid, image, parsed, IMAGE_ID_CACHE_CONTROL);
  }
  const found = await findReleaseAndPrimaryImage(deps.db, mbid, parsed.kind === 'front' ? FRONT_TYPE : BACK_TYPE, coversNeedApproval(deps.approval));
  const release = found?.release;
  const image = found?.image;
  if (release === undefined || image === undefined) {
    return errorPage(404, `No ${parsed.kind} cover image found for release with identifier ${mbid}`, {}, true);
  }
  return fileRedirect(deps, release.gid, image, parsed, CURATED_CACHE_CONTROL);
}

/**
 * The Event Art Archive's paths, answered as artwork-redirect answers eventartarchive.org:
 * `front` is the first image typed Poster; there is no `back` (it is read as an image id, and
 * has none); errors name events.
 */
async function handleEvent(deps: ApiDeps, req: ApiRequest, mbid: string, filename: string | undefined): Promise<ApiResponse> {
  const event = await findEvent(deps.db, mbid);
  const gid = event?.gid ?? mbid;
  if (filename === undefined) {
    if (!acceptsJson(req.accept)) return errorPage(406);
    if (event === undefined || !(await eventHasImages(deps.db, event.id))) {
      return { ...errorPage(404, `No artwork found for event ${gid}`, {}, true), needsJsonAccept: true };
    }
    await deps.ensureEventListing?.(event.id);
    return { ...redirect(307, imageUrl(deps, indexKey(event.gid)), CURATED_CACHE_CONTROL), needsJsonAccept: true };
  }
  const parsed = parseFilename(filename);
  if (parsed?.kind === 'front') {
    const image = event === undefined ? undefined : await findEventFront(deps.db, event.id, coversNeedApproval(deps.approval));
    if (event === undefined || image === undefined) return errorPage(404, `No front image found for event with identifier ${gid}`, {}, true);
    return imageRedirect(deps, imageKey(event.gid, image.id, image.suffix, parsed.size), CURATED_CACHE_CONTROL);
  }
  // "does not not" as upstream; `back…` has no leading digits either.
  if (parsed === undefined || parsed.kind !== 'id') return errorPage(400, `${filename} does not not contain a valid event image id`, {}, true);
  const image = event === undefined || parsed.id === undefined ? undefined : await findEventImage(deps.db, event.id, parsed.id);
  if (event === undefined || image === undefined) return errorPage(404, `event image with id ${parsed.digits} not found`, {}, true);
  return imageRedirect(deps, imageKey(event.gid, image.id, image.suffix, parsed.size), IMAGE_ID_CACHE_CONTROL);
}

async function handleReleaseGroup(deps: ApiDeps, mbid: string, filename: string | undefined): Promise<ApiResponse> {
  const approvedOnly = coversNeedApproval(deps.approval);
  const group = await findReleaseGroup(deps.db, mbid);
  const chosen = group === undefined ? undefined : await chooseGroupRelease(deps.db, group.id, approvedOnly);
  if (chosen === undefined) return errorPage(404, `No cover art found for release group ${mbid}`, {}, true);
  if (filename === undefined) {
    const listing = buildListing(deps.urls, chosen.gid, await listImages(deps.db, chosen.id), approvedOnly);
    return { ...jsonBody(serializeListing(listing)), listingOf: chosen.gid };
  }
  if (!filename.startsWith('front')) return plainText(400, `${filename} not supported for release groups.`, {}, true);
  const parsed = parseFilename(filename, deps.thumbnails);
  const image = await findPrimaryImage(deps.db, chosen.id, FRONT_TYPE, approvedOnly);
  if (image === undefined) return errorPage(404, `No cover art found for release group ${mbid}`, {}, true);
  return fileRedirect(deps, chosen.gid, image, { size: parsed?.size, format: parsed?.format }, CURATED_CACHE_CONTROL);
}

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkAccessToken, isRefusal, type TokenHolder } from '../../auth/pages.js';
import { currentGroupListing, releaseArt, type Listing } from '../../cover-art/index.js';
import { AppError, isAppError } from '../../shared/errors.js';
import { addImage, chooseGroupCover, COMMENT_MAX_LENGTH, editImage, listingTag, releaseListing, removeImage, reorderImages, type Editor } from '../changes.js';
import type { WebsiteDeps } from '../deps.js';
import { BodyRefused, discard, readStreamed, readStreamedForm, streamMultipart, type UploadRefusal } from '../upload-body.js';
import { makeUploads, UPLOAD_RETRY_AFTER, UPLOADS_PER_USER } from '../uploads.js';
import { auditCuration, type CurationEvent } from '../audit.js';

/*
 * The write API for tools (docs/api.md, "The write API for tools"): under /api/cover-art/ on
 * the website's origin, authorized by an access token with the cover_art scope. JSON in and
 * out; errors as {"error", "error_description"}; a token refused as RFC 6750 says, with
 * WWW-Authenticate.
 */

export const API_PREFIX = '/api/cover-art';
/** Largest JSON body (an order of a few thousand ids fits). */
const JSON_LIMIT = 64 * 1024;
const NO_STORE = { 'cache-control': 'no-store' };

/** An answer of the API other than a domain error: its status, error code and text. */
class ApiRefusal extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

const holders = new WeakMap<FastifyRequest, TokenHolder>();

function editorOf(req: FastifyRequest): Editor {
  const holder = holders.get(req);
  if (holder === undefined) throw new Error('no token holder (the authorization hook did not run)');
  return holder.account;
}

function sendJsonStatus(reply: FastifyReply, status: number, body: unknown, headers: Record<string, string> = {}): FastifyReply {
  return reply
    .code(status)
    .headers({ ...NO_STORE, ...headers })
    .type('application/json; charset=utf-8')
    .send(JSON.stringify(body));
}

function sendError(reply: FastifyReply, status: number, error: string, description: string, headers: Record<string, string> = {}): FastifyReply {
  return sendJsonStatus(reply, status, { error, error_description: description }, headers);
}

/** The domain's errors as the API shows them. */
const APP_ERRORS: Record<AppError['code'], [number, string]> = {
  INVALID_INPUT: [400, 'invalid_request'],
  NOT_FOUND: [404, 'not_found'],
  CONFLICT: [409, 'conflict'],
  STORE_UNAVAILABLE: [503, 'temporarily_unavailable'],
};

async function apiErrors(err: FastifyError | Error, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  if (err instanceof ApiRefusal) return sendError(reply, err.status, err.error, err.message, err.headers);
  if (err instanceof BodyRefused) return sendError(reply, err.status, err.status === 413 ? 'too_large' : 'invalid_request', err.message, err.unread ? { connection: 'close' } : {});
  if (isAppError(err)) {
    const [status, code] = APP_ERRORS[err.code];
    if (err.code === 'STORE_UNAVAILABLE') req.log.warn({ err }, 'the object store is unavailable');
    return sendError(reply, status, code, err.expose ? err.message : 'The image store cannot be used just now; try again later', status === 503 ? { 'retry-after': '5' } : {});
  }
  const status = (err as FastifyError).statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    const text = status === 413 ? `The body is larger than ${JSON_LIMIT} bytes` : status === 415 ? 'Unsupported content type' : err.message;
    return sendError(reply, status, status === 413 ? 'too_large' : 'invalid_request', text);
  }
  throw err;
}

/** JSON bodies: parsed within their limit; malformed JSON or a NUL anywhere is a 400. */
function readJson(app: FastifyInstance): void {
  app.addContentTypeParser('application/json', { parseAs: 'string', bodyLimit: JSON_LIMIT }, function parseJson(_req, body, done) {
    let value: unknown;
    try {
      value = JSON.parse(body as string);
    } catch (err) {
      done(new ApiRefusal(400, 'invalid_request', `The body is not valid JSON: ${(err as Error).message}`), undefined);
      return;
    }
    if ((body as string).includes('\\u0000') || (body as string).includes('\0')) {
      done(new ApiRefusal(400, 'invalid_request', 'The body holds a NUL character'), undefined);
      return;
    }
    done(null, value);
  });
}

/** The JSON object body, its keys limited to `allowed`. */
function jsonObject(req: FastifyRequest, allowed: string[]): Record<string, unknown> {
  const body = req.body;
  if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) throw new ApiRefusal(415, 'invalid_request', 'Send a JSON body (Content-Type: application/json)');
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw new ApiRefusal(400, 'invalid_request', 'The body must be a JSON object');
  const unknown = Object.keys(body).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) throw new ApiRefusal(400, 'invalid_request', `Unknown member ${JSON.stringify(unknown[0])}; allowed: ${allowed.join(', ')}`);
  return body as Record<string, unknown>;
}

function stringArray(value: unknown, what: string, max: number): string[] {
  if (!Array.isArray(value) || value.length > max || !value.every((v) => typeof v === 'string')) throw new ApiRefusal(400, 'invalid_request', `${what} must be an array of at most ${max} strings`);
  return value as string[];
}

/** A comment as long as the website's forms take, at most (docs/decisions.md, "Image comments: at most 255 characters"). */
function checkComment(comment: string | undefined): void {
  if (comment !== undefined && comment.length > COMMENT_MAX_LENGTH) throw new ApiRefusal(400, 'invalid_request', `comment is longer than ${COMMENT_MAX_LENGTH} characters`);
}

/** An upload not let in (upload-body.ts, UploadSlots), its body left unread: the connection closes after the answer. */
function uploadRefused(why: UploadRefusal): ApiRefusal {
  const headers = { 'retry-after': UPLOAD_RETRY_AFTER, connection: 'close' };
  if (why === 'user') return new ApiRefusal(429, 'temporarily_unavailable', `${UPLOADS_PER_USER} uploads of yours are in progress already; try again once one is done`, headers);
  return new ApiRefusal(503, 'temporarily_unavailable', 'Too many uploads at once; try again shortly', headers);
}

function ifMatch(req: FastifyRequest): string | undefined {
  const v = req.headers['if-match'];
  return Array.isArray(v) ? v.join(', ') : v;
}

interface ReleaseParams {
  mbid: string;
}
interface ImageParams extends ReleaseParams {
  id: string;
}

/** The write API's changes by method and route (under API_PREFIX), as audit events. */
const CHANGE_EVENTS: Record<string, CurationEvent> = {
  [`POST ${API_PREFIX}/release/:mbid/images`]: 'cover_art.added',
  [`PATCH ${API_PREFIX}/release/:mbid/images/:id`]: 'cover_art.edited',
  [`DELETE ${API_PREFIX}/release/:mbid/images/:id`]: 'cover_art.removed',
  [`PUT ${API_PREFIX}/release/:mbid/order`]: 'cover_art.reordered',
  [`PUT ${API_PREFIX}/release-group/:mbid/cover`]: 'cover_art.group_cover_set',
};

export async function coverArtApiRoutes(app: FastifyInstance, deps: WebsiteDeps): Promise<void> {
  const uploads = makeUploads(deps, 1);
  streamMultipart(app);
  readJson(app);
  app.setErrorHandler(apiErrors);
  app.setNotFoundHandler(function apiNotFound(_req, reply) {
    return sendError(reply, 404, 'not_found', 'No such endpoint');
  });

  // Every endpoint needs a token with cover_art, checked before any body is read.
  app.addHook('onRequest', async function bearer(req, reply) {
    const result = await checkAccessToken(deps.pages, req, 'cover_art');
    if (isRefusal(result)) return sendError(reply, result.status, result.error, result.description, { 'www-authenticate': result.challenge });
    holders.set(req, result);
  });

  // Each change made, as an audit line once answered (who, which application, what).
  app.addHook('onResponse', async function auditChange(req, reply) {
    const event = req.method === 'GET' || reply.statusCode >= 300 ? undefined : CHANGE_EVENTS[`${req.method} ${req.routeOptions.url ?? ''}`];
    const holder = holders.get(req);
    if (event === undefined || holder === undefined) return;
    const params = req.params as Partial<ImageParams>;
    const group = event === 'cover_art.group_cover_set';
    auditCuration(req, event, {
      user: holder.account.name,
      account: holder.account.id,
      address: deps.pages.clientAddress(req),
      clientId: holder.clientId,
      via: 'api',
      release: group ? undefined : params.mbid,
      releaseGroup: group ? params.mbid : undefined,
      image: params.id ?? added.get(req),
    });
  });
  const added = new WeakMap<FastifyRequest, string>();

  const entryUrl = (mbid: string, id: string) => `${deps.pages.deps.authUrl}${API_PREFIX}/release/${mbid}/images/${id}`;
  const sendListing = async (reply: FastifyReply, mbid: string, status = 200) => {
    const listing = await releaseListing(deps, mbid);
    return sendJsonStatus(reply, status, listing, { etag: listingTag(listing) });
  };

  app.get<{ Params: ReleaseParams }>('/release/:mbid/images', async function listImages(req, reply) {
    const listing = await releaseListing(deps, req.params.mbid);
    const art = await releaseArt(deps.api, req.params.mbid);
    const pending = (art?.pending ?? []).map((e) => ({
      edit: e.id,
      kind: e.kind,
      image: e.image,
      editor: e.editor?.name ?? null,
      created: new Date(e.created).toISOString(),
      before: e.before ?? null,
      after: e.after ?? null,
      edit_note: e.edit_note,
    }));
    return sendJsonStatus(reply, 200, { ...listing, pending }, { etag: listingTag(listing) });
  });

  app.get<{ Params: ImageParams }>('/release/:mbid/images/:id', async function showImage(req, reply) {
    const listing = await releaseListing(deps, req.params.mbid);
    const entry = listing.images.find((i) => i.id === req.params.id);
    if (entry === undefined) throw new AppError('NOT_FOUND', `cover image with id ${req.params.id} not found on release ${req.params.mbid}`);
    return sendJsonStatus(reply, 200, entry, { etag: listingTag(listing) });
  });

  app.post<{ Params: ReleaseParams }>('/release/:mbid/images', async function addImageRoute(req, reply) {
    const { mbid } = req.params;
    // An unknown release is refused before its body is read.
    await releaseListing(deps, mbid);
    const editor = editorOf(req);
    // The body is read in a slot of this user's (at most UPLOADS_PER_USER at once), at the client's
    // pace within the request timeout; only a whole body waits for a turn to be decoded and stored.
    const done = await uploads.slots.run(editor.id, async () => {
      const form = await readStreamedForm(req, uploads.folder, uploads.limits);
      try {
        const unknown = [...form.fields.keys(), ...form.files.map((f) => f.field)].find((k) => !['file', 'types', 'comment'].includes(k));
        if (unknown !== undefined) throw new ApiRefusal(400, 'invalid_request', `Unknown field ${JSON.stringify(unknown.slice(0, 40))}; the fields are file, types (repeated) and comment`);
        const [file] = form.files;
        if (file === undefined || file.field !== 'file') throw new ApiRefusal(400, 'invalid_request', 'The image goes in the field "file"');
        const comments = form.fields.get('comment') ?? [];
        if (comments.length > 1) throw new ApiRefusal(400, 'invalid_request', 'Give the comment once');
        checkComment(comments[0]);
        const types = form.fields.get('types') ?? [];
        return await uploads.slots.work(async () => addImage(deps, editor, { release: mbid, bytes: await readStreamed(file), types, comment: comments[0] ?? '' }, ifMatch(req)));
      } finally {
        await discard(form);
      }
    });
    if ('refused' in done) throw uploadRefused(done.refused);
    const entry = done.value;
    added.set(req, entry.id);
    const listing = await releaseListing(deps, mbid);
    return sendJsonStatus(reply, 201, entry, { location: entryUrl(mbid, entry.id), etag: listingTag(listing) });
  });

  app.patch<{ Params: ImageParams }>('/release/:mbid/images/:id', async function editImageRoute(req, reply) {
    const body = jsonObject(req, ['types', 'comment']);
    if (body.types === undefined && body.comment === undefined) throw new ApiRefusal(400, 'invalid_request', 'Give types, comment or both');
    const types = body.types === undefined ? undefined : stringArray(body.types, 'types', 20);
    if (body.comment !== undefined && typeof body.comment !== 'string') throw new ApiRefusal(400, 'invalid_request', 'comment must be a string');
    checkComment(body.comment);
    const { mbid, id } = req.params;
    const entry = await editImage(deps, editorOf(req), { release: mbid, id, types, comment: body.comment as string | undefined }, ifMatch(req));
    return sendJsonStatus(reply, 200, entry, { etag: listingTag(await releaseListing(deps, mbid)) });
  });

  app.delete<{ Params: ImageParams }>('/release/:mbid/images/:id', async function removeImageRoute(req, reply) {
    const { mbid, id } = req.params;
    await removeImage(deps, editorOf(req), mbid, id, ifMatch(req));
    return reply.code(204).headers({ ...NO_STORE, etag: listingTag(await releaseListing(deps, mbid)) }).send();
  });

  app.put<{ Params: ReleaseParams }>('/release/:mbid/order', async function reorderRoute(req, reply) {
    const body = jsonObject(req, ['images']);
    const ids = stringArray(body.images, 'images', 10_000);
    await reorderImages(deps, editorOf(req), req.params.mbid, ids, ifMatch(req));
    return sendListing(reply, req.params.mbid);
  });

  app.put<{ Params: ReleaseParams }>('/release-group/:mbid/cover', async function groupCoverRoute(req, reply) {
    const body = jsonObject(req, ['release']);
    if (typeof body.release !== 'string') throw new ApiRefusal(400, 'invalid_request', 'release must be a release MBID');
    await chooseGroupCover(deps, editorOf(req), req.params.mbid, body.release);
    const listing: Listing | undefined = await currentGroupListing(deps.api, req.params.mbid);
    return sendJsonStatus(reply, 200, listing ?? { images: [], release: `${deps.api.urls.musicBrainzUrl}/release/${body.release}` });
  });
}

import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { checkAccessToken, isRefusal, type TokenHolder } from '../../auth/pages.js';
import { artState, currentGroupListing, storedEditNote, type Listing } from '../../cover-art/index.js';
import { AppError, isAppError } from '../../shared/errors.js';
import { addImage, chooseGroupCover, COMMENT_MAX_LENGTH, editImage, listingTag, ownerListing, removeImage, reorderImages, type Editor } from '../changes.js';
import type { WebsiteDeps } from '../deps.js';
import type { SiteEntity } from '../entities.js';
import { BodyRefused, discard, readStreamed, readStreamedForm, streamMultipart, type UploadRefusal } from '../upload-body.js';
import { makeUploads, UPLOAD_RETRY_AFTER, UPLOADS_PER_USER } from '../uploads.js';
import { auditCuration, type CurationEvent } from '../audit.js';

/*
 * The write API for tools (docs/api.md, "The write API for tools"): under /api/cover-art/ (a
 * release's images, a group's cover) and /api/event-art/ (an event's images) on the website's
 * origin, authorized by an access token with the cover_art scope; the same routes registered for
 * each (entities.ts). JSON in and out; errors as {"error", "error_description"}; a token refused
 * as RFC 6750 says, with WWW-Authenticate.
 */

/** What the routes are registered with: the website's deps and whose art they change. */
export interface ArtApiOptions extends WebsiteDeps {
  entity: SiteEntity;
}
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

/**
 * The editor's note on a change (`edit_note`, as the upload page's), checked as it is stored:
 * trimmed, at most EDIT_NOTE_MAX_LENGTH characters (400 beyond), null when blank. Undefined:
 * none given. Checked before the change does any work.
 */
function editNoteOf(value: unknown): { note: string | undefined; stored: string | null } | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw new ApiRefusal(400, 'invalid_request', 'edit_note must be a string');
  try {
    return { note: value, stored: storedEditNote(value) };
  } catch (err) {
    if (isAppError(err)) throw new ApiRefusal(400, 'invalid_request', err.message);
    throw err;
  }
}

/** A change's answer: with the edit note as stored when the request gave one. */
function withNote<T extends object>(body: T, note: { stored: string | null } | undefined): T | (T & { edit_note: string | null }) {
  return note === undefined ? body : { ...body, edit_note: note.stored };
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

interface OwnerParams {
  mbid: string;
}
interface ImageParams extends OwnerParams {
  id: string;
}

/** The write API's changes by method and route (under the entity's prefix), as audit events. */
function changeEvents(entity: SiteEntity): Record<string, CurationEvent> {
  const base = `${entity.apiPrefix}/${entity.name}/:mbid`;
  return {
    [`POST ${base}/images`]: 'cover_art.added',
    [`PATCH ${base}/images/:id`]: 'cover_art.edited',
    [`DELETE ${base}/images/:id`]: 'cover_art.removed',
    [`PUT ${base}/order`]: 'cover_art.reordered',
    [`PUT ${entity.apiPrefix}/release-group/:mbid/cover`]: 'cover_art.group_cover_set',
  };
}

/** The write API of a release's or an event's art (options.entity), registered under its prefix. */
export async function artApiRoutes(app: FastifyInstance, options: ArtApiOptions): Promise<void> {
  const { entity, ...deps } = options;
  const events = changeEvents(entity);
  // The id of an image an upload added, for its audit line.
  const added = new WeakMap<FastifyRequest, string>();
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
    const event = req.method === 'GET' || reply.statusCode >= 300 ? undefined : events[`${req.method} ${req.routeOptions.url ?? ''}`];
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
      ...(group ? { releaseGroup: params.mbid } : { [entity.name]: params.mbid }),
      image: params.id ?? added.get(req),
    });
  });

  readRoutes(app, deps, entity);
  uploadRoute(app, deps, entity, added);
  changeRoutes(app, deps, entity);
  if (entity.name === 'release') groupCoverRoute(app, deps);
}

/** The listing with its pending edits, and one image's entry. */
function readRoutes(app: FastifyInstance, deps: WebsiteDeps, entity: SiteEntity): void {
  app.get<{ Params: OwnerParams }>(`/${entity.name}/:mbid/images`, async function listImages(req, reply) {
    const listing = await ownerListing(deps, entity, req.params.mbid);
    const art = await artState(deps.api, entity.art, req.params.mbid);
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

  app.get<{ Params: ImageParams }>(`/${entity.name}/:mbid/images/:id`, async function showImage(req, reply) {
    const listing = await ownerListing(deps, entity, req.params.mbid);
    const entry = listing.images.find((i) => i.id === req.params.id);
    if (entry === undefined) throw new AppError('NOT_FOUND', `${entity.art.imageNoun} with id ${req.params.id} not found on ${entity.name} ${req.params.mbid}`);
    return sendJsonStatus(reply, 200, entry, { etag: listingTag(listing) });
  });
}

/** An image added: a streamed multipart body, read in one of the user's upload slots. */
function uploadRoute(app: FastifyInstance, deps: WebsiteDeps, entity: SiteEntity, added: WeakMap<FastifyRequest, string>): void {
  const uploads = makeUploads(deps, 1);
  const entryUrl = (mbid: string, id: string) => `${deps.pages.deps.authUrl}${entity.apiPrefix}/${entity.name}/${mbid}/images/${id}`;

  app.post<{ Params: OwnerParams }>(`/${entity.name}/:mbid/images`, async function addImageRoute(req, reply) {
    const { mbid } = req.params;
    // An unknown release or event is refused before its body is read.
    await ownerListing(deps, entity, mbid);
    const editor = editorOf(req);
    // The body is read in a slot of this user's (at most UPLOADS_PER_USER at once), at the client's
    // pace within the request timeout; only a whole body waits for a turn to be decoded and stored.
    const done = await uploads.slots.run(editor.id, async () => {
      const form = await readStreamedForm(req, uploads.folder, uploads.limits);
      try {
        const unknown = [...form.fields.keys(), ...form.files.map((f) => f.field)].find((k) => !['file', 'types', 'comment', 'edit_note'].includes(k));
        if (unknown !== undefined) throw new ApiRefusal(400, 'invalid_request', `Unknown field ${JSON.stringify(unknown.slice(0, 40))}; the fields are file, types (repeated), comment and edit_note`);
        const [file] = form.files;
        if (file === undefined || file.field !== 'file') throw new ApiRefusal(400, 'invalid_request', 'The image goes in the field "file"');
        const comments = form.fields.get('comment') ?? [];
        if (comments.length > 1) throw new ApiRefusal(400, 'invalid_request', 'Give the comment once');
        checkComment(comments[0]);
        const notes = form.fields.get('edit_note') ?? [];
        if (notes.length > 1) throw new ApiRefusal(400, 'invalid_request', 'Give the edit note once');
        const note = editNoteOf(notes[0]);
        const types = form.fields.get('types') ?? [];
        const entry = await uploads.slots.work(async () =>
          addImage(deps, entity, editor, { owner: mbid, bytes: await readStreamed(file), types, comment: comments[0] ?? '', editNote: note?.note }, ifMatch(req)),
        );
        return { entry, note };
      } finally {
        await discard(form);
      }
    });
    if ('refused' in done) throw uploadRefused(done.refused);
    const { entry, note } = done.value;
    added.set(req, entry.id);
    const listing = await ownerListing(deps, entity, mbid);
    return sendJsonStatus(reply, 201, withNote(entry, note), { location: entryUrl(mbid, entry.id), etag: listingTag(listing) });
  });
}

/** An image's types and comment, its removal, the order. */
function changeRoutes(app: FastifyInstance, deps: WebsiteDeps, entity: SiteEntity): void {
  app.patch<{ Params: ImageParams }>(`/${entity.name}/:mbid/images/:id`, async function editImageRoute(req, reply) {
    const body = jsonObject(req, ['types', 'comment', 'edit_note']);
    if (body.types === undefined && body.comment === undefined) throw new ApiRefusal(400, 'invalid_request', 'Give types, comment or both');
    const types = body.types === undefined ? undefined : stringArray(body.types, 'types', 20);
    if (body.comment !== undefined && typeof body.comment !== 'string') throw new ApiRefusal(400, 'invalid_request', 'comment must be a string');
    checkComment(body.comment);
    const note = editNoteOf(body.edit_note);
    const { mbid, id } = req.params;
    const entry = await editImage(deps, entity, editorOf(req), { owner: mbid, id, types, comment: body.comment as string | undefined, editNote: note?.note }, ifMatch(req));
    return sendJsonStatus(reply, 200, withNote(entry, note), { etag: listingTag(await ownerListing(deps, entity, mbid)) });
  });

  app.delete<{ Params: ImageParams }>(`/${entity.name}/:mbid/images/:id`, async function removeImageRoute(req, reply) {
    // A body is optional: {"edit_note": "..."} says why.
    const note = req.headers['content-type'] === undefined ? undefined : editNoteOf(jsonObject(req, ['edit_note']).edit_note);
    const { mbid, id } = req.params;
    await removeImage(deps, entity, editorOf(req), mbid, id, ifMatch(req), note?.note);
    return reply.code(204).headers({ ...NO_STORE, etag: listingTag(await ownerListing(deps, entity, mbid)) }).send();
  });

  app.put<{ Params: OwnerParams }>(`/${entity.name}/:mbid/order`, async function reorderRoute(req, reply) {
    const body = jsonObject(req, ['images', 'edit_note']);
    const ids = stringArray(body.images, 'images', 10_000);
    const note = editNoteOf(body.edit_note);
    await reorderImages(deps, entity, editorOf(req), req.params.mbid, ids, ifMatch(req), note?.note);
    const listing = await ownerListing(deps, entity, req.params.mbid);
    return sendJsonStatus(reply, 200, withNote(listing, note), { etag: listingTag(listing) });
  });
}

/** A release group's cover (the Cover Art Archive's only). */
function groupCoverRoute(app: FastifyInstance, deps: WebsiteDeps): void {
  app.put<{ Params: OwnerParams }>('/release-group/:mbid/cover', async function groupCoverRoute(req, reply) {
    const body = jsonObject(req, ['release', 'edit_note']);
    if (typeof body.release !== 'string') throw new ApiRefusal(400, 'invalid_request', 'release must be a release MBID');
    const note = editNoteOf(body.edit_note);
    await chooseGroupCover(deps, editorOf(req), req.params.mbid, body.release, note?.note);
    const listing: Listing | undefined = await currentGroupListing(deps.api, req.params.mbid);
    return sendJsonStatus(reply, 200, withNote(listing ?? { images: [], release: `${deps.api.urls.musicBrainzUrl}/release/${body.release}` }, note));
  });
}

import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { csrfValid, errorPage, EXPIRED, formParams, page, pageErrors, redirectWithFlash, requireViewer, sendPage, type SafeHtml, type SignedIn } from '../auth/pages.js';
import { artTypeNames, EDIT_NOTE_MAX_LENGTH, type EventListingImage } from '../cover-art/index.js';
import { isAppError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import { addImage, COMMENT_MAX_LENGTH, ownerListing, undoAdd } from './changes.js';
import type { WebsiteDeps } from './deps.js';
import { artPath, artRoute, SITE_ENTITIES, type SiteEntity } from './entities.js';
import { auditCuration } from './audit.js';
import { BodyRefused, discard, readStreamed, readStreamedForm, streamMultipart, type StreamedForm } from './upload-body.js';
import { makeUploads, UPLOAD_RETRY_AFTER, UPLOADS_PER_USER, type Uploads } from './uploads.js';
import { UPLOAD_SCRIPT } from './views/upload-script.js';
import { UPLOAD_STYLE, uploadBody, type UploadView } from './views/upload.js';

/*
 * The upload page (docs/website.md, "Uploading on the website"): signed-in editors add images
 * to a release or an event (entities.ts), each with its types and comment, and one edit note
 * for the batch. A plain multipart form (CSRF
 * token first) takes one image per submission without script and answers with Post/Redirect/Get;
 * the page's same-origin script (views/upload-script.ts) sends several, one request each with
 * `Accept: application/json` (answered in JSON), then posts their ids to …/done for the
 * gallery's notice. The body streams to disk like the API's, and the same domain path adds
 * each image.
 */

/** Images one form sends at most (the page sends one; a hand-made form may send more, one change). */
const PAGE_FILES = 4;
/** Ids the …/done step names at most. */
const DONE_MAX = 100;
const SCRIPT_PATH = '/static/add-cover-art.js';
const STYLE_PATH = '/static/add-cover-art.css';
/** Versioned by content: a new script or stylesheet is fetched at once, the same one comes from the browser's cache. */
const version = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 12);
const SCRIPT_URL = `${SCRIPT_PATH}?v=${version(UPLOAD_SCRIPT)}`;
const STYLE_URL = `${STYLE_PATH}?v=${version(UPLOAD_STYLE)}`;
/** The upload page's policy: the page's own, plus its script, previews of chosen files (blob:) and its upload (connect-src). */
const UPLOAD_CSP = "default-src 'none'; style-src 'self'; img-src 'self' blob:; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function sendUploadPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply
    .code(status)
    .headers({ 'content-security-policy': UPLOAD_CSP, 'x-frame-options': 'DENY', 'cache-control': 'no-store' })
    .type('text/html; charset=utf-8')
    .send(body);
}

function renderPage(entity: SiteEntity, viewer: SignedIn, body: SafeHtml): string {
  // The layout has no slot for them: the page's own stylesheet and script go at the end of its head.
  return page({ title: `Add ${entity.word}`, body, user: viewer.name, csrf: viewer.csrf }).replace(
    '</head>',
    `<link rel="stylesheet" href="${STYLE_URL}">\n<script src="${SCRIPT_URL}" defer></script>\n</head>`,
  );
}

/** What the form shows again after a refusal: the first row's types and comment, and the edit note. */
function shownAgain(form: StreamedForm | undefined): { row: UploadView['row']; editNote: string } {
  return {
    row: { types: new Set(form?.fields.get('types.0') ?? []), comment: form?.fields.get('comment.0')?.[0] ?? '' },
    editNote: form?.fields.get('edit_note')?.[0] ?? '',
  };
}

/** The gallery's notice for images added (a pending one says it waits). */
function addedNotice(entries: Pick<EventListingImage, 'id' | 'approved' | 'edit'>[]): string {
  const waiting = entries.filter((e) => !e.approved);
  const ids = entries.map((e) => e.id);
  const added = ids.length === 1 ? `Added image ${ids[0]}.` : `Added ${ids.length} images: ${ids.join(', ')}.`;
  if (waiting.length === 0) return added;
  if (waiting.length === 1 && entries.length === 1) return `${added} It waits for an approver (edit #${waiting[0]?.edit}).`;
  return `${added} ${waiting.length === entries.length ? 'They wait' : `${waiting.length} of them wait`} for an approver.`;
}

/** Whether the page's script sent the upload (it asks for JSON), rather than the form itself. */
function fromScript(req: FastifyRequest): boolean {
  return /\bapplication\/json\b/i.test(req.headers.accept ?? '');
}

/** Why a posted form cannot be added as it is, before any image is decoded; undefined: it can. */
function formProblem(form: StreamedForm): string | undefined {
  const chosen = form.files.filter((f) => f.bytes > 0 || f.filename !== '');
  if (chosen.length === 0) return 'Choose at least one image.';
  const stray = chosen.find((f) => !/^file\.\d+$/.test(f.field));
  if (stray !== undefined) return `Unknown field ${JSON.stringify(stray.field.slice(0, 40))}.`;
  const long = chosen.find((f) => (form.fields.get(`comment.${f.field.slice('file.'.length)}`)?.[0] ?? '').length > COMMENT_MAX_LENGTH);
  if (long !== undefined) return `The comment of ${long.filename === '' ? 'an image' : JSON.stringify(long.filename.slice(0, 80))} is longer than ${COMMENT_MAX_LENGTH} characters; nothing was added.`;
  if ((form.fields.get('edit_note')?.[0] ?? '').trim().length > EDIT_NOTE_MAX_LENGTH) return `The edit note is longer than ${EDIT_NOTE_MAX_LENGTH} characters; nothing was added.`;
  return undefined;
}

/** Adds a posted form's images, in turn; one form is one change: a refusal takes back what it added, and is thrown on. */
async function addAll(deps: WebsiteDeps, entity: SiteEntity, uploads: Uploads, editor: { id: number; name: string }, mbid: string, form: StreamedForm): Promise<EventListingImage[]> {
  const chosen = form.files.filter((f) => f.bytes > 0 || f.filename !== '');
  const editNote = form.fields.get('edit_note')?.[0] ?? '';
  const entries: EventListingImage[] = [];
  try {
    for (const file of chosen) {
      const row = file.field.slice('file.'.length);
      const fields = { types: form.fields.get(`types.${row}`) ?? [], comment: form.fields.get(`comment.${row}`)?.[0] ?? '', editNote };
      entries.push(await uploads.slots.work(async () => addImage(deps, entity, editor, { owner: mbid, bytes: await readStreamed(file), ...fields })));
    }
  } catch (err) {
    for (const entry of entries.reverse()) await undoAdd(deps, entity, editor, mbid, entry);
    throw err;
  }
  return entries;
}

export async function uploadPageRoutes(app: FastifyInstance, deps: WebsiteDeps): Promise<void> {
  const uploads = makeUploads(deps, PAGE_FILES);
  streamMultipart(app);
  app.setErrorHandler(async function uploadErrors(err: Error, req, reply) {
    // A path that names no release or event (not an MBID) is a bad request; the store away, a 503; the rest as every page.
    if (isAppError(err) && err.code === 'INVALID_INPUT') return sendPage(reply, 400, errorPage({ error: 'invalid_request', description: err.message }));
    if (isAppError(err) && err.code === 'STORE_UNAVAILABLE') {
      req.log.warn({ err }, 'the object store is unavailable');
      return sendPage(reply.header('retry-after', '5'), 503, errorPage({ error: 'temporarily_unavailable', description: 'The image store cannot be used just now; try again shortly.' }));
    }
    return pageErrors(err, req, reply);
  });

  for (const [path, type, text] of [
    [SCRIPT_PATH, 'text/javascript', UPLOAD_SCRIPT],
    [STYLE_PATH, 'text/css', UPLOAD_STYLE],
  ] as const) {
    app.get(path, async function uploadAsset(_req, reply) {
      return reply.headers({ 'cache-control': 'public, max-age=86400' }).type(`${type}; charset=utf-8`).send(text);
    });
  }

  for (const entity of SITE_ENTITIES) {
    const view: ViewOf = async (mbid, viewer, form, error) => ({
      mbid,
      entity: entity.name,
      word: entity.word,
      gallery: artPath(entity, mbid),
      action: artPath(entity, mbid, 'add'),
      csrf: viewer.csrf,
      types: await artTypeNames(deps.api, entity.art),
      ...shownAgain(form),
      maxBytes: deps.coverArt.limits.maxBytes,
      commentMax: COMMENT_MAX_LENGTH,
      noteMax: EDIT_NOTE_MAX_LENGTH,
      error,
    });
    formRoutes(app, deps, entity, uploads, view);
    doneRoute(app, deps, entity, view);
  }
}

/** The page, and the images its form (or its script, one image a request) posts. */
function formRoutes(app: FastifyInstance, deps: WebsiteDeps, entity: SiteEntity, uploads: Uploads, view: ViewOf): void {
  const ctx = deps.pages;
  app.get<{ Params: { mbid: string } }>(artRoute(entity, 'add'), async function uploadForm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    await ownerListing(deps, entity, req.params.mbid);
    const mbid = parseMbid(req.params.mbid) as string;
    return sendUploadPage(reply, 200, renderPage(entity, viewer, uploadBody(await view(mbid, viewer, undefined))));
  });

  app.post<{ Params: { mbid: string } }>(artRoute(entity, 'add'), async function upload(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    await ownerListing(deps, entity, req.params.mbid);
    const mbid = parseMbid(req.params.mbid) as string;
    const editor = { id: viewer.accountId, name: viewer.name };
    const json = fromScript(req);
    let form: StreamedForm | undefined;
    // A refusal: to the script as JSON, to the form as the form again with the reason.
    const again = async (status: number, error: string, headers: Record<string, string> = {}): Promise<FastifyReply> => {
      reply.headers(headers);
      if (json) return reply.code(status).headers({ 'cache-control': 'no-store' }).send({ error: status === 429 || status === 503 ? 'temporarily_unavailable' : 'invalid_request', error_description: error });
      return sendUploadPage(reply, status, renderPage(entity, viewer, uploadBody(await view(mbid, viewer, form, error))));
    };
    // The answer, once the temporary files are gone (a function: a reply is a thenable, which an await would unwrap).
    // The body is read in a slot of this user's, shared with the write API (uploads.ts), then waits its turn to be stored.
    const done = await uploads.slots.run(viewer.accountId, answer);
    if (!('refused' in done)) return done.value();
    const refusal = { 'retry-after': UPLOAD_RETRY_AFTER, connection: 'close' };
    if (done.refused === 'user') return again(429, `${UPLOADS_PER_USER} uploads of yours are in progress already; try again once one is done.`, refusal);
    return again(503, 'Too many uploads at once; try again shortly.', refusal);

    async function answer(): Promise<() => Promise<FastifyReply> | FastifyReply> {
      try {
        form = await readStreamedForm(req, uploads.folder, uploads.limits);
      } catch (err) {
        if (err instanceof BodyRefused) return () => again(err.status === 415 ? 400 : err.status, err.message, err.unread ? { connection: 'close' } : {});
        throw err;
      }
      try {
        req.form = new URLSearchParams([...form.fields].flatMap(([k, vs]) => vs.map((v): [string, string] => [k, v])));
        if (!csrfValid(req)) return () => again(403, EXPIRED);
        const problem = formProblem(form);
        if (problem !== undefined) return () => again(400, problem);
        let entries: EventListingImage[];
        try {
          entries = await addAll(deps, entity, uploads, editor, mbid, form);
        } catch (err) {
          const several = form.files.filter((f) => f.bytes > 0 || f.filename !== '').length > 1;
          if (isAppError(err) && err.expose) return () => again(400, `${several ? 'Nothing was added: ' : ''}${err.message}`);
          throw err;
        }
        for (const e of entries) auditCuration(req, 'cover_art.added', { user: editor.name, account: editor.id, address: deps.pages.clientAddress(req), via: 'page', [entity.name]: mbid, image: e.id });
        const notice = addedNotice(entries);
        if (json) {
          const first = entries[0] as EventListingImage;
          return () => reply.code(201).headers({ 'cache-control': 'no-store' }).send({ image: { id: first.id, edit: first.edit, approved: first.approved }, images: entries.map((e) => ({ id: e.id, edit: e.edit, approved: e.approved })), notice });
        }
        return () => redirectWithFlash(reply, { a: editor.id, n: notice }, artPath(entity, mbid));
      } finally {
        if (form !== undefined) await discard(form);
      }
    }
  });
}

type ViewOf = (mbid: string, viewer: SignedIn, form: StreamedForm | undefined, error?: string) => Promise<UploadView>;

function doneRoute(app: FastifyInstance, deps: WebsiteDeps, entity: SiteEntity, view: ViewOf): void {
  const ctx = deps.pages;
  // The script's last step: the images it added, for the gallery's notice (Post/Redirect/Get).
  app.post<{ Params: { mbid: string } }>(`${artRoute(entity, 'add')}/done`, async function uploaded(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const listing = await ownerListing(deps, entity, req.params.mbid);
    const mbid = parseMbid(req.params.mbid) as string;
    if (!csrfValid(req)) return sendUploadPage(reply, 403, renderPage(entity, viewer, uploadBody(await view(mbid, viewer, undefined, EXPIRED))));
    const named = new Set((formParams(req).get('added') ?? '').split(',').slice(0, DONE_MAX));
    // Only images of this release or event: the notice never names what is not there.
    const added = listing.images.filter((i) => named.has(i.id));
    const gallery = artPath(entity, mbid);
    if (added.length === 0) return reply.redirect(gallery, 303);
    return redirectWithFlash(reply, { a: viewer.accountId, n: addedNotice(added) }, gallery);
  });
}

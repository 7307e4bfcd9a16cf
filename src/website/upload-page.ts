import type { FastifyInstance, FastifyReply } from 'fastify';
import { csrfValid, errorPage, EXPIRED, html, page, pageErrors, redirectWithFlash, requireViewer, sendPage, type SafeHtml, type SignedIn } from '../auth/pages.js';
import { artTypeNames, type ListingImage } from '../cover-art/index.js';
import { isAppError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';
import { addImage, COMMENT_MAX_LENGTH, releaseListing, undoAdd } from './changes.js';
import type { WebsiteDeps } from './deps.js';
import { auditCuration } from './audit.js';
import { BodyRefused, discard, readStreamed, readStreamedForm, streamMultipart, type StreamedForm } from './upload-body.js';
import { makeUploads, UPLOAD_RETRY_AFTER, UPLOADS_PER_USER } from './uploads.js';

/*
 * The upload page (docs/website.md, "Uploading on the website"): signed-in editors add several images
 * at once, each with its types and comment. A plain multipart form (CSRF token first), so it
 * works without script; a small same-origin script adds previews and upload progress. The
 * body streams to disk like the API's, and the same domain path adds each image.
 */

/** Images one form sends at most. */
export const PAGE_FILES = 4;
const SCRIPT_PATH = '/static/add-cover-art.js';
const STYLE_PATH = '/static/add-cover-art.css';
/** The page's own rules, beside the site's stylesheet: type checkboxes in rows that wrap, 44 px targets, previews that fit a phone. */
const UPLOAD_STYLE = `fieldset.upload-row{display:grid;gap:.5rem;min-width:0;margin:.75rem 0}
fieldset.types{display:flex;flex-wrap:wrap;gap:0 1rem;border:0;padding:0;margin:.25rem 0;min-width:0}
fieldset.types legend{font-weight:600;padding:0;margin-bottom:.25rem}
label.check{display:inline-flex;align-items:center;gap:.4rem;font-weight:400;min-height:2.75rem;min-width:2.75rem}
label.check input{width:1.25rem;height:1.25rem;margin:0}
input[type=file]{font:inherit;min-height:2.75rem;max-width:100%}
fieldset.upload-row input[type=text]{box-sizing:border-box}
.preview img{display:block;max-width:100%;height:auto;border:1px solid var(--line);border-radius:.25rem}
.upload-status progress{width:100%;height:1rem}
form#add-cover-art{max-width:100%;min-width:0}
`;
/** The upload page's policy: the page's own, plus its script, previews of chosen files (blob:) and its upload (connect-src). */
const UPLOAD_CSP = "default-src 'none'; style-src 'self'; img-src 'self' blob:; script-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function sendUploadPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply
    .code(status)
    .headers({ 'content-security-policy': UPLOAD_CSP, 'x-frame-options': 'DENY', 'cache-control': 'no-store' })
    .type('text/html; charset=utf-8')
    .send(body);
}


function typeBoxes(types: string[], row: number, checked: Set<string>): SafeHtml[] {
  return types.map(
    (t) => html`<label class="check"><input type="checkbox" name="types.${row}" value="${t}"${checked.has(t) ? html` checked` : ''}> ${t}</label>`,
  );
}

interface RowValues {
  types: Set<string>;
  comment: string;
}

function uploadBody(opts: { mbid: string; csrf: string; types: string[]; rows: RowValues[]; error?: string }): SafeHtml {
  const rows = Array.from({ length: PAGE_FILES }, (_, i) => {
    const v = opts.rows[i] ?? { types: new Set<string>(), comment: '' };
    return html`<fieldset class="card upload-row">
<legend>Image ${i + 1}</legend>
<label for="file-${i}">File <span class="hint">JPEG, PNG or GIF</span></label>
<input type="file" id="file-${i}" name="file.${i}" accept="image/jpeg,image/png,image/gif" data-preview="preview-${i}">
<div class="preview" id="preview-${i}"></div>
<fieldset class="types"><legend>Types</legend>
${typeBoxes(opts.types, i, v.types)}
</fieldset>
<label for="comment-${i}">Comment</label>
<input type="text" id="comment-${i}" name="comment.${i}" value="${v.comment}" maxlength="255">
</fieldset>`;
  });
  const gallery = `/release/${opts.mbid}/cover-art`;
  return html`<p><a href="${gallery}">Back to the cover art of release <code>${opts.mbid}</code></a></p>
${opts.error ? html`<p class="error" role="alert">${opts.error}</p>` : ''}
<form method="post" enctype="multipart/form-data" action="/release/${opts.mbid}/add-cover-art" id="add-cover-art" class="stack">
<input type="hidden" name="csrf_token" value="${opts.csrf}">
<p class="muted">Choose up to ${PAGE_FILES} images; give each its types and a comment. Empty rows are skipped.</p>
${rows}
<div class="upload-status" hidden><label for="upload-progress">Upload progress</label><progress id="upload-progress" max="100" value="0"></progress></div>
<p id="upload-message" role="status"></p>
<div class="actions"><button type="submit">Upload</button><a class="action" href="${gallery}">Cancel</a></div>
</form>`;
}

function renderPage(viewer: SignedIn, body: SafeHtml): string {
  // The layout has no slot for them: the page's own stylesheet and script go at the end of its head.
  return page({ title: 'Add cover art', body, user: viewer.name, csrf: viewer.csrf }).replace(
    '</head>',
    `<link rel="stylesheet" href="${STYLE_PATH}">\n<script src="${SCRIPT_PATH}" defer></script>\n</head>`,
  );
}

function rowValues(form: StreamedForm | undefined): RowValues[] {
  return Array.from({ length: PAGE_FILES }, (_, i) => ({
    types: new Set(form?.fields.get(`types.${i}`) ?? []),
    comment: form?.fields.get(`comment.${i}`)?.[0] ?? '',
  }));
}

export async function uploadPageRoutes(app: FastifyInstance, deps: WebsiteDeps): Promise<void> {
  const uploads = makeUploads(deps, PAGE_FILES);
  const ctx = deps.pages;
  streamMultipart(app);
  app.setErrorHandler(async function uploadErrors(err: Error, req, reply) {
    // A path that names no release (not an MBID) is a bad request; the store away, a 503; the rest as every page.
    if (isAppError(err) && err.code === 'INVALID_INPUT') return sendPage(reply, 400, errorPage({ error: 'invalid_request', description: err.message }));
    if (isAppError(err) && err.code === 'STORE_UNAVAILABLE') {
      req.log.warn({ err }, 'the object store is unavailable');
      return sendPage(reply.header('retry-after', '5'), 503, errorPage({ error: 'temporarily_unavailable', description: 'The image store cannot be used just now; try again shortly.' }));
    }
    return pageErrors(err, req, reply);
  });

  app.get(SCRIPT_PATH, async function uploadScript(_req, reply) {
    return reply.headers({ 'cache-control': 'public, max-age=3600' }).type('text/javascript; charset=utf-8').send(UPLOAD_SCRIPT);
  });

  app.get(STYLE_PATH, async function uploadStyle(_req, reply) {
    return reply.headers({ 'cache-control': 'public, max-age=3600' }).type('text/css; charset=utf-8').send(UPLOAD_STYLE);
  });

  app.get<{ Params: { mbid: string } }>('/release/:mbid/add-cover-art', async function uploadForm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const listing = await releaseListing(deps, req.params.mbid);
    const mbid = parseMbid(req.params.mbid) as string;
    void listing;
    return sendUploadPage(reply, 200, renderPage(viewer, uploadBody({ mbid, csrf: viewer.csrf, types: await artTypeNames(deps.api), rows: rowValues(undefined) })));
  });

  app.post<{ Params: { mbid: string } }>('/release/:mbid/add-cover-art', async function upload(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    await releaseListing(deps, req.params.mbid);
    const mbid = parseMbid(req.params.mbid) as string;
    const types = await artTypeNames(deps.api);
    const editor = { id: viewer.accountId, name: viewer.name };
    let form: StreamedForm | undefined;
    const again = (status: number, error: string, headers: Record<string, string> = {}) =>
      sendUploadPage(reply.headers(headers), status, renderPage(viewer, uploadBody({ mbid, csrf: viewer.csrf, types, rows: rowValues(form), error })));
    // The answer, once the temporary files are gone (a function: a reply is a thenable, which an await would unwrap).
    // The body is read in a slot of this user's, shared with the write API (uploads.ts), then waits its turn to be stored.
    const done = await uploads.slots.run(viewer.accountId, answer);
    if (!('refused' in done)) return done.value();
    const refusal = { 'retry-after': UPLOAD_RETRY_AFTER, connection: 'close' };
    if (done.refused === 'user') return again(429, `${UPLOADS_PER_USER} uploads of yours are in progress already; try again once one is done.`, refusal);
    return again(503, 'Too many uploads at once; try again shortly.', refusal);

    async function answer(): Promise<() => FastifyReply> {
      try {
        form = await readStreamedForm(req, uploads.folder, uploads.limits);
      } catch (err) {
        if (err instanceof BodyRefused) return () => again(err.status === 415 ? 400 : err.status, err.message, err.unread ? { connection: 'close' } : {});
        throw err;
      }
      try {
        req.form = new URLSearchParams([...form.fields].flatMap(([k, vs]) => vs.map((v): [string, string] => [k, v])));
        if (!csrfValid(req)) return () => again(403, EXPIRED);
        const chosen = form.files.filter((f) => f.bytes > 0 || f.filename !== '');
        if (chosen.length === 0) return () => again(400, 'Choose at least one image.');
        const stray = chosen.find((f) => !/^file\.\d+$/.test(f.field));
        if (stray !== undefined) return () => again(400, `Unknown field ${JSON.stringify(stray.field.slice(0, 40))}.`);
        const long = chosen.find((f) => (form?.fields.get(`comment.${f.field.slice('file.'.length)}`)?.[0] ?? '').length > COMMENT_MAX_LENGTH);
        if (long !== undefined) return () => again(400, `The comment of ${long.filename === '' ? 'an image' : JSON.stringify(long.filename.slice(0, 80))} is longer than ${COMMENT_MAX_LENGTH} characters; nothing was added.`);
        const entries: ListingImage[] = [];
        try {
          for (const file of chosen) {
            const row = file.field.slice('file.'.length);
            const fields = { types: form.fields.get(`types.${row}`) ?? [], comment: form.fields.get(`comment.${row}`)?.[0] ?? '' };
            entries.push(await uploads.slots.work(async () => addImage(deps, editor, { release: mbid, bytes: await readStreamed(file), ...fields })));
          }
        } catch (err) {
          // One form, one change: what this form added before the refusal goes again.
          for (const entry of entries.reverse()) await undoAdd(deps, editor, mbid, entry);
          if (isAppError(err) && err.expose) return () => again(400, `${chosen.length > 1 ? 'Nothing was added: ' : ''}${err.message}`);
          throw err;
        }
        const added = entries.map((e) => e.id);
        for (const id of added) auditCuration(req, 'cover_art.added', { user: editor.name, account: editor.id, address: deps.pages.clientAddress(req), via: 'page', release: mbid, image: id });
        const notice = added.length === 1 ? `Added image ${added[0]}.` : `Added ${added.length} images: ${added.join(', ')}.`;
        return () => redirectWithFlash(reply, { a: editor.id, n: notice }, `/release/${mbid}/cover-art`);
      } finally {
        if (form !== undefined) await discard(form);
      }
    }
  });
}

/** The page's script: previews of the chosen files, and the upload with a progress bar (the form works without it). */
const UPLOAD_SCRIPT = `'use strict';
(function () {
  function bind() {
    var form = document.getElementById('add-cover-art');
    if (!form || !window.FormData || !window.XMLHttpRequest) return;
    var inputs = form.querySelectorAll('input[type=file][data-preview]');
    Array.prototype.forEach.call(inputs, function (input) {
      input.addEventListener('change', function () {
        var box = document.getElementById(input.getAttribute('data-preview'));
        if (!box) return;
        while (box.firstChild) box.removeChild(box.firstChild);
        var file = input.files && input.files[0];
        if (!file) return;
        var img = document.createElement('img');
        img.src = URL.createObjectURL(file);
        img.alt = 'Preview of ' + file.name;
        img.width = 160;
        img.className = 'preview-image';
        box.appendChild(img);
      });
    });
    form.addEventListener('submit', function (event) {
      event.preventDefault();
      var status = form.querySelector('.upload-status');
      var bar = document.getElementById('upload-progress');
      var message = document.getElementById('upload-message');
      var button = form.querySelector('button[type=submit]');
      status.hidden = false;
      button.disabled = true;
      message.textContent = 'Uploading…';
      var xhr = new XMLHttpRequest();
      xhr.open('POST', form.action);
      xhr.upload.addEventListener('progress', function (e) {
        if (e.lengthComputable) bar.value = Math.round((e.loaded / e.total) * 100);
      });
      xhr.addEventListener('load', function () {
        // Redirected (Post/Redirect/Get) only when the upload succeeded: on to the gallery.
        var url = xhr.responseURL || '';
        if (url !== '' && url !== form.action) {
          window.location.assign(url);
          return;
        }
        // The form again, with the reason: shown in place of this one.
        var doc = new DOMParser().parseFromString(xhr.responseText, 'text/html');
        var main = doc.querySelector('main');
        if (main) {
          document.querySelector('main').replaceWith(document.importNode(main, true));
          bind();
          var alert = document.querySelector('main .error');
          if (alert) alert.focus();
        } else {
          button.disabled = false;
          message.textContent = 'The upload failed (' + xhr.status + ').';
        }
      });
      xhr.addEventListener('error', function () {
        button.disabled = false;
        message.textContent = 'The upload failed: the connection was lost.';
      });
      xhr.send(new FormData(form));
    });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', bind);
  else bind();
})();
`;

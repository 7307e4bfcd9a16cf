/*
 * The upload page over HTTP, as a browser without script sends it: a multipart form with
 * its CSRF token, several files with their own types and comment, Post/Redirect/Get back to
 * the gallery; refused without the token or with a bad file, nothing changed.
 */
import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addUser, Browser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, publicListing, startSite, type Part, type Site } from './support.js';

const RELEASE = '22222222-2222-4333-8444-555555555501';
const UNKNOWN = '22222222-2222-4333-8444-5555555555ff';
const MAX_BYTES = 300_000;

describe(`the upload page (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let alice: Browser;
  let jpeg: Buffer;
  let png: Buffer;

  const pageUrl = (release = RELEASE) => `${site.web}/release/${release}/add-cover-art`;
  const cookieOf = (b: Browser) => [...b.jar].map(([k, v]) => `${k}=${v}`).join('; ');
  const post = (parts: Part[], release = RELEASE) => {
    const m = multipart(parts);
    return call(pageUrl(release), { method: 'POST', headers: { cookie: cookieOf(alice), 'content-type': m.type }, body: m.body });
  };
  const csrf = async () => Browser.csrf(await alice.fetch(pageUrl()));
  const ids = async () => (await publicListing(site, RELEASE))?.images.map((i) => i.id) ?? [];
  const uploadsLeft = async () => (await readdir(path.join(t.dir, 'uploads')).catch(() => [])).length;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_UPLOAD_MAX_BYTES: String(MAX_BYTES) });
    site = await startSite(t);
    await addUser(t, 'alice');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', '22222222-2222-4333-8444-5555555555a1']);
    alice = await signIn(site.web, 'alice');
    [jpeg, png] = await Promise.all([makeJpeg(320, 320), makePng(200, 200)]);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it('signed out: sign in first, then back to the page', async () => {
    const res = await call(pageUrl());
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, `/login?return_to=${encodeURIComponent(`/release/${RELEASE}/add-cover-art`)}`);
    const posted = await call(pageUrl(), { method: 'POST', ...(() => { const m = multipart([{ name: 'file.0', value: jpeg, filename: 'a.jpg' }]); return { headers: { 'content-type': m.type }, body: m.body }; })() });
    assert.equal(posted.status, 303);
    assert.deepEqual(await ids(), []);
  });

  it('the form: a CSRF token, one file, its types in a disclosure, a comment, an edit note, its script and stylesheet under the CSP', async () => {
    const res = await alice.fetch(pageUrl());
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-security-policy']), /script-src 'self'/);
    assert.doesNotMatch(String(res.headers['content-security-policy']), /unsafe-inline/);
    assert.match(res.body, /enctype="multipart\/form-data"/);
    assert.match(res.body, /<input type="file" id="file-0" name="file\.0"/);
    assert.doesNotMatch(res.body, /name="file\.1"/, 'one image per submission without script');
    assert.match(res.body, /<details class="types">\s*<summary>Types: <span class="chosen">none chosen<\/span><\/summary>/);
    assert.match(res.body, /<input type="checkbox" id="type-0-\d+" name="types\.0" value="Front">/);
    assert.match(res.body, /name="comment\.0"/);
    assert.match(res.body, /<textarea id="edit-note" name="edit_note" rows="3" maxlength="2000"><\/textarea>/);
    const script = /<script src="(\/static\/add-cover-art\.js\?v=[\w-]+)" defer><\/script>/.exec(res.body)?.[1];
    const style = /<link rel="stylesheet" href="(\/static\/add-cover-art\.css\?v=[\w-]+)">/.exec(res.body)?.[1];
    assert.ok(script !== undefined && style !== undefined, 'the script and stylesheet, versioned');
    assert.doesNotMatch(res.body, /<script>/, 'no inline script');
    const js = await call(`${site.web}${script}`);
    assert.equal(js.status, 200);
    assert.match(String(js.headers['content-type']), /^text\/javascript/);
    assert.match(js.body, /XMLHttpRequest/);
    const css = await call(`${site.web}${style}`);
    assert.match(String(css.headers['content-type']), /^text\/css/);
    const unknown = await alice.fetch(pageUrl(UNKNOWN));
    assert.equal(unknown.status, 404);
    const notMbid = await alice.fetch(pageUrl('not-a-release'));
    assert.equal(notMbid.status, 400);
    assert.match(notMbid.body, /not a valid MBID/);
  });

  it('without its CSRF token the upload is refused and nothing changes', async () => {
    const res = await post([{ name: 'file.0', value: jpeg, filename: 'a.jpg', type: 'image/jpeg' }]);
    assert.equal(res.status, 403);
    assert.match(res.body, /expired/);
    const wrong = await post([{ name: 'csrf_token', value: 'x'.repeat(43) }, { name: 'file.0', value: jpeg, filename: 'a.jpg', type: 'image/jpeg' }]);
    assert.equal(wrong.status, 403);
    assert.deepEqual(await ids(), []);
    assert.equal(await uploadsLeft(), 0);
  });

  it('bad files: the form again with the reason (400), nothing added, the types kept', async () => {
    const token = await csrf();
    const res = await post([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: jpeg, filename: 'good.jpg', type: 'image/jpeg' },
      { name: 'types.0', value: 'Front' },
      { name: 'file.1', value: Buffer.from('not an image at all'), filename: 'bad.jpg', type: 'image/jpeg' },
      { name: 'types.1', value: 'Back' },
    ]);
    assert.equal(res.status, 400, res.body.slice(0, 300));
    assert.match(res.body, /role="alert"[^>]*>Nothing was added: not an image sleeve can read/);
    assert.match(res.body, /name="types\.0" value="Front" checked/, 'the first row shown again');
    assert.deepEqual(await ids(), [], 'the good file of the same form was not kept');

    const long = await post([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: jpeg, filename: 'good.jpg', type: 'image/jpeg' },
      { name: 'comment.0', value: 'ok' },
      { name: 'file.1', value: png, filename: 'long.png', type: 'image/png' },
      { name: 'comment.1', value: 'x'.repeat(256) },
    ]);
    assert.equal(long.status, 400, long.body.slice(0, 300));
    assert.match(long.body, /The comment of &quot;long\.png&quot; is longer than 255 characters; nothing was added/);
    assert.deepEqual(await ids(), [], 'a comment over the limit keeps the whole form out');

    const none = await post([{ name: 'csrf_token', value: token }, { name: 'file.0', value: Buffer.alloc(0), filename: '' }]);
    assert.equal(none.status, 400);
    assert.match(none.body, /Choose at least one image/);

    const big = await post([{ name: 'csrf_token', value: token }, { name: 'file.0', value: Buffer.concat([jpeg, Buffer.alloc(MAX_BYTES)]), filename: 'big.jpg' }]);
    assert.equal(big.status, 413);
    assert.match(big.body, /larger than the limit of 300000 bytes/);
    assert.deepEqual(await ids(), []);
    assert.equal(await uploadsLeft(), 0);
  });

  it('two files with their types and comments: 303 to the gallery with a notice, both in the listing', async () => {
    const token = await csrf();
    const res = await post([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: jpeg, filename: 'front.jpg', type: 'image/jpeg' },
      { name: 'types.0', value: 'Front' },
      { name: 'comment.0', value: 'the front' },
      { name: 'file.1', value: png, filename: 'back.png', type: 'image/png' },
      { name: 'types.1', value: 'Back' },
      { name: 'types.1', value: 'Spine' },
      { name: 'comment.1', value: 'the back' },
      { name: 'file.2', value: Buffer.alloc(0), filename: '' },
    ]);
    assert.equal(res.status, 303, res.body.slice(0, 300));
    assert.equal(res.headers.location, `/release/${RELEASE}/cover-art`);
    assert.match(String(res.headers['set-cookie']), /__Host-sleeve-flash=[A-Za-z0-9_-]+;.*SameSite=Strict/);
    const listing = await publicListing(site, RELEASE);
    assert.deepEqual(listing?.images.map((i) => [i.types, i.comment]), [
      [['Front'], 'the front'],
      [['Back', 'Spine'], 'the back'],
    ]);
    assert.equal(await uploadsLeft(), 0);
  });

  it('the edit note goes with the edit: shown on its page and in the release history; over 2000 characters refused', async () => {
    const token = await csrf();
    const tooLong = await post([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: jpeg, filename: 'a.jpg', type: 'image/jpeg' },
      { name: 'edit_note', value: 'n'.repeat(2001) },
    ]);
    assert.equal(tooLong.status, 400, tooLong.body.slice(0, 300));
    assert.match(tooLong.body, /The edit note is longer than 2000 characters; nothing was added/);
    const before = await ids();
    assert.equal(before.length, 2);
    const res = await post([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: jpeg, filename: 'liner.jpg', type: 'image/jpeg' },
      { name: 'types.0', value: 'Liner' },
      { name: 'edit_note', value: 'Scanned from my copy <CD>.\nSecond line.' },
    ]);
    assert.equal(res.status, 303, res.body.slice(0, 300));
    const entry = (await publicListing(site, RELEASE))?.images.at(-1) as unknown as { id: string; edit: number };
    const edit = await alice.fetch(`${site.web}/edit/${entry.edit}`);
    assert.match(edit.body, /<dt>Edit note<\/dt><dd class="edit-note">Scanned from my copy &lt;CD&gt;\.<br>Second line\.<\/dd>/);
    const history = await alice.fetch(`${site.web}/release/${RELEASE}/edits`);
    assert.match(history.body, /Edit note: Scanned from my copy &lt;CD&gt;\. Second line\./);
    const shown = await cliInProcess(t.env, ['--json', 'edit', 'show', String(entry.edit)]) as { edit_note: string | null };
    assert.equal(shown.edit_note, 'Scanned from my copy <CD>.\nSecond line.');
  });

  it("the script's requests: JSON answers (201 with the image, 400 with the reason), then …/done redirects to the gallery with the notice", async () => {
    const token = await csrf();
    const m = multipart([
      { name: 'csrf_token', value: token },
      { name: 'file.0', value: png, filename: 'obi.png', type: 'image/png' },
      { name: 'comment.0', value: 'obi' },
      { name: 'edit_note', value: 'batch note' },
    ]);
    const headers = { cookie: cookieOf(alice), 'content-type': m.type, accept: 'application/json' };
    const res = await call(pageUrl(), { method: 'POST', headers, body: m.body });
    assert.equal(res.status, 201, res.body.slice(0, 300));
    const added = res.json() as { image: { id: string; edit: number; approved: boolean }; notice: string };
    assert.equal(added.image.approved, true);
    assert.equal(added.notice, `Added image ${added.image.id}.`);
    assert.ok((await ids()).includes(added.image.id));

    const bad = multipart([{ name: 'csrf_token', value: token }, { name: 'file.0', value: Buffer.from('not an image'), filename: 'x.jpg', type: 'image/jpeg' }]);
    const refused = await call(pageUrl(), { method: 'POST', headers: { ...headers, 'content-type': bad.type }, body: bad.body });
    assert.equal(refused.status, 400);
    assert.match(String(refused.headers['content-type']), /^application\/json/);
    assert.match((refused.json() as { error_description: string }).error_description, /not an image sleeve can read/);

    const done = (added: string) => alice.fetch(`${pageUrl()}/done`, { form: { csrf_token: token, added } });
    const forged = await alice.fetch(`${pageUrl()}/done`, { form: { csrf_token: 'x'.repeat(43), added: added.image.id } });
    assert.equal(forged.status, 403);
    const finished = await done(`${added.image.id},99999999,../x`);
    assert.equal(finished.status, 303, finished.body.slice(0, 300));
    assert.equal(finished.headers.location, `/release/${RELEASE}/cover-art`);
    const gallery = await alice.fetch(`${site.web}${finished.headers.location}`);
    assert.match(gallery.body, new RegExp(`<p class="notice" role="status">Added image ${added.image.id}\\.</p>`), 'only the images of this release are named');
  });
});

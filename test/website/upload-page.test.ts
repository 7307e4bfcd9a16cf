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
import { cliOk, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
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
    await cliOk(t.env, ['release', 'add', RELEASE, '--release-group', '22222222-2222-4333-8444-5555555555a1']);
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

  it('the form: a CSRF token, a file, type checkboxes and a comment per row, its script under the CSP', async () => {
    const res = await alice.fetch(pageUrl());
    assert.equal(res.status, 200);
    assert.match(String(res.headers['content-security-policy']), /script-src 'self'/);
    assert.doesNotMatch(String(res.headers['content-security-policy']), /unsafe-inline/);
    assert.match(res.body, /enctype="multipart\/form-data"/);
    assert.match(res.body, /<input type="file" id="file-0" name="file\.0"/);
    assert.match(res.body, /<input type="checkbox" name="types\.1" value="Front">/);
    assert.match(res.body, /name="comment\.0"/);
    assert.match(res.body, /<script src="\/static\/add-cover-art\.js" defer><\/script>/);
    assert.doesNotMatch(res.body, /<script>/, 'no inline script');
    const script = await call(`${site.web}/static/add-cover-art.js`);
    assert.equal(script.status, 200);
    assert.match(String(script.headers['content-type']), /^text\/javascript/);
    assert.match(script.body, /XMLHttpRequest/);
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
    assert.match(res.body, /role="alert">Nothing was added: not an image sleeve can read/);
    assert.match(res.body, /name="types\.1" value="Back" checked/);
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
});

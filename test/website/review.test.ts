/*
 * The approval policy through the website's public surface: under SLEEVE_APPROVAL=review an
 * ordinary editor's changes from the write API and the pages are edits waiting for an approver
 * (an addition listed approved: false, other changes not applied), listed as pending by
 * GET …/images; an approver's changes apply at once; approving applies the waiting change.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, Browser } from '../helpers/auth.js';
import { cliOk, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, publicListing, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const RELEASE = '22222222-2222-4333-8444-555555555501';
const GROUP = '22222222-2222-4333-8444-5555555555a1';

interface Pending {
  edit: number;
  kind: string;
  image: string | null;
  editor: string | null;
}

describe(`changes under review from the website (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let editorToken: string;
  let approverToken: string;
  let jpeg: Buffer;
  let editor: Browser;

  const api = (p: string) => `${site.web}/api/cover-art${p}`;
  const upload = (token: string, comment: string) => {
    const m = multipart([
      { name: 'file', value: jpeg, filename: 'cover.jpg', type: 'image/jpeg' },
      { name: 'types', value: 'Front' },
      { name: 'comment', value: comment },
    ]);
    return call(api(`/release/${RELEASE}/images`), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': m.type }, body: m.body });
  };
  const images = async (token = editorToken) => {
    const res = await call(api(`/release/${RELEASE}/images`), { headers: { authorization: `Bearer ${token}` } });
    assert.equal(res.status, 200, res.body);
    return res.json() as { images: { id: string; approved: boolean; comment: string; edit: number }[]; pending: Pending[] };
  };

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t, { SLEEVE_APPROVAL: 'review' });
    await addUser(t, 'ed');
    await addUser(t, 'ann', ['--role', 'approver']);
    const app = await addApp(t, 'ed', 'confidential', REDIRECT_URI, 'Tagger');
    await cliOk(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    editor = await signIn(site.web, 'ed');
    editorToken = await toolToken(site, editor, app, 'cover_art');
    approverToken = await toolToken(site, await signIn(site.web, 'ann'), app, 'cover_art');
    jpeg = await makeJpeg(300, 300);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it("lists an editor's addition unapproved, with its edit pending, and an approver's approved", async () => {
    const added = await upload(editorToken, 'by ed');
    assert.equal(added.status, 201, added.body);
    const entry = added.json() as { id: string; approved: boolean; edit: number };
    assert.equal(entry.approved, false);
    const byAnn = await upload(approverToken, 'by ann');
    assert.equal(byAnn.status, 201, byAnn.body);
    assert.equal((byAnn.json() as { approved: boolean }).approved, true);

    const seen = await images();
    assert.deepEqual(
      seen.images.map((i) => [i.comment, i.approved]),
      [
        ['by ed', false],
        ['by ann', true],
      ],
    );
    assert.deepEqual(
      seen.pending.map((p) => [p.edit, p.kind, p.image, p.editor]),
      [[entry.edit, 'add', entry.id, 'ed']],
    );
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.comment), ['by ed', 'by ann'], 'the public listing shows the addition');
  });

  it("holds an editor's reorder and comment until an approver approves them", async () => {
    const before = await images();
    const ids = before.images.map((i) => i.id);
    const reorder = await call(api(`/release/${RELEASE}/order`), { method: 'PUT', headers: { authorization: `Bearer ${editorToken}` }, json: { images: [...ids].reverse() } });
    assert.equal(reorder.status, 200, reorder.body);
    const edit = await call(api(`/release/${RELEASE}/images/${ids[1]}`), { method: 'PATCH', headers: { authorization: `Bearer ${editorToken}` }, json: { comment: 'renamed by ed' } });
    assert.equal(edit.status, 200, edit.body);

    const held = await images();
    assert.deepEqual(held.images.map((i) => i.id), ids, 'the order is unchanged');
    assert.equal(held.images[1]?.comment, 'by ann', 'the comment is unchanged');
    const reorderEdit = held.pending.find((p) => p.kind === 'reorder');
    assert.ok(reorderEdit !== undefined, JSON.stringify(held.pending));
    assert.ok(held.pending.some((p) => p.kind === 'edit' && p.image === ids[1]));

    await cliOk(t.env, ['edit', 'approve', String(reorderEdit.edit)]);
    const after = await images();
    assert.deepEqual(after.images.map((i) => i.id), [...ids].reverse(), 'applied once approved');
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.id), [...ids].reverse());
    assert.ok(!after.pending.some((p) => p.edit === reorderEdit.edit));
  });

  it("an upload form refused for its second file takes its first back as the editor's withdrawal: no pending edit left behind", async () => {
    const before = await images();
    const page = await editor.fetch(`${site.web}/release/${RELEASE}/add-cover-art`);
    assert.equal(page.status, 200, page.body.slice(0, 300));
    const m = multipart([
      { name: 'csrf_token', value: Browser.csrf(page) },
      { name: 'file.0', value: jpeg, filename: 'good.jpg', type: 'image/jpeg' },
      { name: 'file.1', value: Buffer.from('not an image at all'), filename: 'bad.jpg', type: 'image/jpeg' },
    ]);
    const cookie = [...editor.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await call(`${site.web}/release/${RELEASE}/add-cover-art`, { method: 'POST', headers: { cookie, 'content-type': m.type }, body: m.body });
    assert.equal(res.status, 400, res.body.slice(0, 300));
    assert.match(res.body, /Nothing was added/);
    const after = await images();
    assert.deepEqual(after.images.map((i) => i.id), before.images.map((i) => i.id), 'the first file is not kept');
    assert.deepEqual(after.pending, before.pending, 'no edit is left waiting for an image that is gone');
    const history = (await editor.fetch(`${site.web}/release/${RELEASE}/edits`)).body;
    assert.match(history, /Add cover art · <a href="\/user\/ed\/edits">ed<\/a> · [^<]* · <strong>Rejected<\/strong>/, 'the addition shows as withdrawn by its editor');
    assert.doesNotMatch(history, /Remove cover art · the operator/, 'not a removal by the operator');
  });

  it("a page change by an editor says it waits for an approver, and changes nothing yet", async () => {
    const current = await images();
    const target = current.images[0] as { id: string; comment: string };
    const form = await editor.fetch(`${site.web}/release/${RELEASE}/edit-cover-art/${target.id}`);
    assert.equal(form.status, 200, form.body.slice(0, 300));
    const csrf = Browser.csrf(form);
    const state = /name="state" value="([^"]+)"/.exec(form.body)?.[1];
    assert.ok(state !== undefined, 'the form carries its state');
    const posted = await editor.fetch(`${site.web}/release/${RELEASE}/edit-cover-art/${target.id}`, { form: { csrf_token: csrf, state, type: 'Front', comment: 'page edit by ed' } });
    assert.equal(posted.status, 303, posted.body.slice(0, 300));
    const gallery = await editor.fetch(`${site.web}${posted.headers.location}`);
    assert.match(gallery.body, /Your change waits for an approver \(edit #\d+\)/);
    assert.equal((await images()).images[0]?.comment, target.comment, 'not applied yet');
  });
});

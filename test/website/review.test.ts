/*
 * The approval policy through the website's public surface: under SLEEVE_APPROVAL=review an
 * ordinary editor's changes from the write API and the pages are edits waiting for an approver
 * (an addition listed approved: false, other changes not applied), listed as pending by
 * GET …/images; an approver's changes apply at once; approving applies the waiting change.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, Browser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, coverArtApi, multipart, publicListing, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const RELEASE = '22222222-2222-4333-8444-555555555501';
const GROUP = '22222222-2222-4333-8444-5555555555a1';
const EVENT = '22222222-2222-4333-8444-5555555555e1';

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
  let approver: Browser;

  const api = (p: string) => `${site.web}/api/cover-art${p}`;
  const uploadTo = (token: string, release: string, types: string[], comment: string, file = jpeg) => {
    const m = multipart([
      { name: 'file', value: file, filename: 'cover.jpg', type: 'image/jpeg' },
      ...types.map((value) => ({ name: 'types', value })),
      { name: 'comment', value: comment },
    ]);
    return call(api(`/release/${release}/images`), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': m.type }, body: m.body });
  };
  const upload = (token: string, comment: string) => uploadTo(token, RELEASE, ['Front'], comment);
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
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    await cliInProcess(t.env, ['event', 'add', EVENT, '--name', 'Festival']);
    editor = await signIn(site.web, 'ed');
    editorToken = await toolToken(site, editor, app, 'cover_art');
    approver = await signIn(site.web, 'ann');
    approverToken = await toolToken(site, approver, app, 'cover_art');
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

    await cliInProcess(t.env, ['edit', 'approve', String(reorderEdit.edit)]);
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

  it("an editor's pending Front or Back is listed, but is never the cover (front, back, the group's, the galleries) until an approver approves it", async () => {
    const late = '22222222-2222-4333-8444-555555555502';
    const early = '22222222-2222-4333-8444-555555555503';
    const group = '22222222-2222-4333-8444-5555555555a2';
    await cliInProcess(t.env, ['release', 'add', late, '--release-group', group, '--date', '2001']);
    await cliInProcess(t.env, ['release', 'add', early, '--release-group', group, '--date', '1999']);
    const added = await uploadTo(approverToken, late, ['Front'], 'the front, by ann');
    assert.equal(added.status, 201, added.body);
    const a = (added.json() as { id: string }).id;

    /** Which image each cover answer names (its 307's target), or its status; each asked twice, the second answered from the response cache. */
    const covers = async () => {
      const out: Record<string, string> = {};
      for (const [name, p] of [
        ['late front', `/release/${late}/front`],
        ['late back', `/release/${late}/back-250`],
        ['early front', `/release/${early}/front`],
        ['group front', `/release-group/${group}/front`],
      ] as const) {
        const [first, again] = [await coverArtApi(site, p), await coverArtApi(site, p)];
        assert.deepEqual([again.status, again.location], [first.status, first.location], `${p} answered the same from the cache`);
        out[name] = first.status === 307 ? (/-(\d+)(?:_thumb\d+)?\.\w+$/.exec(first.location ?? '')?.[1] ?? `307 ${first.location}`) : String(first.status);
      }
      return out;
    };
    const before = { 'late front': a, 'late back': '404', 'early front': '404', 'group front': a };
    assert.deepEqual(await covers(), before);

    const p = await uploadTo(editorToken, late, ['Front', 'Back'], 'front and back, by ed', await makePng(240, 240));
    assert.equal(p.status, 201, p.body);
    const pending = p.json() as { id: string; approved: boolean; front: boolean; back: boolean; edit: number };
    assert.equal(pending.approved, false);
    const q = await uploadTo(editorToken, early, ['Front'], 'early front, by ed');
    assert.equal(q.status, 201, q.body);
    const pendingEarly = q.json() as { id: string; edit: number };
    assert.deepEqual(await covers(), before, 'no cover answer changed for a pending addition');

    // Even first in the order (an approver's reorder applies at once), a pending Front is not the front.
    const order = await call(api(`/release/${late}/order`), { method: 'PUT', headers: { authorization: `Bearer ${approverToken}` }, json: { images: [pending.id, a] } });
    assert.equal(order.status, 200, order.body);
    assert.deepEqual(await covers(), before, 'nor for a pending image put first');

    // Listed, unapproved, and neither the front nor the back.
    const listed = (await publicListing(site, late))?.images as unknown as { id: string; approved: boolean; front: boolean; back: boolean }[];
    assert.deepEqual(
      listed.map((i) => [i.id, i.approved, i.front, i.back]),
      [
        [pending.id, false, false, false],
        [a, true, true, false],
      ],
    );
    // The galleries: the pending image shown as pending, never as the cover.
    const gallery = (await new Browser().fetch(`${site.web}/release/${late}/cover-art`)).body;
    const card = (id: string) => gallery.match(/<li class="art" id="image-\d+">[\s\S]*?<\/li>/g)?.find((c) => c.includes(`id="image-${id}"`)) ?? '';
    assert.match(card(pending.id), /No \(pending\)/);
    assert.doesNotMatch(card(pending.id), /The (front|back) cover/);
    assert.match(card(pending.id), /waits for an approver/);
    assert.match(card(a), /The front cover/);
    const groupPage = (await new Browser().fetch(`${site.web}/release-group/${group}/cover-art`)).body;
    const figure = /<figure class="group-cover">[\s\S]*?<\/figure>/.exec(groupPage)?.[0] ?? '';
    assert.ok(figure.includes(`-${a}_thumb500.jpg`) && !figure.includes(pendingEarly.id), figure);

    const home = (await new Browser().fetch(`${site.web}/`)).body;
    const recent = (id: string) => home.match(/<li><a href="\/release\/[^"]+#image-\d+">[\s\S]*?<\/li>/g)?.find((li) => li.includes(`#image-${id}"`)) ?? '';
    assert.match(recent(pending.id), /\(pending approval\)/);
    assert.ok(recent(a) !== '' && !recent(a).includes('pending'), recent(a));

    // Approved by an approver on the edit pages: each becomes the cover at once, cached answers included.
    for (const edit of [pending.edit, pendingEarly.edit]) {
      const page = await approver.fetch(`${site.web}/edit/${edit}`);
      const done = await approver.fetch(`${site.web}/edit/${edit}/approve`, { form: { csrf_token: Browser.csrf(page), note: '' } });
      assert.equal(done.status, 303, done.body.slice(0, 300));
    }
    assert.deepEqual(await covers(), { 'late front': pending.id, 'late back': pending.id, 'early front': pendingEarly.id, 'group front': pendingEarly.id });
    const approved = (await publicListing(site, late))?.images as unknown as { id: string; approved: boolean; front: boolean; back: boolean }[];
    assert.deepEqual(approved.map((i) => [i.id, i.approved, i.front, i.back])[0], [pending.id, true, true, true]);
  });

  it("an editor's upload from the page says it waits for an approver, and its edit note is on the pending edit", async () => {
    const page = await editor.fetch(`${site.web}/release/${RELEASE}/add-cover-art`);
    const m = multipart([
      { name: 'csrf_token', value: Browser.csrf(page) },
      { name: 'file.0', value: jpeg, filename: 'obi.jpg', type: 'image/jpeg' },
      { name: 'types.0', value: 'Obi' },
      { name: 'edit_note', value: 'The obi of my copy.' },
    ]);
    const res = await editor.fetch(`${site.web}/release/${RELEASE}/add-cover-art`, { method: 'POST', headers: { 'content-type': m.type }, body: m.body });
    assert.equal(res.status, 303, res.body.slice(0, 300));
    const gallery = await editor.fetch(`${site.web}${res.headers.location}`);
    const pending = (await images()).pending.find((p) => p.kind === 'add' && (p as Pending & { edit_note: string | null }).edit_note === 'The obi of my copy.');
    assert.ok(pending !== undefined, 'the pending addition carries its edit note');
    assert.match(gallery.body, new RegExp(`<p class="notice" role="status">Added image ${pending.image}\\. It waits for an approver \\(edit #${pending.edit}\\)\\.</p>`));
  });

  it("an editor's event changes wait as a release's do: the addition listed unapproved and never the poster, the reorder held; an approver approves one and rejects the other on the edit pages", async () => {
    const ev = (p: string) => `${site.web}/api/event-art/event/${EVENT}${p}`;
    const eventUpload = (token: string, comment: string) => {
      const m = multipart([{ name: 'file', value: jpeg, filename: 'poster.jpg', type: 'image/jpeg' }, { name: 'types', value: 'Poster' }, { name: 'comment', value: comment }]);
      return call(ev('/images'), { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': m.type }, body: m.body });
    };
    const eventImages = async () => (await call(ev('/images'), { headers: { authorization: `Bearer ${editorToken}` } })).json() as { images: { id: string; approved: boolean; front: boolean }[]; pending: Pending[] };
    const front = async () => (await coverArtApi(site, `/event/${EVENT}/front`)).status;

    const byEd = await eventUpload(editorToken, 'by ed');
    assert.equal(byEd.status, 201, byEd.body);
    const pending = byEd.json() as { id: string; approved: boolean; edit: number };
    assert.equal(pending.approved, false);
    assert.equal(await front(), 404, 'a pending Poster is not the poster');
    const byAnn = await eventUpload(approverToken, 'by ann');
    assert.equal(byAnn.status, 201, byAnn.body);
    const applied = byAnn.json() as { id: string; approved: boolean };
    assert.equal(applied.approved, true, "an approver's addition applies at once");
    const reorder = await call(ev('/order'), { method: 'PUT', headers: { authorization: `Bearer ${editorToken}` }, json: { images: [applied.id, pending.id] } });
    assert.equal(reorder.status, 200, reorder.body);
    const held = await eventImages();
    assert.deepEqual(held.images.map((i) => [i.id, i.approved, i.front]), [[pending.id, false, false], [applied.id, true, true]], 'the order held, the approved Poster the front');
    assert.deepEqual(held.pending.map((p) => [p.kind, p.editor]), [['add', 'ed'], ['reorder', 'ed']]);
    const reorderEdit = held.pending[1] as Pending;

    // The event's gallery says what waits; its history and the edit pages show the edits as the event's.
    const gallery = (await approver.fetch(`${site.web}/event/${EVENT}/event-art`)).body;
    assert.match(gallery, new RegExp(`<a href="/event/${EVENT}/edits\\?status=pending">2 pending edits</a>`));
    const history = (await approver.fetch(`${site.web}/event/${EVENT}/edits?status=pending`)).body;
    assert.match(history, /Event art edits of Festival/);
    assert.match(history, /Reorder event art · <a href="\/user\/ed\/edits">ed<\/a>[\s\S]*Add event art · <a href="\/user\/ed\/edits">ed<\/a>/, 'newest first');
    for (const [edit, verb] of [
      [pending.edit, 'approve'],
      [reorderEdit.edit, 'reject'],
    ] as const) {
      const page = await approver.fetch(`${site.web}/edit/${edit}`);
      assert.match(page.body, new RegExp(`<dt>Event</dt><dd><a href="/event/${EVENT}/event-art">Festival</a>`));
      const done = await approver.fetch(`${site.web}/edit/${edit}/${verb}`, { form: { csrf_token: Browser.csrf(page), note: '' } });
      assert.equal(done.status, 303, done.body.slice(0, 300));
    }
    const after = await eventImages();
    assert.deepEqual(after.images.map((i) => [i.id, i.approved, i.front]), [[pending.id, true, true], [applied.id, true, false]], 'approved: the first Poster is the poster; the reorder rejected');
    assert.deepEqual(after.pending, []);
    assert.equal(await front(), 307);
    const edits = await cliInProcess(t.env, ['--json', 'edit', 'list', '--event', EVENT]);
    assert.deepEqual(edits.edits.map((e: { kind: string; status: string }) => [e.kind, e.status]), [['reorder', 'rejected'], ['add', 'applied'], ['add', 'approved']]);
  });
});

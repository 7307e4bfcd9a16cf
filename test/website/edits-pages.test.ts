/*
 * The edit pages over HTTPS under SLEEVE_APPROVAL=review: an edit's page with Approve, Reject
 * and Withdraw (roles, CSRF, own edits, stale edits), the histories of a release and of an
 * editor (newest first, paged, pending only, merged MBIDs), the pending count on the gallery
 * and the role on a profile; checked through the pages and the cover art API.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { findAccountByName } from '../../src/auth/index.js';
import { addArt, editArt, mergeRelease, reorderArt, type Editor } from '../../src/cover-art/index.js';
import { addUser, Browser, type HttpsResponse } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { art, release, startSite, type Site } from './page-support.js';

interface Listed {
  id: string;
  approved: boolean;
  image: string;
}

describe(`edit pages (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let ann: Browser;
  let bob: Browser;
  let carl: Browser;
  const editors: Record<string, Editor> = {};

  before(async () => {
    t = await makeTestEnv();
    t.env.SLEEVE_APPROVAL = 'review';
    site = await startSite(t);
    await addUser(t, 'ann', ['--role', 'approver']);
    for (const name of ['bob', 'carl', 'dave']) await addUser(t, name);
    for (const name of ['ann', 'bob', 'carl', 'dave']) {
      const account = await findAccountByName(site.server.runtime.auth, name);
      assert.ok(account !== undefined);
      editors[name] = { id: account.id, name, approver: name === 'ann' };
    }
    [ann, bob, carl] = await Promise.all([signIn(site.base, 'ann'), signIn(site.base, 'bob'), signIn(site.base, 'carl')]);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  const coverArt = () => site.server.runtime.coverArt;
  const get = (path: string, b?: Browser) => (b ?? new Browser()).fetch(`${site.base}${path}`);
  /** Posts a form of the edit page, with the CSRF token of that page unless `csrf` is false. */
  const decide = async (b: Browser, id: number, verb: 'approve' | 'reject', opts: { note?: string; csrf?: boolean } = {}) => {
    const page = await b.fetch(`${site.base}/edit/${id}`);
    const form: [string, string][] = [['note', opts.note ?? '']];
    if (opts.csrf !== false) form.push(['csrf_token', Browser.csrf(page)]);
    return b.fetch(`${site.base}/edit/${id}/${verb}`, { form });
  };
  /** The cover art API's listing of a release as it is now (the redirect to index.json followed). */
  const listingNow = async (mbid: string): Promise<Listed[]> => {
    const res = await fetch(`${site.api}/release/${mbid}/`, { headers: { accept: 'application/json' } });
    if (res.status === 404) return [];
    assert.equal(res.status, 200);
    return ((await res.json()) as { images: Listed[] }).images;
  };
  /** The listing once `view` of it is `expected` (the API follows a change within its watch's interval). */
  const listing = async <T>(mbid: string, view: (l: Listed[]) => T, expected: T): Promise<T> =>
    (await pollUntil(async () => view(await listingNow(mbid)), (v) => JSON.stringify(v) === JSON.stringify(expected))).value;
  /** An addition by an ordinary editor: pending; returns the image and edit ids. */
  const pendingAdd = async (mbid: string, who = 'bob', comment = 'from bob'): Promise<{ image: string; edit: number }> => {
    let edit = 0;
    const entry = await addArt(coverArt(), { release: mbid, bytes: await makeJpeg(200, 200), types: ['Front'], comment }, { editor: editors[who], onEdit: (e) => (edit = e.id) });
    return { image: entry.id, edit };
  };
  const status = (page: HttpsResponse) => /<dt>Status<\/dt><dd><strong>([^<]*)<\/strong>/.exec(page.body)?.[1];

  it('lets an approver approve a pending addition: the listing says approved, the page says who and when, the gallery no longer counts it', async () => {
    const { mbid, group } = await release(site);
    const { image, edit } = await pendingAdd(mbid);
    assert.ok(edit > 1_000_000_000);
    assert.deepEqual(await listing(mbid, (l) => l.map((i) => i.approved), [false]), [false]);
    const gallery = await get(`/release/${mbid}/cover-art`);
    assert.ok(gallery.body.includes(`<a href="/release/${mbid}/edits?status=pending">1 pending edit</a>`), 'the gallery counts the pending edit');

    const visitorView = await get(`/edit/${edit}`);
    assert.equal(visitorView.status, 200);
    assert.equal(status(visitorView), 'Pending (waiting for an approver)');
    assert.ok(visitorView.body.includes('<dd>Add cover art</dd>'));
    assert.ok(visitorView.body.includes(`<a href="/release/${mbid}/cover-art">Album ${mbid.slice(0, 4)}</a> <span class="muted">${mbid}</span>`), 'the release links to its gallery');
    assert.ok(visitorView.body.includes(`<dt>Release group</dt><dd><a href="/release-group/${group}/cover-art">`), 'and its group');
    assert.ok(visitorView.body.includes('<a href="/user/bob/edits">bob</a>'), 'who, linked to their edits');
    assert.ok(visitorView.body.includes('<dt>Types</dt><dd>Front</dd>') && visitorView.body.includes('<dt>Comment</dt><dd>from bob</dd>'), 'the addition readably');
    assert.ok(visitorView.body.includes('<img src='), 'the image is shown while it exists');
    assert.ok(!visitorView.body.includes('/approve"'), 'no forms for a visitor');

    const annView = await get(`/edit/${edit}`, ann);
    assert.ok(annView.body.includes(`action="/edit/${edit}/approve"`) && annView.body.includes(`action="/edit/${edit}/reject"`), 'an approver sees both forms');
    assert.ok(annView.body.includes('removes the image and its files'), 'rejecting an addition is labelled as removing it');

    const done = await decide(ann, edit, 'approve', { note: 'looks <right>' });
    assert.equal(done.status, 303, done.body.slice(0, 400));
    assert.equal(done.headers.location, `/edit/${edit}`);
    const shown = await get(`/edit/${edit}`, ann);
    assert.ok(shown.body.includes(`Approved edit #${edit}.`), 'the flash notice');
    assert.equal(status(shown), 'Approved');
    assert.match(shown.body, /<dt>Approved by<\/dt><dd><a href="\/user\/ann\/edits">ann<\/a>, \d{4}-\d\d-\d\d \d\d:\d\d UTC<\/dd>/);
    assert.ok(shown.body.includes('<dd>looks &lt;right&gt;</dd>'), 'the note, escaped');
    assert.ok(!shown.body.includes('/approve"'), 'a closed edit has no forms');
    assert.deepEqual(await listing(mbid, (l) => l.map((i) => [i.id, i.approved]), [[image, true]]), [[image, true]]);
    const after = await get(`/release/${mbid}/cover-art`);
    assert.ok(!after.body.includes('pending edit'), 'the cached gallery follows the approval');
    assert.ok(after.body.includes('<dd>Yes</dd>'));
    // Closing twice: 409, nothing changes.
    const again = await decide(ann, edit, 'reject');
    assert.equal(again.status, 409);
    assert.ok(again.body.includes('no longer pending'));
  });

  it('lets an approver reject a pending addition: the image and its file are gone', async () => {
    const { mbid } = await release(site);
    const { image, edit } = await pendingAdd(mbid);
    const [entry] = await listing(mbid, (l) => l.map((i) => i.id), [image]).then(() => listingNow(mbid));
    assert.ok(entry !== undefined);
    assert.equal((await fetch(entry.image)).status, 200, 'the file is served while pending');
    const done = await decide(ann, edit, 'reject');
    assert.equal(done.status, 303);
    const shown = await get(`/edit/${edit}`, ann);
    assert.equal(status(shown), 'Rejected');
    assert.ok(shown.body.includes(`Rejected edit #${edit}.`));
    assert.ok(shown.body.includes('(no longer stored)'), 'no thumbnail of a removed image');
    assert.deepEqual(await listing(mbid, (l) => l.length, 0), 0);
    const file = await pollUntil(async () => (await fetch(entry.image)).status, (s) => s === 404);
    assert.equal(file.value, 404);
  });

  it('applies a pending reorder only once approved, and shows the orders before and after', async () => {
    const { mbid } = await release(site);
    const first = await art(site, mbid);
    const second = await art(site, mbid);
    let edit = 0;
    await reorderArt(coverArt(), mbid, [second, first], { editor: editors.bob, onEdit: (e) => (edit = e.id) });
    assert.deepEqual(await listing(mbid, (l) => l.map((i) => i.id), [first, second]), [first, second], 'pending: the order stays');
    const page = await get(`/edit/${edit}`);
    assert.ok(page.body.includes(`<h2>Before</h2><dl><dt>Order</dt><dd><ol class="order"><li>image ${first}</li><li>image ${second}</li></ol>`), page.body);
    assert.ok(page.body.includes(`<h2>After</h2><dl><dt>Order</dt><dd><ol class="order"><li>image ${second}</li><li>image ${first}</li></ol>`));
    assert.equal((await decide(ann, edit, 'approve')).status, 303);
    assert.deepEqual(await listing(mbid, (l) => l.map((i) => i.id), [second, first]), [second, first]);
  });

  it('refuses others: no forms and 403 for an editor without the role, 400 without CSRF, 400 for approving one’s own edit; the editor may withdraw', async () => {
    const { mbid } = await release(site);
    const { edit } = await pendingAdd(mbid);
    const carlView = await get(`/edit/${edit}`, carl);
    assert.ok(!carlView.body.includes(`/edit/${edit}/approve`) && !carlView.body.includes(`/edit/${edit}/reject`), 'no forms for a non-approver');
    for (const verb of ['approve', 'reject'] as const) {
      const forged = await carl.fetch(`${site.base}/edit/${edit}/${verb}`, { form: [['csrf_token', Browser.csrf(await get('/account/applications', carl))]] });
      assert.equal(forged.status, 403, forged.body.slice(0, 300));
      assert.ok(forged.body.includes(`Only approvers ${verb} the edits of others.`));
    }
    const noCsrf = await decide(ann, edit, 'approve', { csrf: false });
    assert.equal(noCsrf.status, 400);
    const visitorPost = await new Browser().fetch(`${site.base}/edit/${edit}/approve`, { form: [['note', '']] });
    assert.equal(visitorPost.status, 303, 'a visitor is sent to sign in');
    assert.match(String(visitorPost.headers.location), /^\/login\?return_to=/);

    const bobView = await get(`/edit/${edit}`, bob);
    assert.ok(bobView.body.includes(`Withdraw my edit #${edit}`) && !bobView.body.includes(`/edit/${edit}/approve`), 'the editor may withdraw, not approve');
    const own = await bob.fetch(`${site.base}/edit/${edit}/approve`, { form: [['csrf_token', Browser.csrf(bobView)]] });
    assert.equal(own.status, 400);
    assert.equal(status(await get(`/edit/${edit}`)), 'Pending (waiting for an approver)', 'nothing changed by the refusals');
    assert.deepEqual(await listing(mbid, (l) => l.length, 1), 1);

    // An edit made before its editor became an approver: still not theirs to approve.
    const { edit: daves } = await pendingAdd(mbid, 'dave');
    await cliInProcess(t.env, ['user', 'edit', 'dave', '--role', 'approver']);
    const dave = await signIn(site.base, 'dave');
    const refused = await decide(dave, daves, 'approve');
    assert.equal(refused.status, 400);
    assert.ok(refused.body.includes('Nobody approves their own edit'));
    assert.equal(status(await get(`/edit/${daves}`)), 'Pending (waiting for an approver)');

    const withdrawn = await decide(bob, edit, 'reject');
    assert.equal(withdrawn.status, 303);
    const shown = await get(`/edit/${edit}`, bob);
    assert.ok(shown.body.includes(`Withdrew edit #${edit}.`));
    assert.ok(shown.body.includes('(withdrawn)'));
  });

  it('answers 409 for an edit the release has moved past, and changes nothing', async () => {
    const { mbid } = await release(site);
    const first = await art(site, mbid);
    const second = await art(site, mbid);
    const third = await art(site, mbid);
    let edit = 0;
    await reorderArt(coverArt(), mbid, [third, second, first], { editor: editors.bob, onEdit: (e) => (edit = e.id) });
    await reorderArt(coverArt(), mbid, [second, first, third]);
    const stale = await decide(ann, edit, 'approve');
    assert.equal(stale.status, 409, stale.body.slice(0, 400));
    assert.match(stale.body, /class="error" role="alert">Edit \d+ cannot be applied/);
    assert.equal(status(stale), 'Pending (waiting for an approver)');
    assert.deepEqual(await listing(mbid, (l) => l.map((i) => i.id), [second, first, third]), [second, first, third]);
    // Still pending: the (cached) gallery counts it until it is rejected, which changes no image.
    assert.ok((await get(`/release/${mbid}/cover-art`)).body.includes('>1 pending edit</a>'));
    assert.equal((await decide(ann, edit, 'reject')).status, 303);
    assert.ok(!(await get(`/release/${mbid}/cover-art`)).body.includes('pending edit'), 'the count follows a rejection');
    assert.equal(status(await get(`/edit/${edit}`)), 'Rejected');
  });

  it('shows the histories of a release and of an editor: newest first, paged, pending only; merged MBIDs redirect; unknown 404', async () => {
    const { mbid } = await release(site);
    const image = await art(site, mbid);
    const { edit: pending } = await pendingAdd(mbid, 'carl', 'carl’s');
    for (let i = 0; i < 50; i++) await editArt(coverArt(), { release: mbid, imageId: image, comment: `take ${i}` });
    const first = await get(`/release/${mbid}/edits`);
    assert.equal(first.status, 200);
    const ids = (page: HttpsResponse) => [...page.body.matchAll(/<li><a href="\/edit\/(\d+)">/g)].map((m) => Number(m[1]));
    const shown = ids(first);
    assert.equal(shown.length, 50);
    assert.deepEqual(shown, [...shown].sort((a, b) => b - a), 'newest first');
    assert.ok(first.body.includes('Edit cover art · the operator ·'));
    const older = /<a href="([^"]+)">Older edits<\/a>/.exec(first.body)?.[1]?.replace(/&amp;/g, '&');
    assert.ok(older !== undefined);
    const second = await get(older);
    const rest = ids(second);
    assert.ok(rest.includes(pending) && rest.length === 2, `${rest}`);
    assert.ok(Math.max(...rest) < Math.min(...shown));
    assert.ok(!second.body.includes('Older edits'));

    const onlyPending = await get(`/release/${mbid}/edits?status=pending`);
    assert.deepEqual(ids(onlyPending), [pending]);
    const carls = await get('/user/carl/edits');
    assert.equal(carls.status, 200);
    assert.ok(ids(carls).includes(pending));
    assert.ok(carls.body.includes(`<a href="/release/${mbid}/cover-art">`));
    assert.ok(!ids(await get('/user/ann/edits?status=pending')).includes(pending));

    const { mbid: into } = await release(site);
    await mergeRelease(coverArt(), mbid, into);
    const moved = await get(`/release/${mbid}/edits?status=pending`);
    assert.equal(moved.status, 301);
    assert.equal(moved.headers.location, `/release/${into}/edits?status=pending`);
    assert.ok(ids(await get(String(moved.headers.location))).includes(pending), "the merged release's history includes the old one's");

    assert.equal((await get(`/release/${crypto.randomUUID()}/edits`)).status, 404);
    assert.equal((await get('/release/not-an-mbid/edits')).status, 400);
    assert.equal((await get('/user/nobody-here/edits')).status, 404);
    assert.equal((await get(`/release/${into}/edits?before=x`)).status, 400);
    assert.equal((await get('/edit/999999999999')).status, 404);
    assert.equal((await get('/edit/abc')).status, 404);
  });

  it("shows a user's role and a link to their edits on the profile", async () => {
    const annPage = await get('/user/ann');
    assert.ok(annPage.body.includes('<dt>Role</dt><dd>Editor and approver'));
    assert.ok(annPage.body.includes('<a href="/user/ann/edits">'));
    const carlPage = await get('/user/carl');
    assert.ok(carlPage.body.includes('<dt>Role</dt><dd>Editor</dd>'));
  });
});

/*
 * Pending edits judged by what they change (docs/decisions.md, "A pending reorder is judged by
 * the images it names"), with two editors (ed, eve) and an approver (ann) under
 * SLEEVE_APPROVAL=review: the editors change art through the write API, ann approves on the
 * edit pages. A pending reorder stays approvable after uploads (its editor's own and another's)
 * and after edits of other images' types or comment; an image added since goes after the
 * reordered ones, one an applied reorder placed keeps its place. It is refused (409, and can
 * still be rejected) only when an image it names is gone or an applied edit reordered them.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, Browser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { call, multipart, publicListing, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const GROUP = '33333333-2222-4333-8444-5555555555a1';
const release = (n: number) => `33333333-2222-4333-8444-5555555555${String(n).padStart(2, '0')}`;

interface Art {
  images: { id: string; comment: string; types: string[]; approved: boolean }[];
  pending: { edit: number; kind: string; image: string | null; editor: string | null }[];
}

describe(`pending edits judged by what they change (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  const token: Record<string, string> = {};
  let ann: Browser;
  let jpeg: Buffer;

  const api = (p: string) => `${site.web}/api/cover-art${p}`;
  const auth = (who: string) => ({ authorization: `Bearer ${token[who]}` });
  const art = async (mbid: string): Promise<Art> => {
    const res = await call(api(`/release/${mbid}/images`), { headers: auth('ann') });
    assert.equal(res.status, 200, res.body);
    return res.json() as Art;
  };
  const ids = async (mbid: string) => (await art(mbid)).images.map((i) => i.id);
  const upload = async (who: string, mbid: string, comment: string): Promise<{ id: string; edit: number }> => {
    const m = multipart([
      { name: 'file', value: jpeg, filename: 'cover.jpg', type: 'image/jpeg' },
      { name: 'types', value: 'Booklet' },
      { name: 'comment', value: comment },
    ]);
    const res = await call(api(`/release/${mbid}/images`), { method: 'POST', headers: { ...auth(who), 'content-type': m.type }, body: m.body });
    assert.equal(res.status, 201, res.body);
    return res.json() as { id: string; edit: number };
  };
  /** Reorders as `who`; returns the edit (pending for an editor, applied for ann). */
  const reorder = async (who: string, mbid: string, order: string[]): Promise<number> => {
    const before = (await art(mbid)).pending.map((p) => p.edit);
    const res = await call(api(`/release/${mbid}/order`), { method: 'PUT', headers: auth(who), json: { images: order } });
    assert.equal(res.status, 200, res.body);
    const edit = (await art(mbid)).pending.find((p) => p.kind === 'reorder' && !before.includes(p.edit))?.edit;
    return edit ?? -1;
  };
  const pendingOf = async (mbid: string, kind: string) => {
    const edit = (await art(mbid)).pending.find((p) => p.kind === kind)?.edit;
    assert.ok(edit !== undefined, `a pending ${kind} edit`);
    return edit;
  };
  /** ann's decision on the edit page (its form, its CSRF token). */
  const decide = async (edit: number, verb: 'approve' | 'reject') => {
    const page = await ann.fetch(`${site.web}/edit/${edit}`);
    assert.equal(page.status, 200, page.body.slice(0, 300));
    return ann.fetch(`${site.web}/edit/${edit}/${verb}`, { form: { csrf_token: Browser.csrf(page), note: '' } });
  };
  const approved = async (edit: number) => {
    const res = await decide(edit, 'approve');
    assert.equal(res.status, 303, res.body.slice(0, 400));
  };
  /** A release with three images by ann (applied at once), and ed's pending reorder of them, reversed. */
  const withPendingReorder = async (n: number) => {
    const mbid = release(n);
    await cliInProcess(t.env, ['release', 'add', mbid, '--release-group', GROUP]);
    const [a, b, c] = [(await upload('ann', mbid, 'a')).id, (await upload('ann', mbid, 'b')).id, (await upload('ann', mbid, 'c')).id];
    const edit = await reorder('ed', mbid, [c, b, a]);
    assert.ok(edit > 0, 'the reorder waits for an approver');
    assert.deepEqual(await ids(mbid), [a, b, c], 'nothing moved yet');
    return { mbid, a, b, c, edit };
  };

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t, { SLEEVE_APPROVAL: 'review' });
    await addUser(t, 'ed');
    await addUser(t, 'eve');
    await addUser(t, 'ann', ['--role', 'approver']);
    const app = await addApp(t, 'ed', 'confidential', REDIRECT_URI, 'Tagger');
    for (const who of ['ed', 'eve', 'ann']) {
      const b = await signIn(site.web, who);
      token[who] = await toolToken(site, b, app, 'cover_art');
      if (who === 'ann') ann = b;
    }
    jpeg = await makeJpeg(200, 200);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it("stays approvable after the editor's own upload and another editor's: the new images go after the reordered ones", async () => {
    const { mbid, a, b, c, edit } = await withPendingReorder(1);
    const own = await upload('ed', mbid, 'by ed, later');
    const other = await upload('eve', mbid, 'by eve');
    await approved(other.edit);
    await approved(edit);
    assert.deepEqual(await ids(mbid), [c, b, a, own.id, other.id]);
    assert.deepEqual((await publicListing(site, mbid))?.images.map((i) => i.id), [c, b, a, own.id, other.id], 'the public listing too');
    assert.ok(!(await art(mbid)).pending.some((p) => p.edit === edit));
    assert.ok((await art(mbid)).pending.some((p) => p.edit === own.edit), "ed's own addition still waits, untouched");
  });

  it('stays approvable after edits of other images (applied and approved); an image an applied reorder placed keeps its place', async () => {
    const { mbid, a, b, c, edit } = await withPendingReorder(2);
    // eve edits b's comment (approved), ann a's types (applied at once).
    const patch = await call(api(`/release/${mbid}/images/${b}`), { method: 'PATCH', headers: auth('eve'), json: { comment: 'b, by eve' } });
    assert.equal(patch.status, 200, patch.body);
    await approved(await pendingOf(mbid, 'edit'));
    const byAnn = await call(api(`/release/${mbid}/images/${a}`), { method: 'PATCH', headers: auth('ann'), json: { types: ['Front'] } });
    assert.equal(byAnn.status, 200, byAnn.body);
    // A later image, put first by ann's reorder (the named images' order among themselves unchanged).
    const d = (await upload('ann', mbid, 'd')).id;
    assert.equal(await reorder('ann', mbid, [d, a, b, c]), -1, "ann's reorder applied at once");
    await approved(edit);
    const now = await art(mbid);
    assert.deepEqual(now.images.map((i) => i.id), [d, c, b, a]);
    assert.deepEqual(now.images.map((i) => i.comment), ['d', 'c', 'b, by eve', 'a'], 'the applied edits stay');
  });

  it('is refused once an image it names is gone, and can still be rejected', async () => {
    const { mbid, a, b, c, edit } = await withPendingReorder(3);
    const removal = await call(api(`/release/${mbid}/images/${b}`), { method: 'DELETE', headers: auth('eve') });
    assert.equal(removal.status, 204, removal.body);
    await approved(await pendingOf(mbid, 'remove'));
    const refused = await decide(edit, 'approve');
    assert.equal(refused.status, 409, refused.body.slice(0, 400));
    assert.match(refused.body, new RegExp(`image ${b} is gone`));
    assert.deepEqual(await ids(mbid), [a, c], 'nothing moved');
    assert.ok((await art(mbid)).pending.some((p) => p.edit === edit), 'it still waits');
    const rejected = await decide(edit, 'reject');
    assert.equal(rejected.status, 303, rejected.body.slice(0, 400));
    assert.ok(!(await art(mbid)).pending.some((p) => p.edit === edit));
  });

  it("is refused once another editor's reorder of its images was applied first", async () => {
    const { mbid, a, b, c, edit } = await withPendingReorder(4);
    const theirs = await reorder('eve', mbid, [b, a, c]);
    await approved(theirs);
    assert.deepEqual(await ids(mbid), [b, a, c]);
    const refused = await decide(edit, 'approve');
    assert.equal(refused.status, 409, refused.body.slice(0, 400));
    assert.match(refused.body, /the order of its images was changed by an edit applied since/);
    assert.deepEqual(await ids(mbid), [b, a, c], "eve's order stays");
  });
});

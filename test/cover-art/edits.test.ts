/*
 * Cover art edits and approval: every change recorded as an edit (the CLI, and the cover art
 * module's functions the website and the write API call, acting for editors), the review
 * policy (pending additions listed unapproved, pending reorders not applied), approval and
 * rejection, stale-revision conflicts, roles, and sleeve's edit ids kept apart from
 * MusicBrainz's. Seen from the outside: the CLI's output, index.json, the API and the files.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { accountRoles } from '../../src/auth/index.js';
import { loadConfig } from '../../src/config/load.js';
import { addArt, approveEdit, editArt, rejectEdit, releaseArt, removeArt, reorderArt, setGroupCover, type Edit, type Editor } from '../../src/cover-art/index.js';
import { openRuntime, type Runtime } from '../../src/runtime.js';
import { cliInProcess, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { assertRefused, folderFiles, newMbid, readIndex, writeInput } from './cli-support.js';

describe(`cover art edits and approval (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let rt: Runtime;
  let ed: Editor;
  let eve: Editor;
  let ann: Editor;
  let jpeg: string;
  let png: string;

  /** The release listing as the API serves it (its redirect followed to index.json). */
  async function apiListing(mbid: string): Promise<{ images: { id: string; approved: boolean; edit: number; comment: string }[] }> {
    const res = await fetch(`${s.base}/release/${mbid}/`, { headers: { accept: 'application/json' } });
    assert.equal(res.status, 200);
    return (await res.json()) as { images: { id: string; approved: boolean; edit: number; comment: string }[] };
  }

  async function newRelease(): Promise<{ release: string; group: string }> {
    const release = newMbid();
    const group = newMbid();
    await cliInProcess(t.env, ['release', 'add', release, '--release-group', group]);
    return { release, group };
  }

  async function addByCli(release: string, file: string, ...flags: string[]): Promise<{ id: string; edit: number; approved: boolean }> {
    return cliInProcess(t.env, ['--json', 'art', 'add', release, file, ...flags]);
  }

  /** Runs a change for an editor and returns the edit it recorded. */
  async function asEditor(change: (onEdit: (e: Edit) => void) => Promise<unknown>): Promise<Edit> {
    let recorded: Edit | undefined;
    await change((e) => {
      recorded = e;
    });
    assert.ok(recorded !== undefined, 'the change told of its edit');
    return recorded;
  }

  before(async () => {
    t = await makeTestEnv({ SLEEVE_APPROVAL: 'review', SLEEVE_RESPONSE_CACHE_BYTES: '0', SLEEVE_FILE_CACHE_BYTES: '0' });
    s = await startServer(t);
    jpeg = await writeInput(t, 'a.jpg', await makeJpeg(300, 300));
    png = await writeInput(t, 'b.png', await makePng(200, 200));
    await cliInProcess(t.env, ['user', 'add', 'ed', '--email', 'ed@example.com', '--password-stdin'], { stdin: 'a long password\n' });
    await cliInProcess(t.env, ['user', 'add', 'eve', '--email', 'eve@example.com', '--password-stdin'], { stdin: 'a long password\n' });
    const added = await cliInProcess(t.env, ['--json', 'user', 'add', 'ann', '--email', 'ann@example.com', '--password-stdin', '--role', 'approver'], { stdin: 'a long password\n' });
    assert.equal(added.role, 'approver');
    const users = (await cliInProcess(t.env, ['--json', 'user', 'list'])).users as { id: number; name: string; role: string }[];
    const byName = (n: string) => users.find((u) => u.name === n) as { id: number; name: string; role: string };
    ed = { id: byName('ed').id, name: 'ed', approver: false };
    eve = { id: byName('eve').id, name: 'eve', approver: false };
    ann = { id: byName('ann').id, name: 'ann', approver: true };
    rt = await openRuntime(loadConfig(t.env));
  });

  after(async () => {
    await rt?.close();
    await s?.server.close();
    await t?.cleanup();
  });

  it("records every CLI change as an applied edit of the operator, with before and after; the listing's edit is the adding edit", async () => {
    const { release, group } = await newRelease();
    // The operator's changes apply at once, whatever the policy (review here).
    const a = await addByCli(release, jpeg, '--type', 'Front', '--comment', 'the cover');
    const b = await addByCli(release, png);
    assert.ok(a.edit > 1_000_000_000 && b.edit === a.edit + 1, `sleeve's edit ids: ${a.edit}, ${b.edit}`);
    assert.equal(a.approved, true);
    const shown = await cliInProcess(t.env, ['--json', 'edit', 'show', String(a.edit)]);
    assert.deepEqual(
      { kind: shown.kind, status: shown.status, editor: shown.editor, release: shown.release, image: shown.image, after: shown.after, before: shown.before },
      { kind: 'add', status: 'applied', editor: null, release, image: a.id, after: { types: ['Front'], comment: 'the cover', approved: true }, before: null },
    );
    // The listing names the adding edit, in index.json and through the API.
    assert.deepEqual((await readIndex(t, release)).images.map((i: { edit: number }) => i.edit), [a.edit, b.edit]);
    assert.deepEqual((await apiListing(release)).images.map((i) => i.edit), [a.edit, b.edit]);

    await cliInProcess(t.env, ['art', 'edit', release, b.id, '--comment', 'the back', '--type', 'back']);
    await cliInProcess(t.env, ['art', 'reorder', release, b.id, a.id]);
    await cliInProcess(t.env, ['release-group', 'set-cover', group, release]);
    await cliInProcess(t.env, ['art', 'remove', release, b.id]);
    const listed = await cliInProcess(t.env, ['--json', 'edit', 'list', '--release', release]);
    assert.equal(listed.next, null);
    assert.deepEqual(
      listed.edits.map((e: Edit) => [e.kind, e.status, e.editor, e.before, e.after]),
      [
        ['remove', 'applied', null, { types: ['Back'], comment: 'the back', approved: true }, null],
        ['set-cover', 'applied', null, { release: null }, { release }],
        ['reorder', 'applied', null, { order: [a.id, b.id] }, { order: [b.id, a.id] }],
        ['edit', 'applied', null, { types: [], comment: '' }, { types: ['Back'], comment: 'the back' }],
        ['add', 'applied', null, null, { types: [], comment: '', approved: true }],
        ['add', 'applied', null, null, { types: ['Front'], comment: 'the cover', approved: true }],
      ],
    );
    // Times in ISO 8601 as the write API gives them (`new Date(ms).toISOString()`), not epoch milliseconds.
    for (const e of listed.edits as { created: unknown }[]) {
      assert.match(String(e.created), /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      assert.equal(new Date(e.created as string).toISOString(), e.created);
    }
    assert.equal((await cliInProcess(t.env, ['--json', 'edit', 'show', String(listed.edits[0].id)])).created, listed.edits[0].created);
    // Ids only grow; a page at a time with --before.
    const ids = listed.edits.map((e: Edit) => e.id);
    assert.deepEqual([...ids].sort((x: number, y: number) => y - x), ids);
    const page = await cliInProcess(t.env, ['--json', 'edit', 'list', '--release', release, '--limit', '2']);
    assert.deepEqual(page.edits.map((e: Edit) => e.id), ids.slice(0, 2));
    assert.equal(page.next, ids[1]);
    const rest = await cliInProcess(t.env, ['--json', 'edit', 'list', '--release', release, '--before', String(page.next)]);
    assert.deepEqual(rest.edits.map((e: Edit) => e.id), ids.slice(2));
    const text = await cliInProcess(t.env, ['edit', 'list', '--release', release]);
    assert.match(text, new RegExp(`^${ids[0]} +applied +remove +${release} +${b.id} +\\(operator\\) `, 'm'));
    assert.match(await cliInProcess(t.env, ['edit', 'show', String(ids[0])]), /^edit \d+: remove, applied\n {2}by: +\(operator\)/);
    assertRefused(await runCli(t.env, ['edit', 'show', '42']), /no edit 42/);
  });

  it("review: an editor's addition is stored and listed unapproved; approval sets approved, rejection removes it with its files", async () => {
    const { release } = await newRelease();
    const bytes = await makeJpeg(320, 240);
    let entry: { id: string; approved: boolean; edit: number } | undefined;
    const pending = await asEditor(async (onEdit) => {
      entry = await addArt(rt.coverArt, { release, bytes, types: ['Front'] }, { editor: ed, onEdit });
    });
    assert.equal(pending.status, 'pending');
    assert.deepEqual(pending.editor, { id: ed.id, name: 'ed' });
    assert.deepEqual({ approved: entry?.approved, edit: entry?.edit }, { approved: false, edit: pending.id });
    // Listed at once (read-your-writes), unapproved, with its files in place.
    assert.deepEqual((await apiListing(release)).images.map((i) => [i.id, i.approved, i.edit]), [[entry?.id, false, pending.id]]);
    assert.equal((await folderFiles(t, release)).filter((f) => f.startsWith(`mbid-${release}-${entry?.id}`)).length, 4);
    const art = await cliInProcess(t.env, ['--json', 'art', 'list', release]);
    assert.deepEqual(art.pending, [pending.id]);
    assert.deepEqual((await cliInProcess(t.env, ['--json', 'edit', 'list', '--pending', '--editor', 'ed'])).edits.map((e: Edit) => e.id).includes(pending.id), true);

    // Only an approver decides, and not on their own edit.
    await assert.rejects(approveEdit(rt.coverArt, pending.id, eve), /eve is not an approver/);
    const approved = await approveEdit(rt.coverArt, pending.id, ann);
    assert.deepEqual({ status: approved.status, by: approved.closed?.by }, { status: 'approved', by: { id: ann.id, name: 'ann' } });
    assert.deepEqual((await apiListing(release)).images.map((i) => i.approved), [true]);
    assert.deepEqual((await readIndex(t, release)).images.map((i: { approved: boolean }) => i.approved), [true]);
    // Closed once: a second decision is a conflict.
    await assert.rejects(rejectEdit(rt.coverArt, pending.id, ann), (err: Error & { code?: string }) => err.code === 'CONFLICT');

    // Another editor's addition, rejected by the operator: the image and its files go.
    let second: { id: string } | undefined;
    const other = await asEditor(async (onEdit) => {
      second = await addArt(rt.coverArt, { release, bytes: await makePng(100, 80) }, { editor: eve, onEdit });
    });
    assert.equal((await apiListing(release)).images.length, 2);
    const rejected = await cliInProcess(t.env, ['--json', 'edit', 'reject', String(other.id), '--note', 'not this release']);
    assert.deepEqual({ status: rejected.status, by: rejected.closed.by, note: rejected.note }, { status: 'rejected', by: null, note: 'not this release' });
    assert.match(rejected.closed.at, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
    assert.deepEqual((await apiListing(release)).images.map((i) => i.id), [entry?.id]);
    assert.deepEqual((await folderFiles(t, release)).filter((f) => f.includes(`-${second?.id}`)), []);

    // An approver's own addition applies and is approved at once; an editor may not set approved or edit.
    const own = await asEditor((onEdit) => addArt(rt.coverArt, { release, bytes }, { editor: ann, onEdit }));
    assert.equal(own.status, 'applied');
    assert.deepEqual((await apiListing(release)).images.map((i) => i.approved), [true, true]);
    await assert.rejects(addArt(rt.coverArt, { release, bytes, approved: true }, { editor: ed }), /only the operator sets approved/);
  });

  it('review: pending edits, removals, reorders and cover choices are not applied until approved', async () => {
    const { release, group } = await newRelease();
    const a = await addByCli(release, jpeg, '--type', 'Front');
    const b = await addByCli(release, png);
    const before = await readIndex(t, release);

    const reorder = await asEditor((onEdit) => reorderArt(rt.coverArt, release, [b.id, a.id], { editor: ed, onEdit }));
    const comment = await asEditor((onEdit) => editArt(rt.coverArt, { release, imageId: a.id, comment: 'scan' }, { editor: ed, onEdit }));
    const removal = await asEditor((onEdit) => removeArt(rt.coverArt, release, b.id, { editor: eve, onEdit }));
    const cover = await asEditor((onEdit) => setGroupCover(rt.coverArt, group, release, { editor: eve, onEdit }));
    for (const e of [reorder, comment, removal, cover]) assert.equal(e.status, 'pending', e.kind);
    // Nothing applied: the listing is as it was.
    assert.deepEqual(await readIndex(t, release), before);
    const state = await releaseArt(rt.coverArt, release);
    // The group's cover choice is listed with the release it names.
    assert.deepEqual(
      state?.pending.map((e) => e.id),
      [reorder.id, comment.id, removal.id, cover.id],
    );

    // Approved one by one, each applies.
    await approveEdit(rt.coverArt, comment.id, ann);
    assert.equal((await apiListing(release)).images[0]?.comment, 'scan');
    await approveEdit(rt.coverArt, reorder.id, ann);
    assert.deepEqual((await apiListing(release)).images.map((i) => i.id), [b.id, a.id]);
    await cliInProcess(t.env, ['edit', 'approve', String(removal.id)]);
    assert.deepEqual((await apiListing(release)).images.map((i) => i.id), [a.id]);
    assert.deepEqual((await folderFiles(t, release)).filter((f) => f.includes(`-${b.id}`)), []);
    await approveEdit(rt.coverArt, cover.id, ann);
    assert.deepEqual((await cliInProcess(t.env, ['--json', 'edit', 'show', String(cover.id)])).status, 'approved');
    assert.deepEqual((await releaseArt(rt.coverArt, release))?.pending, []);
    // A closed edit is not decided again; bad options are refused.
    const again = await runCli(t.env, ['--json', 'edit', 'approve', String(removal.id)]);
    assert.equal(again.code, 2);
    assert.equal(JSON.parse(again.stdout).error.code, 'CONFLICT');
    assertRefused(await runCli(t.env, ['edit', 'list', '--status', 'open']), /--status must be one of applied, pending, approved, rejected/);
    assertRefused(await runCli(t.env, ['edit', 'list', '--editor', 'nobody']), /no user nobody/);
  });

  it('a change based on a stale revision is a conflict, and so is approving a reorder whose image is gone', async () => {
    const { release } = await newRelease();
    const a = await addByCli(release, jpeg);
    const b = await addByCli(release, png);
    const { revision } = await cliInProcess(t.env, ['--json', 'art', 'list', release]);
    await cliInProcess(t.env, ['art', 'reorder', release, b.id, a.id, '--expect-revision', String(revision)]);
    // A second reorder from the same listing: refused, nothing changed.
    const stale = await runCli(t.env, ['--json', 'art', 'reorder', release, a.id, b.id, '--expect-revision', String(revision)]);
    assert.equal(stale.code, 2);
    assert.equal(JSON.parse(stale.stdout).error.code, 'CONFLICT');
    assert.deepEqual((await apiListing(release)).images.map((i) => i.id), [b.id, a.id]);
    assertRefused(await runCli(t.env, ['art', 'edit', release, a.id, '--comment', 'x', '--expect-revision', String(revision)]), /changed since revision/);
    assertRefused(await runCli(t.env, ['art', 'remove', release, a.id, '--expect-revision', String(revision)]), /changed since revision/);
    // A reorder must name every image once.
    assertRefused(await runCli(t.env, ['art', 'reorder', release, a.id]), /every image of the release must be named/);
    assertRefused(await runCli(t.env, ['art', 'reorder', release, a.id, a.id, b.id]), /more than once/);

    // Two editors reordering from one listing: the second is refused even while the first waits.
    const now = (await releaseArt(rt.coverArt, release))?.revision as number;
    const first = await asEditor((onEdit) => reorderArt(rt.coverArt, release, [a.id, b.id], { editor: ed, expectRevision: now, onEdit }));
    await assert.rejects(reorderArt(rt.coverArt, release, [a.id, b.id], { editor: eve, expectRevision: now }), (err: Error & { code?: string }) => err.code === 'CONFLICT');
    // The release moves on: a new image does not stand in the waiting reorder's way (test/website/review-reorder.test.ts),
    // but an image it names removed does: it cannot be approved, only rejected.
    const c = await addByCli(release, jpeg);
    await cliInProcess(t.env, ['art', 'remove', release, b.id]);
    await assert.rejects(approveEdit(rt.coverArt, first.id, ann), new RegExp(`cannot be applied: image ${b.id} is gone`));
    assert.deepEqual((await apiListing(release)).images.map((i) => i.id), [a.id, c.id]);
    assert.equal((await rejectEdit(rt.coverArt, first.id, ed)).status, 'rejected', 'an editor may withdraw their own edit');
  });

  it('roles: given at user add and user edit, listed, audited, and readable by the website', async () => {
    const users = (await cliInProcess(t.env, ['--json', 'user', 'list'])).users as { name: string; role: string }[];
    assert.deepEqual(users.map((u) => [u.name, u.role]), [['ed', 'editor'], ['eve', 'editor'], ['ann', 'approver']]);
    const r = await runCli({ ...t.env, SLEEVE_LOG_LEVEL: 'info' }, ['user', 'edit', 'eve', '--role', 'approver']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /user eve is now an approver \(was editor\)/);
    const line = r.stderr.split('\n').find((l) => l.includes('"audit"'));
    assert.ok(line !== undefined, r.stderr);
    const record = JSON.parse(line);
    assert.deepEqual({ audit: record.audit, user: record.user, reason: record.reason, via: record.via }, { audit: 'user.role_changed', user: 'eve', reason: 'approver', via: 'cli' });
    assert.match(await cliInProcess(t.env, ['user', 'list']), /^\d+ +eve +eve@example\.com +no +approver /m);
    assert.deepEqual(await accountRoles(rt.auth, eve.id), ['editor', 'approver']);
    assert.deepEqual(await accountRoles(rt.auth, ed.id), ['editor']);
    await cliInProcess(t.env, ['user', 'edit', 'eve', '--role', 'editor']);
    assert.deepEqual(await accountRoles(rt.auth, eve.id), ['editor']);
    assertRefused(await runCli(t.env, ['user', 'edit', 'eve', '--role', 'admin']), /role must be one of editor, approver/);
    assertRefused(await runCli(t.env, ['user', 'edit', 'nobody', '--role', 'editor']), /no user nobody/);
  });

  it("sleeve's edit ids stay above MusicBrainz's: --edit names an external edit below 1000000000 only", async () => {
    const { release } = await newRelease();
    assertRefused(await runCli(t.env, ['art', 'add', release, jpeg, '--edit', '1000000000']), /edit ids are sleeve's own/);
    const mb = await addByCli(release, jpeg, '--edit', '999999999');
    assert.equal(mb.edit, 999_999_999);
    const [addEdit] = (await cliInProcess(t.env, ['--json', 'edit', 'list', '--release', release])).edits as Edit[];
    assert.ok((addEdit?.id ?? 0) > 1_000_000_000);
    assert.deepEqual(addEdit?.after, { types: [], comment: '', approved: true, edit: 999_999_999 });
  });
});

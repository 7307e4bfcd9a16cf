/*
 * The write API's edit notes (docs/api.md, "The write API for tools"): `edit_note` on an upload
 * (a multipart field, as the upload page's) and on the other changes (a JSON member; a removal's
 * optional JSON body), stored with the edit trimmed, at most EDIT_NOTE_MAX_LENGTH characters
 * (400 beyond, and nothing changes), given back in the answer, and seen by the operator with
 * `sleeve edit show` / `edit list`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { EDIT_NOTE_MAX_LENGTH } from '../../src/cover-art/index.js';
import { call, multipart, REDIRECT_URI, startSite, toolToken, type Site } from './support.js';

const RELEASE = '11111111-2222-4333-8444-5555555555e1';
const GROUP = '11111111-2222-4333-8444-5555555555e2';

interface EditJson {
  id: number;
  kind: string;
  image: string | null;
  edit_note: string | null;
}

describe(`edit notes through the write API (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let tok: string;
  let jpeg: Buffer;

  const api = (p: string) => `${site.web}/api/cover-art${p}`;
  const auth = () => ({ authorization: `Bearer ${tok}` });
  const upload = (parts: Parameters<typeof multipart>[0]) => {
    const m = multipart([{ name: 'file', value: jpeg, filename: 'a.jpg', type: 'image/jpeg' }, { name: 'types', value: 'Front' }, ...parts]);
    return call(api(`/release/${RELEASE}/images`), { method: 'POST', headers: { ...auth(), 'content-type': m.type }, body: m.body });
  };
  const edits = async (): Promise<EditJson[]> => ((await cliInProcess(t.env, ['--json', 'edit', 'list', '--release', RELEASE, '--limit', '100'])) as { edits: EditJson[] }).edits;
  const latest = async (): Promise<EditJson> => (await edits())[0] as EditJson;
  const ids = async (): Promise<string[]> => (await call(api(`/release/${RELEASE}/images`), { headers: auth() })).json().images.map((i: { id: string }) => i.id);
  const refused = (res: { status: number; body: string }, text: RegExp) => {
    assert.equal(res.status, 400, res.body);
    const body = JSON.parse(res.body) as { error: string; error_description: string };
    assert.equal(body.error, 'invalid_request');
    assert.match(body.error_description, text);
  };

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    const app = await addApp(t, 'alice', 'confidential', REDIRECT_URI, 'Noting tool');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    tok = await toolToken(site, await signIn(site.web, 'alice'), app, 'cover_art');
    jpeg = await makeJpeg(300, 300);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it('an upload takes an edit note: stored trimmed with its edit and given back; none given, none in the answer', async () => {
    const res = await upload([{ name: 'edit_note', value: '  From the booklet scan,\nside B.  ' }]);
    assert.equal(res.status, 201, res.body);
    const entry = res.json();
    assert.equal(entry.edit_note, 'From the booklet scan,\nside B.');
    const shown = (await cliInProcess(t.env, ['--json', 'edit', 'show', String(entry.edit)])) as EditJson;
    assert.equal(shown.kind, 'add');
    assert.equal(shown.image, entry.id);
    assert.equal(shown.edit_note, 'From the booklet scan,\nside B.');
    // Without one: the answer is the entry as before, and the edit has no note.
    const plain = await upload([]);
    assert.equal(plain.status, 201, plain.body);
    assert.equal('edit_note' in plain.json(), false);
    assert.equal(((await cliInProcess(t.env, ['--json', 'edit', 'show', String(plain.json().edit)])) as EditJson).edit_note, null);
    // Blank: stored as none, and said so.
    const blank = await upload([{ name: 'edit_note', value: '   ' }]);
    assert.equal(blank.json().edit_note, null);
    // Exactly the limit once trimmed: taken.
    const full = await upload([{ name: 'edit_note', value: ` ${'n'.repeat(EDIT_NOTE_MAX_LENGTH)}\n` }]);
    assert.equal(full.status, 201, full.body);
    assert.equal(full.json().edit_note.length, EDIT_NOTE_MAX_LENGTH);
  });

  it('an upload whose edit note is too long, or given twice, is refused with 400 and adds nothing', async () => {
    const before = await ids();
    const editsBefore = (await edits()).length;
    refused(await upload([{ name: 'edit_note', value: 'x'.repeat(EDIT_NOTE_MAX_LENGTH + 1) }]), new RegExp(`edit note is longer than ${EDIT_NOTE_MAX_LENGTH} characters`));
    refused(
      await upload([
        { name: 'edit_note', value: 'one' },
        { name: 'edit_note', value: 'two' },
      ]),
      /edit note once/,
    );
    assert.deepEqual(await ids(), before);
    assert.equal((await edits()).length, editsBefore);
  });

  it('edit, reorder, removal and the group cover take an edit note too (JSON), bounded the same way', async () => {
    const [a, b] = await ids();
    const patch = (body: object) => call(api(`/release/${RELEASE}/images/${a}`), { method: 'PATCH', headers: auth(), json: body });
    // Refused: too long, not a string; nothing changed.
    refused(await patch({ comment: 'never', edit_note: 'x'.repeat(EDIT_NOTE_MAX_LENGTH + 1) }), /edit note is longer/);
    refused(await patch({ comment: 'never', edit_note: 42 }), /edit_note must be a string/);
    assert.notEqual((await call(api(`/release/${RELEASE}/images/${a}`), { headers: auth() })).json().comment, 'never');
    const edited = await patch({ comment: 'cropped', edit_note: 'Cropped the scanner bed.' });
    assert.equal(edited.status, 200, edited.body);
    assert.equal(edited.json().comment, 'cropped');
    assert.equal(edited.json().edit_note, 'Cropped the scanner bed.');
    assert.deepEqual([(await latest()).kind, (await latest()).edit_note], ['edit', 'Cropped the scanner bed.']);

    const order = [b, a, ...(await ids()).filter((id) => id !== a && id !== b)];
    const reordered = await call(api(`/release/${RELEASE}/order`), { method: 'PUT', headers: auth(), json: { images: order, edit_note: 'Front first.' } });
    assert.equal(reordered.status, 200, reordered.body);
    assert.deepEqual(
      reordered.json().images.map((i: { id: string }) => i.id),
      order,
    );
    assert.equal(reordered.json().edit_note, 'Front first.');
    assert.deepEqual([(await latest()).kind, (await latest()).edit_note], ['reorder', 'Front first.']);

    const cover = await call(api(`/release-group/${GROUP}/cover`), { method: 'PUT', headers: auth(), json: { release: RELEASE, edit_note: 'The original pressing.' } });
    assert.equal(cover.status, 200, cover.body);
    assert.equal(cover.json().edit_note, 'The original pressing.');
    const set = (((await cliInProcess(t.env, ['--json', 'edit', 'list', '--limit', '1'])) as { edits: EditJson[] }).edits[0] ?? {}) as EditJson;
    assert.deepEqual([set.kind, set.edit_note], ['set-cover', 'The original pressing.']);

    // A removal's note goes in an optional JSON body; too long is refused and removes nothing.
    // Node's client frames a DELETE's body only when told its length (curl and fetch do it themselves).
    const remove = (body: object) => call(api(`/release/${RELEASE}/images/${b}`), { method: 'DELETE', headers: { ...auth(), 'content-length': String(Buffer.byteLength(JSON.stringify(body))) }, json: body });
    refused(await remove({ edit_note: 'x'.repeat(EDIT_NOTE_MAX_LENGTH + 1) }), /edit note is longer/);
    assert.ok((await ids()).includes(b as string));
    const removed = await remove({ edit_note: 'A duplicate of the front.' });
    assert.equal(removed.status, 204, removed.body);
    assert.equal((await ids()).includes(b as string), false);
    assert.deepEqual([(await latest()).kind, (await latest()).image, (await latest()).edit_note], ['remove', b, 'A duplicate of the front.']);
  });
});

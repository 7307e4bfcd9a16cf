/*
 * The write API for tools, through its public surface: a token obtained with openid-client
 * (authorization code, PKCE) carrying cover_art, then add (multipart, real JPEG and PNG
 * bytes), edit, reorder, remove and the group's cover, each seen at once through the public
 * cover art API on the other listener; every bad input refused with its documented status
 * and nothing changed; tokens refused as RFC 6750 says.
 */
import assert from 'node:assert/strict';
import { readdir, stat } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, Browser, request } from '../helpers/auth.js';
import { ShiftedClock } from '../helpers/clock.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { startServe } from '../helpers/serve-process.js';
import { signIn } from '../auth/support.js';
import * as client from 'openid-client';
import { call, multipart, publicListing, REDIRECT_URI, startSite, toolToken, toolTokens, type Site } from './support.js';

const RELEASE = '11111111-2222-4333-8444-555555555501';
const OTHER = '11111111-2222-4333-8444-555555555502';
const GROUP = '11111111-2222-4333-8444-5555555555a1';
const OTHER_GROUP = '11111111-2222-4333-8444-5555555555a2';
const UNKNOWN = '11111111-2222-4333-8444-5555555555ff';
const EVENT = '11111111-2222-4333-8444-5555555555e1';
const OTHER_EVENT = '11111111-2222-4333-8444-5555555555e2';
const MAX_BYTES = 300_000;

describe(`the cover art write API (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let alice: Browser;
  let app: { client_id: string; client_secret: string };
  let tok: string;
  let jpeg: Buffer;
  let png: Buffer;
  const clock = new ShiftedClock();

  const api = (p: string) => `${site.web}/api/cover-art${p}`;
  const auth = (token = tok) => ({ authorization: `Bearer ${token}` });
  const upload = (release: string, parts: Parameters<typeof multipart>[0], headers: Record<string, string> = {}, token = tok) => {
    const m = multipart(parts);
    return call(api(`/release/${release}/images`), { method: 'POST', headers: { ...auth(token), 'content-type': m.type, ...headers }, body: m.body });
  };
  const listing = async (release = RELEASE) => {
    const res = await call(api(`/release/${release}/images`), { headers: auth() });
    assert.equal(res.status, 200, res.body);
    return { body: res.json() as { images: { id: string; types: string[]; comment: string; front: boolean }[]; release: string }, etag: String(res.headers.etag) };
  };
  const assertError = (res: { status: number; body: string }, status: number, error: string, text?: RegExp) => {
    assert.equal(res.status, status, res.body);
    const body = JSON.parse(res.body) as { error: string; error_description: string };
    assert.equal(body.error, error, res.body);
    assert.equal(typeof body.error_description, 'string');
    if (text !== undefined) assert.match(body.error_description, text);
  };
  const uploadsLeft = async () => (await readdir(path.join(t.dir, 'uploads')).catch(() => [])).length;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_UPLOAD_MAX_BYTES: String(MAX_BYTES), SLEEVE_UPLOAD_MAX_PIXELS: String(1000 * 1000) });
    site = await startSite(t, {}, clock);
    await addUser(t, 'alice');
    app = await addApp(t, 'alice', 'confidential', REDIRECT_URI, 'Tagger');
    await cliInProcess(t.env, ['release', 'add', RELEASE, '--release-group', GROUP]);
    await cliInProcess(t.env, ['release', 'add', OTHER, '--release-group', OTHER_GROUP]);
    await cliInProcess(t.env, ['event', 'add', EVENT, '--name', 'A show']);
    await cliInProcess(t.env, ['event', 'add', OTHER_EVENT]);
    alice = await signIn(site.web, 'alice');
    tok = await toolToken(site, alice, app, 'cover_art');
    [jpeg, png] = await Promise.all([makeJpeg(400, 400), makePng(300, 200)]);
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it('the consent page and the metadata name the cover_art scope', async () => {
    const meta = await request(`${site.web}/.well-known/oauth-authorization-server`);
    assert.ok(meta.json().scopes_supported.includes('cover_art'));
    const consent = await alice.fetch(`${site.web}/oauth2/authorize?${new URLSearchParams({ client_id: app.client_id, response_type: 'code', redirect_uri: REDIRECT_URI, scope: 'cover_art', approval_prompt: 'force' })}`);
    assert.equal(consent.status, 200);
    assert.match(consent.body, /Add, edit and reorder cover art/);
  });

  it('add, edit, reorder, remove and the group cover, each seen at once by the public cover art API', async () => {
    const empty = await listing();
    assert.deepEqual(empty.body.images, []);
    assert.equal(await publicListing(site, RELEASE), undefined, 'no art yet');

    const first = await upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'front.jpg', type: 'image/jpeg' }, { name: 'types', value: 'Front' }, { name: 'types', value: 'Booklet' }, { name: 'comment', value: 'scan' }]);
    assert.equal(first.status, 201, first.body);
    const a = first.json();
    assert.deepEqual(a.types, ['Front', 'Booklet']);
    assert.equal(a.comment, 'scan');
    assert.equal(a.front, true);
    assert.equal(first.headers.location, api(`/release/${RELEASE}/images/${a.id}`));
    const shown = await call(String(first.headers.location), { headers: auth() });
    assert.deepEqual(shown.json(), a);
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.id), [a.id]);

    const second = await upload(RELEASE, [{ name: 'file', value: png, filename: 'back.png', type: 'image/png' }, { name: 'types', value: 'back' }]);
    assert.equal(second.status, 201, second.body);
    const b = second.json();
    assert.deepEqual(b.types, ['Back']);
    assert.match(b.image, /\.png$/);
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.id), [a.id, b.id]);

    const longest = await call(api(`/release/${RELEASE}/images/${b.id}`), { method: 'PATCH', headers: auth(), json: { comment: 'x'.repeat(255) } });
    assert.equal(longest.status, 200, 'a comment of 255 characters, as the website takes');
    assert.equal(longest.json().comment, 'x'.repeat(255));
    const edited = await call(api(`/release/${RELEASE}/images/${b.id}`), { method: 'PATCH', headers: auth(), json: { comment: 'the back', types: ['Back', 'Spine'] } });
    assert.equal(edited.status, 200, edited.body);
    assert.deepEqual(edited.json().types, ['Back', 'Spine']);
    const pub = await publicListing(site, RELEASE);
    assert.equal(pub?.images[1]?.comment, 'the back');

    const before = await listing();
    const reordered = await call(api(`/release/${RELEASE}/order`), { method: 'PUT', headers: { ...auth(), 'if-match': before.etag }, json: { images: [b.id, a.id] } });
    assert.equal(reordered.status, 200, reordered.body);
    assert.deepEqual(reordered.json().images.map((i: { id: string }) => i.id), [b.id, a.id]);
    assert.notEqual(reordered.headers.etag, before.etag);
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.id), [b.id, a.id]);

    // The group's cover: the other group's release is refused; this group's is chosen.
    const wrongGroup = await call(api(`/release-group/${GROUP}/cover`), { method: 'PUT', headers: auth(), json: { release: OTHER } });
    assertError(wrongGroup, 400, 'invalid_request', /not in release group/);
    const cover = await call(api(`/release-group/${GROUP}/cover`), { method: 'PUT', headers: auth(), json: { release: RELEASE } });
    assert.equal(cover.status, 200, cover.body);
    assert.equal(cover.json().release, `https://musicbrainz.org/release/${RELEASE}`);
    const group = await fetch(`${site.art}/release-group/${GROUP}/`, { headers: { accept: 'application/json' } });
    assert.equal(group.status, 200);
    assert.deepEqual(((await group.json()) as { images: { id: string }[] }).images.map((i) => i.id), [b.id, a.id]);

    const removed = await call(api(`/release/${RELEASE}/images/${b.id}`), { method: 'DELETE', headers: auth() });
    assert.equal(removed.status, 204);
    assert.deepEqual((await publicListing(site, RELEASE))?.images.map((i) => i.id), [a.id]);
    assert.equal(await uploadsLeft(), 0, 'no temporary file stays');
  });

  it('bad uploads are refused with their reason, and nothing changes (database, files, index.json)', async () => {
    const start = await listing();
    const startPublic = await publicListing(site, RELEASE);
    // One after another: a user has at most 2 uploads in progress at once.
    const cases: [string, () => Promise<{ status: number; body: string }>, number, string, RegExp][] = [
      ['not an image', () => upload(RELEASE, [{ name: 'file', value: Buffer.from('hello, not an image'), filename: 'x.jpg' }]), 400, 'invalid_request', /format|image/i],
      ['truncated', () => upload(RELEASE, [{ name: 'file', value: jpeg.subarray(0, jpeg.length >> 1), filename: 'half.jpg' }]), 400, 'invalid_request', /./],
      ['too many pixels', async () => upload(RELEASE, [{ name: 'file', value: await makeJpeg(1200, 1000, 30), filename: 'big.jpg' }]), 400, 'invalid_request', /pixels/],
      ['unknown type', () => upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'types', value: 'Frontish' }]), 400, 'invalid_request', /unknown art type "Frontish"/],
      ['wrong release', () => upload(UNKNOWN, [{ name: 'file', value: jpeg, filename: 'a.jpg' }]), 404, 'not_found', /no release/],
      ['not an MBID', () => upload('not-a-release', [{ name: 'file', value: jpeg, filename: 'a.jpg' }]), 400, 'invalid_request', /MBID/],
      ['no file', () => upload(RELEASE, [{ name: 'types', value: 'Front' }]), 400, 'invalid_request', /field "file"/],
      ['unknown field', () => upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'note', value: 'x' }]), 400, 'invalid_request', /Unknown field "note"/],
      ['comment too long', () => upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'comment', value: 'x'.repeat(256) }]), 400, 'invalid_request', /comment is longer than 255 characters/],
      ['two files', () => upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'file', value: png, filename: 'b.png' }]), 400, 'invalid_request', /At most 1 files/],
      [
        'not multipart',
        () => call(api(`/release/${RELEASE}/images`), { method: 'POST', headers: auth(), json: { file: 'x' } }),
        415,
        'invalid_request',
        /multipart/,
      ],
      ['stale If-Match', () => upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }], { 'if-match': '"stale"' }), 409, 'conflict', /changed/],
    ];
    for (const [what, res, status, error, text] of cases) {
      const r = await res();
      assert.equal(r.status, status, `${what}: ${r.body}`);
      assertError(r, status, error, text);
    }
    // Streamed past the byte limit: refused while streaming, its temporary file gone.
    const big = Buffer.concat([jpeg, Buffer.alloc(MAX_BYTES)]);
    const tooBig = await upload(RELEASE, [{ name: 'file', value: big, filename: 'huge.jpg' }]);
    assertError(tooBig, 413, 'too_large', /larger than the limit of 300000 bytes/);

    const end = await listing();
    assert.deepEqual(end.body, start.body);
    assert.equal(end.etag, start.etag);
    assert.deepEqual(await publicListing(site, RELEASE), startPublic);
    assert.equal(await uploadsLeft(), 0, 'no temporary file stays');
    const files = await fetch(`${site.art}/release/${RELEASE}/`, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(files.status, 307);
  });

  it('a client that goes away mid-upload leaves no temporary file and nothing changed', async () => {
    const start = await listing();
    const m = multipart([{ name: 'file', value: Buffer.concat([jpeg, Buffer.alloc(100_000)]), filename: 'cut.jpg' }]);
    const req = https.request(api(`/release/${RELEASE}/images`), {
      method: 'POST',
      rejectUnauthorized: false,
      headers: { ...auth(), 'content-type': m.type, 'content-length': String(m.body.length) },
    });
    req.on('error', () => {});
    req.write(m.body.subarray(0, m.body.length >> 1));
    // The server has the file part open: its temporary file exists until the client goes.
    assert.equal((await pollUntil(uploadsLeft, (n) => n === 1)).value, 1, 'the upload streams to a temporary file');
    const folder = path.join(t.dir, 'uploads');
    const [part] = await readdir(folder);
    assert.equal((await stat(path.join(folder, part as string))).mode & 0o777, 0o600, 'the temporary file is private');
    assert.equal((await stat(folder)).mode & 0o777, 0o700);
    req.destroy();
    const { value } = await pollUntil(uploadsLeft, (n) => n === 0);
    assert.equal(value, 0, 'the temporary file is removed');
    assert.deepEqual((await listing()).body, start.body);
  });

  it('more uploads at once than one user may have: 429 with Retry-After before the body is read, the others unharmed', async () => {
    const m = multipart([{ name: 'file', value: Buffer.concat([jpeg, Buffer.alloc(100_000)]), filename: 'slow.jpg' }]);
    const held = Array.from({ length: 2 }, () => {
      const req = https.request(api(`/release/${RELEASE}/images`), {
        method: 'POST',
        rejectUnauthorized: false,
        headers: { ...auth(), 'content-type': m.type, 'content-length': String(m.body.length) },
      });
      req.on('error', () => {});
      req.write(m.body.subarray(0, m.body.length >> 1));
      return req;
    });
    assert.equal((await pollUntil(uploadsLeft, (n) => n === 2)).value, 2, 'two uploads streaming');
    const refused = await upload(RELEASE, [{ name: 'file', value: png, filename: 'third.png' }]);
    assertError(refused, 429, 'temporarily_unavailable', /2 uploads of yours are in progress/);
    assert.equal(refused.headers['retry-after'], '2');
    assert.equal(refused.headers.connection, 'close', 'its body left unread');
    for (const req of held) req.destroy();
    assert.equal((await pollUntil(uploadsLeft, (n) => n === 0)).value, 0);
    // The slots come back once the interrupted uploads are done with (a condition, not a fixed wait).
    const after = (await pollUntil(() => upload(RELEASE, [{ name: 'file', value: png, filename: 'later.png' }]), (r) => r.status !== 429)).value;
    assert.equal(after.status, 201, after.body);
    const removed = await call(api(`/release/${RELEASE}/images/${after.json().id}`), { method: 'DELETE', headers: auth() });
    assert.equal(removed.status, 204);
  });

  it('edits, reorders and removals that name the wrong things are refused, nothing changed', async () => {
    const other = await upload(OTHER, [{ name: 'file', value: png, filename: 'o.png' }]);
    assert.equal(other.status, 201, other.body);
    const otherId = other.json().id as string;
    const extra = await upload(RELEASE, [{ name: 'file', value: png, filename: 'p.png' }, { name: 'types', value: 'Medium' }]);
    assert.equal(extra.status, 201, extra.body);
    const start = await listing();
    const ids = start.body.images.map((i) => i.id);
    assert.equal(ids.length, 2);
    const put = (json: unknown, headers: Record<string, string> = {}) => call(api(`/release/${RELEASE}/order`), { method: 'PUT', headers: { ...auth(), ...headers }, json });
    const cases: [string, Promise<{ status: number; body: string }>, number, string, RegExp][] = [
      ['an id of another release (edit)', call(api(`/release/${RELEASE}/images/${otherId}`), { method: 'PATCH', headers: auth(), json: { comment: 'x' } }), 404, 'not_found', /not found on release/],
      ['an id of another release (remove)', call(api(`/release/${RELEASE}/images/${otherId}`), { method: 'DELETE', headers: auth() }), 404, 'not_found', /not found/],
      ['an id with a leading zero (edit)', call(api(`/release/${RELEASE}/images/0${ids[0]}`), { method: 'PATCH', headers: auth(), json: { comment: 'x' } }), 400, 'invalid_request', /no leading zero/],
      ['an id with leading zeros (remove)', call(api(`/release/${RELEASE}/images/00${ids[0]}`), { method: 'DELETE', headers: auth() }), 400, 'invalid_request', /no leading zero/],
      ['unknown type (edit)', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: { types: ['Nope'] } }), 400, 'invalid_request', /unknown art type/],
      ['unknown member (edit)', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: { approved: true } }), 400, 'invalid_request', /Unknown member/],
      ['empty edit', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: {} }), 400, 'invalid_request', /types, comment/],
      ['malformed JSON', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: { ...auth(), 'content-type': 'application/json' }, body: '{"comment": ' }), 400, 'invalid_request', /not valid JSON/],
      ['comment too long (edit)', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: { comment: 'é'.repeat(256) } }), 400, 'invalid_request', /comment is longer than 255 characters/],
      ['a NUL', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: { comment: 'a\u0000b' } }), 400, 'invalid_request', /NUL/],
      ['oversize JSON', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: auth(), json: { comment: 'x'.repeat(70_000) } }), 413, 'too_large', /larger/],
      ['reorder missing one', put({ images: [ids[0]] }), 400, 'invalid_request', /every image/],
      ['reorder naming one twice', put({ images: [ids[0], ids[0], ids[1]] }), 400, 'invalid_request', /more than once/],
      ['reorder with another release id', put({ images: [...ids, otherId] }), 404, 'not_found', /not found on release/],
      ['reorder not an array', put({ images: 'all' }), 400, 'invalid_request', /array/],
      ['stale If-Match (reorder)', put({ images: [...ids].reverse() }, { 'if-match': '"0000"' }), 409, 'conflict', /changed since you read it/],
      ['stale If-Match (edit)', call(api(`/release/${RELEASE}/images/${ids[0]}`), { method: 'PATCH', headers: { ...auth(), 'if-match': '"0000"' }, json: { comment: 'x' } }), 409, 'conflict', /changed/],
      ['unknown release (order)', call(api(`/release/${UNKNOWN}/order`), { method: 'PUT', headers: auth(), json: { images: [] } }), 404, 'not_found', /no release/],
    ];
    for (const [what, res, status, error, text] of cases) {
      const r = await res;
      assert.equal(r.status, status, `${what}: ${r.body}`);
      assertError(r, status, error, text);
    }
    const end = await listing();
    assert.deepEqual(end.body, start.body);

    // Two editors reorder from the same listing: the first wins, the second gets a conflict.
    const [x, y] = await Promise.all([put({ images: [...ids].reverse() }, { 'if-match': start.etag }), put({ images: [...ids].reverse() }, { 'if-match': start.etag })]);
    assert.deepEqual([x.status, y.status].sort(), [200, 409]);
  });

  it('If-Match holds across processes: two reorders from one listing, sent to two serving processes at once, one 200 and one 409', async () => {
    const other = await startServe(t.env);
    try {
      for (let round = 0; round < 4; round++) {
        const start = await listing();
        const ids = start.body.images.map((i) => i.id);
        assert.ok(ids.length >= 2, 'the release has images to reorder');
        const put = (base: string, order: string[]) =>
          call(`${base}/api/cover-art/release/${RELEASE}/order`, { method: 'PUT', headers: { ...auth(), 'if-match': start.etag }, json: { images: order } });
        const [x, y] = await Promise.all([put(site.web, [...ids].reverse()), put(other.authBase, [ids[1] as string, ids[0] as string, ...ids.slice(2)])]);
        assert.deepEqual([x.status, y.status].sort(), [200, 409], `round ${round}: ${x.body.slice(0, 120)} / ${y.body.slice(0, 120)}`);
      }
    } finally {
      await other.stop();
    }
  });

  it("an event's images under /api/event-art/: tokens, add, edit, reorder, remove, each seen at once by /event/{mbid}/; refusals change nothing", async () => {
    const ev = (p: string, event = EVENT) => `${site.web}/api/event-art/event/${event}${p}`;
    const eventUpload = (parts: Parameters<typeof multipart>[0], headers: Record<string, string> = {}, event = EVENT) => {
      const m = multipart(parts);
      return call(ev('/images', event), { method: 'POST', headers: { ...auth(), 'content-type': m.type, ...headers }, body: m.body });
    };
    const eventListing = async () => {
      const res = await call(ev('/images'), { headers: auth() });
      assert.equal(res.status, 200, res.body);
      return { body: res.json() as { event: string; images: { id: string; types: string[]; comment: string; front: boolean }[]; pending: unknown[] }, etag: String(res.headers.etag) };
    };
    /** The event's listing as the public Event Art Archive API serves it (its 307 followed), and what /front names. */
    const published = async () => {
      const first = await fetch(`${site.art}/event/${EVENT}/`, { redirect: 'manual', headers: { accept: 'application/json' } });
      if (first.status === 404) return undefined;
      const index = (await (await fetch(String(first.headers.get('location')))).json()) as { images: { id: string; comment: string }[] };
      const front = await fetch(`${site.art}/event/${EVENT}/front`, { redirect: 'manual' });
      return { ids: index.images.map((i) => i.id), comments: index.images.map((i) => i.comment), front: /-(\d+)\.\w+$/.exec(front.headers.get('location') ?? '')?.[1] ?? String(front.status) };
    };

    // The token rules are the release's.
    assertError(await call(ev('/images')), 401, 'invalid_token');
    assertError(await call(ev('/images'), { headers: auth(await toolToken(site, alice, app, 'profile')) }), 403, 'insufficient_scope', /cover_art/);
    assertError(await call(`${site.web}/api/event-art/release/${RELEASE}/images`, { headers: auth() }), 404, 'not_found', /No such endpoint/);

    const empty = await eventListing();
    assert.deepEqual(empty.body, { event: `https://musicbrainz.org/event/${EVENT}`, images: [], pending: [] });
    assert.equal(await published(), undefined, 'no art yet');

    const first = await eventUpload([{ name: 'file', value: jpeg, filename: 'poster.jpg', type: 'image/jpeg' }, { name: 'types', value: 'poster' }, { name: 'comment', value: 'the poster' }, { name: 'edit_note', value: 'From the venue' }]);
    assert.equal(first.status, 201, first.body);
    const a = first.json();
    assert.deepEqual([a.types, a.comment, a.front, a.approved, a.edit_note, 'back' in a], [['Poster'], 'the poster', true, true, 'From the venue', false]);
    assert.equal(first.headers.location, ev(`/images/${a.id}`));
    const { edit_note: _note, ...entry } = a;
    assert.deepEqual((await call(String(first.headers.location), { headers: auth() })).json(), entry);
    const second = await eventUpload([{ name: 'file', value: png, filename: 'stage.png', type: 'image/png' }]);
    assert.equal(second.status, 201, second.body);
    const b = second.json();
    assert.deepEqual(await published(), { ids: [a.id, b.id], comments: ['the poster', ''], front: a.id });
    // The addition is an edit of the event's, by the token's user, with its note.
    const edit = await cliInProcess(t.env, ['--json', 'edit', 'show', String(a.edit)]);
    assert.deepEqual([edit.kind, edit.event, edit.release, edit.image, edit.editor?.name, edit.edit_note], ['add', EVENT, null, a.id, 'alice', 'From the venue']);

    // Refused as a release's are, each with its reason; nothing changes.
    const start = await eventListing();
    const put = (json: unknown, headers: Record<string, string> = {}) => call(ev('/order'), { method: 'PUT', headers: { ...auth(), ...headers }, json });
    const cases: [string, () => Promise<{ status: number; body: string }>, number, string, RegExp][] = [
      ['a release\'s type', () => eventUpload([{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'types', value: 'Front' }]), 400, 'invalid_request', /unknown event art type "Front"; known types: Poster/],
      ['not an image', () => eventUpload([{ name: 'file', value: Buffer.from('no image here'), filename: 'x.jpg' }]), 400, 'invalid_request', /format|image/i],
      ['comment too long', () => eventUpload([{ name: 'file', value: jpeg, filename: 'a.jpg' }, { name: 'comment', value: 'x'.repeat(256) }]), 400, 'invalid_request', /longer than 255/],
      ['unknown event', () => eventUpload([{ name: 'file', value: jpeg, filename: 'a.jpg' }], {}, UNKNOWN), 404, 'not_found', /no event/],
      ['a release is no event', () => call(ev('/images', RELEASE), { headers: auth() }), 404, 'not_found', /no event/],
      ['stale If-Match (upload)', () => eventUpload([{ name: 'file', value: jpeg, filename: 'a.jpg' }], { 'if-match': '"stale"' }), 409, 'conflict', /changed/],
      ['an image of another event', () => call(ev(`/images/${a.id}`, OTHER_EVENT), { method: 'PATCH', headers: auth(), json: { comment: 'x' } }), 404, 'not_found', /event image with id \d+ not found on event/],
      ['an unknown type (edit)', () => call(ev(`/images/${b.id}`), { method: 'PATCH', headers: auth(), json: { types: ['Back'] } }), 400, 'invalid_request', /unknown event art type/],
      ['reorder missing one', () => put({ images: [a.id] }), 400, 'invalid_request', /every image of the event/],
      ['stale If-Match (reorder)', () => put({ images: [b.id, a.id] }, { 'if-match': '"0000"' }), 409, 'conflict', /changed since you read it/],
      ['stale If-Match (remove)', () => call(ev(`/images/${b.id}`), { method: 'DELETE', headers: { ...auth(), 'if-match': '"0000"' } }), 409, 'conflict', /changed/],
    ];
    for (const [what, res, status, error, text] of cases) {
      const r = await res();
      assert.equal(r.status, status, `${what}: ${r.body}`);
      assertError(r, status, error, text);
    }
    const unchanged = await eventListing();
    assert.deepEqual([unchanged.body, unchanged.etag], [start.body, start.etag], 'nothing changed');
    assert.deepEqual(await published(), { ids: [a.id, b.id], comments: ['the poster', ''], front: a.id });

    // Edit and reorder, based on the listing read (If-Match): the stage photo becomes the first Poster, so the front.
    const edited = await call(ev(`/images/${b.id}`), { method: 'PATCH', headers: { ...auth(), 'if-match': start.etag }, json: { types: ['Poster'], comment: 'stage' } });
    assert.equal(edited.status, 200, edited.body);
    assert.deepEqual([edited.json().types, edited.json().front], [['Poster'], false]);
    const now = await eventListing();
    const reordered = await call(ev('/order'), { method: 'PUT', headers: { ...auth(), 'if-match': now.etag }, json: { images: [b.id, a.id], edit_note: 'Stage first' } });
    assert.equal(reordered.status, 200, reordered.body);
    assert.deepEqual([reordered.json().images.map((i: { id: string }) => i.id), reordered.json().event, reordered.json().edit_note], [[b.id, a.id], `https://musicbrainz.org/event/${EVENT}`, 'Stage first']);
    assert.deepEqual(await published(), { ids: [b.id, a.id], comments: ['stage', 'the poster'], front: b.id });

    const removed = await call(ev(`/images/${b.id}`), { method: 'DELETE', headers: auth() });
    assert.equal(removed.status, 204, removed.body);
    assert.deepEqual((await eventListing()).body.images.map((i) => i.id), [a.id]);
    assert.deepEqual(await published(), { ids: [a.id], comments: ['the poster'], front: a.id });
    assert.equal((await fetch(`${site.art}/event/${EVENT}/${b.id}`, { redirect: 'manual' })).status, 404, 'its files are gone from the API');
    const history = await cliInProcess(t.env, ['--json', 'edit', 'list', '--event', EVENT]);
    assert.deepEqual(history.edits.map((e: { kind: string }) => e.kind), ['remove', 'reorder', 'edit', 'add', 'add']);
    assert.equal(await uploadsLeft(), 0, 'no temporary file stays');
  });

  it('tokens: without cover_art 403 insufficient_scope; none, garbage and revoked 401 invalid_token, each with WWW-Authenticate', async () => {
    const profileOnly = await toolToken(site, alice, app, 'profile');
    const noScope = await call(api(`/release/${RELEASE}/images`), { headers: auth(profileOnly) });
    assertError(noScope, 403, 'insufficient_scope', /cover_art/);
    assert.match(String(noScope.headers['www-authenticate']), /^Bearer realm="sleeve", error="insufficient_scope", .*scope="cover_art"/);
    const refusedUpload = await upload(RELEASE, [{ name: 'file', value: jpeg, filename: 'a.jpg' }], {}, profileOnly);
    assert.equal(refusedUpload.status, 403);

    const none = await call(api(`/release/${RELEASE}/images`));
    assertError(none, 401, 'invalid_token');
    assert.match(String(none.headers['www-authenticate']), /^Bearer realm="sleeve"/);
    const garbage = await call(api(`/release/${RELEASE}/images`), { headers: auth('garbage.garbage') });
    assertError(garbage, 401, 'invalid_token', /invalid, expired or revoked/);
    assert.match(String(garbage.headers['www-authenticate']), /error="invalid_token"/);
    const basic = await call(api(`/release/${RELEASE}/images`), { headers: { authorization: 'Basic Zm9vOmJhcg==' } });
    assertError(basic, 401, 'invalid_token');

    const doomed = await toolToken(site, alice, app, 'cover_art');
    assert.equal((await call(api(`/release/${RELEASE}/images`), { headers: auth(doomed) })).status, 200);
    const revoked = await request(`${site.web}/oauth2/revoke`, { form: { token: doomed, client_id: app.client_id, client_secret: app.client_secret } });
    assert.equal(revoked.status, 200, revoked.body);
    const after = await call(api(`/release/${RELEASE}/images`), { headers: auth(doomed) });
    assertError(after, 401, 'invalid_token');
    assert.match(String(after.headers['www-authenticate']), /error="invalid_token"/);
  });

  it('a DPoP-bound token: refused as Bearer (401 invalid_token, DPoP challenge); with Authorization: DPoP and a proof of its key it works', async () => {
    const { token: bound, config, DPoP } = await toolTokens(site, alice, app, 'cover_art', await client.randomDPoPKeyPair('ES256'));
    const asBearer = await call(api(`/release/${RELEASE}/images`), { headers: auth(bound) });
    assertError(asBearer, 401, 'invalid_token', /DPoP-bound/);
    assert.match(String(asBearer.headers['www-authenticate']), /^DPoP algs="[^"]+", error="invalid_token"/);
    const asBearerWrite = await call(api(`/release/${RELEASE}/images/1`), { method: 'DELETE', headers: auth(bound) });
    assert.equal(asBearerWrite.status, 401, asBearerWrite.body);

    // openid-client's own DPoP request: the proof carries htm, htu and ath of this request.
    const res = await client.fetchProtectedResource(config, bound, new URL(api(`/release/${RELEASE}/images`)), 'GET', undefined, undefined, { DPoP });
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(((await res.json()) as { release: string }).release.endsWith(RELEASE), true);
    // Without a proof the DPoP scheme is refused.
    const noProof = await call(api(`/release/${RELEASE}/images`), { headers: { authorization: `DPoP ${bound}` } });
    assertError(noProof, 401, 'invalid_dpop_proof');
    assert.match(String(noProof.headers['www-authenticate']), /^DPoP algs="[^"]+", error="invalid_dpop_proof"/);
    // A bearer token sent with the DPoP scheme is refused too.
    const plain = await call(api(`/release/${RELEASE}/images`), { headers: { authorization: `DPoP ${tok}` } });
    assertError(plain, 401, 'invalid_token');
  });

  it('an expired token (the clock moved past its lifetime) is refused with 401 invalid_token', async () => {
    const fresh = await toolToken(site, alice, app, 'cover_art');
    assert.equal((await call(api(`/release/${RELEASE}/images`), { headers: auth(fresh) })).status, 200);
    clock.advance(3601_000);
    const expired = await call(api(`/release/${RELEASE}/images`), { headers: auth(fresh) });
    assertError(expired, 401, 'invalid_token');
    assert.match(String(expired.headers['www-authenticate']), /error="invalid_token"/);
  });
});

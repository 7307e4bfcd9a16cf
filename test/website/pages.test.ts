/*
 * The website's cover art pages over HTTPS: the galleries, the home page and search, and the
 * curation forms (CSRF, bad input, stale forms, Post/Redirect/Get), with art loaded through
 * the cover art domain and checked through the pages and the cover art API; an event's pages
 * (the Event Art Archive) the same way.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { mergeRelease } from '../../src/cover-art/index.js';
import { addUser, Browser, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { signIn } from '../auth/support.js';
import { art, event, release, startSite, type Site } from './page-support.js';

/** The image ids of a gallery page, in the order shown. */
function shownOrder(page: HttpsResponse): string[] {
  return [...page.body.matchAll(/<li class="art" id="image-(\d+)">/g)].map((m) => m[1] as string);
}

/** The cover art API's listing of a release (following its redirect to index.json), as it was before the change. */
async function listingNow(site: Site, mbid: string): Promise<{ images: { id: string; types: string[]; comment: string; front: boolean }[] }> {
  const get = (url: string) =>
    new Promise<{ status: number; location?: string; body: string }>((resolve, reject) => {
      http.get(url, { headers: { accept: 'application/json' } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, location: res.headers.location, body: Buffer.concat(chunks).toString('utf8') }));
      }).on('error', reject);
    });
  const first = await get(`${site.api}/release/${mbid}/`);
  if (first.status === 404) return { images: [] };
  assert.equal(first.status, 307, first.body);
  const index = await get(first.location as string);
  assert.equal(index.status, 200);
  return JSON.parse(index.body);
}

/**
 * The listing once it shows `expected` (the API's caches follow a change within the watch's poll
 * interval); the last one read otherwise, for the assertion to name.
 */
async function listing<T>(site: Site, mbid: string, view: (l: Awaited<ReturnType<typeof listingNow>>) => T, expected: T): Promise<T> {
  const { value } = await pollUntil(async () => view(await listingNow(site, mbid)), (v) => JSON.stringify(v) === JSON.stringify(expected));
  return value;
}

/** A gallery's images as shown: id, types and comment of each, in order (the pages read the catalogue as it is now). */
function shown(page: HttpsResponse): string[] {
  return page.body.split('<li class="art" id="image-').slice(1).map((card) => {
    const types = /<dt>Types<\/dt><dd>(.*?)<\/dd>/.exec(card)?.[1] ?? '';
    const comment = /<dt>Comment<\/dt><dd>(.*?)<\/dd>/.exec(card)?.[1] ?? '';
    return `${card.slice(0, card.indexOf('"'))} ${types.replace(/<[^>]+>/g, '')} / ${comment.replace(/<[^>]+>/g, '')}`;
  });
}

describe(`cover art pages (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let alice: Browser;

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    alice = await signIn(site.base, 'alice');
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  const get = (path: string, b?: Browser) => (b ?? new Browser()).fetch(`${site.base}${path}`);
  const post = async (b: Browser, path: string, form: [string, string][], formPath = path) => {
    const page = await b.fetch(`${site.base}${formPath}`);
    return b.fetch(`${site.base}${path}`, { form: [['csrf_token', Browser.csrf(page)], ...form] });
  };
  /** A field of the form on a page. */
  const field = (page: HttpsResponse, name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(page.body)?.[1] ?? '';

  it('shows a release gallery to everyone: types, comment, approval, edit, size, files, srcset, front and back, with the image origin allowed', async () => {
    const { mbid } = await release(site, { title: 'Gallery <Test>' });
    const front = await art(site, mbid, { types: ['Front'], comment: 'the sleeve', width: 640, height: 480, edit: 42 });
    const back = await art(site, mbid, { types: ['Back', 'Spine'], png: true, width: 300, height: 200 });
    const second = await art(site, mbid, { types: ['Front', 'Raw/Unedited'], approved: false });
    const page = await get(`/release/${mbid}/cover-art`);
    assert.equal(page.status, 200, page.body.slice(0, 500));
    assert.match(String(page.headers['content-type']), /^text\/html/);
    const csp = String(page.headers['content-security-policy']);
    assert.match(csp, new RegExp(`img-src 'self' ${site.api.replace(/\./g, '\\.')}(;| )`));
    assert.doesNotMatch(csp, /script-src/, 'no script on the gallery');
    assert.ok(page.body.includes('Gallery &lt;Test&gt;'), 'title escaped');
    assert.deepEqual(shownOrder(page), [front, back, second]);
    assert.ok(page.body.includes('640 × 480 px'), 'dimensions of the JPEG');
    assert.ok(page.body.includes('300 × 200 px'), 'dimensions of the PNG');
    assert.match(page.body, /640 × 480 px, \d+\.\d kB/);
    assert.ok(page.body.includes('the sleeve'));
    assert.ok(page.body.includes('<dd>Back, Spine</dd>'));
    // The edit that added each image, linked to a page that exists: a MusicBrainz edit number
    // (--edit 42) on MusicBrainz, sleeve's own edit on its edit page here.
    assert.ok(page.body.includes('<a href="https://musicbrainz.org/edit/42">MusicBrainz edit #42</a>'), 'a MusicBrainz edit');
    const own = [...page.body.matchAll(/<dt>Added by<\/dt><dd><a href="(\/edit\/(\d+))">edit #\2<\/a>/g)];
    assert.equal(own.length, 2, 'the two images added without --edit link to their sleeve edits');
    for (const [, href] of own) {
      const edit = await get(href as string);
      assert.equal(edit.status, 200, `${href}: ${edit.body.slice(0, 300)}`);
      assert.match(edit.body, /Edit #\d+/);
    }
    assert.ok(page.body.includes('<dd>Yes</dd>'), 'approved');
    assert.ok(page.body.split('<li class="art"')[3]?.includes('<dd>No (pending)</dd>'), 'not approved');
    assert.ok(page.body.includes(`href="${site.api}/release/${mbid}/${front}.jpg"`), 'original as the listing names it');
    assert.ok(page.body.includes(`href="${site.api}/release/${mbid}/${back}-1200.jpg"`), 'a thumbnail link');
    assert.ok(page.body.includes(`${site.api}/download/mbid-${mbid}/mbid-${mbid}-${front}_thumb250.jpg 250w`), 'srcset from the files');
    assert.ok(page.body.includes('1200w" sizes="'), 'srcset with sizes');
    assert.ok(page.body.includes('<strong>The front cover</strong>'));
    assert.ok(page.body.includes('<strong>The back cover</strong>'));
    assert.ok(page.body.includes('Typed Front, but image 1 comes first'));
    assert.ok(!page.body.includes('edit-cover-art'), 'no editing links for a visitor');
    // The image itself loads from that origin.
    const img = /src="([^"]+_thumb500\.jpg)"/.exec(page.body)?.[1] as string;
    const file = await new Promise<number>((resolve, reject) => http.get(img, (res) => (res.resume(), resolve(res.statusCode ?? 0))).on('error', reject));
    assert.equal(file, 200);

    const signedIn = await get(`/release/${mbid}/cover-art`, alice);
    assert.ok(signedIn.body.includes(`/release/${mbid}/edit-cover-art/${front}`), 'editing links for an editor');
    assert.ok(signedIn.body.includes(`/release/${mbid}/reorder-cover-art`));
    assert.ok(signedIn.body.includes('alice'), 'the header names the editor');
    const again = await get(`/release/${mbid}/cover-art`);
    assert.ok(!again.body.includes('alice'), 'the cached page carries no other viewer');
  });

  it('answers 400 to a malformed MBID, 404 to an unknown one, and redirects merged and upper-case MBIDs', async () => {
    const bad = await get('/release/not-an-mbid/cover-art');
    assert.equal(bad.status, 400);
    assert.ok(bad.body.includes('is not an MBID'));
    const unknown = await get('/release/00000000-0000-4000-8000-000000000000/cover-art');
    assert.equal(unknown.status, 404);
    assert.ok(unknown.body.includes('There is no release 00000000-0000-4000-8000-000000000000'));
    assert.equal((await get('/release-group/nope/cover-art')).status, 400);
    assert.equal((await get('/release-group/00000000-0000-4000-8000-000000000000/cover-art')).status, 404);

    const { mbid: into, group } = await release(site);
    const { mbid: old } = await release(site, { group });
    await art(site, old, { types: ['Front'] });
    await mergeRelease(site.server.runtime.coverArt, old, into);
    const merged = await get(`/release/${old}/cover-art`);
    assert.equal(merged.status, 301);
    assert.equal(merged.headers.location, `/release/${into}/cover-art`);
    const upper = await get(`/release/${into.toUpperCase()}/cover-art`);
    assert.equal(upper.status, 301);
    assert.equal(upper.headers.location, `/release/${into}/cover-art`);
    const upperGroup = await get(`/release-group/${group.toUpperCase()}/cover-art`);
    assert.equal(upperGroup.headers.location, `/release-group/${group}/cover-art`);
  });

  it('says so when a release has no art, with an Add link for editors', async () => {
    const { mbid } = await release(site);
    const anon = await get(`/release/${mbid}/cover-art`);
    assert.equal(anon.status, 200);
    assert.ok(anon.body.includes('There is no cover art for this release yet.'));
    assert.ok(anon.body.includes('Sign in</a> to add some'));
    const editor = await get(`/release/${mbid}/cover-art`, alice);
    assert.ok(editor.body.includes(`href="/release/${mbid}/add-cover-art">Add cover art</a>`));
  });

  it('shows a group’s cover, the release it comes from and why', async () => {
    const { mbid: late, group } = await release(site, { title: 'Late', date: '2001-05' });
    const { mbid: early } = await release(site, { group, title: 'Early', date: '1999' });
    const { mbid: none } = await release(site, { group, title: 'Bare' });
    const empty = await get(`/release-group/${group}/cover-art`);
    assert.equal(empty.status, 200);
    assert.ok(empty.body.includes('No release of this group has a front cover yet'));
    await art(site, late, { types: ['Front'] });
    const only = await get(`/release-group/${group}/cover-art`);
    assert.ok(only.body.includes('it is the only release of the group with a front cover'));
    assert.ok(only.body.includes(`The front cover of <a href="/release/${late}/cover-art">Late</a>`));
    await art(site, early, { types: ['Front'] });
    const earliest = await get(`/release-group/${group}/cover-art`);
    assert.ok(earliest.body.includes(`The front cover of <a href="/release/${early}/cover-art">Early</a>`));
    assert.ok(earliest.body.includes('it has the earliest release date'));
    assert.ok(earliest.body.includes(`href="/release/${none}/cover-art">Bare</a>`), 'every release of the group is listed');
    assert.ok(!earliest.body.includes('set-cover-art'), 'no set-cover link for a visitor');
  });

  it('home: search by MBID (release, group, link), bad and unknown values, recent additions of both archives', async () => {
    const { mbid, group } = await release(site, { title: 'Newest' });
    const id = await art(site, mbid, { types: ['Front'] });
    const home = await get('/');
    assert.equal(home.status, 200);
    assert.ok(home.body.includes('action="/search"'));
    assert.ok(home.body.includes('<button type="submit">Find art</button>'), 'a label for releases and events alike');
    assert.ok(home.body.includes(`href="/release/${mbid}/cover-art#image-${id}"`), 'the newest addition');
    // An event's poster added since: the page (cached) shows it beside the release's, leading to the event's gallery.
    const show = await event(site, 'Home <Gig>');
    const poster = await art(site, show, { event: true, types: ['Poster'] });
    const again = (await get('/')).body;
    const recent = again.match(/<ul class="recent">[\s\S]*?<\/ul>/)?.[0] ?? '';
    const links = [...recent.matchAll(/<a href="([^"]+)"/g)].map((m) => m[1]);
    assert.deepEqual(links.slice(0, 2), [`/event/${show}/event-art#image-${poster}`, `/release/${mbid}/cover-art#image-${id}`], 'newest first, both archives');
    assert.ok(recent.includes('alt="Event art of Home &lt;Gig&gt;"'), recent);
    assert.ok(recent.includes(`/mbid-${show}/mbid-${show}-${poster}_thumb500.jpg`), "the poster's thumbnail");
    assert.ok(home.body.includes('<a href="/login">Sign in</a>'), 'what the account home page offered');
    assert.ok((await get('/', alice)).body.includes('href="/account/applications">Your applications'));
    const toRelease = await get(`/search?mbid=${mbid}`);
    assert.equal(toRelease.status, 303);
    assert.equal(toRelease.headers.location, `/release/${mbid}/cover-art`);
    const toGroup = await get(`/search?mbid=${encodeURIComponent(` https://musicbrainz.org/release-group/${group.toUpperCase()} `)}`);
    assert.equal(toGroup.status, 303);
    assert.equal(toGroup.headers.location, `/release-group/${group}/cover-art`);
    const bad = await get('/search?mbid=%3Cb%3Enope');
    assert.equal(bad.status, 400);
    assert.ok(bad.body.includes('“&lt;b&gt;nope” is not an MBID'));
    assert.ok(bad.body.includes('value="&lt;b&gt;nope"'), 'the form again, with the value');
    const unknown = await get('/search?mbid=00000000-0000-4000-8000-000000000001');
    assert.equal(unknown.status, 404);
    assert.ok(unknown.body.includes('There is no release, release group or event 00000000-0000-4000-8000-000000000001 here.'));
  });

  it('edit form: sign-in first, CSRF, a stale form, an unknown type, then saved with a notice', async () => {
    const { mbid } = await release(site);
    const id = await art(site, mbid, { types: ['Front'], comment: 'old' });
    const path = `/release/${mbid}/edit-cover-art/${id}`;
    const out = await get(path);
    assert.equal(out.status, 303);
    assert.equal(out.headers.location, `/login?return_to=${encodeURIComponent(path)}`);
    const postedOut = await new Browser().fetch(`${site.base}${path}`, { form: { comment: 'x' } });
    assert.equal(postedOut.status, 303, 'a signed-out post changes nothing and goes to sign in');

    const form = await get(path, alice);
    assert.equal(form.status, 200);
    assert.match(form.body, /<input type="checkbox" name="type" value="Front" checked>/);
    assert.match(form.body, /<input type="checkbox" name="type" value="Medium">/);
    const state = field(form, 'state');

    const noCsrf = await alice.fetch(`${site.base}${path}`, { form: [['state', state], ['type', 'Back'], ['comment', 'new']] });
    assert.equal(noCsrf.status, 400);
    assert.ok(noCsrf.body.includes('The form you submitted has expired'));
    const unknownType = await post(alice, path, [['state', state], ['type', 'Nonsense'], ['comment', 'new']]);
    assert.equal(unknownType.status, 400);
    assert.ok(unknownType.body.includes('unknown art type &quot;Nonsense&quot;'));
    assert.deepEqual(shown(await get(`/release/${mbid}/cover-art`)), [`${id} Front / old`], 'nothing changed');

    const stale = await post(alice, path, [['state', 'not-the-state'], ['type', 'Back'], ['comment', 'new']]);
    assert.equal(stale.status, 409);
    assert.ok(stale.body.includes('Someone changed this image since you opened the form'));

    const saved = await post(alice, path, [['state', state], ['type', 'Back'], ['type', 'Medium'], ['comment', 'new']]);
    assert.equal(saved.status, 303);
    assert.equal(saved.headers.location, `/release/${mbid}/cover-art#image-${id}`);
    const edited = [[['Back', 'Medium'], 'new']];
    assert.deepEqual(await listing(site, mbid, (l) => l.images.map((i) => [i.types, i.comment]), edited), edited, 'the API follows');
    const gallery = await get(`/release/${mbid}/cover-art`, alice);
    assert.ok(gallery.body.includes('Saved the types and comment of image 1.'), 'the notice, once');
    assert.ok(gallery.body.includes('<dd>Back, Medium</dd>'), 'the page shows the change at once');
    assert.ok(!(await get(`/release/${mbid}/cover-art`, alice)).body.includes('Saved the types'), 'not twice');
    const replay = await post(alice, path, [['state', state], ['type', 'Front'], ['comment', 'again']]);
    assert.equal(replay.status, 409, 'the old form is stale now');

    assert.equal((await get(`/release/${mbid}/edit-cover-art/999`, alice)).status, 404);
    assert.equal((await get(`/release/${mbid}/edit-cover-art/abc`, alice)).status, 404);
  });

  it('remove: a confirmation page, CSRF, then removal', async () => {
    const { mbid } = await release(site);
    const keep = await art(site, mbid, { types: ['Front'] });
    const gone = await art(site, mbid, { types: ['Back'] });
    const path = `/release/${mbid}/remove-cover-art/${gone}`;
    const confirm = await get(path, alice);
    assert.equal(confirm.status, 200);
    assert.ok(confirm.body.includes('this cannot be undone'));
    assert.ok(confirm.body.includes('Remove image 2</button>'));
    const noCsrf = await alice.fetch(`${site.base}${path}`, { form: {} });
    assert.equal(noCsrf.status, 400);
    assert.equal(shownOrder(await get(`/release/${mbid}/cover-art`)).length, 2, 'nothing removed');
    const removed = await post(alice, path, []);
    assert.equal(removed.status, 303);
    assert.equal(removed.headers.location, `/release/${mbid}/cover-art`);
    assert.deepEqual(await listing(site, mbid, (l) => l.images.map((i) => i.id), [keep]), [keep], 'the API follows');
    const gallery = await get(`/release/${mbid}/cover-art`, alice);
    assert.ok(gallery.body.includes('Removed image 2.'));
    assert.equal((await get(path, alice)).status, 404);
  });

  it('reorder: moves without script, CSRF, a stale order answers 409 and changes nothing, then saved', async () => {
    const { mbid } = await release(site);
    const [a, b, c] = [await art(site, mbid, { types: ['Front'] }), await art(site, mbid), await art(site, mbid, { types: ['Back'] })];
    const path = `/release/${mbid}/reorder-cover-art`;
    const form = await get(path, alice);
    assert.equal(form.status, 200);
    assert.ok(form.body.includes('<script src="/static/reorder.js" defer></script>'));
    assert.ok(!/<script>/.test(form.body), 'no inline script');
    assert.match(String(form.headers['content-security-policy']), /script-src 'self';/, 'scripts from this origin only');
    const previous = field(form, 'previous');
    assert.equal(previous, [a, b, c].join(','));
    const moved = await get(`${path}?${new URLSearchParams({ order: previous, previous, move: `up:${c}` })}`, alice);
    assert.equal(moved.status, 200);
    assert.equal(field(moved, 'order'), [a, c, b].join(','), 'a move proposes an order');
    assert.match(moved.body, new RegExp(`value="up:${c}" autofocus`), 'focus stays on the button');
    assert.equal(shownOrder(await get(`/release/${mbid}/cover-art`)).join(','), previous, 'a move saves nothing');

    const noCsrf = await alice.fetch(`${site.base}${path}`, { form: { order: [c, b, a].join(','), previous } });
    assert.equal(noCsrf.status, 400);
    const bad = await post(alice, path, [['order', [a, b].join(',')], ['previous', previous]]);
    assert.equal(bad.status, 400);
    assert.ok(bad.body.includes('every image of the release must be named'));

    // Someone else reorders meanwhile: the first form is stale.
    const other = await signIn(site.base, 'alice');
    assert.equal((await post(other, path, [['order', [b, a, c].join(',')], ['previous', previous]])).status, 303);
    const stale = await post(alice, path, [['order', [c, b, a].join(',')], ['previous', previous]]);
    assert.equal(stale.status, 409);
    assert.ok(stale.body.includes('Someone changed the images of this release while you were reordering them'));
    assert.equal(field(stale, 'previous'), [b, a, c].join(','), 'the form again, from the current order');
    assert.deepEqual(shownOrder(await get(`/release/${mbid}/cover-art`)), [b, a, c], 'the other editor’s order stands');
    const staleMove = await get(`${path}?${new URLSearchParams({ order: previous, previous, move: `up:${c}` })}`, alice);
    assert.equal(staleMove.status, 409);

    const saved = await post(alice, path, [['order', [c, b, a].join(',')], ['previous', [b, a, c].join(',')]]);
    assert.equal(saved.status, 303);
    assert.deepEqual(shownOrder(await get(`/release/${mbid}/cover-art`)), [c, b, a], 'the gallery follows at once');
    assert.deepEqual(await listing(site, mbid, (l) => l.images.map((i) => i.id), [c, b, a]), [c, b, a], 'the API follows');

    const script = await get('/static/reorder.js');
    assert.equal(script.status, 200);
    assert.match(String(script.headers['content-type']), /^text\/javascript/);
    assert.ok(script.body.includes('dragstart'));
  });

  it('two editors post forms made from the same state at once: one is saved, the other is stale (409), for the order, an image and a group cover', async () => {
    const { mbid } = await release(site);
    const [a, b, c] = [await art(site, mbid), await art(site, mbid), await art(site, mbid)];
    const bob = await signIn(site.base, 'alice');
    const path = `/release/${mbid}/reorder-cover-art`;
    const [formA, formB] = await Promise.all([get(path, alice), get(path, bob)]);
    const previous = field(formA, 'previous');
    const send = (br: Browser, form: HttpsResponse, order: string[]) => br.fetch(`${site.base}${path}`, { form: [['csrf_token', Browser.csrf(form)], ['order', order.join(',')], ['previous', previous]] });
    const [x, y] = await Promise.all([send(alice, formA, [c, b, a]), send(bob, formB, [b, c, a])]);
    assert.deepEqual([x.status, y.status].sort(), [303, 409], 'the second form was made from an order that no longer is');
    const winner = x.status === 303 ? [c, b, a] : [b, c, a];
    assert.deepEqual(shownOrder(await get(`/release/${mbid}/cover-art`)), winner);

    const editPath = `/release/${mbid}/edit-cover-art/${a}`;
    const [editA, editB] = await Promise.all([get(editPath, alice), get(editPath, bob)]);
    const state = field(editA, 'state');
    const edit = (br: Browser, form: HttpsResponse, comment: string) => br.fetch(`${site.base}${editPath}`, { form: [['csrf_token', Browser.csrf(form)], ['comment', comment], ['state', state]] });
    const [p, q] = await Promise.all([edit(alice, editA, 'from alice'), edit(bob, editB, 'from bob')]);
    assert.deepEqual([p.status, q.status].sort(), [303, 409], 'the second edit form was made from a comment that no longer is');

    // The group's cover, chosen from the same form by two editors at once.
    const { mbid: one, group } = await release(site, { title: 'One', date: '1990' });
    const { mbid: two } = await release(site, { group, title: 'Two', date: '2000' });
    await art(site, one, { types: ['Front'] });
    await art(site, two, { types: ['Front'] });
    const coverPath = `/release-group/${group}/set-cover-art`;
    const [coverA, coverB] = await Promise.all([get(coverPath, alice), get(coverPath, bob)]);
    const choose = (br: Browser, form: HttpsResponse, chosen: string) =>
      br.fetch(`${site.base}${coverPath}`, { form: [['csrf_token', Browser.csrf(form)], ['release', chosen], ['previous', field(form, 'previous')]] });
    const [u, v] = await Promise.all([choose(alice, coverA, one), choose(bob, coverB, two)]);
    assert.deepEqual([u.status, v.status].sort(), [303, 409], 'the second cover form was made from a choice that no longer is');
    const lost = u.status === 409 ? u : v;
    const kept = u.status === 303 ? one : two;
    assert.match(lost.body, /changed the group/);
    assert.equal(field(lost, 'previous'), kept, 'the form is made again from the choice there is now');
    assert.match(lost.body, new RegExp(`value="${kept}" required checked`));
  });

  it('set the group cover: CSRF, stale, a release without front or of another group refused, then saved', async () => {
    const { mbid: early, group } = await release(site, { title: 'First', date: '1990' });
    const { mbid: later } = await release(site, { group, title: 'Second', date: '2000' });
    const { mbid: bare } = await release(site, { group, title: 'Bare' });
    const { mbid: foreign } = await release(site, { title: 'Elsewhere' });
    await art(site, early, { types: ['Front'] });
    await art(site, later, { types: ['Front'] });
    await art(site, foreign, { types: ['Front'] });
    const path = `/release-group/${group}/set-cover-art`;
    const form = await get(path, alice);
    assert.equal(form.status, 200);
    assert.match(form.body, new RegExp(`value="${early}" required checked`), 'the release shown now is selected');
    assert.ok(!form.body.includes(`value="${bare}"`), 'a release without a front cover cannot be chosen');
    assert.ok(form.body.includes('1 release of the group without a front cover'));
    const noCsrf = await alice.fetch(`${site.base}${path}`, { form: { release: later, previous: '' } });
    assert.equal(noCsrf.status, 400);
    assert.equal((await post(alice, path, [['release', bare], ['previous', '']])).status, 400);
    const other = await post(alice, path, [['release', foreign], ['previous', '']]);
    assert.equal(other.status, 400);
    assert.ok(other.body.includes('is not in this group'));
    assert.ok((await get(`/release-group/${group}/cover-art`)).body.includes('it has the earliest release date'), 'nothing changed');

    const saved = await post(alice, path, [['release', later], ['previous', '']]);
    assert.equal(saved.status, 303);
    assert.equal(saved.headers.location, `/release-group/${group}/cover-art`);
    const page = await get(`/release-group/${group}/cover-art`, alice);
    assert.ok(page.body.includes('an editor chose it for the group'));
    assert.ok(page.body.includes(`The front cover of <a href="/release/${later}/cover-art">Second</a>`));
    assert.ok(page.body.includes('The group&#39;s cover now comes from Second.') || page.body.includes('The group’s cover now comes from Second.') || page.body.includes("The group's cover now comes from Second."));
    const stale = await post(alice, path, [['release', early], ['previous', '']]);
    assert.equal(stale.status, 409);
    assert.ok(stale.body.includes("changed the group"));
  });

  it("an event's pages: 400, 404 and merged MBIDs as a release's; a visitor's gallery without editing links; the forms refuse without CSRF and a stale order (409), nothing changed", async () => {
    const show = await event(site, 'Gig <Night>');
    const [a, b] = [await art(site, show, { event: true, types: ['Poster'], comment: 'the poster' }), await art(site, show, { event: true, png: true })];
    assert.equal((await get('/event/not-an-mbid/event-art')).status, 400);
    const unknown = await get('/event/00000000-0000-4000-8000-000000000000/event-art');
    assert.equal(unknown.status, 404);
    assert.ok(unknown.body.includes('There is no event 00000000-0000-4000-8000-000000000000 here.'));
    const { mbid: releaseMbid } = await release(site);
    assert.equal((await get(`/event/${releaseMbid}/event-art`)).status, 404, 'a release is no event');
    const old = '00000000-0000-4000-8000-0000000000e1';
    const { id } = await site.server.runtime.coverArt.db.selectFrom('event').select('id').where('gid', '=', show).executeTakeFirstOrThrow();
    await site.server.runtime.coverArt.db.insertInto('event_gid_redirect').values({ gid: old, new_id: id }).execute();
    for (const [path, to] of [
      [`/event/${old}/event-art`, `/event/${show}/event-art`],
      [`/event/${show.toUpperCase()}/event-art`, `/event/${show}/event-art`],
      [`/event/${old}/edits?status=pending`, `/event/${show}/edits?status=pending`],
    ]) {
      const moved = await get(path as string);
      assert.deepEqual([moved.status, moved.headers.location], [301, to], path);
    }

    const page = await get(`/event/${show}/event-art`);
    assert.equal(page.status, 200, page.body.slice(0, 300));
    assert.ok(page.body.includes('<h1>Event art: Gig &lt;Night&gt;</h1>'), 'named, escaped');
    assert.deepEqual(shownOrder(page), [a, b]);
    assert.ok(page.body.includes('<strong>The poster</strong>: the first image typed Poster in this order.'));
    assert.ok(!page.body.includes('The back cover'), 'an event has no back');
    assert.ok(page.body.includes(`${site.api}/download/mbid-${show}/mbid-${show}-${a}_thumb250.jpg 250w`), 'thumbnails from the files');
    assert.ok(!page.body.includes('edit-event-art'), 'no editing links for a visitor');
    const editor = await get(`/event/${show}/event-art`, alice);
    for (const link of [`/event/${show}/add-event-art`, `/event/${show}/reorder-event-art`, `/event/${show}/edit-event-art/${a}`, `/event/${show}/remove-event-art/${b}`]) assert.ok(editor.body.includes(`href="${link}"`), link);
    assert.equal((await get(`/event/${show}/edit-event-art/123`, alice)).status, 404);
    const signIn = await get(`/event/${show}/reorder-event-art`);
    assert.deepEqual([signIn.status, signIn.headers.location], [303, `/login?return_to=${encodeURIComponent(`/event/${show}/reorder-event-art`)}`], 'sign in first, then back');

    // Without CSRF, or from a stale order: refused, nothing changed.
    const removePath = `/event/${show}/remove-event-art/${b}`;
    const confirm = await get(removePath, alice);
    assert.ok(confirm.body.includes('from this event? Its files and thumbnails go with it'));
    assert.equal((await alice.fetch(`${site.base}${removePath}`, { form: {} })).status, 400);
    const reorderPath = `/event/${show}/reorder-event-art`;
    assert.equal((await alice.fetch(`${site.base}${reorderPath}`, { form: { order: [b, a].join(','), previous: [a, b].join(',') } })).status, 400);
    const stale = await post(alice, reorderPath, [['order', [b, a].join(',')], ['previous', [b, a].join(',')]]);
    assert.equal(stale.status, 409);
    assert.ok(stale.body.includes('Someone changed the images of this event while you were reordering them'));
    assert.deepEqual(shownOrder(await get(`/event/${show}/event-art`)), [a, b], 'nothing changed');
    const saved = await post(alice, reorderPath, [['order', [b, a].join(',')], ['previous', [a, b].join(',')]]);
    assert.deepEqual([saved.status, saved.headers.location], [303, `/event/${show}/event-art`]);
    assert.deepEqual(shownOrder(await get(`/event/${show}/event-art`)), [b, a]);
  });
});

/*
 * The Event Art Archive over HTTP and the CLI (docs/api.md, "Events"; docs/decisions.md,
 * "Events beside releases"): events and their images go in through `sleeve event add` and
 * `sleeve art add`, and /event/… answers as eventartarchive.org does (artwork-redirect's
 * messages, `front` = the first Poster, no `back`), with the release paths' CORS, OPTIONS and
 * merged MBIDs; the file server serves the event's files in the same layout.
 */
import assert from 'node:assert/strict';
import { rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase } from '../../src/db/connect.js';
import { cliInProcess, DIALECT, makeTestEnv, rawHttp, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { dimensions, makeJpeg, makePng } from '../helpers/images.js';

const MB = 'https://mb.example.org';
/** SLEEVE_EVENT_BASE_URL: requests whose Host is its host ask the Event Art Archive. */
const EAA = 'http://events.example';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One request to the listener with the Host given (fetch cannot set Host). */
function ask(base: string, p: string, options: { method?: string; host?: string; headers?: Record<string, string> } = {}): Promise<Answer> {
  const target = new URL(base);
  return new Promise((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, path: p, method: options.method ?? 'GET', headers: { host: options.host ?? 'events.example', ...options.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}
/** E1: three images; the Poster is the second. */
const E1 = 'e0e0e0e0-2345-4678-9abc-def012345671';
/** E2: an image with no type (no front). */
const E2 = 'e0e0e0e0-2345-4678-9abc-def012345672';
/** E3: no images. */
const E3 = 'e0e0e0e0-2345-4678-9abc-def012345673';
/** OLD: an event merged into E1 (a gid redirect, as a dump or the mirror's database has it). */
const OLD = 'e0e0e0e0-2345-4678-9abc-def0123456a0';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
const TEXT = 'text/plain; charset=utf-8';
const HTML = 'text/html; charset=utf-8';
const NAMES: Record<number, string> = { 400: 'Bad Request', 404: 'Not Found', 405: 'Method Not Allowed', 406: 'Not Acceptable' };

function page(status: number, text: string): string {
  const name = NAMES[status];
  return `<!doctype html>\n<html lang=en>\n<title>${status} ${name}</title>\n<h1>${name}</h1>\n<p>${text}</p>\n`;
}

describe(`the Event Art Archive (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const id: Record<string, string> = {};
  const bytes: Record<string, Buffer> = {};
  let x3edit = 0;
  const get = (p: string, options: { method?: string; host?: string; headers?: Record<string, string> } = {}) => ask(s.base, p, options);
  const dl = (m: string, rest: string) => `${s.base}/download/mbid-${m}/mbid-${m}-${rest}`;

  async function expectRedirect(p: string, location: string, cacheControl: string, host?: string): Promise<void> {
    const res = await get(p, { host });
    assert.equal(res.status, 307, `${p}: ${res.body}`);
    assert.equal(res.headers.location, location, p);
    assert.equal(res.body, `See: ${location}\n`, p);
    assert.equal(res.headers['content-type'], TEXT, p);
    assert.equal(res.headers['cache-control'], cacheControl, p);
    assert.equal(res.headers['access-control-allow-origin'], '*', p);
  }

  async function expectError(p: string, status: number, text: string, options: { method?: string; host?: string; headers?: Record<string, string> } = {}): Promise<void> {
    const res = await get(p, options);
    assert.equal(res.status, status, `${p}: ${res.body}`);
    assert.equal(res.headers['content-type'], HTML, p);
    assert.equal(res.body, page(status, text), p);
    assert.equal(res.headers['access-control-allow-origin'], '*', p);
  }

  async function addImage(event: string, name: string, image: Buffer, ext: string, args: string[]): Promise<any> {
    const file = path.join(t.dir, `${name}.${ext}`);
    await writeFile(file, image);
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', event, file, ...args]);
    id[name] = entry.id;
    bytes[name] = image;
    return entry;
  }

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LISTING_FIELDS: 'caa' });
    s = await startServer(t, { SLEEVE_MUSICBRAINZ_URL: MB, SLEEVE_EVENT_BASE_URL: EAA });
    const [j1, p2, j3, j4] = await Promise.all([makeJpeg(400, 300), makePng(300, 300), makeJpeg(320, 240), makeJpeg(200, 200)]);
    assert.deepEqual(await cliInProcess(t.env, ['--json', 'event', 'add', E1, '--name', 'A night out']), { event: E1 });
    await cliInProcess(t.env, ['event', 'add', E2]);
    await cliInProcess(t.env, ['event', 'add', E3]);
    await addImage(E1, 'x1', j1 as Buffer, 'jpg', ['--comment', 'the stage', '--edit', '41']);
    await addImage(E1, 'x2', p2 as Buffer, 'png', ['--type', 'poster', '--edit', '42']);
    // Without --edit, the listing's edit is the sleeve edit that added the image, as for a release.
    x3edit = (await addImage(E1, 'x3', j3 as Buffer, 'jpg', ['--type', 'Poster', '--unapproved'])).edit;
    assert.ok(x3edit >= 1_000_000_001, 'a sleeve edit id');
    await addImage(E2, 'y1', j4 as Buffer, 'jpg', []);
    // A merged event: the dump and the mirror's database carry these (docs/import.md).
    const handle = await openDatabase(loadConfig(t.env).database, { poolSize: 1 });
    try {
      const e1 = await handle.db.selectFrom('event').select('id').where('gid', '=', E1).executeTakeFirstOrThrow();
      await handle.db.insertInto('event_gid_redirect').values({ gid: OLD, new_id: e1.id }).execute();
    } finally {
      await handle.close();
    }
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  function entry(m: string, e: { id: string; suffix: string; approved: boolean; comment: string; edit: number; front: boolean; types: string }): string {
    const p = `${EAA}/event/${m}/${e.id}`;
    return (
      `{"approved": ${e.approved}, "comment": "${e.comment}", "edit": ${e.edit}, "front": ${e.front}, ` +
      `"id": "${e.id}", "image": "${p}.${e.suffix}", ` +
      `"thumbnails": {"1200": "${p}-1200.jpg", "250": "${p}-250.jpg", "500": "${p}-500.jpg", "large": "${p}-500.jpg", "small": "${p}-250.jpg"}, ` +
      `"types": ${e.types}}`
    );
  }

  it('/event/{mbid}/ redirects to index.json, whose link field is "event" and whose entries have no "back"', async () => {
    await expectRedirect(`/event/${E1}/`, `${s.base}/download/mbid-${E1}/index.json`, 'public, max-age=60');
    await expectRedirect(`/event/${E1}`, `${s.base}/download/mbid-${E1}/index.json`, 'public, max-age=60');
    const listing = await fetch(`${s.base}/download/mbid-${E1}/index.json`);
    assert.equal(listing.status, 200);
    const images = [
      entry(E1, { id: id.x1 as string, suffix: 'jpg', approved: true, comment: 'the stage', edit: 41, front: false, types: '[]' }),
      entry(E1, { id: id.x2 as string, suffix: 'png', approved: true, comment: '', edit: 42, front: true, types: '["Poster"]' }),
      entry(E1, { id: id.x3 as string, suffix: 'jpg', approved: false, comment: '', edit: x3edit, front: false, types: '["Poster"]' }),
    ];
    assert.equal(await listing.text(), `{"event": "${MB}/event/${E1}", "images": [${images.join(', ')}]}`);
  });

  it('front is the first image typed Poster, with thumbnails; ids redirect to their files; every target is served', async () => {
    await expectRedirect(`/event/${E1}/front`, dl(E1, `${id.x2}.png`), 'public, max-age=60');
    await expectRedirect(`/event/${E1}/front.jpg`, dl(E1, `${id.x2}.png`), 'public, max-age=60');
    for (const size of [250, 500, 1200]) {
      await expectRedirect(`/event/${E1}/front-${size}`, dl(E1, `${id.x2}_thumb${size}.jpg`), 'public, max-age=60');
      await expectRedirect(`/event/${E1}/${id.x1}-${size}.jpg`, dl(E1, `${id.x1}_thumb${size}.jpg`), 'public, max-age=86400');
    }
    await expectRedirect(`/event/${E1}/${id.x3}`, dl(E1, `${id.x3}.jpg`), 'public, max-age=86400');
    for (const name of ['x1', 'x2', 'x3']) {
      const loc = (await get(`/event/${E1}/${id[name]}`)).headers.location as string;
      const file = await fetch(loc);
      assert.equal(file.status, 200, loc);
      assert.deepEqual(Buffer.from(await file.arrayBuffer()), bytes[name], loc);
    }
    const thumb = await fetch((await get(`/event/${E1}/front-250`)).headers.location as string);
    assert.equal(thumb.status, 200);
    assert.equal(thumb.headers.get('content-type'), 'image/jpeg');
    assert.equal((await dimensions(Buffer.from(await thumb.arrayBuffer()))).width, 250);
  });

  it("an event's index.json the store lacks is written from the database when asked for", async () => {
    await rm(path.join(t.dir, 'files', `mbid-${E2}`, 'index.json'));
    const res = await fetch(`${s.base}/download/mbid-${E2}/index.json`);
    assert.equal(res.status, 200);
    const listing = JSON.parse(await res.text());
    assert.equal(listing.event, `${MB}/event/${E2}`);
    assert.deepEqual(listing.images.map((i: { id: string }) => i.id), [id.y1]);
    assert.equal(listing.images[0].front, false);
  });

  it('a merged MBID answers as the event it was merged into', async () => {
    await expectRedirect(`/event/${OLD}/`, `${s.base}/download/mbid-${E1}/index.json`, 'public, max-age=60');
    await expectRedirect(`/event/${OLD}/front-500`, dl(E1, `${id.x2}_thumb500.jpg`), 'public, max-age=60');
    await expectRedirect(`/event/${OLD}/${id.x1}`, dl(E1, `${id.x1}.jpg`), 'public, max-age=86400');
  });

  it("errors are artwork-redirect's for events: no artwork, no front, back and unknown types, unknown ids", async () => {
    await expectError(`/event/${E3}/`, 404, `No artwork found for event ${E3}`);
    await expectError(`/event/${UNKNOWN}/`, 404, `No artwork found for event ${UNKNOWN}`);
    await expectError(`/event/${E2}/front`, 404, `No front image found for event with identifier ${E2}`);
    await expectError(`/event/${UNKNOWN}/front-250`, 404, `No front image found for event with identifier ${UNKNOWN}`);
    await expectError(`/event/${E1}/back`, 400, 'back does not not contain a valid event image id');
    await expectError(`/event/${E1}/back-250`, 400, 'back-250 does not not contain a valid event image id');
    await expectError(`/event/${E1}/medium`, 400, 'medium does not not contain a valid event image id');
    await expectError(`/event/${E1}/12345`, 404, 'event image with id 12345 not found');
    // An image of another event is not this one's.
    await expectError(`/event/${E2}/${id.x1}`, 404, `event image with id ${id.x1} not found`);
    await expectError(`/event/not-an-mbid/`, 400, 'invalid MBID specified');
    await expectError(`/event`, 400, 'no MBID specified');
    await expectError(`/event/${E1}/`, 406, 'The resource identified by the request is only capable of generating response entities which have content characteristics not acceptable according to the accept headers sent in the request.', { headers: { accept: 'image/png' } });
    await expectError(`/event/${E1}/front`, 405, 'The method is not allowed for the requested URL.', { method: 'POST' });
  });

  it('OPTIONS and HEAD answer as for releases', async () => {
    const ok = await rawHttp(s.base, `OPTIONS /event/${E1}/front-250 HTTP/1.1\r\nHost: events.example\r\nConnection: close\r\n\r\n`);
    assert.equal(ok.status, 200);
    assert.equal(ok.headers.allow, 'GET, HEAD, OPTIONS');
    assert.equal(ok.headers['access-control-allow-origin'], '*');
    const bad = await rawHttp(s.base, `OPTIONS /event/${E1}/front-300 HTTP/1.1\r\nHost: events.example\r\nConnection: close\r\n\r\n`);
    assert.equal(bad.status, 400);
    const elsewhere = await rawHttp(s.base, `OPTIONS /event/${E1}/front HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    assert.equal(elsewhere.status, 200);
    const eventHostOnly = await rawHttp(s.base, `OPTIONS /release/${E1}/front HTTP/1.1\r\nHost: events.example\r\nConnection: close\r\n\r\n`);
    assert.equal(eventHostOnly.status, 400);
    const head = await get(`/event/${E1}/front`, { method: 'HEAD' });
    assert.equal(head.status, 307);
    assert.equal(head.headers.location, dl(E1, `${id.x2}.png`));
  });

  it('entities by Host, as artwork-redirect: the event host answers events only, eventartarchive.org too, beta.* and any other host both', async () => {
    // Twice each: a second answer may come from the response cache, which must not cross hosts.
    for (let round = 0; round < 2; round++) {
      await expectError(`/release/${E1}/front`, 400, 'Only the following entities are supported: event');
      await expectError(`/release/${E1}/front`, 400, 'Only the following entities are supported: event', { host: 'eventartarchive.org' });
      await expectRedirect(`/event/${E1}/front`, dl(E1, `${id.x2}.png`), 'public, max-age=60', 'eventartarchive.org');
      await expectRedirect(`/event/${E1}/front`, dl(E1, `${id.x2}.png`), 'public, max-age=60', 'beta.coverartarchive.org');
      await expectError(`/artist/${E1}/`, 400, 'Only the following entities are supported: release, release-group, event', { host: 'beta.eventartarchive.org' });
      // Any other host answers both, in the Cover Art Archive's words: a tool pointed at
      // localhost reaches events too.
      for (const host of ['coverartarchive.org', new URL(s.base).host]) {
        await expectRedirect(`/event/${E1}/front`, dl(E1, `${id.x2}.png`), 'public, max-age=60', host);
        await expectError(`/release/${E1}/front`, 404, `No front cover image found for release with identifier ${E1}`, { host });
        await expectError(`/artist/${E1}/`, 400, 'Only the following entities are supported: release, release-group', { host });
      }
    }
  });

  it('sleeve art add with an event MBID says so; unknown types are refused with the known ones named', async () => {
    const E4 = 'e0e0e0e0-2345-4678-9abc-def012345674';
    await cliInProcess(t.env, ['event', 'add', E4]);
    const file = path.join(t.dir, 'x1.jpg');
    const human = await runCli(t.env, ['art', 'add', E4, file, '--type', 'Poster']);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, new RegExp(`^added image \\d+ \\(Poster\\) on event ${E4}\\n  ${EAA}/event/${E4}/\\d+\\.jpg\\n$`));
    const bad = await runCli(t.env, ['art', 'add', E4, file, '--type', 'Front']);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /unknown event art type "Front"; known types: Poster/);
    const again = await runCli(t.env, ['event', 'add', E4]);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, new RegExp(`event ${E4} already exists`));
    const badMbid = await runCli(t.env, ['event', 'add', 'nope']);
    assert.equal(badMbid.code, 2, badMbid.stderr);
    assert.match(badMbid.stderr, /event "nope" is not a valid MBID/);
    // Neither a release nor an event: the release's message, as before.
    const none = await runCli(t.env, ['art', 'add', UNKNOWN, file]);
    assert.match(none.stderr, new RegExp(`no release ${UNKNOWN}; add it first`));
  });
});

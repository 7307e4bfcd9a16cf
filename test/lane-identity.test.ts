/*
 * One answer per listener (docs/decisions.md, "One answer per listener"): the fast lane only
 * carries the answers the listener's one answering function gives, so every answer it gives is
 * the one node:http gives. Two servers on the same data, one with SLEEVE_FAST_LANE=on and one
 * with it off, are asked the same requests, each on a connection of its own over a raw socket
 * (TCP, or TLS for the HTTPS listener), for every path the lane may take: files (kept, read
 * cold and kept or not, 304s, ranges, HEADs, names outside the layout), the response cache's
 * answers (redirects, listings, their variants, 304s, HEADs, a kept 404), the image endpoints
 * answering with the file (SLEEVE_IMAGE_RESPONSE=bytes), the gallery pages kept for visitors,
 * the token endpoint's form POSTs, answered or refused, and a file the folder store fails to
 * read (a 500). The answers must be the same bytes: status line, headers in their order, body. Each one the lane was to take is checked taken
 * (sleeve_http_fast_lane_total), so a lane that quietly declined would fail the test.
 */
import assert from 'node:assert/strict';
import { rm, symlink, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { loadConfig } from '../src/config/load.js';
import { serve, type Server } from '../src/serve.js';
import type { FsObjectStore } from '../src/storage/index.js';
import { addApp, addUser, authorize, type Browser } from './helpers/auth.js';
import { ManualClock } from './helpers/clock.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, type TestEnv } from './helpers/env.js';
import { makeJpeg } from './helpers/images.js';
import { codeOf, s256, signIn } from './auth/support.js';
import { countOf, scrape } from './metrics/support.js';

const R1 = '7c8d9e0f-1a2b-4c3d-8e4f-5a6b7c8d9e0f';
const GROUP = '8d9e0f1a-2b3c-4d4e-9f5a-6b7c8d9e0f1a';
const UNKNOWN = '9e0f1a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b';
const WEB_URI = 'https://client.example/callback';
const VERIFIER = Buffer.from('the identity test verifier, 32 b').toString('base64url');

interface Running {
  server: Server;
  coverArt: number;
  auth: number;
}

interface Answer {
  /** The status line and the header lines, as sent (latin1). */
  head: string;
  body: Buffer;
}

/**
 * Writes `request` on a connection of its own and reads one whole answer: its head, then the
 * body its Content-Length gives (none for HEAD and 304).
 */
function ask(port: number, secure: boolean, request: string): Promise<Answer> {
  const headOnly = request.startsWith('HEAD ');
  return new Promise((resolve, reject) => {
    let raw = Buffer.alloc(0);
    const socket: Socket = secure ? tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false }, () => socket.write(request)) : connect(port, '127.0.0.1', () => socket.write(request));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no whole answer within 10 s to ${JSON.stringify(request.slice(0, 80))}: ${JSON.stringify(raw.toString('latin1').slice(0, 300))}`));
    }, 10_000);
    socket.on('error', () => {});
    socket.on('data', (c: Buffer) => {
      raw = Buffer.concat([raw, c]);
      const end = raw.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = raw.subarray(0, end).toString('latin1');
      const status = Number(head.split(' ')[1]);
      const length = headOnly || status === 304 ? 0 : Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (raw.length < end + 4 + length) return;
      clearTimeout(timer);
      socket.destroy();
      resolve({ head, body: raw.subarray(end + 4, end + 4 + length) });
    });
  });
}

/**
 * The head with what legitimately differs between the two servers masked: Date, the second it
 * was sent in (node:http's and the lane's alike, from the system clock: the two requests may
 * straddle a second). Nothing else is masked here; the request ids are the test's own (the
 * servers trust 127.0.0.1 as a proxy, so they keep the X-Request-Id sent).
 */
function masked(head: string): string {
  return head.replace(/\r\nDate: [^\r]*/, '\r\nDate: <masked>');
}

let ids = 0;
/** A request with an id of its own (the same to both servers), `extra` header lines, and a body. */
function request(method: string, target: string, extra: string[] = [], body = ''): string {
  const lines = ['Host: 127.0.0.1', `X-Request-Id: lane-identity-${++ids}`, ...extra];
  if (body !== '') lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${method} ${target} HTTP/1.1\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n${body}`;
}

/**
 * A server on `t`'s data with the lane `lane`, on `clock`, saying the public URLs `urls` (the
 * same for both servers, so their pages, listings and tokens name the same addresses).
 * `ports`: the listeners' (those the URLs name), else free ones.
 */
async function start(t: TestEnv, lane: 'on' | 'off', urls: Record<string, string>, clock: ManualClock, extra: Record<string, string>, ports?: { coverArt: number; auth: number }): Promise<Running> {
  const coverArt = ports?.coverArt ?? (await freePort());
  const auth = ports?.auth ?? (await freePort());
  const env = { ...t.env, ...urls, ...extra, SLEEVE_FAST_LANE: lane, SLEEVE_TRUST_PROXY: '127.0.0.1', SLEEVE_COVERART_LISTEN: `127.0.0.1:${coverArt}`, SLEEVE_AUTH_LISTEN: `127.0.0.1:${auth}` };
  return { server: await serve(loadConfig(env), { clock }), coverArt, auth };
}

/** How many answers a server's lane gave so far. */
async function laneCount(r: Running): Promise<number> {
  return countOf(await scrape(r.server.metricsAddress), 'sleeve_http_fast_lane_total');
}

/**
 * A case: what it is; its request, or one for each server (alike but for what must differ: a
 * code, a refresh token); whether the lane takes it (on this database), undefined for either.
 */
type Case = [string, string | [string, string], boolean | undefined];

/**
 * A token endpoint's 200 with its new tokens masked: they are new random values at each
 * exchange (and the grant's id they start with may be a digit longer on one server), so their
 * values and the length of the body carrying them differ; everything else is compared.
 */
function maskedTokens(a: Answer): Answer {
  if (!a.head.startsWith('HTTP/1.1 200 ')) return a;
  const json = JSON.parse(a.body.toString('utf8')) as Record<string, unknown>;
  for (const k of ['access_token', 'refresh_token', 'id_token']) {
    if (typeof json[k] === 'string') json[k] = (json[k] as string).replace(/[A-Za-z0-9_-]/g, 'x').replace(/x+/g, 'x');
  }
  return { head: a.head.replace(/\r\ncontent-length: \d+/, '\r\ncontent-length: <masked>'), body: Buffer.from(JSON.stringify(json)) };
}

/**
 * Asks `on` and `off` each case in turn (each server the same requests in the same order) and
 * checks the answers the same bytes but for the masked Date (and, with `tokens`, the new
 * tokens), and taken by the lane where the case says so, by node:http where it says not.
 */
async function alike(on: Running, off: Running, secure: boolean, cases: Case[], tokens = false): Promise<[Answer, Answer][]> {
  const answers: [Answer, Answer][] = [];
  for (const [what, req, lane] of cases) {
    const [reqOn, reqOff] = typeof req === 'string' ? [req, req] : req;
    const before = await laneCount(on);
    let a = await ask(secure ? on.auth : on.coverArt, secure, reqOn);
    const taken = (await laneCount(on)) - before;
    if (lane !== undefined) assert.equal(taken, lane ? 1 : 0, `${what}: ${lane ? 'taken by the lane' : 'left to node:http'} (${a.head.split('\r\n')[0]})`);
    let b = await ask(secure ? off.auth : off.coverArt, secure, reqOff);
    answers.push([a, b]);
    if (tokens) [a, b] = [maskedTokens(a), maskedTokens(b)];
    assert.equal(masked(a.head), masked(b.head), `${what}: the same status line and headers`);
    assert.ok(a.body.equals(b.body), `${what}: the same body (${a.body.length} and ${b.body.length} bytes)`);
  }
  return answers;
}

/** The status of each answer `on` gave. */
function statuses(answers: [Answer, Answer][]): number[] {
  return answers.map(([a]) => Number(a.head.split(' ')[1]));
}

/** The first header `name` of an answer. */
function header(a: Answer, name: string): string | undefined {
  return new RegExp(`\\r\\n${name}: ([^\\r]*)`, 'i').exec(a.head)?.[1];
}

describe(`the lane's answers are node:http's, byte for byte (${DIALECT})`, () => {
  let t: TestEnv;
  let on: Running;
  let off: Running;
  let bytesOn: Running;
  let bytesOff: Running;
  let id: string;
  const clock = new ManualClock();
  const dir = `/download/mbid-${R1}`;
  const sqlite = DIALECT === 'sqlite';

  before(async () => {
    t = await makeTestEnv();
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'Identity']);
    const file = path.join(t.dir, 'front.jpg');
    await writeFile(file, await makeJpeg(900, 700));
    ({ id } = (await cliInProcess(t.env, ['--json', 'art', 'add', R1, file, '--type', 'Front', '--approved'])) as { id: string });
    await addUser(t, 'alice');
    const ports = { coverArt: await freePort(), auth: await freePort() };
    // Both servers say the first one's addresses: the one alice signs in on.
    const urls = { SLEEVE_BASE_URL: `http://127.0.0.1:${ports.coverArt}`, SLEEVE_AUTH_URL: `https://127.0.0.1:${ports.auth}` };
    // WebP thumbnails too: a thumbnail redirect is kept with a variant per format.
    const formats = { SLEEVE_THUMBNAIL_FORMATS: 'jpeg,webp' };
    on = await start(t, 'on', urls, clock, formats, ports);
    off = await start(t, 'off', urls, clock, formats);
    const bytes = { SLEEVE_IMAGE_RESPONSE: 'bytes' };
    bytesOn = await start(t, 'on', urls, clock, bytes);
    bytesOff = await start(t, 'off', urls, clock, bytes);
  });

  after(async () => {
    for (const r of [on, off, bytesOn, bytesOff]) await r?.server.close();
    await t?.cleanup();
  });

  it('cover art: files kept, read cold (kept or not), 304s, ranges, HEADs, names outside the layout', async () => {
    const thumb = `${dir}/mbid-${R1}-${id}_thumb250.jpg`;
    const original = `${dir}/mbid-${R1}-${id}.jpg`;
    // A file of the layout the catalogue does not know (put there by hand): read, answered, never kept.
    const stray = `mbid-${R1}/mbid-${R1}-987654321.jpg`;
    await on.server.runtime.store.put(stray, await makeJpeg(120, 90), 'image/jpeg');
    const [[cold], [hit]] = await alike(on, off, false, [
      // Read cold and kept: on PostgreSQL the catalogue's question is awaited, which the lane leaves to node:http.
      ['a thumbnail read cold', request('GET', thumb), sqlite],
      ['a thumbnail kept', request('GET', thumb), true],
      ['an original read cold', request('GET', original), sqlite],
      ['an original kept', request('GET', original), true],
      // Never kept: asked of the catalogue on the thread on SQLite; on PostgreSQL once awaited, then known.
      ['a file the catalogue does not know', request('GET', `/download/${stray}`), sqlite],
      ['a file the catalogue does not know, again', request('GET', `/download/${stray}`), true],
      ['HEAD of a file not kept', request('HEAD', `/download/${stray}`), true],
      ['a range of a file not kept', request('GET', `/download/${stray}`, ['Range: bytes=10-19']), true],
      // index.json: written on the spot or read, then kept or read again (either way the lane's from then on).
      ['index.json', request('GET', `${dir}/index.json`), undefined],
      ['index.json again', request('GET', `${dir}/index.json`), true],
      ['a name outside the layout', request('GET', `${dir}/nothing.jpg`), true],
      ['HEAD of a name outside the layout', request('HEAD', `${dir}/nothing.jpg`), true],
      ['an encoded slash', request('GET', `${dir}/mbid-${R1}-${id}%2Fx.jpg`), true],
    ]);
    assert.ok(cold?.head.startsWith('HTTP/1.1 200 ') && hit?.head.startsWith('HTTP/1.1 200 '));
    const etag = header(hit as Answer, 'etag');
    const modified = header(hit as Answer, 'last-modified');
    assert.ok(etag !== undefined && modified !== undefined);
    const answers = await alike(on, off, false, [
      ['If-None-Match', request('GET', thumb, [`If-None-Match: ${etag}`]), true],
      ['If-None-Match, another tag', request('GET', thumb, ['If-None-Match: "other"']), true],
      ['If-Modified-Since', request('GET', thumb, [`If-Modified-Since: ${modified}`]), true],
      ['HEAD', request('HEAD', thumb), true],
      ['a range', request('GET', thumb, ['Range: bytes=0-99']), true],
      ['a suffix range', request('GET', thumb, ['Range: bytes=-50']), true],
      ['HEAD of a range', request('HEAD', thumb, ['Range: bytes=100-']), true],
      ['a range past the end', request('GET', thumb, ['Range: bytes=99999999-']), true],
      ['a range under another If-Range', request('GET', thumb, ['Range: bytes=0-9', 'If-Range: "other"']), true],
      ['a range under its If-Range', request('GET', thumb, ['Range: bytes=0-9', `If-Range: ${etag}`]), true],
      ['several ranges (answered whole)', request('GET', thumb, ['Range: bytes=0-1,5-6']), true],
    ]);
    assert.deepEqual(statuses(answers), [304, 200, 304, 200, 206, 206, 206, 416, 200, 206, 200]);
  });

  it("cover art: the response cache's answers (redirects, their variants, listings, a 404), 304s and HEADs", async () => {
    const targets = [`/release/${R1}/front`, `/release/${R1}/front-250`, `/release/${R1}/${id}`, `/release/${R1}/${id}-500`, `/release/${R1}/`, `/release-group/${GROUP}/`, `/release-group/${GROUP}/front`, `/release/${UNKNOWN}/`];
    // Each asked first through the router (a miss: node:http's), then from the cache (the lane's).
    await alike(on, off, false, targets.map((target): Case => [`${target}, routed`, request('GET', target), false]));
    const kept = await alike(on, off, false, targets.map((target): Case => [`${target}, kept`, request('GET', target), true]));
    // The release group's listing is answered, not redirected to a file.
    assert.deepEqual(statuses(kept), [307, 307, 307, 307, 307, 200, 307, 404]);
    const cases: Case[] = [
      ['HEAD of a kept redirect', request('HEAD', `/release/${R1}/front`), true],
      ['a thumbnail redirect, WebP preferred', request('GET', `/release/${R1}/front-250`, ['Accept: image/webp,*/*']), true],
      ['a listing, JSON asked for', request('GET', `/release/${R1}/`, ['Accept: application/json']), true],
      // A listing's kept answer is only for a client that takes JSON: the router answers this one.
      ['a listing, HTML asked for', request('GET', `/release/${R1}/`, ['Accept: text/html']), false],
    ];
    for (const [i, [a]] of kept.entries()) {
      const etag = header(a, 'etag');
      if (etag !== undefined) cases.push([`${targets[i] as string}, If-None-Match`, request('GET', targets[i] as string, [`If-None-Match: ${etag}`]), true]);
    }
    await alike(on, off, false, cases);
  });

  it('cover art, SLEEVE_IMAGE_RESPONSE=bytes: the image endpoints answer with the file, 304s, ranges and HEADs', async () => {
    const front = `/release/${R1}/front`;
    const small = `/release/${R1}/${id}-250`;
    const [[routed]] = await alike(bytesOn, bytesOff, false, [
      [`${front}, routed`, request('GET', front), false],
      [`${small}, routed`, request('GET', small), false],
    ]);
    const etag = header(routed as Answer, 'etag');
    assert.ok(routed?.head.startsWith('HTTP/1.1 200 ') && etag !== undefined, routed?.head);
    await alike(bytesOn, bytesOff, false, [
      [`${front}, kept`, request('GET', front), true],
      [`${small}, kept`, request('GET', small), true],
      ['If-None-Match', request('GET', front, [`If-None-Match: ${etag}`]), true],
      ['a range', request('GET', front, ['Range: bytes=5-24']), true],
      ['HEAD', request('HEAD', small), true],
    ]);
  });

  it('auth: the gallery pages kept for visitors, plain and gzipped, through a trusted proxy', async () => {
    const page = `/release/${R1}/cover-art`;
    const group = `/release-group/${GROUP}/cover-art`;
    const answers = await alike(on, off, true, [
      // Made by the router (and kept), then from the front door's cache.
      ['a gallery page, routed', request('GET', page), false],
      ['a gallery page, kept', request('GET', page), true],
      ['a gallery page, gzipped', request('GET', page, ['Accept-Encoding: gzip, br']), true],
      ["a gallery page, through a proxy that says HTTPS", request('GET', page, ['X-Forwarded-Proto: https']), true],
      // A proxy that says plain HTTP: refused by the router (HTTPS only).
      ["a gallery page, through a proxy that says HTTP", request('GET', page, ['X-Forwarded-Proto: http']), false],
      ["a release group's page, routed", request('GET', group), false],
      ["a release group's page, kept", request('GET', group), true],
      ['HEAD of a kept page (the router)', request('HEAD', page), false],
    ]);
    assert.deepEqual(statuses(answers), [200, 200, 200, 200, 400, 200, 200, 200]);
    assert.equal(header((answers[2] as [Answer, Answer])[0], 'content-encoding'), 'gzip');
  });

  it("auth: the token endpoint's form POSTs, answered and refused", async () => {
    const web = await addApp(t, 'alice', 'confidential', WEB_URI, 'Identity Web');
    const alice: Browser = await signIn(`https://127.0.0.1:${on.auth}`, 'alice');
    const code = async (): Promise<string> =>
      codeOf(
        await authorize(alice, `https://127.0.0.1:${on.auth}`, {
          client_id: web.client_id,
          response_type: 'code',
          redirect_uri: WEB_URI,
          scope: 'openid profile',
          nonce: 'n-1',
          access_type: 'offline',
          code_challenge: s256(VERIFIER),
          code_challenge_method: 'S256',
        }),
      );
    const form = (fields: Record<string, string>): string => new URLSearchParams(fields).toString();
    const FORM = 'Content-Type: application/x-www-form-urlencoded';
    const post = (body: string, extra: string[] = []): string => request('POST', '/oauth2/token', [FORM, ...extra], body);
    /** The same request to both servers but for its body (one id). */
    const posts = (bodyOn: string, bodyOff: string): [string, string] => {
      const first = post(bodyOn);
      return [first, first.slice(0, first.indexOf('Content-Length: ')) + `Content-Length: ${Buffer.byteLength(bodyOff)}\r\n\r\n${bodyOff}`];
    };
    const exchange = (c: string): string => form({ grant_type: 'authorization_code', code: c, redirect_uri: WEB_URI, client_id: web.client_id, client_secret: web.client_secret, code_verifier: VERIFIER });
    const [[exchangedOn, exchangedOff]] = await alike(on, off, true, [['a code exchange', posts(exchange(await code()), exchange(await code())), true]], true);
    assert.ok(exchangedOn?.head.startsWith('HTTP/1.1 200 '), exchangedOn?.head);
    // Each server's refresh token, of the grant its exchange made.
    const [refreshOn, refreshOff] = [exchangedOn, exchangedOff].map((a) => (JSON.parse(String(a?.body)) as { refresh_token: string }).refresh_token) as [string, string];
    const refresh = (r: string): string => form({ grant_type: 'refresh_token', refresh_token: r, client_id: web.client_id, client_secret: web.client_secret });
    const basic = `Authorization: Basic ${Buffer.from(`${web.client_id}:wrong`).toString('base64')}`;
    const bogus = { grant_type: 'authorization_code', code: 'A'.repeat(43), redirect_uri: WEB_URI, client_id: web.client_id, client_secret: web.client_secret };
    const answers = await alike(
      on,
      off,
      true,
      [
        ['a refresh', posts(refresh(refreshOn), refresh(refreshOff)), true],
        ['an unknown client', post(form({ ...bogus, client_id: 'nobody' })), true],
        ['a wrong secret', post(form({ ...bogus, client_secret: 'wrong' })), true],
        ['a wrong secret in Basic', post(form({ grant_type: 'authorization_code', code: 'A'.repeat(43), redirect_uri: WEB_URI }), [basic]), true],
        ['an unknown code', post(form(bogus)), true],
        ['a malformed code', post(form({ ...bogus, code: 'not a code!' })), true],
        ['no grant_type', post(form({ code: 'abc', client_id: web.client_id })), true],
        ['an unsupported grant_type', post(form({ grant_type: 'password', client_id: web.client_id, client_secret: web.client_secret })), true],
        ['a parameter twice', post(`${form(bogus)}&code=again`), true],
        ['a NUL', post(form({ ...bogus, client_id: `${web.client_id}\0` })), true],
        ['a bad refresh token', post(form({ grant_type: 'refresh_token', refresh_token: '1.x', client_id: web.client_id, client_secret: web.client_secret })), true],
        ['through a proxy that says HTTPS', post(form({ ...bogus, client_id: 'nobody' }), ['X-Forwarded-Proto: https']), true],
        // Left to node:http and Fastify, the same answer either way.
        ['through a proxy that says HTTP', post(form({ ...bogus, client_id: 'nobody' }), ['X-Forwarded-Proto: http']), false],
        ['a form with a charset', request('POST', '/oauth2/token', ['Content-Type: application/x-www-form-urlencoded; charset=utf-8'], form({ ...bogus, client_id: 'nobody' })), false],
      ],
      true,
    );
    assert.deepEqual(statuses(answers), [200, 401, 401, 401, 400, 400, 400, 400, 400, 400, 400, 401, 400, 401]);
  });

  it('cover art: a file the folder store fails to read (a path that loops): 500, alike, again and again', async () => {
    // A file of the layout whose every open fails (ELOOP, also for root, which no permission stops): not missing, so not a 404.
    const looping = `mbid-${R1}/mbid-${R1}-987654322.jpg`;
    const file = path.join((on.server.runtime.store as FsObjectStore).root, looping);
    await symlink(path.basename(file), file);
    try {
      const answers = await alike(on, off, false, [
        // Read in the lane on SQLite; on PostgreSQL the catalogue's question is awaited first, which the
        // lane leaves to node:http, each time (a read that fails leaves no answer of the catalogue kept).
        ['a file that cannot be read', request('GET', `/download/${looping}`), sqlite],
        ['a file that cannot be read, again', request('GET', `/download/${looping}`), sqlite],
        ['HEAD of a file that cannot be read', request('HEAD', `/download/${looping}`), sqlite],
        ['a range of a file that cannot be read', request('GET', `/download/${looping}`, ['Range: bytes=0-9']), sqlite],
      ]);
      assert.deepEqual(statuses(answers), [500, 500, 500, 500]);
    } finally {
      await rm(file);
    }
  });

  it('never took a request into the lane on the servers without it', async () => {
    assert.equal(await laneCount(off), 0);
    assert.equal(await laneCount(bytesOff), 0);
  });
});

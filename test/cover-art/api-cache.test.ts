/*
 * The cover art front door: the response cache must forget answers once the CLI
 * changes the catalogue (another process; the server polls every SLEEVE_CHANGE_POLL_MS,
 * 250 ms by default), and the rate limit (SLEEVE_RATE_LIMIT) applies to every
 * request, cached answers included.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ManualClock } from '../helpers/clock.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, rawHttp, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeGif, makeJpeg, makePng } from '../helpers/images.js';

const R = 'cace0000-0000-4000-8000-000000000001';
const G = 'cace0000-0000-4000-8000-0000000000aa';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';
/** A change must show within this bound (docs/several-processes.md, "Freshness": servers see a change within a poll interval). */
const BOUND_MS = 3000;

describe(`the response cache follows CLI changes (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const id: Record<string, string> = {};

  const get = (p: string, init: RequestInit = {}) => fetch(`${s.base}${p}`, { redirect: 'manual', ...init });
  const dl = (rest: string) => `${s.base}/download/mbid-${R}/mbid-${R}-${rest}`;
  /** Status and Location of a GET, body read. */
  async function probe(p: string): Promise<string> {
    const res = await get(p);
    await res.arrayBuffer();
    return `${res.status} ${res.headers.get('location') ?? ''}`.trim();
  }
  async function expectSoon(p: string, want: string): Promise<void> {
    const { value, ms } = await pollUntil(() => probe(p), (v) => v === want, BOUND_MS);
    assert.equal(value, want, `${p} after ${ms} ms`);
  }
  async function add(name: string, bytes: Buffer, ext: string, types: string[]): Promise<void> {
    const file = path.join(t.dir, `${name}.${ext}`);
    await writeFile(file, bytes);
    id[name] = (await cliInProcess(t.env, ['--json', 'art', 'add', R, file, ...types.flatMap((x) => ['--type', x])])).id;
  }

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t);
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('a cached 404 gives way to the new image', async () => {
    const page = `<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n<p>No front cover image found for release with identifier ${R}</p>\n`;
    for (let i = 0; i < 3; i++) {
      const res = await get(`/release/${R}/front`);
      assert.equal(res.status, 404);
      assert.equal(await res.text(), page);
    }
    assert.equal(await probe(`/release/${R}/`), '404');
    assert.equal(await probe(`/release-group/${G}/front`), '404');
    await add('a', await makeJpeg(200, 200), 'jpg', ['Front']);
    await expectSoon(`/release/${R}/front`, `307 ${dl(`${id.a}.jpg`)}`);
    await expectSoon(`/release/${R}/`, `307 ${s.base}/download/mbid-${R}/index.json`);
    await expectSoon(`/release-group/${G}/front`, `307 ${dl(`${id.a}.jpg`)}`);
  });

  it('a new image put first by art reorder becomes the front', async () => {
    // Make sure these answers are cached before the change.
    for (let i = 0; i < 2; i++) {
      assert.equal(await probe(`/release/${R}/front`), `307 ${dl(`${id.a}.jpg`)}`);
      assert.equal(await probe(`/release/${R}/front-250`), `307 ${dl(`${id.a}_thumb250.jpg`)}`);
      assert.equal(await probe(`/release-group/${G}/front`), `307 ${dl(`${id.a}.jpg`)}`);
    }
    const before = await get(`/release-group/${G}/`);
    const etag = before.headers.get('etag') as string;
    await before.arrayBuffer();

    await add('b', await makePng(180, 180), 'png', ['Front']);
    // Added last, b is not the front yet (asked once the server's caches follow the change).
    await s.server.refreshCaches();
    assert.equal(await probe(`/release/${R}/front`), `307 ${dl(`${id.a}.jpg`)}`);
    assert.equal(await probe(`/release/${R}/${id.b}`), `307 ${dl(`${id.b}.png`)}`);

    await cliInProcess(t.env, ['art', 'reorder', R, id.b as string, id.a as string]);
    await expectSoon(`/release/${R}/front`, `307 ${dl(`${id.b}.png`)}`);
    await expectSoon(`/release/${R}/front-250`, `307 ${dl(`${id.b}_thumb250.jpg`)}`);
    await expectSoon(`/release-group/${G}/front`, `307 ${dl(`${id.b}.png`)}`);
    const { value: after } = await pollUntil(
      async () => {
        const res = await get(`/release-group/${G}/`, { headers: { 'if-none-match': etag } });
        return { status: res.status, text: await res.text() };
      },
      (v) => v.status === 200,
      BOUND_MS,
    );
    assert.equal(after.status, 200, 'the old ETag no longer matches');
    const listing = JSON.parse(after.text);
    assert.deepEqual(
      listing.images.map((i: any) => [i.id, i.front]),
      [
        [id.b, true],
        [id.a, false],
      ],
    );
    const index = (await (await fetch(`${s.base}/download/mbid-${R}/index.json`)).json()) as any;
    assert.deepEqual(
      index.images.map((i: any) => i.id),
      [id.b, id.a],
    );
  });

  it('art remove: the front falls back, and the cached redirect to the removed id becomes a 404', async () => {
    for (let i = 0; i < 2; i++) assert.equal(await probe(`/release/${R}/${id.b}-500`), `307 ${dl(`${id.b}_thumb500.jpg`)}`);
    await cliInProcess(t.env, ['art', 'remove', R, id.b as string]);
    await expectSoon(`/release/${R}/front`, `307 ${dl(`${id.a}.jpg`)}`);
    await expectSoon(`/release/${R}/${id.b}-500`, '404');
    const gone = await get(`/release/${R}/${id.b}-500`);
    assert.equal(gone.status, 404);
    assert.match(await gone.text(), new RegExp(`<p>cover image with id ${id.b} not found</p>`));
    assert.equal((await fetch(dl(`${id.b}.png`))).status, 404, 'its files are gone too');
  });

  it('art edit changing the types moves front and back', async () => {
    await add('c', await makeGif(150, 150), 'gif', ['Back']);
    await expectSoon(`/release/${R}/back`, `307 ${dl(`${id.c}.gif`)}`);
    assert.equal(await probe(`/release/${R}/back`), `307 ${dl(`${id.c}.gif`)}`);
    await cliInProcess(t.env, ['art', 'edit', R, id.c as string, '--type', 'Front']);
    await cliInProcess(t.env, ['art', 'reorder', R, id.c as string, id.a as string]);
    await expectSoon(`/release/${R}/back`, '404');
    await expectSoon(`/release/${R}/front`, `307 ${dl(`${id.c}.gif`)}`);
  });

  it('removing the last images empties the release: its listing and front are 404 again', async () => {
    for (let i = 0; i < 2; i++) assert.equal(await probe(`/release/${R}/${id.a}`), `307 ${dl(`${id.a}.jpg`)}`);
    await cliInProcess(t.env, ['art', 'remove', R, id.a as string]);
    await cliInProcess(t.env, ['art', 'remove', R, id.c as string]);
    await expectSoon(`/release/${R}/`, '404');
    await expectSoon(`/release/${R}/front`, '404');
    await expectSoon(`/release/${R}/${id.a}`, '404');
    await expectSoon(`/release-group/${G}/`, '404');
  });
});

describe(`rate limit (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t, { SLEEVE_RATE_LIMIT: '5/10s' });
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('the sixth request in the window gets 503 with Retry-After and ACAO, though the answer was cached', async () => {
    const p = `${s.base}/release/${UNKNOWN}/front`;
    for (let i = 1; i <= 5; i++) {
      const res = await fetch(p, { redirect: 'manual' });
      assert.equal(res.status, 404, `request ${i}`);
      await res.arrayBuffer();
    }
    const over = await fetch(p, { redirect: 'manual' });
    const body = await over.text();
    assert.equal(over.status, 503);
    const retryAfter = Number(over.headers.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 10, `Retry-After ${over.headers.get('retry-after')}`);
    assert.equal(over.headers.get('access-control-allow-origin'), '*');
    assert.equal(over.headers.get('content-type'), 'text/html; charset=utf-8');
    assert.match(body, /^<!doctype html>\n<html lang=en>\n<title>503 Service Unavailable<\/title>\n<h1>Service Unavailable<\/h1>\n<p>[^\n]+<\/p>\n$/);
  });

  it('every kind of request counts against the same client: OPTIONS, HEAD, other paths, the file server', async () => {
    const answers = [
      await fetch(`${s.base}/release/${UNKNOWN}/back`, { method: 'HEAD' }),
      await fetch(`${s.base}/release/${UNKNOWN}/`, { method: 'OPTIONS' }),
      await fetch(`${s.base}/release-group/${UNKNOWN}/`),
      await fetch(`${s.base}/robots.txt`),
      await fetch(`${s.base}/download/mbid-${UNKNOWN}/index.json`),
      await fetch(`${s.base}/release/${UNKNOWN}/front`, { headers: { 'x-forwarded-for': '203.0.113.9' } }),
    ];
    for (const res of answers) {
      assert.equal(res.status, 503, res.url);
      assert.ok(Number(res.headers.get('retry-after')) >= 1, res.url);
      assert.equal(res.headers.get('access-control-allow-origin'), '*', res.url);
      await res.arrayBuffer();
    }
    const raw = await rawHttp(s.base, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(raw.status, 503);
  });
});

describe(`rate limit behind a trusted proxy (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  /** Stands still, so every request falls in one window until the test moves it on. */
  const clock = new ManualClock();

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t, { SLEEVE_RATE_LIMIT: '2/2s', SLEEVE_TRUST_PROXY: '127.0.0.1' }, clock);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('counts each forwarded client apart, and lets a client in again after Retry-After', async () => {
    const ask = async (client: string) => {
      const res = await fetch(`${s.base}/release/${UNKNOWN}/front`, { redirect: 'manual', headers: { 'x-forwarded-for': client } });
      await res.arrayBuffer();
      return res;
    };
    assert.equal((await ask('198.51.100.1')).status, 404);
    assert.equal((await ask('198.51.100.1')).status, 404);
    const over = await ask('198.51.100.1');
    assert.equal(over.status, 503);
    assert.equal((await ask('198.51.100.2')).status, 404, 'another client has its own budget');
    assert.equal((await ask('10.0.0.1, 198.51.100.3')).status, 404, 'the nearest untrusted address is the client');
    const wait = Number(over.headers.get('retry-after'));
    assert.ok(wait >= 1 && wait <= 2, `Retry-After ${wait}`);
    clock.advance(wait * 1000);
    assert.equal((await ask('198.51.100.1')).status, 404, 'a new window after Retry-After');
  });
});

/** Splits the answers read from one connection: by Content-Length, no body to HEAD or 304. */
function splitAnswers(raw: Buffer, methods: string[]): { status: number; headers: Record<string, string>; body: Buffer }[] {
  const out = [];
  let at = 0;
  for (const method of methods) {
    const end = raw.indexOf('\r\n\r\n', at);
    assert.notEqual(end, -1, `answer ${out.length + 1} of ${methods.length} is missing: ${JSON.stringify(raw.subarray(at).toString('latin1'))}`);
    const [statusLine = '', ...lines] = raw.subarray(at, end).toString('latin1').split('\r\n');
    const headers: Record<string, string> = {};
    for (const line of lines) headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
    const status = Number(statusLine.split(' ')[1]);
    const length = method === 'HEAD' || status === 304 ? 0 : Number(headers['content-length']);
    assert.ok(Number.isInteger(length), `answer ${out.length + 1} has no Content-Length: ${statusLine}`);
    out.push({ status, headers, body: raw.subarray(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  assert.equal(at, raw.length, 'nothing follows the last answer');
  return out;
}

describe(`cached answers on the wire (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const comment = 'Ünïcödé “sleeve” — 日本語 ✓';

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t);
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
    const file = path.join(t.dir, 'front.png');
    await writeFile(file, await makePng(64, 64));
    await cliInProcess(t.env, ['art', 'add', R, file, '--type', 'Front', '--comment', comment]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('pipelined requests on one connection get whole answers in order, the same bytes as when first made', async () => {
    const targets = [`/release/${R}/front`, `/release-group/${G}/`, `/release/${UNKNOWN}/front`];
    // First answers (made by the routes, then cached), one connection each.
    const first = new Map<string, Buffer>();
    for (const p of targets) {
      const r = await rawHttp(s.base, `GET ${p} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\nConnection: close\r\n\r\n`);
      first.set(p, r.body);
    }
    const listing = JSON.parse(first.get(`/release-group/${G}/`)?.toString('utf8') ?? '{}') as { images: { comment: string }[] };
    assert.equal(listing.images[0]?.comment, comment);
    const etag = (await fetch(`${s.base}/release-group/${G}/`)).headers.get('etag') ?? '';
    assert.match(etag, /^"/);

    const requests: [string, string, string?][] = [
      ['GET', targets[0] as string],
      ['HEAD', targets[0] as string],
      ['GET', targets[1] as string],
      ['GET', targets[1] as string, `If-None-Match: ${etag}`],
      ['GET', targets[2] as string],
      ['HEAD', targets[1] as string],
      ['GET', targets[0] as string],
    ];
    const wire = requests
      .map(([m, p, extra], i) => `${m} ${p} HTTP/1.1\r\nHost: x\r\nAccept: application/json\r\n${extra === undefined ? '' : `${extra}\r\n`}${i === requests.length - 1 ? 'Connection: close\r\n' : ''}\r\n`)
      .join('');
    const { connect } = await import('node:net');
    const url = new URL(s.base);
    const raw = await new Promise<Buffer>((resolve, reject) => {
      const socket = connect(Number(url.port), url.hostname, () => socket.write(wire));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks)));
    });
    const answers = splitAnswers(
      raw,
      requests.map(([m]) => m),
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      [307, 307, 200, 304, 404, 200, 307],
    );
    const ids = answers.map((a) => a.headers['x-request-id']);
    assert.equal(new Set(ids).size, ids.length, `every answer has its own request id: ${ids.join(' ')}`);
    for (const [i, [method, p]] of requests.entries()) {
      const a = answers[i];
      assert.ok(a !== undefined);
      if (method === 'HEAD' || a.status === 304) {
        assert.equal(a.body.length, 0);
        continue;
      }
      assert.equal(Number(a.headers['content-length']), a.body.length, `${method} ${p}: Content-Length is the body's byte count`);
      assert.deepEqual(a.body, first.get(p), `${method} ${p}: the cached answer is the first answer's bytes`);
    }
    assert.equal(answers[1]?.headers['content-length'], answers[0]?.headers['content-length'], 'HEAD names the GET body length');
  });
});

/*
 * Fuzz test of both listeners of a real `sleeve serve` process: thousands of generated
 * requests each (paths, methods, headers, query strings, bodies; valid and broken) over
 * raw sockets, HTTPS for the auth listener. No answer may be a 5xx other than the
 * interface's own 501s, every well-framed request gets an answer, the process logs no
 * error and is still alive and answering normal requests at the end.
 *
 * Reproduce a failure with the seed and index it prints:
 *   SLEEVE_FUZZ_SEED=<seed> SLEEVE_FUZZ_ONLY=<index> node scripts/test.mjs fuzz/listeners
 * SLEEVE_FUZZ_COUNT sets the number of requests per listener (default 10,000);
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, Browser, PASSWORD, request } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';
import { codeOf, exchange } from '../auth/support.js';
import { Pool, sendAlone, type Outcome, type Target } from './client.js';
import { authRequest, coverArtRequest, describe as show, encode, requestRng, type AuthWorld, type CoverArtWorld, type FuzzRequest, type Rng } from './generate.js';

const SEED = Number(process.env.SLEEVE_FUZZ_SEED ?? 20261124) >>> 0;
const COUNT = Number(process.env.SLEEVE_FUZZ_COUNT ?? 10_000);
const ONLY = process.env.SLEEVE_FUZZ_ONLY === undefined ? undefined : Number(process.env.SLEEVE_FUZZ_ONLY);
/** Keep-alive connections per listener, and requests in flight at once. */
const CONNECTIONS = 6;
const IN_FLIGHT = 8;
const ANSWER_MS = 15_000;

const USER = 'fuzzer';
const R1 = '5e1f0a2b-3c4d-4e5f-8a6b-7c8d9e0f1a2b';
const R2 = '6f2a1b3c-4d5e-4f6a-9b7c-8d9e0f1a2b3c';
const R3 = '7a3b2c4d-5e6f-4a7b-8c8d-9e0f1a2b3c4d';
const GROUP = '8b4c3d5e-6f7a-4b8c-9d9e-0f1a2b3c4d5e';
const CONFIDENTIAL_CB = 'https://app.example/cb';
const LOOPBACK_CB = 'http://127.0.0.1/cb';
const CUSTOM_CB = 'org.example.fuzz://auth';

interface Failure {
  index: number;
  what: string;
  request: string;
}

/**
 * The interface's own 5xx on the cover art listener: 501 for a method the API does not
 * implement on a release group, and for OPTIONS over anything but HTTP/1.1 (docs/api.md).
 */
function interface501(req: FuzzRequest, status: number): boolean {
  if (status !== 501) return false;
  if (req.method.toUpperCase() === 'OPTIONS') return req.version !== 'HTTP/1.1';
  return !['GET', 'HEAD'].includes(req.method.toUpperCase()) && /release-group/i.test(decodeURIComponentSafe(req.target));
}

function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/** Sends COUNT generated requests (or the one SLEEVE_FUZZ_ONLY names) and returns what went wrong. */
async function fuzz(target: Target, generate: (r: Rng) => FuzzRequest, allowed: (req: FuzzRequest, status: number) => boolean): Promise<{ failures: Failure[]; statuses: Map<string, number>; unanswered: number }> {
  const pool = new Pool(target, CONNECTIONS);
  const failures: Failure[] = [];
  const statuses = new Map<string, number>();
  let unanswered = 0;
  const indexes = ONLY === undefined ? Array.from({ length: COUNT }, (_, i) => i) : [ONLY];
  let next = 0;
  const worker = async () => {
    while (next < indexes.length) {
      const index = indexes[next++] as number;
      const req = generate(requestRng(SEED, index));
      const bytes = encode(req);
      const head = req.method.toUpperCase() === 'HEAD';
      const outcome: Outcome = req.alone ? await sendAlone(target, bytes, head, ANSWER_MS) : await pool.send(bytes, head, ANSWER_MS);
      for (const a of outcome.answers) {
        // Answers without a request id came from Node's parser (refused before any handler ran).
        const key = /\r\nx-request-id:/i.test(a.head) ? String(a.status) : `${a.status}(parser)`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
        if (a.status >= 500 && !allowed(req, a.status)) failures.push({ index, what: `answered ${a.head.split('\r\n')[0]}`, request: show(req) });
      }
      if (outcome.failure !== undefined) {
        unanswered++;
        // A request with honest framing is always answered; a broken one may be dropped, but not left hanging.
        if (!req.alone || outcome.failure === 'timeout') failures.push({ index, what: `no answer (${outcome.failure}${outcome.previous === undefined ? '' : ` after ${JSON.stringify(outcome.previous)}`})`, request: show(req) });
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
  pool.close();
  return { failures, statuses, unanswered };
}

/** Fails unless a fair share of the requests got through to real answers: a generator whose every request is refused at the door tests nothing. */
function assertReachedTheApp(result: Awaited<ReturnType<typeof fuzz>>, text: string): void {
  if (ONLY !== undefined) return;
  const good = [...result.statuses].filter(([s]) => /^[23]\d\d$/.test(s)).reduce((n, [, c]) => n + c, 0);
  assert.ok(good >= COUNT * 0.05, `only ${good} of ${COUNT} requests got a 2xx or 3xx:\n${text}`);
}

function report(name: string, result: Awaited<ReturnType<typeof fuzz>>): string {
  const counts = [...result.statuses].sort(([a], [b]) => (a < b ? -1 : 1)).map(([s, n]) => `${s}×${n}`).join(' ');
  const lines = [`${name}: seed ${SEED}, statuses ${counts}, ${result.unanswered} dropped without an answer`];
  for (const f of result.failures.slice(0, 15)) lines.push(`  #${f.index} ${f.what} (SLEEVE_FUZZ_SEED=${SEED} SLEEVE_FUZZ_ONLY=${f.index})\n    ${f.request}`);
  if (result.failures.length > 15) lines.push(`  … and ${result.failures.length - 15} more`);
  return lines.join('\n');
}

describe(`fuzzing both listeners (${DIALECT})`, () => {
  let t: TestEnv;
  let p: ServeProcess;
  let coverArt: CoverArtWorld;
  let auth: AuthWorld;

  before(async () => {
    t = await makeTestEnv();
    await addUser(t, USER);
    const confidential = await addApp(t, USER, 'confidential', CONFIDENTIAL_CB, 'Fuzz confidential');
    const pub = await addApp(t, USER, 'public', CUSTOM_CB, 'Fuzz public');
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'Fuzzed']);
    await cliInProcess(t.env, ['release', 'add', R2, '--release-group', GROUP, '--title', 'Also fuzzed']);
    await cliInProcess(t.env, ['release', 'add', R3, '--release-group', GROUP, '--title', 'No art']);
    const jpg = path.join(t.dir, 'front.jpg');
    const png = path.join(t.dir, 'back.png');
    await writeFile(jpg, await makeJpeg(300, 300));
    await writeFile(png, await makePng(120, 90));
    const front = await cliInProcess(t.env, ['--json', 'art', 'add', R1, jpg, '--approved', '--type', 'Front']);
    const back = await cliInProcess(t.env, ['--json', 'art', 'add', R2, png, '--approved', '--type', 'Back']);
    p = await startServe(t.env);

    const files = [
      `mbid-${R1}/index.json`,
      `mbid-${R2}/index.json`,
      `mbid-${R1}/mbid-${R1}-${front.id}.jpg`,
      `mbid-${R2}/mbid-${R2}-${back.id}.png`,
      ...[250, 500, 1200].map((n) => `mbid-${R1}/mbid-${R1}-${front.id}_thumb${n}.jpg`),
    ];
    const etags: string[] = [];
    for (const f of files.slice(0, 4)) {
      const res = await fetch(`${p.base}/download/${f}`);
      assert.equal(res.status, 200, f);
      etags.push(res.headers.get('etag') ?? '"none"');
      await res.arrayBuffer();
    }
    coverArt = { releases: [R1, R2, R3], groups: [GROUP], imageIds: [front.id, back.id], files, etags };

    // Two sessions (one for requests that may end theirs), and tokens of two clients: the
    // confidential client's access token is only read, the public client's refresh token only refreshed.
    const browser = new Browser();
    assert.equal((await browser.login(p.authBase, USER, PASSWORD)).status, 303);
    const spare = new Browser();
    assert.equal((await spare.login(p.authBase, USER, PASSWORD)).status, 303);
    const tokens = async (app: { client_id: string; client_secret: string }, redirectUri: string) => {
      const res = await authorize(browser, p.authBase, { client_id: app.client_id, response_type: 'code', scope: 'profile email', redirect_uri: redirectUri, access_type: 'offline' });
      const ex = await exchange(p.authBase, app, codeOf(res), redirectUri);
      assert.equal(ex.status, 200, ex.body);
      return ex.json();
    };
    const readOnly = await tokens(confidential, CONFIDENTIAL_CB);
    const refreshed = await tokens(pub, LOOPBACK_CB);
    const page = await browser.fetch(`${p.authBase}/account/applications`);
    const appIds = [...page.body.matchAll(/\/account\/applications\/edit\/(\d+)/g)].map((m) => Number(m[1]));
    assert.equal(appIds.length, 2, 'both applications listed');
    auth = {
      user: USER,
      password: PASSWORD,
      session: browser.jar.get('__Host-sleeve-session') as string,
      spareSession: spare.jar.get('__Host-sleeve-session') as string,
      csrf: browser.jar.get('__Host-sleeve-csrf') as string,
      clients: [
        { id: confidential.client_id, secret: confidential.client_secret, redirectUri: CONFIDENTIAL_CB, kind: 'confidential' },
        { id: pub.client_id, secret: pub.client_secret, redirectUri: CUSTOM_CB, kind: 'public' },
      ],
      accessToken: readOnly.access_token,
      refreshToken: refreshed.refresh_token,
      appIds,
    };
    assert.ok(auth.session && auth.spareSession && auth.csrf && auth.refreshToken);
  });

  after(async () => {
    await p?.stop();
    await t?.cleanup();
  });

  it(`answers ${COUNT} generated requests on the cover art listener (plain HTTP) without a 5xx`, async () => {
    const url = new URL(p.base);
    const result = await fuzz({ host: url.hostname, port: Number(url.port), tls: false }, (r) => coverArtRequest(r, coverArt), interface501);
    const text = report('cover art listener', result);
    console.log(text);
    assert.equal(result.failures.length, 0, text);
    assertReachedTheApp(result, text);
  });

  it(`answers ${COUNT} generated requests on the auth listener (HTTPS) without a 5xx`, async () => {
    const url = new URL(p.authBase);
    const result = await fuzz({ host: url.hostname, port: Number(url.port), tls: true }, (r) => authRequest(r, auth), () => false);
    const text = report('auth listener', result);
    console.log(text);
    assert.equal(result.failures.length, 0, text);
    assertReachedTheApp(result, text);
  });

  it('answers a request Node refuses over TLS with its 400 or 431 (not a reset)', async () => {
    const url = new URL(p.authBase);
    const target: Target = { host: url.hostname, port: Number(url.port), tls: true };
    for (const [bytes, status] of [
      ['GET /\xe9 HTTP/1.1\r\nHost: x\r\n\r\n', 400],
      ['GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n', 400],
      [`GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, 431],
    ] as const) {
      const outcome = await sendAlone(target, Buffer.from(bytes, 'latin1'), false, ANSWER_MS);
      assert.deepEqual(outcome.answers.map((a) => a.status), [status], JSON.stringify(bytes.slice(0, 60)));
      assert.match(outcome.answers[0]?.head ?? '', /\r\nConnection: close/i);
    }
  });

  it('refuses a NUL in the path, query, form or Basic credentials with 400 before any query (PostgreSQL refuses NUL in text)', async () => {
    const session = `__Host-sleeve-session=${auth.session}; __Host-sleeve-csrf=${auth.csrf}`;
    const cases: [string, Parameters<typeof request>[1]][] = [
      ['/user/%00', {}],
      [`/oauth2/authorize?client_id=%00&response_type=code&scope=profile&redirect_uri=${encodeURIComponent(CONFIDENTIAL_CB)}`, { headers: { cookie: session } }],
      ['/oauth2/token', { form: { grant_type: 'refresh_token', refresh_token: auth.refreshToken, client_id: '\u0000', client_secret: 'x' } }],
      ['/oauth2/token', { form: { grant_type: 'refresh_token', refresh_token: 'x' }, headers: { authorization: `Basic ${Buffer.from('\u0000:\u0000').toString('base64')}` } }],
      ['/login', { form: { csrf_token: auth.csrf, username: `${USER}\u0000`, password: 'x' }, headers: { cookie: `__Host-sleeve-csrf=${auth.csrf}` } }],
    ];
    for (const [path, init] of cases) {
      const res = await request(`${p.authBase}${path}`, init);
      assert.equal(res.status, 400, `${path}: ${res.body.slice(0, 200)}`);
      assert.ok(res.body.includes('NUL'), res.body.slice(0, 300));
    }
  });

  it('is still alive and answering normal requests, and logged no error', async () => {
    assert.equal(p.child.exitCode, null, `the server exited:\n${p.stderr()}`);
    const art = await fetch(`${p.base}/release/${R1}/front`, { redirect: 'manual' });
    assert.equal(art.status, 307);
    assert.match(art.headers.get('location') ?? '', new RegExp(`/mbid-${R1}-\\d+\\.jpg$`));
    const file = await fetch(`${p.base}/download/mbid-${R1}/index.json`);
    assert.equal(file.status, 200);
    assert.equal(((await file.json()) as { release: string }).release, `https://musicbrainz.org/release/${R1}`);
    const meta = await request(`${p.authBase}/.well-known/oauth-authorization-server`);
    assert.equal(meta.status, 200);
    const fresh = new Browser();
    const login = await fresh.login(p.authBase, USER, PASSWORD);
    // The fuzz's wrong passwords may have throttled the account, which is an answer too.
    assert.ok(login.status === 303 || login.status === 429, `sign-in: ${login.status}`);
    const errors = logLines(p).filter((l) => l.level >= 50);
    assert.deepEqual(
      errors.map((l) => `${l.msg}: ${JSON.stringify(l.err ?? l).slice(0, 300)}`),
      [],
      'no error logged',
    );
  });
});

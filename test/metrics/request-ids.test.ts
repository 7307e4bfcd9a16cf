/*
 * Request ids: every answer of both listeners carries X-Request-Id; an incoming id is kept
 * only from a trusted proxy (SLEEVE_TRUST_PROXY) and only when it is well formed; every log
 * line of a request carries the id (replays from the cache and 500s included), and no
 * secret of a request reaches the log.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { sql } from 'kysely';
import { after, before, describe, it } from 'node:test';
import { request } from '../helpers/auth.js';
import { CLI, DIALECT, freePort, makeTestEnv, pollUntil, rawHttp, type TestEnv } from '../helpers/env.js';
import { plainHttp } from '../auth/support.js';
import { startLoggedServer, type LoggedServer } from './support.js';

const UNKNOWN = '1d1d0000-0000-4000-8000-00000000ffff';
const GENERATED = /^[0-9a-f]{5}-[0-9a-z]+$/;

async function get(url: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  await res.arrayBuffer();
  return res;
}

function idOf(res: Response | { headers: Record<string, string | string[] | undefined> }): string {
  const v = res.headers instanceof Headers ? res.headers.get('x-request-id') : res.headers['x-request-id'];
  assert.equal(typeof v, 'string', 'X-Request-Id is present');
  return v as string;
}

describe(`request ids without a trusted proxy (${DIALECT})`, () => {
  let t: TestEnv;
  let s: LoggedServer;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'debug' });
    s = await startLoggedServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('gives every answer of both listeners its own id, whatever answered it', async () => {
    const ids: string[] = [];
    // Uncached, then replayed from the cache; a 404; a 400; OPTIONS * (answered before routing).
    for (let i = 0; i < 3; i++) ids.push(idOf(await get(`${s.base}/release/${UNKNOWN}/front`)));
    ids.push(idOf(await get(`${s.base}/nope`)));
    const star = await rawHttp(s.base, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    ids.push(star.headers['x-request-id'] ?? '');
    // Health probes, answered before everything else on both listeners.
    ids.push(idOf(await get(`${s.base}/healthz`)), idOf(await get(`${s.base}/readyz`)), idOf(await request(`${s.authBase}/readyz`)));
    // Auth: a page, a JSON endpoint, a 404, and a plain-HTTP request refused on the HTTPS port.
    ids.push(idOf(await request(`${s.authBase}/login`)));
    ids.push(idOf(await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'password' } })));
    ids.push(idOf(await request(`${s.authBase}/nope`)));
    const plain = await plainHttp(s.authBase, '/oauth2/userinfo');
    assert.equal(plain.status, 400);
    ids.push(String(plain.headers['x-request-id']));
    for (const id of ids) assert.match(id, GENERATED);
    assert.equal(new Set(ids).size, ids.length, 'all different');
    // One process, one prefix.
    assert.equal(new Set(ids.map((id) => id.split('-')[0])).size, 1);
  });

  it('ignores an incoming X-Request-Id when the peer is not a trusted proxy', async () => {
    const cover = await get(`${s.base}/release/${UNKNOWN}/front`, { headers: { 'x-request-id': 'client-chosen-1' } });
    assert.match(idOf(cover), GENERATED);
    const auth = await request(`${s.authBase}/login`, { headers: { 'x-request-id': 'client-chosen-2' } });
    assert.match(idOf(auth), GENERATED);
    assert.doesNotMatch(s.logText(), /client-chosen/);
  });

  it('logs each request with its id: routed answers, replays from the cache, and 500s', async () => {
    const first = idOf(await get(`${s.base}/release/${UNKNOWN}/back`));
    const second = idOf(await get(`${s.base}/release/${UNKNOWN}/back`));
    const line = (id: string) => pollUntil(async () => s.logs().filter((l) => l.reqId === id), (ls) => ls.length > 0);
    const routed = (await line(first)).value;
    assert.equal(routed.length, 1);
    assert.equal(routed[0]?.msg, 'request');
    assert.equal(routed[0]?.status, 404);
    assert.equal(routed[0]?.url, `/release/${UNKNOWN}/back`);
    const cached = (await line(second)).value;
    assert.equal(cached.length, 1);
    assert.equal(cached[0]?.cached, true);
    assert.equal(cached[0]?.status, 404);

    // A failing database: the 500's error line carries the id the client got.
    const db = s.server.runtime.database.db;
    await sql`ALTER TABLE release_group RENAME TO release_group_away`.execute(db);
    let failed: Response;
    try {
      failed = await get(`${s.base}/release-group/${UNKNOWN}/`);
    } finally {
      await sql`ALTER TABLE release_group_away RENAME TO release_group`.execute(db);
    }
    assert.equal(failed.status, 500);
    const id = idOf(failed);
    const lines = (await pollUntil(async () => s.logs().filter((l) => l.reqId === id), (ls) => ls.length >= 2)).value;
    const error = lines.find((l) => l.level === 50);
    assert.ok(error !== undefined, JSON.stringify(lines));
    assert.equal(error.msg, 'cover art request failed');
    assert.match(JSON.stringify(error.err), /release_group/);
    assert.ok(lines.some((l) => l.msg === 'request' && l.status === 500));
  });

  it('logs auth requests with their ids, and no secret of theirs: no query strings, headers, bodies or cookies', async () => {
    const secrets = ['SECRETCODE1', 'SECRETPW2', 'SECRETCODE3', 'SECRETPW4', 'SECRETCOOKIE5', 'SECRETTOKEN6', 'SECRETPW7', 'SECRETSTATE8'];
    const ids = [
      idOf(await request(`${s.authBase}/oauth2/oob?code=SECRETCODE1&state=SECRETSTATE8`)),
      idOf(
        await request(`${s.authBase}/oauth2/token`, {
          headers: { authorization: `Basic ${Buffer.from('someclient:SECRETPW2').toString('base64')}` },
          form: { grant_type: 'authorization_code', code: 'SECRETCODE3', redirect_uri: 'http://localhost/cb' },
        }),
      ),
      idOf(await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'c', client_secret: 'SECRETPW4' } })),
      idOf(await request(`${s.authBase}/account/applications`, { headers: { cookie: '__Host-sleeve-session=SECRETCOOKIE5' } })),
      idOf(await request(`${s.authBase}/oauth2/userinfo`, { headers: { authorization: 'Bearer SECRETTOKEN6' } })),
      idOf(await request(`${s.authBase}/login`, { form: { username: 'nobody', password: 'SECRETPW7', csrf_token: 'x' } })),
    ];
    // And a 500 carrying credentials: the error line has the id, not the credentials.
    const db = s.server.runtime.database.db;
    await sql`ALTER TABLE oauth_application RENAME TO oauth_application_away`.execute(db);
    let failed;
    try {
      failed = await request(`${s.authBase}/oauth2/token`, {
        form: { grant_type: 'authorization_code', code: 'SECRETCODE3', redirect_uri: 'http://localhost/cb', client_id: 'c', client_secret: 'SECRETPW4' },
      });
    } finally {
      await sql`ALTER TABLE oauth_application_away RENAME TO oauth_application`.execute(db);
    }
    assert.equal(failed.status, 500);
    const failedId = idOf(failed);
    const all = [...ids, failedId];
    const { value: logs } = await pollUntil(async () => s.logs(), (ls) => all.every((id) => ls.some((l) => l.reqId === id && l.msg === 'request')));
    for (const id of all) {
      const line = logs.find((l) => l.reqId === id && l.msg === 'request');
      assert.ok(line !== undefined, `a request line for ${id}`);
      assert.equal(typeof line.path, 'string');
      assert.equal(typeof line.route, 'string');
    }
    assert.equal(logs.find((l) => l.reqId === ids[0] && l.msg === 'request')?.path, '/oauth2/oob');
    const error = logs.find((l) => l.reqId === failedId && l.level === 50);
    assert.ok(error !== undefined, 'the 500 is logged with the id');
    assert.equal(error.msg, 'auth request failed');
    const text = s.logText();
    for (const secret of secrets) assert.equal(text.includes(secret), false, `${secret} is not in the log`);
  });
});

describe(`request ids behind a trusted proxy (${DIALECT})`, () => {
  let t: TestEnv;
  let s: LoggedServer;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'debug', SLEEVE_TRUST_PROXY: '127.0.0.1', SLEEVE_RATE_LIMIT: '6/1h' });
    s = await startLoggedServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it("keeps a proxy's well-formed id on both listeners, routed, cached and refused answers alike", async () => {
    const uuid = '0f8fad5b-d9cb-469f-a165-70867728950e';
    const max = `${'a'.repeat(120)}:/+=@_.-`;
    assert.equal(max.length, 128);
    const front = `${s.base}/release/${UNKNOWN}/front`;
    assert.equal(idOf(await get(front, { headers: { 'x-request-id': uuid } })), uuid);
    assert.equal(idOf(await get(front, { headers: { 'x-request-id': 'proxy-2' } })), 'proxy-2', 'the cached replay too');
    assert.equal(idOf(await get(front, { headers: { 'x-request-id': max } })), max);
    assert.equal(idOf(await request(`${s.authBase}/login`, { headers: { 'x-request-id': 'proxy-3' } })), 'proxy-3');
    const logged = await pollUntil(async () => s.logs().filter((l) => l.reqId === 'proxy-2' || l.reqId === 'proxy-3'), (ls) => ls.length === 2);
    assert.equal(logged.value.length, 2);
    // Rate limited (6 per hour; 3 used above): the refusal keeps the id and logs it.
    for (let i = 0; i < 3; i++) await get(front);
    const refused = await get(front, { headers: { 'x-request-id': 'proxy-4' } });
    assert.equal(refused.status, 503);
    assert.equal(idOf(refused), 'proxy-4');
    const line = (await pollUntil(async () => s.logs().find((l) => l.reqId === 'proxy-4'), (l) => l !== undefined)).value;
    assert.equal(line?.msg, 'rate limited');
  });

  it('replaces an id that is too long or carries other characters', async () => {
    for (const bad of ['a'.repeat(129), 'has space', 'quote"d', 'semi;colon', 'comma,list', 'ünïcode']) {
      const res = await request(`${s.authBase}/login`, { headers: { 'x-request-id': bad } });
      assert.match(idOf(res), GENERATED, JSON.stringify(bad));
    }
    // Sent twice, the header arrives joined with ", ": not an id either.
    const twice = await rawHttp(s.base, `GET /robots.txt HTTP/1.1\r\nHost: x\r\nX-Request-Id: one\r\nX-Request-Id: two\r\nConnection: close\r\n\r\n`);
    assert.match(twice.headers['x-request-id'] ?? '', GENERATED);
  });
});

describe(`request ids in the log of a sleeve serve process (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'debug', SLEEVE_TRUST_PROXY: '127.0.0.1' });
  });
  after(async () => t?.cleanup());

  it('writes JSON lines with the id on stdout, and prints where the metrics are', async () => {
    const port = await freePort();
    const env = { ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: `http://127.0.0.1:${port}` };
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
    const child = spawn(process.execPath, [CLI, 'serve', '--only', 'coverart'], { env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await pollUntil(async () => stderr, (e) => e.includes('sleeve is running'), 60_000);
      const metricsUrl = /metrics:\s+(http:\/\/\S+\/metrics)/.exec(stderr)?.[1];
      assert.ok(metricsUrl !== undefined, stderr);
      assert.equal((await get(metricsUrl)).status, 200);
      const res = await get(`http://127.0.0.1:${port}/robots.txt`, { headers: { 'x-request-id': 'from-the-proxy-42' } });
      assert.equal(idOf(res), 'from-the-proxy-42');
      const { value } = await pollUntil(async () => stdout, (o) => o.includes('from-the-proxy-42'), 5000);
      const line = value
        .split('\n')
        .filter((l) => l.includes('from-the-proxy-42'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)[0];
      assert.equal(line?.reqId, 'from-the-proxy-42');
      assert.equal(line?.url, '/robots.txt');
    } finally {
      child.kill('SIGTERM');
      assert.equal(await exited, 0, stderr);
    }
  });
});

/*
 * The token endpoint in the fast lane (src/auth/token-lane.ts, docs/decisions.md "The token
 * endpoint in the fast lane"): a form POST to /oauth2/token over TLS is answered from the
 * socket, by the route's own function. Raw TLS through the public listener: each answer the
 * lane gives is byte for byte the one node:http and Fastify give the same request (Date,
 * X-Request-Id and the new tokens aside), for success and every class of error; what the lane
 * does not take (another content type, a body too large or cut in two, a DPoP proof, chunked)
 * goes to node:http with the rest of its connection; pipelined requests are answered in
 * order across the hand-off; a client's FIN, reset or silence ends the connection as before.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import tls, { type TLSSocket } from 'node:tls';
import { addApp, addUser, authorize, type AuthServer, type Browser } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { countOf, scrape } from '../metrics/support.js';
import { codeOf, exchange, grant, OOB, s256, signIn, startLoggedAuthServer, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';
const KEEPALIVE_MS = 600;
const VERIFIER = Buffer.from('the lane test verifier, 32 bytes').toString('base64url');

interface Answer {
  head: string;
  status: number;
  body: Buffer;
}

function connect(base: string): Promise<TLSSocket> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => resolve(socket));
    socket.once('error', reject);
  });
}

function splitAnswers(raw: Buffer): Answer[] {
  const out: Answer[] = [];
  let at = 0;
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end === -1) break;
    const head = raw.subarray(at, end).toString('latin1');
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
    if (end + 4 + length > raw.length) break;
    out.push({ head, status: Number(head.split(' ')[1]), body: raw.subarray(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return out;
}

/**
 * Writes each of `parts` on one TLS connection (each once the answers to the parts before it
 * are in, when `stepwise`; else all at once) and reads until `count` answers are in, or the
 * server closes. `end`: the client's FIN after the last part. `idle`: then leaves the
 * connection open until the server closes it, and says how long after the last answer.
 */
async function talk(
  base: string,
  parts: (string | Buffer)[],
  count: number,
  opts: { stepwise?: number[]; end?: boolean; idle?: boolean } = {},
): Promise<{ answers: Answer[]; closed: boolean; idleMs?: number }> {
  const socket = await connect(base);
  const chunks: Buffer[] = [];
  let closed = false;
  let wake: () => void = () => {};
  const got = (): number => splitAnswers(Buffer.concat(chunks)).length;
  socket.on('data', (c: Buffer) => {
    chunks.push(c);
    wake();
  });
  socket.on('close', () => {
    closed = true;
    wake();
  });
  socket.on('error', () => {});
  const until = (n: number): Promise<void> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`fewer than ${n} answers in 10 s: ${Buffer.concat(chunks).toString('latin1').slice(0, 400)}`)), 10_000);
      wake = () => {
        if (closed || got() >= n) {
          clearTimeout(timer);
          resolve();
        }
      };
      wake();
    });
  for (const [i, part] of parts.entries()) {
    const waitFor = opts.stepwise?.[i];
    if (waitFor !== undefined) await until(waitFor);
    socket.write(part);
  }
  if (opts.end === true) socket.end();
  await until(count);
  let idleMs: number | undefined;
  if ((opts.end === true || opts.idle === true) && !closed) {
    const start = performance.now();
    await new Promise<void>((resolve) => socket.once('close', () => resolve()));
    idleMs = performance.now() - start;
  }
  socket.destroy();
  return { answers: splitAnswers(Buffer.concat(chunks)), closed, idleMs };
}

const post = (body: string, headers: Record<string, string> = {}): string => {
  const lines = Object.entries({ host: '127.0.0.1', 'content-type': 'application/x-www-form-urlencoded', 'content-length': String(Buffer.byteLength(body)), ...headers })
    .filter(([, v]) => v !== '')
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `POST /oauth2/token HTTP/1.1\r\n${lines}\r\n${body}`;
};
const form = (fields: Record<string, string>): string => new URLSearchParams(fields).toString();
/** A request the lane never takes (OPTIONS): everything after it on its connection is node:http's. */
const TO_NODE = 'OPTIONS /oauth2/token HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n';

/** A head without what differs per request and per second. */
function stableHead(a: Answer): string {
  return a.head.replace(/\r\n(date): [^\r]*/gi, '').replace(/\r\n(x-request-id): [0-9a-z]+-[0-9a-z]+/i, '\r\n$1: <id>');
}

/** A body with the new tokens' values replaced by their shapes (grant ids and randomness differ). */
function stableBody(a: Answer): string {
  const text = a.body.toString('utf8');
  if (a.status !== 200) return text;
  const json = JSON.parse(text) as Record<string, unknown>;
  for (const k of ['access_token', 'refresh_token']) if (typeof json[k] === 'string') json[k] = (json[k] as string).replace(/^[0-9a-z]+\.[A-Za-z0-9_-]{43}$/, '<token>');
  if (typeof json.id_token === 'string') json.id_token = json.id_token.split('.').length === 3 ? '<jws>' : json.id_token;
  return JSON.stringify(json);
}

function assertSame(lane: Answer | undefined, node: Answer | undefined, what: string): void {
  assert.ok(lane !== undefined && node !== undefined, what);
  assert.equal(stableHead(lane), stableHead(node), `${what}: heads`);
  assert.equal(stableBody(lane), stableBody(node), `${what}: bodies`);
  assert.match(lane.head, /\r\nx-request-id: \S+/, `${what}: a request id`);
  assert.match(lane.head, /\r\ndate: \S+/i, `${what}: a date`);
}

describe(`the token endpoint in the fast lane (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer & { logs(): string };
  let alice: Browser;
  let web: Client;
  let desktop: Client;
  let lanes = 0;

  /** How many answers the lane gave since the last call. */
  async function laneAnswers(): Promise<number> {
    const now = countOf(await scrape(s.server.metricsAddress), 'sleeve_http_fast_lane_total');
    const d = now - lanes;
    lanes = now;
    return d;
  }

  /** A fresh code of `app` (openid; PKCE S256 unless `pkce` is false). */
  async function code(app: Client = web, extra: Record<string, string> = {}, pkce = true): Promise<string> {
    const res = await authorize(alice, s.base, {
      client_id: app.client_id,
      response_type: 'code',
      redirect_uri: app === desktop ? OOB : WEB_URI,
      scope: 'openid profile',
      nonce: 'n-1',
      ...(pkce ? { code_challenge: s256(VERIFIER), code_challenge_method: 'S256' } : {}),
      ...extra,
    });
    return codeOf(res);
  }

  const exchangeForm = (c: string, extra: Record<string, string> = {}): string =>
    form({ grant_type: 'authorization_code', code: c, redirect_uri: WEB_URI, client_id: web.client_id, client_secret: web.client_secret, code_verifier: VERIFIER, ...extra });

  before(async () => {
    t = await makeTestEnv({ SLEEVE_KEEPALIVE_TIMEOUT_MS: String(KEEPALIVE_MS), SLEEVE_LOG_LEVEL: 'info' });
    s = await startLoggedAuthServer(t);
    await addUser(t, 'alice');
    [web, desktop] = await Promise.all([addApp(t, 'alice', 'confidential', WEB_URI, 'Lane Web'), addApp(t, 'alice', 'public', undefined, 'Lane Desktop')]);
    alice = await signIn(s.base, 'alice');
    await laneAnswers();
  });

  after(async () => {
    await s.server.close();
    await t.cleanup();
  });

  it('answers a code exchange (openid, PKCE) and a refresh with the bytes node:http sends', async () => {
    const offline = { access_type: 'offline' };
    const [c1, c2] = [await code(web, offline), await code(web, offline)];
    const lane = await talk(s.base, [post(exchangeForm(c1))], 1);
    assert.equal(await laneAnswers(), 1, 'the lane answered it');
    const node = await talk(s.base, [TO_NODE, post(exchangeForm(c2))], 2);
    assert.equal(await laneAnswers(), 0, 'node:http answered it');
    assertSame(lane.answers[0], node.answers[1], 'exchange');
    assert.equal(lane.answers[0]?.status, 200);
    const tokens = JSON.parse(String(lane.answers[0]?.body)) as { refresh_token: string; id_token: string };
    assert.equal(tokens.id_token.split('.').length, 3);
    const other = JSON.parse(String(node.answers[1]?.body)) as { refresh_token: string };
    const refreshForm = (r: string) => form({ grant_type: 'refresh_token', refresh_token: r, client_id: web.client_id, client_secret: web.client_secret });
    const r1 = await talk(s.base, [post(refreshForm(tokens.refresh_token))], 1);
    const r2 = await talk(s.base, [TO_NODE, post(refreshForm(other.refresh_token))], 2);
    assert.equal(await laneAnswers(), 1);
    assertSame(r1.answers[0], r2.answers[1], 'refresh');
    assert.equal(r1.answers[0]?.status, 200);
  });

  it('answers every class of error with the bytes node:http sends', async () => {
    const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
    // Each case makes its request anew (with a fresh code where it needs one) for each path.
    const cases: [string, () => Promise<string[]>, number][] = [
      ['unknown client', async () => [post(exchangeForm(await code(), { client_id: 'nobody' }))], 401],
      ['wrong secret', async () => [post(exchangeForm(await code(), { client_secret: 'wrong' }))], 401],
      ['wrong secret in Basic', async () => [post(form({ grant_type: 'authorization_code', code: await code(), redirect_uri: WEB_URI, code_verifier: VERIFIER }), { authorization: basic(web.client_id, 'wrong') })], 401],
      ['no secret (confidential)', async () => [post(exchangeForm(await code(), { client_secret: '' }))], 401],
      ['wrong redirect_uri', async () => [post(exchangeForm(await code(), { redirect_uri: 'https://client.example/other' }))], 400],
      ['wrong verifier', async () => [post(exchangeForm(await code(), { code_verifier: 'x'.repeat(43) }))], 400],
      ['missing code', async () => [post(form({ grant_type: 'authorization_code', redirect_uri: WEB_URI, client_id: web.client_id, client_secret: web.client_secret }))], 400],
      ['missing grant_type', async () => [post(form({ code: 'abc', client_id: web.client_id }))], 400],
      ['unsupported grant_type', async () => [post(form({ grant_type: 'password', client_id: web.client_id, client_secret: web.client_secret }))], 400],
      ['a parameter twice', async () => [post(`${exchangeForm(await code())}&code=again`)], 400],
      ['malformed code', async () => [post(exchangeForm('not a code!'))], 400],
      ['unknown code', async () => [post(exchangeForm('A'.repeat(43)))], 400],
      ['token_type mac', async () => [post(exchangeForm(await code(), { token_type: 'mac' }))], 400],
      ['a NUL', async () => [post(exchangeForm(await code(), { client_id: `${web.client_id}\0` }))], 400],
      ['bad refresh token', async () => [post(form({ grant_type: 'refresh_token', refresh_token: '1.x', client_id: web.client_id, client_secret: web.client_secret }))], 400],
      ['public client without PKCE', async () => [post(form({ grant_type: 'authorization_code', code: await code(desktop, {}, false), redirect_uri: OOB, client_id: desktop.client_id }))], 401],
      [
        'a replayed code',
        async () => {
          // Used first (through node:http, on a connection of its own), then replayed: node:http
          // would handle two pipelined uses at once, and either may be the one that wins.
          const c = await code();
          const first = await talk(s.base, [TO_NODE, post(exchangeForm(c))], 2);
          assert.equal(first.answers[1]?.status, 200);
          return [post(exchangeForm(c))];
        },
        400,
      ],
    ];
    for (const [what, make, status] of cases) {
      const viaLane = await make();
      const lane = await talk(s.base, viaLane, viaLane.length);
      assert.equal(await laneAnswers(), viaLane.length, `${what}: the lane answered`);
      const viaNode = await make();
      const node = await talk(s.base, [TO_NODE, ...viaNode], viaNode.length + 1);
      assert.equal(await laneAnswers(), 0, `${what}: node:http answered`);
      const last = viaLane.length - 1;
      assertSame(lane.answers[last], node.answers[last + 1], what);
      assert.equal(lane.answers[last]?.status, status, `${what}: ${lane.answers[last]?.body.toString()}`);
      if (status === 401) assert.match(lane.answers[last]?.head ?? '', /\r\nwww-authenticate: Basic realm="OAuth2-Client"\r\n/);
      assert.match(lane.answers[last]?.head ?? '', /\r\ncache-control: no-store\r\npragma: no-cache\r\naccess-control-allow-origin: \*\r\n/);
    }
  });

  it('says a replayed code in the audit trail under the request id it answered with', async () => {
    const c = await code();
    const { answers } = await talk(s.base, [post(exchangeForm(c)), post(exchangeForm(c))], 2);
    assert.equal(await laneAnswers(), 2);
    const id = /\r\nx-request-id: (\S+)/.exec(answers[1]?.head ?? '')?.[1];
    assert.ok(id !== undefined);
    const line = s
      .logs()
      .split('\n')
      .filter((l) => l.includes('"grant.revoked"') && l.includes('code_replayed'))
      .map((l) => JSON.parse(l) as { reqId?: string; user?: string; clientId?: string })
      .find((l) => l.reqId === id);
    assert.ok(line !== undefined, `an audit line with reqId ${id}`);
    assert.equal(line.user, 'alice');
    assert.equal(line.clientId, web.client_id);
  });

  it('leaves to node:http what it does not take, with the rest of the connection, and answers in order', async () => {
    const r = await grant(alice, s.base, web, { redirect_uri: WEB_URI, access_type: 'offline' });
    assert.ok(r.refresh_token !== undefined);
    await laneAnswers();
    const refreshBody = form({ grant_type: 'refresh_token', refresh_token: r.refresh_token as string, client_id: web.client_id, client_secret: web.client_secret });
    const big = `${refreshBody}&pad=${'x'.repeat(5000)}`;
    const huge = `${refreshBody}&pad=${'x'.repeat(70 * 1024)}`;
    const odd: [string, string | Buffer, number][] = [
      ['JSON', post(JSON.stringify({ grant_type: 'refresh_token' }), { 'content-type': 'application/json' }), 400],
      ['form with a charset', post(refreshBody, { 'content-type': 'application/x-www-form-urlencoded; charset=utf-8' }), 200],
      ['a body past the lane’s 4 KiB', post(big), 200],
      ['a body past the listener’s limit', post(huge), 413],
      ['a DPoP proof', post(refreshBody, { dpop: 'not.a.proof' }), 400],
      ['chunked', `POST /oauth2/token HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/x-www-form-urlencoded\r\ntransfer-encoding: chunked\r\n\r\n${Buffer.byteLength(refreshBody).toString(16)}\r\n${refreshBody}\r\n0\r\n\r\n`, 200],
      ['a query string', post(refreshBody).replace('/oauth2/token', '/oauth2/token?x=1'), 200],
      ['no body', post(''), 400],
    ];
    for (const [what, request, status] of odd) {
      // A lane answer, the odd request, then one the lane would take: node:http's from the odd one on.
      const { answers } = await talk(s.base, [post(refreshBody), request, post(refreshBody)], 3, { stepwise: [0, 1, 1] });
      assert.equal(await laneAnswers(), 1, `${what}: only the first in the lane`);
      const statuses = answers.map((a) => a.status);
      const said = `${what}: ${answers.map((a) => a.body.toString().slice(0, 120)).join(' | ')}`;
      assert.deepEqual(statuses.slice(0, 2), [200, status], said);
      // After a 413 node:http closes the connection (the body is not read); else the third is answered too.
      if (status !== 413) assert.equal(statuses[2], 200, said);
      const viaNode = await talk(s.base, [TO_NODE, request], 2);
      assert.equal(await laneAnswers(), 0);
      assertSame(answers[1], viaNode.answers[1], what);
    }
  });

  it('answers a body that arrives in two parts through node:http, and pipelined requests in order across the hand-off', async () => {
    const cs = [await code(), await code(), await code()];
    const [a, b, c] = cs.map((x) => post(exchangeForm(x)));
    const cut = (b as string).length - 20;
    // a and the head of b at once; b's last bytes once a is answered; then c: a in the lane, b and c node:http's.
    const split = await talk(s.base, [`${a}${(b as string).slice(0, cut)}`, (b as string).slice(cut), c as string], 3, { stepwise: [0, 1, 2] });
    assert.deepEqual(
      split.answers.map((x) => x.status),
      [200, 200, 200],
    );
    assert.equal(await laneAnswers(), 1);
    // Three exchanges and a GET in one write: three asynchronous answers in the lane, then the GET (node:http's) after them.
    const more = [await code(), await code(), await code()].map((x) => post(exchangeForm(x)));
    const { answers } = await talk(s.base, [`${more.join('')}GET /oauth2/token HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n`], 4);
    assert.deepEqual(
      answers.map((x) => x.status),
      [200, 200, 200, 400],
    );
    assert.match(answers[3]?.body.toString() ?? '', /Only POST requests are allowed/);
    const ids = answers.slice(0, 3).map((x) => (JSON.parse(x.body.toString()) as { access_token: string }).access_token);
    assert.equal(new Set(ids).size, 3);
    assert.equal(await laneAnswers(), 3);
  });

  it('answers 300 pipelined requests sent in one go, in order, whether the lane or node:http answers each', async () => {
    // Scopes of their own: a grant asked for again without consent gives no refresh token.
    const r = await grant(alice, s.base, web, { redirect_uri: WEB_URI, access_type: 'offline', scope: 'profile email' });
    assert.ok(r.refresh_token !== undefined);
    const good = post(form({ grant_type: 'refresh_token', refresh_token: r.refresh_token as string, client_id: web.client_id, client_secret: web.client_secret }));
    const bad = post(form({ grant_type: 'refresh_token', refresh_token: r.refresh_token as string, client_id: web.client_id, client_secret: 'wrong' }));
    // ~90 KB of requests: TLS records cut some of them in two, which hands the rest of the connection to node:http.
    const requests = Array.from({ length: 300 }, (_, i) => (i % 3 === 2 ? bad : good));
    const { answers } = await talk(s.base, [requests.join('')], 300);
    assert.deepEqual(
      answers.map((a) => a.status),
      requests.map((q) => (q === bad ? 401 : 200)),
    );
    assert.ok((await laneAnswers()) >= 2, 'the lane answered the first ones');
  });

  it('treats a FIN before the answer as node:http does, and survives a client that reset before its answer', async () => {
    // The listener does not keep half-open connections: a FIN with the request ends the connection before the answer, in both.
    const lane = await talk(s.base, [post(exchangeForm(await code()))], 1, { end: true });
    const node = await talk(s.base, [TO_NODE, post(exchangeForm(await code()))], 2, { end: true });
    assert.ok(lane.closed && node.closed);
    assert.equal(lane.answers.length, node.answers.length - 1, 'as many token answers (none) in both');
    // A client gone before its answer: nothing is written, the server goes on.
    const socket = await connect(s.base);
    const gone = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.write(post(exchangeForm(await code())));
    socket.destroy();
    await gone;
    const after = await talk(s.base, [post(exchangeForm(await code()))], 1);
    assert.equal(after.answers[0]?.status, 200);
    await laneAnswers();
  });

  it('keeps a connection open after an answer, and closes it once idle past the keep-alive timeout', async () => {
    // Both codes first: the connection must not sit idle for an authorization round trip.
    const first = exchangeForm(await code());
    const second = exchangeForm(await code());
    // The second request is written once the first is answered: the answer did not end the connection.
    const { answers, idleMs } = await talk(s.base, [post(first), post(second)], 2, { stepwise: [0, 1], idle: true });
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200],
    );
    // Each answer said the connection stays open; the server closed it later, idle.
    for (const a of answers) assert.match(a.head, /\r\nconnection: keep-alive\r\n/i);
    // Closed by the server, idle: node:http allows 1 s past the Keep-Alive it announces, the lane as much.
    assert.ok(idleMs !== undefined && idleMs < KEEPALIVE_MS + 1000 + 2000, `closed after ${Math.round(idleMs ?? -1)} ms`);
    assert.equal(await laneAnswers(), 2);
  });

  it('answers a code exchange through the lane that a client of the usual kind makes', async () => {
    // node:https (keep-alive agent), as the other suites send every token request.
    const res = await exchange(s.base, web, await code(), WEB_URI, { code_verifier: VERIFIER });
    assert.equal(res.status, 200, res.body);
    assert.equal(res.headers['cache-control'], 'no-store');
    assert.equal(res.headers['strict-transport-security'], 'max-age=31536000');
    assert.equal(await laneAnswers(), 1);
  });
});

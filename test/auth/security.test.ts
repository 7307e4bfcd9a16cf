/*
 * Security properties of the authorization service (docs/decisions.md "Authorization
 * service"): CSRF on every form, framing and script policies, HTML escaping, sign-in
 * throttling, session cookies, HTTPS only (also behind a trusted proxy), body limits,
 * and secrets neither logged nor stored in plaintext.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { addApp, addUser, authorize, Browser, PASSWORD, request, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { authorizeUrl, codeOf, escapeHtml, exchange, grant, isConsent, OOB, plainHttp, refresh, signIn, startLoggedAuthServer, tryLogin, userinfoStatus, type Client, type Tokens } from './support.js';

const WEB_URI = 'https://client.example/callback';
const XSS = '<script>alert(1)</script>';
const ESCAPED_XSS = '&lt;script&gt;alert(1)&lt;/script&gt;';
const HTTPS_ONLY = { error: 'invalid_request', error_description: 'Invalid protocol, only HTTPS is allowed' };

function setCookies(res: HttpsResponse): string[] {
  const set = res.headers['set-cookie'];
  return Array.isArray(set) ? set : set === undefined ? [] : [set];
}

/**
 * POSTs a large body (chunked when asked, else with Content-Length) and gives the status
 * of the answer, or 'reset' when the server refused by closing the connection before
 * its answer could be read (it may stop reading an oversized body).
 */
function postLarge(url: string, contentType: string, body: string | Buffer, opts: { chunked?: boolean; headers?: Record<string, string>; method?: string } = {}): Promise<{ status: number | 'reset'; body: string }> {
  const data = Buffer.from(body);
  return new Promise((resolve, reject) => {
    let answered = false;
    const headers: Record<string, string> = { 'content-type': contentType, ...opts.headers };
    if (opts.chunked === true) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(data.length);
    const req = https.request(url, { method: opts.method ?? 'POST', headers, rejectUnauthorized: false, agent: false }, (res) => {
      answered = true;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('close', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
    });
    // Late errors of a connection the server closed after answering are expected, not failures.
    req.on('socket', (socket) => socket.on('error', () => {}));
    req.on('error', (err) => {
      if (answered) return;
      if (/EPIPE|ECONNRESET|socket hang up/.test(String(err))) resolve({ status: 'reset', body: '' });
      else reject(err);
    });
    for (let i = 0; i < data.length; i += 16384) req.write(data.subarray(i, i + 16384));
    req.end();
  });
}

describe(`security of the authorization service (${DIALECT})`, () => {
  let t: TestEnv;
  let s: Awaited<ReturnType<typeof startLoggedAuthServer>>;
  let alice: Browser;
  let bob: Browser;
  let web: Client;
  let desktop: Client;
  let xss: Client;
  /** Every secret value seen in this file: none may be logged or stored as is. */
  const secrets = new Set<string>([PASSWORD]);
  const keep = (...values: (string | undefined)[]) => values.forEach((v) => v !== undefined && v !== '' && secrets.add(v));
  const keepTokens = (tokens: Tokens) => keep(tokens.access_token, tokens.refresh_token);
  const keepCookies = (b: Browser) => keep(...b.jar.values());

  before(async () => {
    t = await makeTestEnv();
    s = await startLoggedAuthServer(t, { SLEEVE_TRUST_PROXY: '127.0.0.1', SLEEVE_LOG_LEVEL: 'debug' });
    await Promise.all([addUser(t, 'alice'), addUser(t, 'bob'), addUser(t, 'carol'), addUser(t, 'dave')]);
    [web, desktop, xss] = await Promise.all([
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web'),
      addApp(t, 'alice', 'public', undefined, 'Test Desktop'),
      addApp(t, 'alice', 'public', undefined, XSS),
    ]);
    for (const app of [web, desktop, xss]) keep(app.client_secret);
    [alice, bob] = await Promise.all([signIn(s.base, 'alice'), signIn(s.base, 'bob')]);
    keepCookies(alice);
    keepCookies(bob);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const list = (b = alice) => b.fetch(`${s.base}/account/applications`);
  const csrfOf = async (b = alice) => Browser.csrf(await list(b));
  const appId = async (name: string) => {
    const page = await list();
    const card = page.body.split('<div class="card">').find((c) => c.includes(`<h3>${escapeHtml(name)}</h3>`) && c.includes('/account/applications/edit/'));
    return /\/account\/applications\/edit\/(\d+)/.exec(card ?? '')?.[1] as string;
  };

  describe('CSRF: every form refuses a POST without the right token and changes nothing', () => {
    /** No token; a well-formed token that is not this browser's; bob's token with alice's cookies. */
    const badTokens = async (): Promise<(string | undefined)[]> => [undefined, 'A'.repeat(43), await csrfOf(bob), ''];
    const withToken = (form: Record<string, string>, tok: string | undefined) => (tok === undefined ? form : { ...form, csrf_token: tok });

    it('login', async () => {
      for (const tok of [undefined, 'A'.repeat(43), '']) {
        const b = new Browser();
        await b.fetch(`${s.base}/login`);
        const res = await b.fetch(`${s.base}/login`, { form: withToken({ username: 'alice', password: PASSWORD, return_to: '/account/applications' }, tok) });
        assert.equal(res.status, 400, String(tok));
        assert.match(res.body, /The form you submitted has expired/);
        assert.equal(b.jar.has('__Host-sleeve-session'), false);
        assert.equal((await b.fetch(`${s.base}/account/applications`)).status, 303);
      }
      // Without any CSRF cookie at all, even a token-shaped field is refused.
      const res = await request(`${s.base}/login`, { form: { csrf_token: 'A'.repeat(43), username: 'alice', password: PASSWORD } });
      assert.equal(res.status, 400);
      assert.ok(!setCookies(res).some((c) => c.startsWith('__Host-sleeve-session=') && !/Max-Age=0/.test(c)));
    });

    it('consent', async () => {
      const url = authorizeUrl(s.base, { client_id: web.client_id, response_type: 'code', scope: 'profile', redirect_uri: WEB_URI, state: 's' });
      for (const tok of await badTokens()) {
        const res = await alice.fetch(url, { form: withToken({ decision: 'allow' }, tok) });
        assert.equal(res.status, 400, String(tok));
        assert.equal(res.headers.location, undefined);
        assert.ok(!res.body.includes('name="code"'));
        assert.match(res.body, /has expired/);
        assert.ok(isConsent({ ...res, status: 200 }), 'the consent page is shown again');
      }
      assert.ok(isConsent(await alice.fetch(url)), 'nothing was granted: still asked');
    });

    it('logout', async () => {
      for (const tok of await badTokens()) {
        const res = await alice.fetch(`${s.base}/logout`, { form: withToken({}, tok) });
        assert.equal(res.status, 303);
        assert.equal((await list()).status, 200, `still signed in after ${String(tok)}`);
      }
    });

    it('register', async () => {
      for (const tok of await badTokens()) {
        const res = await alice.fetch(`${s.base}/account/applications/register`, { form: withToken({ name: 'CSRF App', kind: 'public', redirect_uri: '' }, tok) });
        assert.equal(res.status, 400);
        assert.ok(!/Client secret/.test(res.body));
      }
      assert.ok(!(await list()).body.includes('CSRF App'));
    });

    it('edit', async () => {
      const id = await appId('Test Web');
      for (const tok of await badTokens()) {
        const res = await alice.fetch(`${s.base}/account/applications/edit/${id}`, { form: withToken({ name: 'Hijacked', redirect_uri: 'https://evil.example/cb' }, tok) });
        assert.equal(res.status, 400);
      }
      const page = await list();
      assert.ok(!page.body.includes('Hijacked'));
      assert.ok(isConsent(await alice.fetch(authorizeUrl(s.base, { client_id: web.client_id, response_type: 'code', scope: 'profile', redirect_uri: WEB_URI }))));
    });

    it('reset secret', async () => {
      const id = await appId('Test Desktop');
      for (const tok of await badTokens()) {
        const res = await alice.fetch(`${s.base}/account/applications/reset-secret/${id}`, { form: withToken({}, tok) });
        assert.equal(res.status, 400);
        assert.ok(!/Client secret/.test(res.body), 'no new secret');
      }
      const check = await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', client_id: desktop.client_id, client_secret: desktop.client_secret } });
      assert.equal(check.status, 200, 'the old secret still works');
    });

    it('remove', async () => {
      const id = await appId('Test Desktop');
      for (const tok of await badTokens()) {
        assert.equal((await alice.fetch(`${s.base}/account/applications/remove/${id}`, { form: withToken({}, tok) })).status, 400);
      }
      assert.ok((await list()).body.includes('Test Desktop'));
    });

    it('revoke grant', async () => {
      const tokens = await grant(alice, s.base, desktop, { redirect_uri: OOB });
      keepTokens(tokens);
      const page = await list();
      const grantId = /\/account\/applications\/revoke\/(\d+)/.exec(page.body)?.[1];
      assert.ok(grantId);
      for (const tok of await badTokens()) {
        assert.equal((await alice.fetch(`${s.base}/account/applications/revoke/${grantId}`, { form: withToken({}, tok) })).status, 400);
      }
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
      assert.equal((await refresh(s.base, desktop, tokens.refresh_token as string)).status, 200);
    });
  });

  describe('pages cannot be framed and run no script', () => {
    it('sends X-Frame-Options: DENY and a CSP with frame-ancestors none on every page', async () => {
      const tokens = await grant(alice, s.base, desktop, { redirect_uri: OOB });
      keepTokens(tokens);
      const oobRes = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB });
      keep(codeOf(oobRes));
      const pages: [string, Promise<HttpsResponse>][] = [
        ['home', request(`${s.base}/`)],
        ['login', request(`${s.base}/login`)],
        ['interstitial', request(authorizeUrl(s.base, { client_id: web.client_id }))],
        ['consent', alice.fetch(authorizeUrl(s.base, { client_id: web.client_id, response_type: 'code', scope: 'profile', redirect_uri: WEB_URI }))],
        ['error', alice.fetch(authorizeUrl(s.base, { client_id: 'nope', response_type: 'code', scope: 'profile', redirect_uri: WEB_URI }))],
        ['oob', alice.fetch(String(oobRes.headers.location))],
        ['applications', list()],
        ['register', alice.fetch(`${s.base}/account/applications/register`)],
        ['not found', request(`${s.base}/no/such/page`)],
        ['profile', request(`${s.base}/user/alice`)],
      ];
      for (const [name, pending] of pages) {
        const res = await pending;
        assert.ok(res.status < 500, name);
        assert.match(String(res.headers['content-type']), /^text\/html/, name);
        assert.equal(res.headers['x-frame-options'], 'DENY', name);
        const csp = String(res.headers['content-security-policy']);
        assert.match(csp, /frame-ancestors 'none'/, name);
        assert.match(csp, /default-src 'none'/, name);
        assert.doesNotMatch(csp, /script-src|unsafe-inline|unsafe-eval/, `${name}: no script allowed`);
        assert.doesNotMatch(res.body, /<script/i, name);
        assert.match(String(res.headers['strict-transport-security']), /max-age=\d+/, name);
        assert.equal(res.headers['x-content-type-options'], 'nosniff', name);
      }
    });
  });

  describe('HTML escaping', () => {
    it(`escapes an application named ${XSS} on the consent, oob, form_post, declined, applications and confirmation pages`, async () => {
      const p = { client_id: xss.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB };
      const consent = await alice.fetch(authorizeUrl(s.base, p));
      assert.ok(isConsent(consent));
      const oob = await authorize(alice, s.base, p);
      keep(codeOf(oob));
      const oobPage = await alice.fetch(String(oob.headers.location));
      const formPost = await authorize(alice, s.base, { ...p, redirect_uri: 'http://127.0.0.1:5678/cb', response_mode: 'form_post' });
      assert.equal(formPost.status, 200);
      keep(codeOf(formPost));
      const tokens = await grant(alice, s.base, xss, { redirect_uri: OOB });
      keepTokens(tokens);
      const apps = await list();
      const id = await appId(XSS);
      const edit = await alice.fetch(`${s.base}/account/applications/edit/${id}`);
      const remove = await alice.fetch(`${s.base}/account/applications/remove/${id}`);
      const reset = await alice.fetch(`${s.base}/account/applications/reset-secret/${id}`);
      const grantId = /\/account\/applications\/revoke\/(\d+)/.exec(apps.body.split(ESCAPED_XSS)[1] ?? '')?.[1];
      const revokePage = await alice.fetch(`${s.base}/account/applications/revoke/${grantId}`);
      const denied = await authorize(alice, s.base, p, 'deny');
      const declined = await alice.fetch(new URL(String(denied.headers.location), s.base).href);
      const pages = [['consent', consent], ['oob', oobPage], ['form_post', formPost], ['applications', apps], ['edit', edit], ['remove', remove], ['reset', reset], ['revoke', revokePage], ['declined', declined]] as const;
      for (const [name, res] of pages) {
        assert.ok(!res.body.includes(XSS), `${name} has the raw name`);
        assert.ok(res.body.includes(ESCAPED_XSS), `${name} shows the escaped name`);
      }
      assert.ok(apps.body.split(ESCAPED_XSS).length >= 3, 'in both the authorized and the developer list');
    });

    it('escapes state, redirect URIs and typed-in values', async () => {
      const evil = '"><script>alert(2)</script>';
      const oob = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB, state: evil });
      const oobPage = await alice.fetch(String(oob.headers.location));
      keep(codeOf(oob));
      const uri = `http://127.0.0.1:5678/cb?q=${evil}`;
      const formPost = await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: uri, state: evil, response_mode: 'form_post' });
      keep(codeOf(formPost));
      assert.equal(formPost.status, 200);
      assert.ok(formPost.body.includes(`action="${escapeHtml(uri)}"`), 'the form action is escaped');
      const register = await alice.fetch(`${s.base}/account/applications/register`, { form: { csrf_token: await csrfOf(), name: evil, kind: 'confidential', redirect_uri: evil } });
      assert.equal(register.status, 400);
      const login = await tryLogin(s.base, evil, 'wrong password', { 'x-forwarded-for': '192.0.2.77' });
      assert.equal(login.status, 400);
      for (const [name, res] of [['oob', oobPage], ['form_post', formPost], ['register', register], ['login', login]] as const) {
        assert.ok(!res.body.includes('<script>alert(2)'), `${name} reflects the raw value`);
        assert.ok(res.body.includes(escapeHtml(evil)), `${name} shows the escaped value`);
      }
    });
  });

  describe('sign-in', () => {
    it('sets __Host- cookies that are Secure, HttpOnly and SameSite, without Domain', async () => {
      const b = new Browser();
      const form = await b.fetch(`${s.base}/login`);
      const csrfCookie = setCookies(form).find((c) => c.startsWith('__Host-sleeve-csrf='));
      assert.ok(csrfCookie, 'a CSRF cookie');
      for (const attr of ['Path=/', 'Secure', 'HttpOnly', 'SameSite=Strict']) assert.ok(csrfCookie.split('; ').includes(attr), `${attr} in ${csrfCookie}`);
      const res = await b.fetch(`${s.base}/login`, { form: { csrf_token: Browser.csrf(form), username: 'alice', password: PASSWORD, return_to: '/account/applications' } });
      assert.equal(res.status, 303);
      const session = setCookies(res).find((c) => c.startsWith('__Host-sleeve-session='));
      assert.ok(session, 'a session cookie');
      const attrs = session.split('; ');
      for (const attr of ['Path=/', 'Secure', 'HttpOnly', 'SameSite=Lax']) assert.ok(attrs.includes(attr), `${attr} in ${session}`);
      assert.ok(!/domain=/i.test(session));
      const maxAge = Number(/Max-Age=(\d+)/.exec(session)?.[1]);
      assert.equal(maxAge, 14 * 24 * 3600);
      assert.match(session.split(';')[0]?.split('=')[1] ?? '', /^[A-Za-z0-9_-]{43,}$/, 'a 256-bit session id');
      keepCookies(b);
    });

    it('gives a new session id at every sign-in and ends the old one', async () => {
      const b = await signIn(s.base, 'bob');
      const first = b.jar.get('__Host-sleeve-session') as string;
      keepCookies(b);
      const res = await b.fetch(`${s.base}/login`, { form: { csrf_token: b.jar.get('__Host-sleeve-csrf') as string, username: 'bob', password: PASSWORD, return_to: '/' } });
      assert.equal(res.status, 303);
      const second = b.jar.get('__Host-sleeve-session') as string;
      keepCookies(b);
      assert.notEqual(second, first);
      const old = await request(`${s.base}/account/applications`, { headers: { cookie: `__Host-sleeve-session=${first}` } });
      assert.equal(old.status, 303, 'the old session no longer works');
      assert.equal((await b.fetch(`${s.base}/account/applications`)).status, 200);
    });

    it('logout ends the session on the server', async () => {
      const b = await signIn(s.base, 'bob');
      keepCookies(b);
      const sessionId = b.jar.get('__Host-sleeve-session') as string;
      const page = await b.fetch(`${s.base}/account/applications`);
      const res = await b.fetch(`${s.base}/logout`, { form: { csrf_token: Browser.csrf(page) } });
      assert.equal(res.status, 303);
      assert.ok(setCookies(res).some((c) => c.startsWith('__Host-sleeve-session=;') && /Max-Age=0/.test(c)), 'the cookie is cleared');
      const replay = await request(`${s.base}/account/applications`, { headers: { cookie: `__Host-sleeve-session=${sessionId}` } });
      assert.equal(replay.status, 303, 'a copy of the old cookie no longer works');
      assert.match(String(replay.headers.location), /^\/login/);
    });

    it('returns only to paths of this site after signing in', async () => {
      for (const returnTo of ['https://evil.example/', '//evil.example/x', '/\\evil.example', 'javascript:alert(1)', '/\n/evil']) {
        const b = new Browser();
        const form = await b.fetch(`${s.base}/login`);
        const res = await b.fetch(`${s.base}/login`, { form: { csrf_token: Browser.csrf(form), username: 'bob', password: PASSWORD, return_to: returnTo } });
        keepCookies(b);
        assert.equal(res.status, 303);
        assert.equal(res.headers.location, '/account/applications', JSON.stringify(returnTo));
      }
    });

    it('locks an account after 5 failures: 429 with Retry-After even with the right password', async () => {
      const from = { 'x-forwarded-for': '198.51.100.1' };
      for (let i = 0; i < 5; i++) {
        const res = await tryLogin(s.base, 'carol', `wrong ${i}`, from);
        assert.equal(res.status, 400);
        assert.match(res.body, /Incorrect user name or password/);
      }
      for (const headers of [from, { 'x-forwarded-for': '198.51.100.2' }, { 'x-forwarded-for': '198.51.100.3' }]) {
        const res = await tryLogin(s.base, 'CAROL', PASSWORD, headers);
        assert.equal(res.status, 429, JSON.stringify(headers));
        const retry = Number(res.headers['retry-after']);
        assert.ok(Number.isInteger(retry) && retry > 0 && retry <= 900, `Retry-After ${res.headers['retry-after']}`);
        assert.ok(!setCookies(res).some((c) => c.startsWith('__Host-sleeve-session=')), 'no session');
      }
      const other = await tryLogin(s.base, 'dave', PASSWORD, from);
      assert.equal(other.status, 303, 'other accounts from the same address still sign in');
    });

    it('locks an address after 20 failures, whatever the names', async () => {
      const from = { 'x-forwarded-for': '203.0.113.9' };
      for (let i = 0; i < 20; i++) {
        const res = await tryLogin(s.base, `ghost${i}`, 'wrong', from);
        assert.equal(res.status, 400, `attempt ${i}`);
      }
      const locked = await tryLogin(s.base, 'dave', PASSWORD, from);
      assert.equal(locked.status, 429);
      assert.ok(Number(locked.headers['retry-after']) > 0);
      const elsewhere = await tryLogin(s.base, 'dave', PASSWORD, { 'x-forwarded-for': '203.0.113.10' });
      assert.equal(elsewhere.status, 303, 'the same account from another address');
    });

    it('counts concurrent failures too', async () => {
      const from = { 'x-forwarded-for': '203.0.113.50' };
      const results = await Promise.all(Array.from({ length: 8 }, (_, i) => tryLogin(s.base, 'bob', `wrong ${i}`, from)));
      assert.ok(results.every((r) => r.status === 400 || r.status === 429), results.map((r) => `${r.status} ${r.body.slice(0, 2000)}`).join('\n'));
      const res = await tryLogin(s.base, 'bob', PASSWORD, { 'x-forwarded-for': '203.0.113.51' });
      assert.equal(res.status, 429, 'bob is locked after 8 failures sent at once');
    });
  });

  describe('HTTPS only', () => {
    let tokens: Tokens;
    before(async () => {
      tokens = await grant(alice, s.base, desktop, { redirect_uri: OOB });
      keepTokens(tokens);
    });

    it('answers plain HTTP on the auth port 400 invalid_request (JSON on the OAuth endpoints)', async () => {
      for (const [method, p] of [
        ['POST', '/oauth2/token'],
        ['POST', '/oauth2/revoke'],
        ['GET', '/oauth2/userinfo'],
        ['POST', '/oauth2/introspect'],
        ['GET', '/.well-known/oauth-authorization-server'],
      ]) {
        const res = await plainHttp(s.base, p as string, {
          method,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: method === 'POST' ? new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token as string, client_id: desktop.client_id, client_secret: desktop.client_secret }).toString() : undefined,
        });
        assert.equal(res.status, 400, p);
        assert.match(String(res.headers['content-type']), /^application\/json/, p);
        assert.deepEqual(JSON.parse(res.body), HTTPS_ONLY, p);
        assert.ok(!res.body.includes('access_token'), p);
      }
      const page = await plainHttp(s.base, `/oauth2/authorize?client_id=${web.client_id}`);
      assert.equal(page.status, 400);
      assert.match(String(page.headers['content-type']), /^text\/html/);
      assert.match(page.body, /Invalid protocol, only HTTPS is allowed/);
    });

    it('ignores bearer tokens and credentials sent over plain HTTP', async () => {
      const res = await plainHttp(s.base, '/oauth2/userinfo', { headers: { authorization: `Bearer ${tokens.access_token}` } });
      assert.equal(res.status, 400);
      assert.ok(!res.body.includes('alice'));
      const query = await plainHttp(s.base, `/oauth2/userinfo?access_token=${tokens.access_token}`);
      assert.equal(query.status, 400);
      assert.ok(!query.body.includes('alice'));
      const rev = await plainHttp(s.base, '/oauth2/revoke', {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: tokens.refresh_token as string, client_id: desktop.client_id, client_secret: desktop.client_secret }).toString(),
      });
      assert.equal(rev.status, 400);
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200, 'the revocation sent over plain HTTP was not honoured');
    });

    it('refuses requests a trusted proxy says came over plain HTTP', async () => {
      const viaHttp = { 'x-forwarded-proto': 'http' };
      const tokenRes = await request(`${s.base}/oauth2/token`, { headers: viaHttp, form: { grant_type: 'refresh_token', refresh_token: tokens.refresh_token as string, client_id: desktop.client_id, client_secret: desktop.client_secret } });
      assert.equal(tokenRes.status, 400);
      assert.deepEqual(tokenRes.json(), HTTPS_ONLY);
      const info = await request(`${s.base}/oauth2/userinfo`, { headers: { ...viaHttp, authorization: `Bearer ${tokens.access_token}` } });
      assert.equal(info.status, 400);
      assert.deepEqual(info.json(), HTTPS_ONLY);
      const page = await alice.fetch(`${s.base}/account/applications`, { headers: viaHttp });
      assert.equal(page.status, 400);
      assert.match(page.body, /only HTTPS is allowed/);
      const ok = await request(`${s.base}/oauth2/userinfo`, { headers: { 'x-forwarded-proto': 'https', authorization: `Bearer ${tokens.access_token}` } });
      assert.equal(ok.status, 200);
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
    });
  });

  describe('request size', () => {
    it('answers bodies over 64 KiB with a 4xx, never a 5xx, and keeps serving', async () => {
      const form = 'application/x-www-form-urlencoded';
      const big = `grant_type=authorization_code&code=${'a'.repeat(70 * 1024)}`;
      // Just over the limit: the whole body fits in the socket buffers, so the answer is always read.
      const justOver: [string, Promise<{ status: number | 'reset'; body: string }>][] = [
        ['token', postLarge(`${s.base}/oauth2/token`, form, big)],
        ['revoke', postLarge(`${s.base}/oauth2/revoke`, form, big)],
        ['userinfo', postLarge(`${s.base}/oauth2/userinfo`, form, big)],
        ['introspect', postLarge(`${s.base}/oauth2/introspect`, form, big)],
        ['login', postLarge(`${s.base}/login`, form, big)],
        ['register', postLarge(`${s.base}/account/applications/register`, form, big, { headers: { cookie: [...alice.jar].map(([k, v]) => `${k}=${v}`).join('; ') } })],
        ['consent', postLarge(authorizeUrl(s.base, { client_id: web.client_id, response_type: 'code', scope: 'profile', redirect_uri: WEB_URI }), form, big, { headers: { cookie: [...alice.jar].map(([k, v]) => `${k}=${v}`).join('; ') } })],
        ['json', postLarge(`${s.base}/oauth2/token`, 'application/json', JSON.stringify({ x: 'a'.repeat(70 * 1024) }))],
        ['multipart', postLarge(`${s.base}/oauth2/token`, 'multipart/form-data; boundary=x', `--x\r\n${'a'.repeat(70 * 1024)}`)],
        ['chunked form', postLarge(`${s.base}/oauth2/token`, form, big, { chunked: true })],
        ['chunked octets', postLarge(`${s.base}/oauth2/revoke`, 'application/octet-stream', big, { chunked: true })],
      ];
      for (const [name, pending] of justOver) {
        const res = await pending;
        assert.ok(typeof res.status === 'number' && res.status >= 400 && res.status < 500, `${name}: ${res.status} ${res.body.slice(0, 200)}`);
      }
      // Far over it: a 4xx, or the connection closed on the sender; never a 5xx.
      for (const [name, pending] of [
        ['token 4 MiB', postLarge(`${s.base}/oauth2/token`, form, Buffer.alloc(4 << 20, 'a'))],
        ['json 4 MiB chunked', postLarge(`${s.base}/oauth2/token`, 'application/json', Buffer.alloc(4 << 20, 'a'), { chunked: true })],
      ] as const) {
        const res = await pending;
        assert.ok(res.status === 'reset' || (res.status >= 400 && res.status < 500), `${name}: ${res.status} ${res.body.slice(0, 200)}`);
      }
      const longQuery = await postLarge(`${s.base}/oauth2/authorize?state=${'a'.repeat(70 * 1024)}`, form, '', { method: 'GET' });
      assert.ok(longQuery.status === 'reset' || (longQuery.status >= 400 && longQuery.status < 500), `long query: ${longQuery.status}`);
      assert.equal((await request(`${s.base}/.well-known/oauth-authorization-server`)).status, 200);
    });
  });

  describe('secrets at rest and in the logs', () => {
    before(async () => {
      // One more complete flow of each kind, so that every sort of secret has been through the server.
      const web1 = await authorize(alice, s.base, { client_id: web.client_id, response_type: 'code', scope: 'profile email', redirect_uri: WEB_URI, access_type: 'offline', approval_prompt: 'force' });
      const code = codeOf(web1);
      keep(code);
      const ex = await exchange(s.base, web, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      keepTokens(ex.json());
      const renewed = await refresh(s.base, web, ex.json().refresh_token);
      keepTokens(renewed.json());
      await request(`${s.base}/oauth2/revoke`, { form: { token: renewed.json().access_token, client_id: web.client_id, client_secret: web.client_secret } });
      await request(`${s.base}/oauth2/userinfo?access_token=${ex.json().access_token}`);
      await request(`${s.base}/oauth2/introspect`, { form: { token: ex.json().refresh_token, client_id: web.client_id, client_secret: web.client_secret } });
      // Each answers 303; the applications page it leads to shows the secret once.
      const shownSecret = async () => {
        const secret = /<dt>Client secret<\/dt><dd><code>([^<]+)<\/code>/.exec((await list()).body)?.[1];
        assert.ok(secret, 'a secret is shown');
        return secret;
      };
      assert.equal((await alice.fetch(`${s.base}/account/applications/register`, { form: { csrf_token: await csrfOf(), name: 'Secret Keeper', kind: 'public', redirect_uri: '' } })).status, 303);
      keep(await shownSecret());
      assert.equal((await alice.fetch(`${s.base}/account/applications/reset-secret/${await appId('Secret Keeper')}`, { form: { csrf_token: await csrfOf() } })).status, 303);
      keep(await shownSecret());
      keepCookies(alice);
    });

    it('logs none of them (SLEEVE_LOG_LEVEL=debug)', () => {
      const logs = s.logs();
      assert.ok(logs.length > 0, 'something was logged');
      for (const line of logs.split('\n').filter((l) => l !== '')) assert.doesNotThrow(() => JSON.parse(line), line);
      assert.ok(secrets.size >= 20, `collected ${secrets.size} secrets`);
      for (const secret of secrets) assert.ok(!logs.includes(secret), `a secret in the logs: ${secret.slice(0, 6)}…`);
    });

    it('stores none of them in plaintext', async () => {
      let stored: string;
      if (DIALECT === 'sqlite') {
        const file = path.join(t.dir, 'sleeve.db');
        const parts = await Promise.all([file, `${file}-wal`, `${file}-journal`].filter((f) => existsSync(f)).map((f) => readFile(f)));
        stored = Buffer.concat(parts).toString('latin1');
      } else {
        const client = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
        await client.connect();
        try {
          const tables = await client.query<{ table_name: string }>("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'");
          const dumps: string[] = [];
          for (const { table_name } of tables.rows) dumps.push(JSON.stringify((await client.query(`SELECT * FROM "${table_name}"`)).rows));
          stored = dumps.join('\n');
        } finally {
          await client.end();
        }
      }
      assert.ok(stored.includes('Secret Keeper') && stored.includes(web.client_id), 'the search covers the stored data');
      for (const secret of secrets) assert.ok(!stored.includes(secret), `stored in plaintext: ${secret.slice(0, 6)}…`);
    });
  });
});

/*
 * The device authorization grant (RFC 8628) over HTTPS: the device authorization endpoint,
 * the device page (signed in, consent, Post/Redirect/Get), every polling answer of §3.5 with
 * time moved by a ManualClock, single use, the id_token for `openid`, and the throttling of
 * user codes per address (IPv6 per /64) and per account, with their audit lines, and the global
 * bound that slows answers down rather than refusing a valid code.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import Database from 'better-sqlite3';
import { createLocalJWKSet, jwtVerify, type JSONWebKeySet } from 'jose';
import pg from 'pg';
import { addApp, addUser, Browser, PASSWORD, request, token, type HttpsResponse } from '../helpers/auth.js';
import { ManualClock } from '../helpers/clock.js';
import { DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { assertOAuthError, signIn, startLoggedAuthServer, userinfoStatus, type Client } from './support.js';

const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const WEB_URI = 'https://tv.example/callback';
const USER_CODE_RE = /^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/;

interface DeviceCodes {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

describe(`device authorization grant (${DIALECT})`, () => {
  let t: TestEnv;
  let s: Awaited<ReturnType<typeof startLoggedAuthServer>>;
  const clock = new ManualClock();
  let alice: Browser;
  let tv: Client;
  let web: Client;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_TRUST_PROXY: '127.0.0.1' });
    s = await startLoggedAuthServer(t, { SLEEVE_LOG_LEVEL: 'info' }, clock);
    await Promise.all([addUser(t, 'alice'), addUser(t, 'bob')]);
    [tv, web] = await Promise.all([addApp(t, 'alice', 'public', undefined, 'Living Room Tagger'), addApp(t, 'alice', 'confidential', WEB_URI, 'Server Tagger')]);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const authorizeDevice = (form: Record<string, string>, headers: Record<string, string> = {}) => request(`${s.base}/oauth2/device_authorization`, { form, headers });
  async function codes(app: Client = tv, scope = 'profile', confidential = false): Promise<DeviceCodes> {
    const res = await authorizeDevice({ client_id: app.client_id, scope, ...(confidential ? { client_secret: app.client_secret } : {}) });
    assert.equal(res.status, 200, res.body);
    return res.json();
  }
  const poll = (c: DeviceCodes, app: Client = tv, extra: Record<string, string> = {}) => token(s.base, { grant_type: GRANT, device_code: c.device_code, client_id: app.client_id, ...extra });
  const page = (b: Browser, userCode: string, from?: string) =>
    b.fetch(`${s.base}/oauth2/device?${new URLSearchParams({ user_code: userCode })}`, from === undefined ? {} : { headers: { 'x-forwarded-for': from } });
  /** Enters the code on the device page, then presses a button of the consent page; returns the POST's answer. */
  async function decide(b: Browser, userCode: string, decision: 'allow' | 'deny', from?: string): Promise<HttpsResponse> {
    const consent = await page(b, userCode, from);
    assert.equal(consent.status, 200, consent.body.slice(0, 600));
    assert.match(consent.body, /is requesting permission to/);
    return b.fetch(`${s.base}/oauth2/device?${new URLSearchParams({ user_code: userCode })}`, {
      form: { csrf_token: Browser.csrf(consent), decision },
      headers: from === undefined ? {} : { 'x-forwarded-for': from },
    });
  }
  /** The audit lines of an event that satisfy `enough` (log lines arrive asynchronously: waited for, up to 3 s). */
  const audits = async (event: string, enough: (lines: Record<string, string>[]) => boolean) => {
    const read = async () =>
      s
        .logs()
        .split('\n')
        .filter((l) => l.includes(`"audit":"${event}"`))
        .map((l) => JSON.parse(l) as Record<string, string>);
    return (await pollUntil(read, enough)).value;
  };

  it('is in both metadata documents, with its grant type', async () => {
    for (const doc of ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server']) {
      const m = (await request(`${s.base}${doc}`)).json();
      assert.equal(m.device_authorization_endpoint, `${s.base}/oauth2/device_authorization`, doc);
      assert.ok(m.grant_types_supported.includes(GRANT), doc);
    }
  });

  it('answers a device authorization request with both codes, the page, the lifetime and the interval', async () => {
    const res = await authorizeDevice({ client_id: tv.client_id, scope: 'profile musicbrainz:tag' });
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers['cache-control']), /no-store/);
    const c = res.json() as DeviceCodes;
    assert.match(c.device_code, /^[A-Za-z0-9_-]{43}$/);
    assert.match(c.user_code, USER_CODE_RE);
    assert.equal(c.verification_uri, `${s.base}/oauth2/device`);
    assert.equal(c.verification_uri_complete, `${s.base}/oauth2/device?user_code=${c.user_code}`);
    assert.equal(c.expires_in, 600);
    assert.equal(c.interval, 5);
    const again = await codes();
    assert.notEqual(again.user_code, c.user_code);
    assert.notEqual(again.device_code, c.device_code);
  });

  it('refuses bad device authorization requests with RFC 6749 errors', async () => {
    assertOAuthError(await authorizeDevice({ client_id: tv.client_id, scope: 'profile nope' }), 400, 'invalid_scope', 'Unsupported scope: nope');
    assertOAuthError(await authorizeDevice({ client_id: tv.client_id }), 400, 'invalid_scope', 'A scope is required');
    assertOAuthError(await authorizeDevice({ client_id: tv.client_id, scope: 'profile', client_secret: 'wrong' }), 401, 'invalid_client');
    // A confidential client authenticates; its client_id alone is not enough.
    assertOAuthError(await authorizeDevice({ client_id: web.client_id, scope: 'profile' }), 401, 'invalid_client');
    assertOAuthError(await authorizeDevice({ client_id: web.client_id, scope: 'profile', client_secret: 'x'.repeat(43) }), 401, 'invalid_client');
    assertOAuthError(await authorizeDevice({ client_id: 'no-such-client', scope: 'profile' }), 401, 'invalid_client');
    assertOAuthError(await authorizeDevice({ scope: 'profile' }), 401, 'invalid_client');
    assertOAuthError(await authorizeDevice([['client_id', tv.client_id], ['scope', 'profile'], ['scope', 'email']] as unknown as Record<string, string>), 400, 'invalid_request', 'Parameter is included more than once in the request: scope');
    assertOAuthError(await request(`${s.base}/oauth2/device_authorization?client_id=${tv.client_id}&scope=profile`), 400, 'invalid_request', 'Only POST requests are allowed');
    const basic = Buffer.from(`${web.client_id}:${web.client_secret}`).toString('base64');
    assert.equal((await authorizeDevice({ scope: 'profile' }, { authorization: `Basic ${basic}` })).status, 200, 'HTTP Basic works');
    assert.equal((await authorizeDevice({ client_id: tv.client_id, client_secret: tv.client_secret, scope: 'profile' })).status, 200, 'a public client may send its secret');
  });

  it('public client: pending until the user approves on the page (code typed in lower case without the dash), then tokens, once', async () => {
    const c = await codes(tv, 'profile');
    assertOAuthError(await poll(c), 400, 'authorization_pending');
    clock.advance(5000);
    const typed = c.user_code.replace('-', ' ').toLowerCase();
    const consent = await page(alice, typed);
    assert.equal(consent.status, 200, consent.body.slice(0, 500));
    assert.match(consent.body, /Living Room Tagger/);
    assert.match(consent.body, /View your public account information/);
    assert.ok(consent.body.includes(`<code>${c.user_code}</code>`), 'the page shows the code as the device does');
    assert.match(consent.body, /the access lasts until you revoke it/, 'device grants are offline, and the page says so');
    const decided = await alice.fetch(`${s.base}/oauth2/device?${new URLSearchParams({ user_code: typed })}`, { form: { csrf_token: Browser.csrf(consent), decision: 'allow' } });
    assert.equal(decided.status, 303);
    const done = await alice.fetch(`${s.base}${String(decided.headers.location)}`);
    assert.equal(done.status, 200);
    assert.match(done.body, /You gave <strong>Living Room Tagger<\/strong> access/);

    const res = await poll(c);
    assert.equal(res.status, 200, res.body);
    assert.match(String(res.headers['cache-control']), /no-store/);
    const tokens = res.json();
    assert.equal(tokens.token_type, 'Bearer');
    assert.equal(tokens.expires_in, 3600);
    assert.equal(typeof tokens.refresh_token, 'string');
    assert.equal(tokens.id_token, undefined, 'no openid, no id_token');
    assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
    const refreshed = await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tv.client_id, client_secret: tv.client_secret });
    assert.equal(refreshed.status, 200, refreshed.body);

    clock.advance(5000);
    assertOAuthError(await poll(c), 400, 'invalid_grant', 'The device code has already been used');
    const reused = await page(alice, c.user_code);
    assert.equal(reused.status, 400);
    assert.match(reused.body, /This code has already been used/);
    const [line] = (await audits('device.approved', (l) => l.length > 0)).filter((a) => a.clientId === tv.client_id);
    assert.equal(line?.user, 'alice');
    assert.equal(line?.scope, 'profile');
    assert.equal(line?.via, 'oauth2/device');
  });

  it('a database failure while the tokens are issued leaves the approved code usable; of simultaneous polls, one gets tokens', async () => {
    const c = await codes();
    assert.equal((await decide(alice, c.user_code, 'allow')).status, 303);
    const failed = await failingCodeInserts(t, () => poll(c));
    assert.ok(failed.status >= 500, `the failure is the server's: ${failed.status}`);
    clock.advance(5000);
    const retried = await poll(c);
    assert.equal(retried.status, 200, retried.body);
    assert.equal(await userinfoStatus(s.base, retried.json().access_token), 200);
    assertOAuthError(await poll(c), 400, 'invalid_grant', 'The device code has already been used');

    const raced = await codes();
    assert.equal((await decide(alice, raced.user_code, 'allow')).status, 303);
    const answers = await Promise.all([poll(raced), poll(raced), poll(raced)]);
    const won = answers.filter((r) => r.status === 200);
    assert.equal(won.length, 1, answers.map((r) => `${r.status} ${r.body}`).join('\n'));
    for (const r of answers.filter((a) => a.status !== 200)) assertOAuthError(r, 400, 'invalid_grant');
    assert.equal(await userinfoStatus(s.base, (won[0] as HttpsResponse).json().access_token), 200);
  });

  it('slow_down when polled sooner than the interval, which then grows by 5 seconds', async () => {
    const c = await codes();
    assertOAuthError(await poll(c), 400, 'authorization_pending');
    clock.advance(1000);
    assertOAuthError(await poll(c), 400, 'slow_down', /wait 10 seconds/);
    clock.advance(9000);
    assertOAuthError(await poll(c), 400, 'slow_down', /wait 15 seconds/);
    clock.advance(15000);
    assertOAuthError(await poll(c), 400, 'authorization_pending');
    clock.advance(14000);
    assertOAuthError(await poll(c), 400, 'slow_down', /wait 20 seconds/);
  });

  it('of two polls at once, one is slow_down: the interval grows once', async () => {
    const c = await codes();
    const answers = await Promise.all([poll(c), poll(c)]);
    assert.deepEqual(answers.map((r) => r.json().error).sort(), ['authorization_pending', 'slow_down']);
    clock.advance(9000);
    assertOAuthError(await poll(c), 400, 'slow_down', 'Polling too fast: wait 15 seconds between requests');
  });

  it('access_denied after "No thanks", and the page says so', async () => {
    const c = await codes();
    const res = await decide(alice, c.user_code, 'deny');
    assert.equal(res.status, 303);
    const done = await alice.fetch(`${s.base}${String(res.headers.location)}`);
    assert.match(done.body, /You did not give <strong>Living Room Tagger<\/strong> access/);
    assertOAuthError(await poll(c), 400, 'access_denied');
    clock.advance(10_000);
    assertOAuthError(await poll(c), 400, 'access_denied');
    const denied = await audits('device.denied', (l) => l.length > 0);
    assert.ok(denied.some((a) => a.clientId === tv.client_id && a.user === 'alice'));
    // Another user cannot read what alice decided.
    const bob = await signIn(s.base, 'bob');
    const other = await bob.fetch(`${s.base}${String(res.headers.location)}`);
    assert.doesNotMatch(other.body, /Living Room Tagger/);
    assert.match(other.body, /Enter the code/);
  });

  it('expired_token after the lifetime, for pending and approved codes; the page says the code expired', async () => {
    const pending = await codes();
    const approved = await codes();
    assert.equal((await decide(alice, approved.user_code, 'allow')).status, 303);
    clock.advance(600_000);
    assertOAuthError(await poll(pending), 400, 'expired_token');
    assertOAuthError(await poll(approved), 400, 'expired_token');
    const late = await page(alice, pending.user_code);
    assert.equal(late.status, 400);
    assert.match(late.body, /This code has expired/);
  });

  it('approval a moment before expiry still works; after it, the consent cannot be given', async () => {
    const c = await codes();
    const consent = await page(alice, c.user_code);
    clock.advance(600_000);
    const res = await alice.fetch(`${s.base}/oauth2/device?${new URLSearchParams({ user_code: c.user_code })}`, { form: { csrf_token: Browser.csrf(consent), decision: 'allow' } });
    assert.equal(res.status, 400);
    assert.match(res.body, /This code has expired/);
    assertOAuthError(await poll(c), 400, 'expired_token');
  });

  it('confidential client with openid: it authenticates to poll, gets an id_token from the code path, and the consent says offline', async () => {
    const c = await codes(web, 'openid profile', true);
    assertOAuthError(await poll(c, web), 401, 'invalid_client');
    assertOAuthError(await poll(c, web, { client_secret: 'x'.repeat(43) }), 401, 'invalid_client');
    const consent = await page(alice, c.user_code);
    assert.match(consent.body, /Keep this access when you are not using it/);
    assert.match(consent.body, /Know who you are/);
    assert.equal((await decide(alice, c.user_code, 'allow')).status, 303);
    const res = await poll(c, web, { client_secret: web.client_secret });
    assert.equal(res.status, 200, res.body);
    const tokens = res.json();
    assert.equal(typeof tokens.refresh_token, 'string');
    const jwks = (await request(`${s.base}/.well-known/jwks.json`)).json() as JSONWebKeySet;
    const { payload } = await jwtVerify(tokens.id_token, createLocalJWKSet(jwks), { issuer: s.base, audience: web.client_id, currentDate: new Date(clock.now()) });
    assert.equal(payload.sub, 'alice');
    assert.equal(typeof payload.at_hash, 'string');
    assert.ok(typeof payload.auth_time === 'number' && payload.auth_time <= (payload.iat as number));
  });

  it("refuses another client's device code, a malformed one and a missing one", async () => {
    const c = await codes();
    assertOAuthError(await poll(c, web, { client_secret: web.client_secret }), 400, 'invalid_grant', 'Invalid device code');
    assertOAuthError(await poll({ ...c, device_code: 'not a code' }), 400, 'invalid_grant', 'Invalid device code');
    assertOAuthError(await poll({ ...c, device_code: 'A'.repeat(43) }), 400, 'invalid_grant', 'Invalid device code');
    assertOAuthError(await token(s.base, { grant_type: GRANT, client_id: tv.client_id }), 400, 'invalid_request', 'Required parameter is missing: device_code');
    assertOAuthError(await token(s.base, { grant_type: GRANT, device_code: c.device_code }), 401, 'invalid_client');
    // Still pending: none of that touched it.
    assertOAuthError(await poll(c), 400, 'authorization_pending');
  });

  it('the page: signed-out users sign in and come back; a missing CSRF token or decision decides nothing', async () => {
    const c = await codes();
    const b = new Browser();
    const first = await page(b, c.user_code);
    assert.equal(first.status, 303);
    const login = new URL(String(first.headers.location), s.base);
    assert.equal(login.pathname, '/login');
    const back = login.searchParams.get('return_to') as string;
    assert.equal(back, `/oauth2/device?user_code=${encodeURIComponent(c.user_code)}`);
    const form = await b.fetch(`${s.base}/login`);
    const signedIn = await b.fetch(`${s.base}/login`, { form: { csrf_token: Browser.csrf(form), username: 'alice', password: PASSWORD, return_to: back } });
    assert.equal(signedIn.status, 303);
    assert.equal(signedIn.headers.location, back);
    const consent = await b.fetch(`${s.base}${back}`);
    assert.match(consent.body, /is requesting permission to/);

    const url = `${s.base}${back}`;
    const noCsrf = await b.fetch(url, { form: { decision: 'allow' } });
    assert.equal(noCsrf.status, 400);
    assert.match(noCsrf.body, /The form you submitted has expired/);
    const noDecision = await b.fetch(url, { form: { csrf_token: Browser.csrf(consent) } });
    assert.equal(noDecision.status, 400);
    assertOAuthError(await poll(c), 400, 'authorization_pending');
    assert.equal((await b.fetch(url, { form: { csrf_token: Browser.csrf(consent), decision: 'allow' } })).status, 303);
    // A second post (a double tap) finds the code decided.
    const twice = await b.fetch(url, { form: { csrf_token: Browser.csrf(consent), decision: 'deny' } });
    assert.equal(twice.status, 400);
    assert.match(twice.body, /already been used/);
    clock.advance(5000);
    assert.equal((await poll(c)).status, 200, 'the first decision stands');

    const entry = await alice.fetch(`${s.base}/oauth2/device`);
    assert.equal(entry.status, 200);
    assert.match(entry.body, /name="user_code"/);
    const malformed = await page(alice, 'AEIO-U123');
    assert.equal(malformed.status, 400);
    assert.match(malformed.body, /A code has 8 letters/);
  });

  it('a post without a valid CSRF token is refused before the code is looked up: it spends no throttled attempt', async () => {
    const c = await codes();
    const from = '198.51.100.9';
    const wrong = 'BBBB-CCCC';
    for (let i = 0; i < 12; i++) {
      const res = await alice.fetch(`${s.base}/oauth2/device?${new URLSearchParams({ user_code: wrong })}`, { form: { csrf_token: 'forged', decision: 'allow' }, headers: { 'x-forwarded-for': from } });
      assert.equal(res.status, 400, `forged post ${i}`);
      assert.match(res.body, /The form you submitted has expired/);
    }
    assert.equal((await page(alice, c.user_code, from)).status, 200, 'the address is not throttled');
    assert.equal(s.logs().split('\n').filter((l) => l.includes('"audit":"device.code_failed"') && l.includes(from)).length, 0);
  });

  const wrong = (n: number) => `BBBB-${'BCDFGHJKLMNPQRSTVWXZ'[n % 20]}${'BCDFGHJKLMNPQRSTVWXZ'[Math.floor(n / 20) % 20]}BB`;

  it('throttles wrong user codes per client address and per account; each refusal is an audit line', async () => {
    // Windows that earlier tests opened have ended.
    clock.advance(15 * 60 * 1000);
    const c = await codes();
    const from = '198.51.100.7';
    for (let i = 0; i < 10; i++) {
      const res = await page(alice, wrong(i), from);
      assert.equal(res.status, 400, `wrong code ${i}`);
      assert.match(res.body, /There is no such code/);
    }
    const throttled = await page(alice, c.user_code, from);
    assert.equal(throttled.status, 429, 'even the right code, once the address is throttled');
    assert.match(String(throttled.headers['retry-after']), /^\d+$/);
    assert.match(throttled.body, /Too many wrong codes/);
    assert.equal((await page(alice, c.user_code, '198.51.100.8')).status, 429, 'the account is throttled from any address');
    const bob = await signIn(s.base, 'bob');
    assert.equal((await page(bob, c.user_code, from)).status, 429, 'the address is throttled for any account');
    // Another account from another address is not throttled by these; the right code gives its attempt back.
    assert.equal((await page(bob, c.user_code, '198.51.100.8')).status, 200);
    const failed = (await audits('device.code_failed', (l) => l.filter((a) => a.address === from).length >= 12)).filter((a) => a.address === from);
    assert.equal(failed.filter((a) => a.reason === 'unknown').length, 10);
    assert.equal(failed.filter((a) => a.reason === 'throttled').length, 2);
    // An IPv6 client is one address per /64.
    clock.advance(15 * 60 * 1000);
    const later = await codes();
    const carol = await signInAs('carol');
    for (let i = 0; i < 10; i++) assert.equal((await page(carol, wrong(i), `2001:db8:1:2::${i + 1}`)).status, 400);
    assert.equal((await page(bob, later.user_code, '2001:db8:1:2:ffff::1')).status, 429, 'the same /64');
    assert.equal((await page(bob, later.user_code, '2001:db8:1:3::1')).status, 200, 'another /64');
  });

  it('one account from many addresses cannot spend the page for everyone (issue 32)', async () => {
    clock.advance(15 * 60 * 1000);
    const c = await codes();
    const mallory = await signInAs('mallory');
    // Sent at once, from 40 addresses: the account's limit holds under concurrency.
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => page(mallory, wrong(i % 3), `203.0.113.${i + 1}`)));
    assert.equal(results.filter((r) => r.status === 400).length, 10, 'ten wrong codes counted');
    assert.equal(results.filter((r) => r.status === 429).length, 30, 'the rest throttled');
    const bob = await signIn(s.base, 'bob');
    assert.equal((await page(bob, c.user_code, '192.0.2.200')).status, 200, "another user's valid code works");
  });

  it('past the global bound, a signed-in user with a valid code gets a slower answer, not a refusal', async () => {
    clock.advance(15 * 60 * 1000);
    const c = await codes();
    // Everyone's wrong codes together have reached the global bound (1,000 per window).
    await spendGlobalBound(t, clock.now());
    const bob = await signIn(s.base, 'bob');
    const [valid, again, guess] = await Promise.all([page(bob, c.user_code, '192.0.2.201'), page(alice, c.user_code, '192.0.2.202'), page(bob, wrong(7), '192.0.2.201')]);
    assert.equal(valid.status, 200, valid.body.slice(0, 300));
    assert.match(valid.body, /is requesting permission to/);
    assert.equal(again.status, 200);
    assert.equal(guess.status, 400, 'a wrong code is answered (and counted against the account and the address), not refused');
    assert.match(guess.body, /There is no such code/);
    const approved = await decide(bob, c.user_code, 'allow', '192.0.2.201');
    assert.equal(approved.status, 303);
  });

  /** A user signed in (made on first use). */
  async function signInAs(name: string): Promise<Browser> {
    if (!made.has(name)) {
      await addUser(t, name);
      made.add(name);
    }
    return signIn(s.base, name);
  }
  const made = new Set<string>();
});

/** Sets the global count of wrong user codes to its bound, in a window that starts `now`. */
async function spendGlobalBound(t: TestEnv, now: number): Promise<void> {
  if (DIALECT === 'sqlite') {
    const db = new Database(path.join(t.env.SLEEVE_DATA_DIR as string, 'sleeve.db'));
    try {
      db.prepare("INSERT INTO login_throttle (key, attempts, window_start) VALUES ('user_code:all', 1000, ?) ON CONFLICT (key) DO UPDATE SET attempts = 1000, window_start = excluded.window_start").run(now);
    } finally {
      db.close();
    }
    return;
  }
  const c = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
  await c.connect();
  try {
    await c.query("INSERT INTO login_throttle (key, attempts, window_start) VALUES ('user_code:all', 1000, $1) ON CONFLICT (key) DO UPDATE SET attempts = 1000, window_start = excluded.window_start", [now]);
  } finally {
    await c.end();
  }
}

/** Runs `run` while the database refuses new authorization codes (a trigger), as a failing database would. */
async function failingCodeInserts<T>(t: TestEnv, run: () => Promise<T>): Promise<T> {
  if (DIALECT === 'sqlite') {
    const db = new Database(path.join(t.env.SLEEVE_DATA_DIR as string, 'sleeve.db'));
    db.exec("CREATE TRIGGER refuse_codes BEFORE INSERT ON oauth_code BEGIN SELECT RAISE(ABORT, 'refused by the test'); END");
    try {
      return await run();
    } finally {
      db.exec('DROP TRIGGER refuse_codes');
      db.close();
    }
  }
  const c = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
  await c.connect();
  await c.query("CREATE FUNCTION refuse_codes() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = '40001'; END $$");
  await c.query('CREATE TRIGGER refuse_codes BEFORE INSERT ON oauth_code FOR EACH ROW EXECUTE FUNCTION refuse_codes()');
  try {
    return await run();
  } finally {
    await c.query('DROP TRIGGER refuse_codes ON oauth_code');
    await c.query('DROP FUNCTION refuse_codes()');
    await c.end();
  }
}

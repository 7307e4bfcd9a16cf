/*
 * The behaviour of the OpenID Foundation's Basic OP and Config OP test plans, module by module
 * (each test names its modules in brackets; docs/openid-conformance.md maps them), driven by
 * openid-client 6 over HTTPS with sleeve's self-signed certificate as its only CA, the
 * browser's part (sign-in, consent) by a cookie jar over HTTP. Time moves on an injected clock.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeJwt, decodeProtectedHeader, generateKeyPair, SignJWT } from 'jose';
import * as client from 'openid-client';
import { addApp, addUser, Browser, PASSWORD, request, token, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { ShiftedClock } from '../helpers/clock.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir } from '../helpers/openid-fetch.js';
import { assertErrorPage, isConsent, signIn, startSibling, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';

/** The hidden return_to of a sign-in page, as the browser would post it back. */
function returnToOf(page: HttpsResponse): string {
  const m = /name="return_to" value="([^"]*)"/.exec(page.body);
  assert.ok(m, `a sign-in form: ${page.body.slice(0, 300)}`);
  return (m[1] as string).replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
}

/** Whether the answer is the sign-in form (and not a consent page or a redirect). */
function isSignIn(res: HttpsResponse): boolean {
  return res.status === 200 && res.body.includes('name="password"') && !res.body.includes('name="decision"');
}

/** The parameters of a redirect to the client's redirect URI. */
function callback(res: HttpsResponse): URL {
  assert.equal(res.status, 302, `a redirect to the client: ${res.status} ${res.body.slice(0, 300)}`);
  const url = new URL(String(res.headers.location));
  assert.equal(`${url.origin}${url.pathname}`, WEB_URI);
  return url;
}

describe(`OpenID Connect conformance: Basic OP and Config OP (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  const clock = new ShiftedClock();
  let rp: Client;
  let rp2: Client;
  let alice: Browser;
  let customFetch: client.CustomFetch;

  before(async () => {
    t = await makeTestEnv();
    s = await startSibling(t, {}, clock);
    customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
    await addUser(t, 'alice', ['--website', 'https://alice.example', '--gender', 'female', '--birth-date', '1990-02-03', '--country', 'GB', '--email-verified']);
    await addUser(t, 'bob');
    [rp, rp2] = await Promise.all([addApp(t, 'alice', 'confidential', WEB_URI, 'Conformance RP'), addApp(t, 'alice', 'confidential', WEB_URI, 'Second RP')]);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const discover = (app: Client, auth: 'basic' | 'post' = 'basic') =>
    client.discovery(new URL(s.base), app.client_id, undefined, auth === 'post' ? client.ClientSecretPost(app.client_secret) : client.ClientSecretBasic(app.client_secret), {
      [client.customFetch]: customFetch,
    });

  /** Opens the URL in the browser, allowing on the consent page when it shows (unless told not to). */
  async function visit(b: Browser, url: URL | string, consent = true): Promise<HttpsResponse> {
    const res = await b.fetch(String(url));
    if (consent && isConsent(res)) return b.fetch(String(url), { form: { csrf_token: Browser.csrf(res), decision: 'allow' } });
    return res;
  }

  /** Signs in as `name` on the sign-in page `page` shows, and follows where it returns (consenting if asked). */
  async function signInThere(b: Browser, page: HttpsResponse, name: string): Promise<HttpsResponse> {
    const res = await b.fetch(`${s.base}/login`, { form: { csrf_token: Browser.csrf(page), username: name, password: PASSWORD, return_to: returnToOf(page) } });
    assert.equal(res.status, 303, res.body.slice(0, 300));
    return visit(b, `${s.base}${res.headers.location}`);
  }

  interface Started {
    url: URL;
    verifier: string;
    state: string;
    nonce: string | undefined;
  }

  /** An authorization request as openid-client builds it: PKCE S256, state, a nonce unless `nonce` is false. */
  async function start(config: client.Configuration, params: Record<string, string> = {}, nonce = true): Promise<Started> {
    const verifier = client.randomPKCECodeVerifier();
    const state = client.randomState();
    const n = nonce ? client.randomNonce() : undefined;
    const url = client.buildAuthorizationUrl(config, {
      redirect_uri: WEB_URI,
      scope: 'openid',
      state,
      code_challenge: await client.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      ...(n === undefined ? {} : { nonce: n }),
      ...params,
    });
    return { url, verifier, state, nonce: n };
  }

  /** The token exchange of a redirect, checked by openid-client (signature against the JWKS, iss, aud, nonce, at_hash, state, iss of the response). */
  function finish(config: client.Configuration, started: Started, res: HttpsResponse) {
    return client.authorizationCodeGrant(config, callback(res), { pkceCodeVerifier: started.verifier, expectedState: started.state, expectedNonce: started.nonce, idTokenExpected: true });
  }

  /** The whole flow in `b` (signed in), consenting if asked. */
  async function flow(config: client.Configuration, params: Record<string, string> = {}, b = alice) {
    const started = await start(config, params);
    return finish(config, started, await visit(b, started.url));
  }

  /**
   * The error redirected to the client, with its state and iss. `added`: parameters put in the
   * URL openid-client built (which sends a `request` object alone, as JAR says; the suite sends both).
   */
  async function refusal(config: client.Configuration, params: Record<string, string>, b = alice, added: Record<string, string> = {}): Promise<{ error: string | null; description: string | null }> {
    const started = await start(config, params);
    for (const [k, v] of Object.entries(added)) started.url.searchParams.set(k, v);
    const q = callback(await visit(b, started.url, false)).searchParams;
    assert.equal(q.get('state'), started.state);
    assert.equal(q.get('iss'), s.base);
    assert.equal(q.get('code'), null);
    return { error: q.get('error'), description: q.get('error_description') };
  }

  it('discovery and JWKS: every advertised endpoint answers, RS256 and ES256 keys, no request objects or claims parameter [config, discovery-endpoint-verification, idtoken-rs256]', async () => {
    const config = await discover(rp);
    const m = config.serverMetadata();
    assert.equal(m.issuer, s.base);
    assert.ok(m.id_token_signing_alg_values_supported?.includes('RS256'));
    assert.deepEqual(m.response_types_supported, ['code']);
    assert.ok(m.scopes_supported?.includes('openid') && m.scopes_supported.includes('offline_access'));
    assert.equal(m.request_parameter_supported, false);
    assert.equal(m.request_uri_parameter_supported, false);
    assert.equal(m.claims_parameter_supported, false);
    assert.equal(m.end_session_endpoint, `${s.base}/oauth2/logout`);
    assert.deepEqual(m.prompt_values_supported, ['none', 'login', 'consent', 'select_account']);
    const jwks = (await request(String(m.jwks_uri))).json() as { keys: { kid: string; alg: string; use: string }[] };
    assert.deepEqual(jwks.keys.map((k) => k.alg).sort(), ['ES256', 'RS256']);
    assert.equal(new Set(jwks.keys.map((k) => k.kid)).size, jwks.keys.length, 'one kid per key');
    assert.ok(jwks.keys.every((k) => k.use === 'sig'));
    // Each endpoint answers as itself (none is a 404 or a 5xx).
    const signedOut = await request(`${m.authorization_endpoint}?${new URLSearchParams({ client_id: rp.client_id, response_type: 'code', scope: 'openid', redirect_uri: WEB_URI })}`);
    assert.ok(isSignIn(signedOut), 'the authorization endpoint shows the sign-in form');
    const unauthenticated = { form: { token: 'x' } };
    const tokenRes = await request(String(m.token_endpoint), { form: {} });
    assert.ok(tokenRes.status === 400 || tokenRes.status === 401, tokenRes.body);
    assert.equal(typeof tokenRes.json().error, 'string');
    assert.equal((await request(String(m.userinfo_endpoint))).status, 401);
    for (const endpoint of [m.revocation_endpoint, m.introspection_endpoint]) {
      const res = await request(String(endpoint), unauthenticated);
      assert.ok(res.status === 400 || res.status === 401, `${endpoint}: ${res.status}`);
      assert.equal(typeof res.json().error, 'string');
    }
    const device = await request(String(m.device_authorization_endpoint), { form: { client_id: rp.client_id, client_secret: rp.client_secret, scope: 'openid' } });
    assert.equal(device.status, 200, device.body);
    const end = await request(String(m.end_session_endpoint));
    assert.equal(end.status, 303);
    assert.equal((await request(String(m.service_documentation))).status, 200, 'service_documentation: the home page');
    // Every advertised scope is taken (the consent page, not an invalid_scope redirect).
    for (const scope of m.scopes_supported ?? []) {
      const res = await alice.fetch(`${m.authorization_endpoint}?${new URLSearchParams({ client_id: rp.client_id, response_type: 'code', scope, redirect_uri: WEB_URI, prompt: 'consent' })}`);
      assert.ok(isConsent(res), `${scope}: ${res.status} ${String(res.headers.location)}`);
    }
  });

  for (const auth of ['basic', 'post'] as const) {
    it(`the code flow with client_secret_${auth}: an RS256 id_token openid-client verifies, userinfo's sub the same [server, client-secret-${auth}]`, async () => {
      const config = await discover(rp, auth);
      const tokens = await flow(config, { scope: 'openid profile' });
      assert.equal(decodeProtectedHeader(tokens.id_token as string).alg, 'RS256');
      const claims = tokens.claims();
      assert.equal(claims?.sub, 'alice');
      assert.equal(claims?.aud, rp.client_id);
      assert.equal((await client.fetchUserInfo(config, tokens.access_token, 'alice')).sub, 'alice');
    });
  }

  it('a request without a nonce succeeds [ensure-request-without-nonce-succeeds-for-code-flow]', async () => {
    const config = await discover(rp);
    const started = await start(config, {}, false);
    const tokens = await finish(config, started, await visit(alice, started.url));
    assert.equal(tokens.claims()?.nonce, undefined);
  });

  it('a missing response_type is an error page, never a redirect [response-type-missing]', async () => {
    const res = await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: rp.client_id, scope: 'openid', redirect_uri: WEB_URI, state: 's' })}`);
    assertErrorPage(res, 400, 'invalid_request', 'Required parameter is missing: response_type');
  });

  it('userinfo by GET with the header, POST with the header and POST with the form body, all the same [userinfo-get, userinfo-post-header, userinfo-post-body]', async () => {
    const config = await discover(rp);
    const tokens = await flow(config, { scope: 'openid profile email' });
    const viaClient = await client.fetchUserInfo(config, tokens.access_token, 'alice');
    const get = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    const postHeader = await request(`${s.base}/oauth2/userinfo`, { method: 'POST', headers: { authorization: `Bearer ${tokens.access_token}` } });
    const postBody = await request(`${s.base}/oauth2/userinfo`, { form: { access_token: tokens.access_token } });
    for (const res of [get, postHeader, postBody]) {
      assert.equal(res.status, 200, res.body);
      assert.deepEqual(res.json(), viaClient);
    }
    assert.equal(viaClient.email, 'alice@example.com');
  });

  it('scopes profile, email, address, phone, all, in any order: the claims sleeve holds, the rest left out [scope-profile, scope-email, scope-address, scope-phone, scope-all, ensure-other-scope-order-succeeds]', async () => {
    const config = await discover(rp);
    const base = ['sub', 'username', 'preferred_username'];
    const profile = ['profile', 'metabrainz_user_id', 'website', 'gender', 'zoneinfo', 'age', 'country'];
    const email = ['email', 'email_verified'];
    const cases: [string, string[]][] = [
      ['openid profile', [...base, ...profile]],
      ['openid email', [...base, ...email]],
      ['openid address', base],
      ['openid phone', base],
      ['openid profile email address phone', [...base, ...profile, ...email]],
      ['phone email openid address profile', [...base, ...profile, ...email]],
    ];
    const seen = new Set<string>();
    for (const [scope, keys] of cases) {
      const tokens = await flow(config, { scope });
      const info = await client.fetchUserInfo(config, tokens.access_token, 'alice');
      assert.deepEqual(Object.keys(info).sort(), [...keys].sort(), scope);
      for (const k of [...Object.keys(info), ...Object.keys(tokens.claims() ?? {})]) seen.add(k);
    }
    // claims_supported promises nothing that was not served.
    const missing = (config.serverMetadata().claims_supported ?? []).filter((c) => !seen.has(c));
    assert.deepEqual(missing, []);
    // A classic request keeps MusicBrainz's answer to a scope it does not know.
    const classic = await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: rp.client_id, response_type: 'code', scope: 'profile phone', redirect_uri: WEB_URI })}`);
    assert.equal(callback(classic).searchParams.get('error'), 'invalid_scope');
  });

  it('prompt=login: the sign-in form even when signed in, then a new auth_time [prompt-login]', async () => {
    const config = await discover(rp);
    const first = (await flow(config)).claims()?.auth_time as number;
    clock.advance(2000);
    const started = await start(config, { prompt: 'login' });
    const page = await visit(alice, started.url);
    assert.ok(isSignIn(page), 'the sign-in form');
    assert.match(page.body, /Sign in again to continue to Conformance RP/);
    const tokens = await finish(config, started, await signInThere(alice, page, 'alice'));
    assert.ok((tokens.claims()?.auth_time as number) > first, 'a new auth_time');
  });

  it('prompt=none: login_required without a session; a code without any page with one; consent_required where the consent page would show [prompt-none-not-logged-in, prompt-none-logged-in]', async () => {
    const config = await discover(rp);
    assert.equal((await refusal(config, { prompt: 'none' }, new Browser())).error, 'login_required');
    await flow(config, { scope: 'openid email' });
    const started = await start(config, { prompt: 'none', scope: 'openid email' });
    const res = await visit(alice, started.url, false);
    const tokens = await finish(config, started, res);
    assert.equal(tokens.claims()?.sub, 'alice');
    assert.equal((await refusal(config, { prompt: 'none', scope: 'openid tag' })).error, 'consent_required');
    assert.equal((await refusal(config, { prompt: 'none', scope: 'openid email', access_type: 'offline' })).error, 'consent_required', 'offline access not granted yet');
    assert.equal((await refusal(config, { prompt: 'none', scope: 'openid email', approval_prompt: 'force' })).error, 'consent_required', 'consent forced');
  });

  it('max_age=1 after a pause asks for a sign-in, and auth_time says so; max_age=10000 does not [max-age-1, max-age-10000]', async () => {
    const config = await discover(rp);
    const before = (await flow(config)).claims()?.auth_time as number;
    const kept = await flow(config, { max_age: '10000' });
    assert.equal(kept.claims()?.auth_time, before, 'max_age=10000: the same sign-in');
    clock.advance(2000);
    const started = await start(config, { max_age: '1' });
    const page = await visit(alice, started.url);
    assert.ok(isSignIn(page), 'max_age=1 after 2 s: the sign-in form');
    const tokens = await finish(config, started, await signInThere(alice, page, 'alice'));
    const authTime = tokens.claims()?.auth_time as number;
    assert.ok(authTime > before && authTime >= Math.floor(clock.now() / 1000) - 1, `auth_time ${authTime} is the new sign-in`);
    clock.advance(1000);
    assert.equal((await refusal(config, { prompt: 'none', max_age: '0' })).error, 'login_required', 'too old for prompt=none');
  });

  it('id_token_hint: of the signed-in user, taken; of another user, the sign-in form (login_required with prompt=none); of another key, client or garbage, invalid_request; an expired one is still a hint [id-token-hint]', async () => {
    const config = await discover(rp);
    const own = (await flow(config)).id_token as string;
    const hinted = await flow(config, { id_token_hint: own, prompt: 'none' });
    assert.equal(hinted.claims()?.sub, 'alice');

    const bob = await signIn(s.base, 'bob');
    const bobs = (await flow(config, {}, bob)).id_token as string;
    const started = await start(config, { id_token_hint: bobs });
    const page = await visit(alice, started.url);
    assert.ok(isSignIn(page), 'another user: the sign-in form');
    assert.match(page.body, /name="username"[^>]*value="bob"/);
    assert.equal((await refusal(config, { id_token_hint: bobs, prompt: 'none' })).error, 'login_required');

    const { privateKey } = await generateKeyPair('RS256');
    const claims = decodeJwt(own);
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: decodeProtectedHeader(own).kid as string }).sign(privateKey);
    const otherClient = (await flow(await discover(rp2))).id_token as string;
    for (const hint of [forged, otherClient, 'not.a.jwt', `${own}x`, 'a'.repeat(5000)]) {
      assert.equal((await refusal(config, { id_token_hint: hint })).error, 'invalid_request', hint.slice(0, 40));
    }
    clock.advance(3700_000);
    try {
      const late = await alice.fetch(String((await start(config, { id_token_hint: own, prompt: 'none' })).url));
      assert.ok(callback(late).searchParams.get('code'), 'an expired hint of this user is still taken');
    } finally {
      clock.advance(-3700_000);
    }
  });

  it('login_hint prefills the sign-in form [login-hint]', async () => {
    const config = await discover(rp);
    const started = await start(config, { login_hint: 'alice' });
    const page = await new Browser().fetch(String(started.url));
    assert.ok(isSignIn(page));
    assert.match(page.body, /name="username"[^>]*value="alice"/);
  });

  it('display, ui_locales, claims_locales, acr_values, claims and unknown parameters are taken and ignored [display-page, display-popup, ui-locales, claims-locales, ensure-request-with-acr-values-succeeds, ensure-request-with-unknown-parameter-succeeds, claims-essential]', async () => {
    const config = await discover(rp);
    const extras: Record<string, string>[] = [
      { display: 'page' },
      { display: 'popup' },
      { ui_locales: 'se' },
      { claims_locales: 'se' },
      { acr_values: '1 2' },
      { extra_parameter: 'foobar' },
      { claims: JSON.stringify({ userinfo: { name: { essential: true } } }) },
    ];
    for (const extra of extras) {
      const tokens = await flow(config, { scope: 'openid profile', ...extra });
      assert.equal(tokens.claims()?.sub, 'alice', JSON.stringify(extra));
    }
  });

  it('request, request_uri and registration are refused with their own errors on the redirect, as advertised [unsigned-request-object-supported-correctly-or-rejected-as-unsupported]', async () => {
    const config = await discover(rp);
    const object = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify({ client_id: rp.client_id })).toString('base64url')}.`;
    assert.equal((await refusal(config, {}, alice, { request: object })).error, 'request_not_supported');
    assert.equal((await refusal(config, {}, alice, { request_uri: 'https://client.example/request.jwt' })).error, 'request_uri_not_supported');
    assert.equal((await refusal(config, {}, alice, { registration: '{}' })).error, 'registration_not_supported');
  });

  it('an unregistered redirect_uri is an error page, never a redirect [ensure-registered-redirect-uri]', async () => {
    const config = await discover(rp);
    const started = await start(config, { redirect_uri: 'https://client.example/other' });
    assertErrorPage(await alice.fetch(String(started.url)), 400, 'invalid_request', 'Mismatched redirect URI');
  });

  it('offline_access with prompt=consent: the consent page (offline bullet), a refresh token; a refresh gives a new access token and no id_token; another client cannot use it [refresh-token]', async () => {
    const config = await discover(rp);
    const started = await start(config, { scope: 'openid offline_access', prompt: 'consent' });
    const page = await alice.fetch(String(started.url));
    assert.ok(isConsent(page), 'prompt=consent shows the consent page');
    assert.match(page.body, /when I(&#39;|')m not using the application/);
    const tokens = await finish(config, started, await alice.fetch(String(started.url), { form: { csrf_token: Browser.csrf(page), decision: 'allow' } }));
    assert.equal(typeof tokens.refresh_token, 'string');
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token as string);
    assert.notEqual(refreshed.access_token, tokens.access_token);
    assert.equal(refreshed.id_token, undefined);
    await assert.rejects(client.refreshTokenGrant(await discover(rp2), tokens.refresh_token as string), (err: client.ResponseBodyError) => err.error === 'invalid_grant');
    // Asked again without prompt=consent: no page (the grant exists) and, as with access_type=offline, no new refresh token.
    const quiet = await flow(config, { scope: 'openid offline_access' });
    assert.equal(quiet.refresh_token, undefined);
  });

  it("the openid-client example of docs/oauth.md, run twice in a row, ends each time with a working refresh", async () => {
    const config = await discover(rp);
    for (const run of [1, 2]) {
      // As docs/oauth.md, "OpenID Connect", writes it (its redirect URI is this test's).
      const verifier = client.randomPKCECodeVerifier(),
        nonce = client.randomNonce();
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: WEB_URI,
        scope: 'openid profile offline_access',
        prompt: 'consent',
        nonce,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      const page = await alice.fetch(url.href);
      assert.ok(isConsent(page), `run ${run}: the consent page`);
      const back = callback(await alice.fetch(url.href, { form: { csrf_token: Browser.csrf(page), decision: 'allow' } }));
      const tokens = await client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedNonce: nonce });
      const claims = tokens.claims();
      assert.ok(claims !== undefined);
      assert.equal((await client.fetchUserInfo(config, tokens.access_token, claims.sub)).sub, 'alice');
      const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token as string);
      assert.equal((await client.fetchUserInfo(config, refreshed.access_token, claims.sub)).sub, 'alice', `run ${run}: the refreshed token works`);
    }
  });

  it('PKCE: the right verifier succeeds, a wrong or missing one is refused [ensure-request-with-valid-pkce-succeeds, pkce]', async () => {
    const config = await discover(rp);
    const started = await start(config);
    const code = callback(await visit(alice, started.url)).searchParams.get('code') as string;
    const form = { grant_type: 'authorization_code', code, redirect_uri: WEB_URI, client_id: rp.client_id, client_secret: rp.client_secret };
    assert.equal((await token(s.base, { ...form, code_verifier: client.randomPKCECodeVerifier() })).json().error, 'invalid_grant');
    assert.equal((await token(s.base, form)).json().error, 'invalid_request', 'no verifier');
    const ok = await token(s.base, { ...form, code_verifier: started.verifier });
    assert.equal(ok.status, 200, ok.body);
  });

  it('bad prompt and max_age values are invalid_request on the redirect, never a 500', async () => {
    const config = await discover(rp);
    const bad: Record<string, string>[] = [{ prompt: 'bogus' }, { prompt: 'none login' }, { prompt: 'login none' }, { max_age: '-1' }, { max_age: 'abc' }, { max_age: '1e3' }, { max_age: '' }];
    for (const params of bad) {
      const { error, description } = await refusal(config, params);
      assert.equal(error, 'invalid_request', `${JSON.stringify(params)}: ${description}`);
    }
  });

  for (const wait of [0, 30_000]) {
    const module = wait === 0 ? 'codereuse' : 'codereuse-30seconds';
    it(`a code used again${wait === 0 ? '' : ' 30 seconds later'} is refused, and what its first use issued is revoked [${module}]`, async () => {
      const config = await discover(rp);
      const started = await start(config, { scope: 'openid offline_access', prompt: 'consent' });
      const res = await visit(alice, started.url);
      const first = await finish(config, started, res);
      const code = callback(res).searchParams.get('code') as string;
      clock.advance(wait);
      const again = await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: WEB_URI, client_id: rp.client_id, client_secret: rp.client_secret, code_verifier: started.verifier });
      assert.equal(again.json().error, 'invalid_grant');
      assert.equal((await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${first.access_token}` } })).status, 401);
      await assert.rejects(client.refreshTokenGrant(config, first.refresh_token as string));
    });
  }
});

/*
 * OpenID Connect for the code flow, driven by a real, unmodified client: openid-client 6
 * with its default discovery (/.well-known/openid-configuration) over sleeve's HTTPS
 * listener, trusting the self-signed certificate as its only CA. It checks the id_token's
 * signature against the JWKS, nonce, iss, aud, exp and at_hash; userinfo's sub against the
 * id_token's; ES256 and RS256 applications; a wrong nonce; an id_token signed before a key
 * rotation still verifies after it (docs/decisions.md, "OpenID Connect", "Signing keys").
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet } from 'jose';
import * as client from 'openid-client';
import { addApp, addUser, authorize, Browser, request, startAuthServer, type AuthServer } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir } from '../helpers/openid-fetch.js';
import { isConsent, signIn, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';

describe(`OpenID Connect with openid-client (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let alice: Browser;
  let rsApp: Client;
  let esApp: Client;
  let customFetch: client.CustomFetch;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
    await addUser(t, 'alice');
    [rsApp, esApp] = await Promise.all([addApp(t, 'alice', 'confidential', WEB_URI, 'OIDC RS'), addApp(t, 'alice', 'confidential', WEB_URI, 'OIDC ES')]);
    const edited = await cliInProcess(t.env, ['--json', 'app', 'edit', esApp.client_id, '--id-token-alg', 'ES256']);
    assert.equal(edited.id_token_alg, 'ES256');
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  /** openid-client's default discovery for this application. */
  const discover = (app: Client, alg?: 'ES256' | 'RS256') =>
    client.discovery(new URL(s.base), app.client_id, alg === undefined ? app.client_secret : { client_secret: app.client_secret, id_token_signed_response_alg: alg }, undefined, {
      [client.customFetch]: customFetch,
    });

  /** Runs authorize (sign-in done, consent over HTTP with its CSRF token) for the URL openid-client built; returns the redirect it ends with. */
  async function runAuthorize(config: client.Configuration, params: Record<string, string>): Promise<URL> {
    const url = client.buildAuthorizationUrl(config, { redirect_uri: WEB_URI, response_type: 'code', approval_prompt: 'force', ...params });
    const consent = await alice.fetch(url.href);
    assert.ok(isConsent(consent), consent.body.slice(0, 400));
    assert.ok(consent.body.includes('Know who you are'), 'the consent page explains openid');
    const res = await authorize(alice, s.base, Object.fromEntries(url.searchParams));
    assert.equal(res.status, 302, res.body.slice(0, 400));
    return new URL(String(res.headers.location));
  }

  async function codeFlow(config: client.Configuration, scope: string, extra: Record<string, string> = {}) {
    const verifier = client.randomPKCECodeVerifier();
    const nonce = client.randomNonce();
    const state = client.randomState();
    const back = await runAuthorize(config, { scope, nonce, state, code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', ...extra });
    const tokens = await client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedNonce: nonce, expectedState: state });
    return { tokens, nonce };
  }

  it('discovery: both metadata documents say the same, with jwks_uri, openid and the MetaBrainz scope names, CORS and caching', async () => {
    const config = await discover(rsApp);
    const m = config.serverMetadata();
    assert.equal(m.issuer, s.base);
    assert.equal(m.jwks_uri, `${s.base}/.well-known/jwks.json`);
    assert.equal(m.userinfo_endpoint, `${s.base}/oauth2/userinfo`);
    assert.deepEqual(m.id_token_signing_alg_values_supported, ['ES256', 'RS256']);
    assert.deepEqual(m.subject_types_supported, ['public']);
    for (const scope of ['openid', 'profile', 'email', 'musicbrainz:tag', 'musicbrainz:submit_barcode']) assert.ok(m.scopes_supported?.includes(scope), scope);
    const oidc = await request(`${s.base}/.well-known/openid-configuration`);
    const rfc8414 = await request(`${s.base}/.well-known/oauth-authorization-server`);
    assert.deepEqual(oidc.json(), rfc8414.json());
    assert.equal(oidc.headers['access-control-allow-origin'], '*');
    assert.match(String(oidc.headers['cache-control']), /^public, max-age=\d+$/);
  });

  for (const alg of ['RS256', 'ES256'] as const) {
    it(`the code flow with PKCE, openid and a nonce: an ${alg} id_token the client verifies; userinfo; refresh`, async () => {
      const app = alg === 'RS256' ? rsApp : esApp;
      const config = await discover(app, alg);
      const { tokens, nonce } = await codeFlow(config, 'openid profile email', { access_type: 'offline' });
      assert.equal(decodeProtectedHeader(tokens.id_token as string).alg, alg);
      const claims = tokens.claims();
      assert.ok(claims !== undefined);
      assert.equal(claims.iss, s.base);
      assert.equal(claims.sub, 'alice');
      assert.equal(claims.aud, app.client_id);
      assert.equal(claims.nonce, nonce);
      assert.equal(typeof claims.at_hash, 'string');
      assert.equal(claims.exp - claims.iat, 3600);
      // The session's sign-in, not the exchange: it happened in before(), earlier than this token.
      assert.ok(typeof claims.auth_time === 'number' && claims.auth_time <= claims.iat, `auth_time ${claims.auth_time} ≤ iat ${claims.iat}`);

      const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
      assert.equal(info.sub, 'alice');
      assert.equal(info.username, 'alice');
      assert.equal(info.preferred_username, 'alice');
      assert.equal(info.email, 'alice@example.com');
      assert.equal(info.profile, `${s.base}/user/alice`);

      const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token as string);
      assert.notEqual(refreshed.access_token, tokens.access_token);
      assert.equal(refreshed.id_token, undefined, 'no id_token on refresh (a refresh is no sign-in)');
      assert.equal((await client.fetchUserInfo(config, refreshed.access_token, 'alice')).sub, 'alice');
      await assert.rejects(client.fetchUserInfo(config, refreshed.access_token, 'bob'), 'the client refuses a userinfo sub other than the one expected');
    });
  }

  it('a wrong nonce is refused by the client; a nonce the server cannot keep is refused by the server', async () => {
    const config = await discover(rsApp);
    const verifier = client.randomPKCECodeVerifier();
    const back = await runAuthorize(config, { scope: 'openid', nonce: client.randomNonce(), code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' });
    await assert.rejects(client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedNonce: client.randomNonce() }), (err: Error) => {
      assert.match(String((err.cause as Error | undefined)?.message), /nonce/);
      return true;
    });

    const url = client.buildAuthorizationUrl(config, { redirect_uri: WEB_URI, response_type: 'code', scope: 'openid', nonce: 'x'.repeat(513) });
    const res = await alice.fetch(url.href);
    assert.equal(res.status, 302);
    const refused = new URL(String(res.headers.location)).searchParams;
    assert.equal(refused.get('error'), 'invalid_request');
    assert.match(String(refused.get('error_description')), /nonce/);
  });

  it('openid without a nonce is accepted (optional in the code flow); without openid everything stays classic', async () => {
    const config = await discover(rsApp);
    const verifier = client.randomPKCECodeVerifier();
    const back = await runAuthorize(config, { scope: 'profile openid', code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' });
    const tokens = await client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier });
    assert.equal(tokens.claims()?.nonce, undefined);

    const res = await authorize(alice, s.base, { client_id: rsApp.client_id, redirect_uri: WEB_URI, response_type: 'code', scope: 'profile' });
    const code = String(new URL(String(res.headers.location)).searchParams.get('code'));
    const classic = await request(`${s.base}/oauth2/token`, {
      form: { grant_type: 'authorization_code', code, redirect_uri: WEB_URI, client_id: rsApp.client_id, client_secret: rsApp.client_secret },
    });
    assert.equal(classic.status, 200, classic.body);
    assert.deepEqual(Object.keys(classic.json()).sort(), ['access_token', 'expires_in', 'token_type']);
    const info = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${classic.json().access_token}` } });
    assert.deepEqual(Object.keys(info.json()), ['sub', 'profile', 'metabrainz_user_id', 'zoneinfo']);
  });

  it('openid alone reads userinfo: sub and the account name only', async () => {
    const config = await discover(rsApp);
    const { tokens } = await codeFlow(config, 'openid');
    assert.deepEqual(await client.fetchUserInfo(config, tokens.access_token, 'alice'), { sub: 'alice', username: 'alice', preferred_username: 'alice' });
  });

  it('sleeve app add|edit --id-token-alg: ES256 or RS256 only, shown by app list', async () => {
    const bad = await runCli(t.env, ['app', 'edit', rsApp.client_id, '--id-token-alg', 'HS256']);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /ES256, RS256/);
    const added = await runCli(t.env, ['app', 'add', '--owner', 'alice', '--name', 'Bad', '--type', 'public', '--id-token-alg', 'none']);
    assert.equal(added.code, 2, added.stderr);
    const listed = (await cliInProcess(t.env, ['app', 'list', '--json'])).applications as { client_id: string; id_token_alg: string }[];
    assert.deepEqual(
      [rsApp, esApp].map((a) => listed.find((x) => x.client_id === a.client_id)?.id_token_alg),
      ['RS256', 'ES256'],
    );
    assert.ok(!listed.some((x) => (x as { name?: string }).name === 'Bad'), 'a refused registration registers nothing');
  });

  it('the website registers and edits an application with its id_token algorithm', async () => {
    const form = await alice.fetch(`${s.base}/account/applications/register`);
    assert.match(form.body, /<select name="id_token_alg">/);
    const bad = await alice.fetch(`${s.base}/account/applications/register`, {
      form: { csrf_token: Browser.csrf(form), name: 'Web OIDC', kind: 'confidential', redirect_uri: WEB_URI, id_token_alg: 'none' },
    });
    assert.equal(bad.status, 400, bad.body.slice(0, 300));
    assert.match(bad.body, /the id_token algorithm must be one of ES256, RS256/);
    const made = await alice.fetch(`${s.base}/account/applications/register`, {
      form: { csrf_token: Browser.csrf(form), name: 'Web OIDC', kind: 'confidential', redirect_uri: WEB_URI, id_token_alg: 'ES256' },
    });
    assert.equal(made.status, 303, made.body.slice(0, 300));
    const listed = (await cliInProcess(t.env, ['app', 'list', '--json'])).applications as { name: string; id_token_alg: string }[];
    assert.equal(listed.find((a) => a.name === 'Web OIDC')?.id_token_alg, 'ES256');
    const page = await alice.fetch(`${s.base}/account/applications`);
    assert.match(page.body, /<h3>Web OIDC<\/h3>[\s\S]*?<dt>ID tokens<\/dt><dd>signed ES256<\/dd>/);
  });

  it('key rotation: an id_token signed before `sleeve keys rotate` still verifies against the JWKS after it', async () => {
    const config = await discover(esApp, 'ES256');
    const { tokens } = await codeFlow(config, 'openid profile');
    const before = decodeProtectedHeader(tokens.id_token as string).kid;
    const rotated = await runCli(t.env, ['keys', 'rotate']);
    assert.equal(rotated.code, 0, rotated.stderr);
    const jwks = (await request(`${s.base}/.well-known/jwks.json`)).json() as JSONWebKeySet;
    const kids = jwks.keys.map((k) => k.kid);
    assert.ok(kids.includes(before), 'the old key is still published');
    assert.equal(kids.length, 4, 'old and new keys of both algorithms');
    const { payload } = await jwtVerify(tokens.id_token as string, createLocalJWKSet(jwks), { issuer: s.base, audience: esApp.client_id, algorithms: ['ES256'] });
    assert.equal(payload.sub, 'alice');
  });
});

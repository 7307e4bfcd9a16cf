/*
 * RFC 9700's smaller points (docs/decisions.md, "RFC 9700"): the issuer in every authorization
 * response that goes back to the client (RFC 9207) and its metadata flag; a public application
 * authenticated by PKCE alone (`token_endpoint_auth_method=none`, RFC 8252), driven by
 * openid-client 6, while its non-secret secret keeps working; SLEEVE_PKCE=s256-for-public.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as client from 'openid-client';
import { loadConfig } from '../../src/config/load.js';
import { addApp, addUser, authorize, locationParams, request, startAuthServer, token, type AuthServer, type Browser } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir } from '../helpers/openid-fetch.js';
import { assertOAuthError, codeOf, exchange, s256, signIn, startSibling, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';
const LOOPBACK = 'http://127.0.0.1:53682/cb';
const VERIFIER = 'v'.repeat(43);

describe(`RFC 9700: iss, auth method none, PKCE for public clients (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let strict: AuthServer;
  let alice: Browser;
  let desktop: Client;
  let web: Client;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await addUser(t, 'alice');
    [desktop, web] = await Promise.all([addApp(t, 'alice', 'public', undefined, 'Desktop'), addApp(t, 'alice', 'confidential', WEB_URI, 'Web')]);
    strict = await startSibling(t, { SLEEVE_PKCE: 's256-for-public' });
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await strict?.server.close();
    await s?.server.close();
    await t?.cleanup();
  });

  const ask = (base: string, app: Client, redirectUri: string, extra: Record<string, string> = {}, decision: 'allow' | 'deny' = 'allow', browser = alice) =>
    authorize(browser, base, { client_id: app.client_id, response_type: 'code', scope: 'profile', redirect_uri: redirectUri, state: 'st', approval_prompt: 'force', ...extra }, decision);

  it('both metadata documents advertise the iss parameter and auth method none', async () => {
    for (const doc of ['openid-configuration', 'oauth-authorization-server']) {
      const m = (await request(`${s.base}/.well-known/${doc}`)).json();
      assert.equal(m.authorization_response_iss_parameter_supported, true, doc);
      assert.deepEqual(m.token_endpoint_auth_methods_supported, ['client_secret_basic', 'client_secret_post', 'none'], doc);
    }
  });

  describe('iss in authorization responses (RFC 9207)', () => {
    it('on success, on the user saying no, and on a refused request', async () => {
      const ok = locationParams(await ask(s.base, web, WEB_URI));
      assert.equal(ok.get('iss'), s.base);
      assert.ok(ok.get('code'));
      const denied = locationParams(await ask(s.base, web, WEB_URI, {}, 'deny'));
      assert.equal(denied.get('error'), 'access_denied');
      assert.equal(denied.get('iss'), s.base);
      assert.equal(denied.get('state'), 'st');
      const refused = locationParams(await ask(s.base, web, WEB_URI, { scope: 'nonsense' }));
      assert.equal(refused.get('error'), 'invalid_scope');
      assert.equal(refused.get('iss'), s.base);
    });
  });

  describe('a public client authenticated by PKCE alone', () => {
    it('openid-client with auth method none: the code flow (checking iss) and a refresh, without any secret', async () => {
      const customFetch = fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR);
      const config = await client.discovery(new URL(s.base), desktop.client_id, undefined, client.None(), { [client.customFetch]: customFetch });
      const verifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: LOOPBACK,
        scope: 'openid profile',
        state,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
      });
      const res = await authorize(alice, s.base, Object.fromEntries(url.searchParams));
      assert.equal(res.status, 302, res.body.slice(0, 300));
      const back = new URL(String(res.headers.location));
      assert.equal(back.searchParams.get('iss'), s.base);
      const tokens = await client.authorizationCodeGrant(config, back, { pkceCodeVerifier: verifier, expectedState: state });
      assert.ok(tokens.refresh_token, 'a public application gets a refresh token');
      assert.equal(tokens.claims()?.sub, 'alice');
      const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token);
      assert.equal((await client.fetchUserInfo(config, refreshed.access_token, 'alice')).username, 'alice');

      // The metadata promise holds both ways: a response whose iss is not this server's is refused.
      const forged = new URL(back.href);
      forged.searchParams.set('iss', 'https://elsewhere.example');
      await assert.rejects(client.authorizationCodeGrant(config, forged, { pkceCodeVerifier: verifier, expectedState: state }), (err: Error) => {
        assert.match(String((err.cause as Error | undefined)?.message), /"iss"/);
        return true;
      });
      // …and so is one without iss at all.
      const bare = new URL(back.href);
      bare.searchParams.delete('iss');
      await assert.rejects(client.authorizationCodeGrant(config, bare, { pkceCodeVerifier: verifier, expectedState: state }), (err: Error) => {
        assert.match(String((err.cause as Error | undefined)?.message), /"iss"/);
        return true;
      });
    });

    it('without PKCE a public client must send its secret: none is refused (the code stays usable), the secret works', async () => {
      const code = codeOf(await ask(s.base, desktop, LOOPBACK));
      const form = { grant_type: 'authorization_code', code, redirect_uri: LOOPBACK, client_id: desktop.client_id };
      assertOAuthError(await token(s.base, form), 401, 'invalid_client');
      const withSecret = await token(s.base, { ...form, client_secret: desktop.client_secret });
      assert.equal(withSecret.status, 200, withSecret.body);
    });

    it('with PKCE the secret may still be sent (the interface), and a wrong one is still refused', async () => {
      const code = codeOf(await ask(s.base, desktop, LOOPBACK, { code_challenge: s256(VERIFIER), code_challenge_method: 'S256' }));
      assertOAuthError(await exchange(s.base, { ...desktop, client_secret: 'wrong' }, code, LOOPBACK, { code_verifier: VERIFIER }), 401, 'invalid_client');
      const ok = await exchange(s.base, desktop, code, LOOPBACK, { code_verifier: VERIFIER });
      assert.equal(ok.status, 200, ok.body);
    });

    it('a confidential application without its secret is refused, PKCE or not', async () => {
      const code = codeOf(await ask(s.base, web, WEB_URI, { code_challenge: s256(VERIFIER), code_challenge_method: 'S256' }));
      assertOAuthError(await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: WEB_URI, client_id: web.client_id, code_verifier: VERIFIER }), 401, 'invalid_client');
    });
  });

  describe('SLEEVE_PKCE=s256-for-public', () => {
    it('refuses a public client with plain or no PKCE (back to the client, with iss), takes S256; web applications are unaffected', async () => {
      const b = await signIn(strict.base, 'alice');
      const plain = locationParams(await ask(strict.base, desktop, LOOPBACK, { code_challenge: VERIFIER, code_challenge_method: 'plain' }, 'allow', b));
      assert.equal(plain.get('error'), 'invalid_request');
      assert.match(plain.get('error_description') ?? '', /S256/);
      assert.equal(plain.get('iss'), strict.base);
      const implicitPlain = locationParams(await ask(strict.base, desktop, LOOPBACK, { code_challenge: VERIFIER }, 'allow', b));
      assert.equal(implicitPlain.get('error'), 'invalid_request');
      const missing = locationParams(await ask(strict.base, desktop, LOOPBACK, {}, 'allow', b));
      assert.equal(missing.get('error'), 'invalid_request');
      assert.equal(missing.get('code'), null);

      const code = codeOf(await ask(strict.base, desktop, LOOPBACK, { code_challenge: s256(VERIFIER), code_challenge_method: 'S256' }, 'allow', b));
      const ok = await token(strict.base, { grant_type: 'authorization_code', code, redirect_uri: LOOPBACK, client_id: desktop.client_id, code_verifier: VERIFIER });
      assert.equal(ok.status, 200, ok.body);

      const webCode = codeOf(await ask(strict.base, web, WEB_URI, {}, 'allow', b));
      assert.equal((await exchange(strict.base, web, webCode, WEB_URI)).status, 200);
    });

    it('the default is optional: a public client without PKCE gets its code', async () => {
      assert.ok(codeOf(await ask(s.base, desktop, LOOPBACK)));
    });

    it('bad settings are refused at start', () => {
      assert.throws(() => loadConfig({ ...t.env, SLEEVE_PKCE: 'always' }), /SLEEVE_PKCE/);
      assert.throws(() => loadConfig({ ...t.env, SLEEVE_REFRESH_GRACE_SECONDS: '-1' }), /SLEEVE_REFRESH_GRACE_SECONDS/);
      assert.equal(loadConfig(t.env).refreshGraceSeconds, 30);
      assert.equal(loadConfig(t.env).pkce, 'optional');
    });
  });
});

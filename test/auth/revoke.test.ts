/*
 * POST /oauth2/revoke (RFC 7009): the request checks musicbrainz.org's revoke makes (the
 * cases of MusicBrainz's "Revoke token" test: parameters from the body only, client
 * authentication, 200 for any token) and the three revocation rows of the interface's state
 * table (docs/interface.md).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, request, startAuthServer, type AuthServer, type Browser, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { assertOAuthError, codeOf, exchange, grant, isConsent, OOB, refresh, revoke, signIn, userinfoStatus, type Client, type Tokens } from './support.js';

const WEB_URI = 'https://client.example/callback';

function assertRevoked(res: HttpsResponse): void {
  assert.equal(res.status, 200, res.body);
  assert.equal(res.body, '');
  assert.equal(res.headers['content-length'], '0');
  assert.equal(res.headers['access-control-allow-origin'], '*');
}

describe(`/oauth2/revoke (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let alice: Browser;
  let web: Client;
  let other: Client;
  let desktop: Client;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await addUser(t, 'alice');
    [web, other, desktop] = await Promise.all([
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'Other Web'),
      addApp(t, 'alice', 'public', undefined, 'Test Desktop'),
    ]);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const webGrant = (extra: Record<string, string> = {}) => grant(alice, s.base, web, { redirect_uri: WEB_URI, approval_prompt: 'force', ...extra });
  const desktopGrant = () => grant(alice, s.base, desktop, { redirect_uri: OOB });
  const post = (form: Record<string, string> | [string, string][], query = '', headers: Record<string, string> = {}) => request(`${s.base}/oauth2/revoke${query}`, { form, headers });

  describe("request checks (MusicBrainz's revoke token cases)", () => {
    it('answers OPTIONS for a CORS preflight', async () => {
      const res = await request(`${s.base}/oauth2/revoke`, { method: 'OPTIONS' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.allow, 'POST, OPTIONS');
      assert.equal(res.headers['access-control-allow-headers'], 'authorization');
      assert.equal(res.headers['access-control-allow-origin'], '*');
    });

    it('accepts only POST', async () => {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        assertOAuthError(await request(`${s.base}/oauth2/revoke?token=x&client_id=${web.client_id}&client_secret=${web.client_secret}`, { method }), 400, 'invalid_request', 'Only POST requests are allowed');
      }
    });

    it('names the first missing parameter', async () => {
      assertOAuthError(await post({}), 400, 'invalid_request', 'Required parameter is missing: token');
      assertOAuthError(await post({ token: '', client_id: web.client_id, client_secret: web.client_secret }), 400, 'invalid_request', 'Required parameter is missing: token');
      assertOAuthError(await post({ token: 'abc' }), 400, 'invalid_request', 'Required parameter is missing: client_id');
      assertOAuthError(await post({ token: 'abc', client_id: web.client_id }), 400, 'invalid_request', 'Required parameter is missing: client_secret');
    });

    it('reads the body only, never the query', async () => {
      const q = `?${new URLSearchParams({ token: 'abc', client_id: web.client_id, client_secret: web.client_secret })}`;
      assertOAuthError(await post({}, q), 400, 'invalid_request', 'Required parameter is missing: token');
      assertOAuthError(await post({ token: 'abc' }, `?client_id=${web.client_id}&client_secret=${web.client_secret}`), 400, 'invalid_request', 'Required parameter is missing: client_id');
    });

    it('refuses repeated parameters', async () => {
      for (const name of ['token', 'client_id', 'client_secret']) {
        const form: [string, string][] = [
          ['token', 'abc'],
          ['client_id', web.client_id],
          ['client_secret', web.client_secret],
          [name, 'again'],
        ];
        assertOAuthError(await post(form), 400, 'invalid_request', `Parameter is included more than once in the request: ${name}`);
      }
    });

    it('answers bad client credentials 401 invalid_client with the Basic challenge', async () => {
      for (const form of [
        { token: 'abc', client_id: 'id-xxx', client_secret: web.client_secret },
        { token: 'abc', client_id: web.client_id, client_secret: 'wrong' },
        { token: 'abc', client_id: web.client_id, client_secret: other.client_secret },
      ]) {
        const res = await post(form);
        assertOAuthError(res, 401, 'invalid_client', 'Client not authentified');
        assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2-Client"');
      }
    });

    it('answers 200 with an empty body for unknown tokens', async () => {
      assertRevoked(await post({ token: 'invalid', client_id: web.client_id, client_secret: web.client_secret }));
      assertRevoked(await post({ token: 'x'.repeat(500), client_id: web.client_id, client_secret: web.client_secret }));
      assertRevoked(await post({ token: 'invalid', client_id: web.client_id, client_secret: web.client_secret, token_type_hint: 'refresh_token' }));
    });

    it('accepts HTTP Basic client authentication instead of body fields (decision)', async () => {
      const tokens = await desktopGrant();
      const auth = `Basic ${Buffer.from(`${desktop.client_id}:${desktop.client_secret}`).toString('base64')}`;
      assertOAuthError(await post({ token: tokens.refresh_token as string }, '', { authorization: `Basic ${Buffer.from(`${desktop.client_id}:wrong`).toString('base64')}` }), 401, 'invalid_client');
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200, 'a failed revocation changes nothing');
      assertRevoked(await post({ token: tokens.refresh_token as string }, '', { authorization: auth }));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
    });
  });

  describe('effects (state table)', () => {
    it("other clients' tokens change nothing and still get 200", async () => {
      const tokens = await desktopGrant();
      assertRevoked(await revoke(s.base, web, tokens.refresh_token as string));
      assertRevoked(await revoke(s.base, web, tokens.access_token));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
      const r = await refresh(s.base, desktop, tokens.refresh_token as string);
      assert.equal(r.status, 200, r.body);
    });

    it('a refresh token revokes the whole grant (installed application)', async () => {
      const tokens = await desktopGrant();
      const r = await refresh(s.base, desktop, tokens.refresh_token as string);
      const current = r.json().access_token as string;
      assertRevoked(await revoke(s.base, desktop, tokens.refresh_token as string));
      assert.equal(await userinfoStatus(s.base, current), 401);
      assertOAuthError(await refresh(s.base, desktop, tokens.refresh_token as string), 400, 'invalid_grant');
      assertRevoked(await revoke(s.base, desktop, tokens.refresh_token as string));
    });

    it('a refresh token revokes the whole grant (offline web application)', async () => {
      const tokens = await webGrant({ access_type: 'offline' });
      assertRevoked(await revoke(s.base, web, tokens.refresh_token as string));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      assertOAuthError(await refresh(s.base, web, tokens.refresh_token as string), 400, 'invalid_grant');
    });

    it('an access token of an installed grant revokes only itself; the refresh token still works', async () => {
      const tokens = await desktopGrant();
      assertRevoked(await revoke(s.base, desktop, tokens.access_token));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      const r = await refresh(s.base, desktop, tokens.refresh_token as string);
      assert.equal(r.status, 200, r.body);
      assert.equal(r.json().refresh_token, tokens.refresh_token);
      assert.equal(await userinfoStatus(s.base, r.json().access_token), 200);
    });

    it('an access token of an offline web grant revokes only itself; the refresh token still works', async () => {
      const tokens = await webGrant({ access_type: 'offline', scope: 'profile email' });
      assertRevoked(await revoke(s.base, web, tokens.access_token));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      const r = await refresh(s.base, web, tokens.refresh_token as string);
      assert.equal(r.status, 200, r.body);
      assert.equal(await userinfoStatus(s.base, r.json().access_token), 200);
      // The grant is still active, so the same offline request is not asked again.
      const again = await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams({ client_id: web.client_id, response_type: 'code', scope: 'profile email', redirect_uri: WEB_URI, access_type: 'offline' })}`);
      assert.equal(again.status, 302);
    });

    it('an access token of an online web grant revokes the whole grant', async () => {
      const p = { client_id: web.client_id, response_type: 'code', scope: 'profile rating', redirect_uri: WEB_URI };
      const tokens: Tokens = await webGrant({ scope: 'profile rating' });
      const keep: Tokens = await webGrant({ scope: 'profile collection' });
      assert.equal(tokens.refresh_token, undefined);
      assert.equal((await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams(p)}`)).status, 302, 'pre-authorized while the grant is active');
      assertRevoked(await revoke(s.base, web, tokens.access_token));
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      assert.ok(isConsent(await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams(p)}`)), 'the grant is gone: consent is asked again');
      assert.equal(await userinfoStatus(s.base, keep.access_token), 200, 'other grants are untouched');
    });

    it('an authorization code is not a token: revoking it changes nothing', async () => {
      const code = codeOf(await authorize(alice, s.base, { client_id: desktop.client_id, response_type: 'code', scope: 'profile', redirect_uri: OOB }));
      assertRevoked(await revoke(s.base, desktop, code));
      const ex = await exchange(s.base, desktop, code, OOB);
      assert.equal(ex.status, 200, ex.body);
    });
  });
});

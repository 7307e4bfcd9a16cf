/*
 * POST /oauth2/token: the request checks musicbrainz.org's token endpoint makes (the cases
 * of MusicBrainz's "Exchange authorization code" and "Exchange refresh code" tests) as
 * sleeve decides them (docs/decisions.md, "Authorization service"), the code exchange,
 * refresh and expiry rows of the interface's state table (docs/interface.md), code reuse,
 * redirect-URI binding and PKCE (the cases of MusicBrainz's PKCE authorize test).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, request, startAuthServer, token, type AuthServer, type Browser, type HttpsResponse } from '../helpers/auth.js';
import { ManualClock } from '../helpers/clock.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { assertErrorPage, assertOAuthError, codeOf, exchange, grant, isConsent, OOB, refresh, s256, signIn, startSibling, userinfoStatus, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';
/** Access and refresh tokens: `{grant id, base 36}.{256 random bits, base64url}` (an RFC 6750 b64token). */
const TOKEN_RE = /^[0-9a-z]{1,10}\.[A-Za-z0-9_-]{43}$/;
const V = Buffer.from('...never gonna guess this code..').toString('base64url');

function assertNoStore(res: HttpsResponse): void {
  assert.equal(res.headers['cache-control'], 'no-store');
  assert.equal(res.headers.pragma, 'no-cache');
  assert.equal(res.headers['access-control-allow-origin'], '*');
}

function assertInvalidClient(res: HttpsResponse): void {
  assertOAuthError(res, 401, 'invalid_client', 'Client not authentified');
  assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2-Client"');
  assertNoStore(res);
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;

describe(`/oauth2/token (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  /** The same database served with SLEEVE_ACCESS_TOKEN_TTL=1 and SLEEVE_AUTH_CODE_TTL=1, on a clock the tests move. */
  let short: AuthServer;
  const shortClock = new ManualClock();
  let alice: Browser;
  let web: Client;
  let other: Client;
  let pkce: Client;
  let desktop: Client;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    short = await startSibling(t, { SLEEVE_ACCESS_TOKEN_TTL: '1', SLEEVE_AUTH_CODE_TTL: '1' }, shortClock);
    await addUser(t, 'alice');
    [web, other, pkce, desktop] = await Promise.all([
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'Other Web'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'PKCE Web'),
      addApp(t, 'alice', 'public', undefined, 'Test Desktop'),
    ]);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await short?.server.close();
    await s?.server.close();
    await t?.cleanup();
  });

  const webParams = (extra: Record<string, string> = {}) => ({ client_id: web.client_id, response_type: 'code', scope: 'profile', state: 'xxx', redirect_uri: WEB_URI, ...extra });
  /** A fresh code (consenting each time) for an app. */
  const newCode = async (app: Client, redirectUri: string, extra: Record<string, string> = {}, server = s) =>
    codeOf(await authorize(alice, server.base, { client_id: app.client_id, response_type: 'code', scope: 'profile', redirect_uri: redirectUri, approval_prompt: 'force', ...extra }));

  describe("request checks (MusicBrainz's exchange authorization code cases)", () => {
    it('answers OPTIONS with the allowed methods', async () => {
      const res = await request(`${s.base}/oauth2/token`, { method: 'OPTIONS' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.allow, 'POST, OPTIONS');
      // A browser client may send a DPoP proof (RFC 9449); MusicBrainz's token preflight names no header.
      assert.equal(res.headers['access-control-allow-headers'], 'dpop');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.deepEqual(res.json(), { message: 'OK' });
      assertNoStore(res);
    });

    it('refuses other methods, even with every parameter in the query', async () => {
      const q = new URLSearchParams({ client_id: web.client_id, client_secret: web.client_secret, grant_type: 'authorization_code', code: 'abc', redirect_uri: WEB_URI });
      for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
        const res = await request(`${s.base}/oauth2/token?${q}`, { method });
        assertOAuthError(res, 400, 'invalid_request', 'Only POST requests are allowed');
        assertNoStore(res);
      }
    });

    const names = ['client_id', 'client_secret', 'grant_type', 'redirect_uri', 'code', 'token_type', 'code_verifier', 'refresh_token'];
    for (const name of names) {
      it(`refuses a repeated ${name}`, async () => {
        const form: [string, string][] = [
          ['client_id', 'abc'],
          ['client_secret', 'abc'],
          ['grant_type', 'authorization_code'],
          ['redirect_uri', 'abc'],
          ['code', 'abc'],
          [name, 'abc'],
          [name, 'abc'],
        ];
        const res = await request(`${s.base}/oauth2/token`, { form });
        assertOAuthError(res, 400, 'invalid_request', `Parameter is included more than once in the request: ${name}`);
        assertNoStore(res);
      });
    }

    it('counts a parameter in the query and in the body as repeated', async () => {
      for (const name of ['client_secret', 'code', 'grant_type']) {
        const form = { client_id: web.client_id, client_secret: web.client_secret, grant_type: 'authorization_code', code: 'abc', redirect_uri: WEB_URI };
        const res = await request(`${s.base}/oauth2/token?${name}=${encodeURIComponent(form[name as keyof typeof form])}`, { form });
        assertOAuthError(res, 400, 'invalid_request', `Parameter is included more than once in the request: ${name}`);
      }
    });

    it('names the missing parameter (empty counts as missing)', async () => {
      const creds = { client_id: web.client_id, client_secret: web.client_secret };
      const cases: [Record<string, string>, string][] = [
        [{ ...creds, code: 'abc', redirect_uri: WEB_URI }, 'grant_type'],
        [{ ...creds, grant_type: '', code: 'abc', redirect_uri: WEB_URI }, 'grant_type'],
        [{ ...creds, grant_type: 'authorization_code', redirect_uri: WEB_URI }, 'code'],
        [{ ...creds, grant_type: 'authorization_code', code: '', redirect_uri: WEB_URI }, 'code'],
        [{ ...creds, grant_type: 'authorization_code', code: 'abc' }, 'redirect_uri'],
        [{ ...creds, grant_type: 'refresh_token' }, 'refresh_token'],
        [{ ...creds, grant_type: 'refresh_token', refresh_token: '' }, 'refresh_token'],
      ];
      for (const [form, name] of cases) assertOAuthError(await token(s.base, form), 400, 'invalid_request', `Required parameter is missing: ${name}`);
    });

    it('reads no parameters from a JSON body', async () => {
      const res = await request(`${s.base}/oauth2/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'authorization_code', client_id: web.client_id, client_secret: web.client_secret, code: 'abc', redirect_uri: WEB_URI }),
      });
      assertOAuthError(res, 400, 'invalid_request', 'Required parameter is missing: grant_type');
    });

    it('answers bad client credentials 401 invalid_client with the Basic challenge', async () => {
      const rest = { grant_type: 'authorization_code', code: 'abc', redirect_uri: WEB_URI };
      assertInvalidClient(await token(s.base, { ...rest, client_secret: web.client_secret }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: '', client_secret: web.client_secret }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: 'id-xxx', client_secret: web.client_secret }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: '' }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: 'wrong' }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: `${web.client_secret}x` }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: other.client_secret }));
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: web.client_secret.toUpperCase() }));
    });

    it('lets HTTP Basic credentials win over the body', async () => {
      const rest = { grant_type: 'authorization_code', code: 'x'.repeat(43), redirect_uri: WEB_URI };
      assertInvalidClient(await token(s.base, { ...rest, client_id: web.client_id, client_secret: web.client_secret }, { authorization: basic(web.client_id, 'wrong') }));
      // Authenticated by Basic despite a wrong body secret: the answer is about the code.
      assertOAuthError(await token(s.base, { ...rest, client_id: web.client_id, client_secret: 'wrong' }, { authorization: basic(web.client_id, web.client_secret) }), 400, 'invalid_grant');
      assertOAuthError(await token(s.base, rest, { authorization: basic(web.client_id, web.client_secret) }), 400, 'invalid_grant');
      assertInvalidClient(await token(s.base, rest, { authorization: basic('nobody', web.client_secret) }));
    });

    it('refuses other grant types after client authentication', async () => {
      const creds = { client_id: web.client_id, client_secret: web.client_secret };
      for (const grantType of ['xxx', 'password', 'client_credentials', 'implicit', 'AUTHORIZATION_CODE']) {
        const res = await token(s.base, { ...creds, grant_type: grantType, code: 'abc', redirect_uri: WEB_URI });
        assertOAuthError(res, 400, 'unsupported_grant_type', 'Unsupported grant_type, only authorization_code and refresh_token are supported');
        assertNoStore(res);
      }
      assertInvalidClient(await token(s.base, { client_id: web.client_id, client_secret: 'wrong', grant_type: 'password' }));
    });

    it('allows only the bearer token type', async () => {
      const creds = { client_id: web.client_id, client_secret: web.client_secret };
      for (const tt of ['mac', 'pop', 'DPoP']) {
        assertOAuthError(await token(s.base, { ...creds, grant_type: 'authorization_code', code: 'abc', redirect_uri: WEB_URI, token_type: tt }), 400, 'invalid_request', 'Invalid requested token type, only bearer is allowed');
      }
    });

    it('refuses malformed, unknown and mismatched codes', async () => {
      const creds = { client_id: desktop.client_id, client_secret: desktop.client_secret, grant_type: 'authorization_code', redirect_uri: OOB };
      assertOAuthError(await token(s.base, { ...creds, code: '\'"\0<script>alert(1);</script>' }), 400, 'invalid_request', 'Malformed authorization code');
      assertOAuthError(await token(s.base, { ...creds, code: 'a b' }), 400, 'invalid_request', 'Malformed authorization code');
      assertOAuthError(await token(s.base, { ...creds, code: 'xxxxxxxxxxxxxxxxxxxxxx' }), 400, 'invalid_grant', 'Invalid authorization code');
      assertOAuthError(await token(s.base, { ...creds, code: 'x'.repeat(43) }), 400, 'invalid_grant', 'Invalid authorization code');
      assertOAuthError(await token(s.base, { ...creds, redirect_uri: 'xxx', code: 'x'.repeat(43) }), 400, 'invalid_request', 'Mismatched redirect URI');
      assertOAuthError(
        await token(s.base, { client_id: web.client_id, client_secret: web.client_secret, grant_type: 'authorization_code', redirect_uri: OOB, code: 'x'.repeat(43) }),
        400,
        'invalid_request',
        'Mismatched redirect URI',
      );
    });
  });

  describe('code exchange (state table: authorization code → access token valid)', () => {
    it('a confidential online grant: Bearer access token, expires_in, no refresh token; the token works', async () => {
      const code = await newCode(web, WEB_URI);
      const res = await exchange(s.base, web, code, WEB_URI);
      assert.equal(res.status, 200, res.body);
      assertNoStore(res);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const body = res.json();
      assert.equal(body.token_type, 'Bearer');
      assert.equal(body.expires_in, 3600);
      assert.match(body.access_token, TOKEN_RE);
      assert.equal('refresh_token' in body, false);
      assert.equal(await userinfoStatus(s.base, body.access_token), 200);
    });

    it('a confidential grant with access_type=offline carries a refresh token', async () => {
      const code = await newCode(web, WEB_URI, { access_type: 'offline' });
      const res = await exchange(s.base, web, code, WEB_URI);
      assert.equal(res.status, 200, res.body);
      const body = res.json();
      assert.match(body.refresh_token, TOKEN_RE);
      assert.notEqual(body.refresh_token, body.access_token);
    });

    it('a public (installed) grant carries a refresh token', async () => {
      const code = await newCode(desktop, OOB);
      const res = await exchange(s.base, desktop, code, OOB);
      assert.equal(res.status, 200, res.body);
      assert.equal(res.json().token_type, 'Bearer');
      assert.match(res.json().refresh_token, TOKEN_RE);
      assert.equal(await userinfoStatus(s.base, res.json().access_token), 200);
    });

    it('accepts client_secret_basic and token_type in any case', async () => {
      const code = await newCode(web, WEB_URI);
      const res = await token(s.base, { grant_type: 'authorization_code', code, redirect_uri: WEB_URI, token_type: 'BEARER' }, { authorization: basic(web.client_id, web.client_secret) });
      assert.equal(res.status, 200, res.body);
    });

    it('refuses a token type other than bearer and a redirect URI the application does not have, without burning the code', async () => {
      // Checked between the code's lookup and its writes, which may otherwise share one batch job (docs/decisions.md).
      const code = await newCode(web, WEB_URI);
      assertOAuthError(await exchange(s.base, web, code, WEB_URI, { token_type: 'mac' }), 400, 'invalid_request', 'Invalid requested token type, only bearer is allowed');
      assertOAuthError(await exchange(s.base, web, code, OOB), 400, 'invalid_request', 'Mismatched redirect URI');
      const res = await exchange(s.base, web, code, WEB_URI);
      assert.equal(res.status, 200, res.body);
      assert.equal(await userinfoStatus(s.base, res.json().access_token), 200);
    });

    it("refuses another client's code without burning it", async () => {
      const code = await newCode(web, WEB_URI);
      assertOAuthError(await exchange(s.base, other, code, WEB_URI), 400, 'invalid_grant', 'Invalid authorization code');
      const res = await exchange(s.base, web, code, WEB_URI);
      assert.equal(res.status, 200, res.body);
    });

    it('refuses a second use of a code and revokes what the first use issued (RFC 6749 §4.1.2)', async () => {
      const code = await newCode(web, WEB_URI, { access_type: 'offline' });
      const first = await exchange(s.base, web, code, WEB_URI);
      assert.equal(first.status, 200, first.body);
      const { access_token, refresh_token } = first.json();
      const refreshed = await refresh(s.base, web, refresh_token);
      assert.equal(refreshed.status, 200, refreshed.body);
      const second = refreshed.json().access_token as string;
      assert.equal(await userinfoStatus(s.base, second), 200);

      assertOAuthError(await exchange(s.base, web, code, WEB_URI), 400, 'invalid_grant');
      assert.equal(await userinfoStatus(s.base, access_token), 401);
      assert.equal(await userinfoStatus(s.base, second), 401, 'tokens refreshed from that grant die too');
      assertOAuthError(await refresh(s.base, web, refresh_token), 400, 'invalid_grant', 'Invalid refresh token');
      assertOAuthError(await exchange(s.base, web, code, WEB_URI), 400, 'invalid_grant');
    });

    it('gives tokens for a code once when it is presented many times at once, to two server processes', async () => {
      // Group commit: uses of the same code can meet in one batch (one process) or race between batches (two).
      const twin = await startSibling(t, {});
      try {
        const code = await newCode(web, WEB_URI, { access_type: 'offline' });
        const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => exchange(i % 3 === 0 ? twin.base : s.base, web, code, WEB_URI)));
        const won = answers.filter((r) => r.status === 200);
        assert.equal(won.length, 1, answers.map((r) => `${r.status} ${r.body}`).join('\n'));
        for (const r of answers) if (r.status !== 200) assertOAuthError(r, 400, 'invalid_grant');
        // One more use is a replay: what the one use issued ends (it may have ended already, if a use came after it).
        assertOAuthError(await exchange(s.base, web, code, WEB_URI), 400, 'invalid_grant');
        const { access_token, refresh_token } = (won[0] as HttpsResponse).json();
        assert.equal(await userinfoStatus(s.base, access_token), 401);
        assertOAuthError(await refresh(s.base, web, refresh_token), 400, 'invalid_grant', 'Invalid refresh token');
      } finally {
        await twin.server.close();
      }
    });

    it('binds the code to the redirect_uri of the authorization request (decision), without burning it', async () => {
      const code = await newCode(desktop, 'http://127.0.0.1:5678/cb');
      assertOAuthError(await exchange(s.base, desktop, code, 'http://127.0.0.1:5679/cb'), 400, 'invalid_grant');
      assertOAuthError(await exchange(s.base, desktop, code, 'http://localhost:5678/cb'), 400, 'invalid_grant');
      assertOAuthError(await exchange(s.base, desktop, code, OOB), 400, 'invalid_grant');
      const res = await exchange(s.base, desktop, code, 'http://127.0.0.1:5678/cb');
      assert.equal(res.status, 200, res.body);
    });

    it('refuses an expired code (SLEEVE_AUTH_CODE_TTL=1), also on the oob page', async () => {
      const code = await newCode(desktop, OOB, {}, short);
      const oobUrl = `${short.base}/oauth2/oob?code=${code}`;
      assert.equal((await alice.fetch(oobUrl)).status, 200);
      shortClock.advance(1200);
      assertOAuthError(await exchange(short.base, desktop, code, OOB), 400, 'invalid_grant', 'Expired authorization code');
      assertErrorPage(await alice.fetch(oobUrl), 400, 'invalid_request', 'Expired authorization code');
    });
  });

  describe("PKCE (MusicBrainz's web workflow online with PKCE cases)", () => {
    const p = (extra: Record<string, string>) => ({ client_id: pkce.client_id, response_type: 'code', scope: 'profile', state: 'xyz', redirect_uri: WEB_URI, ...extra });

    it('plain by default: wrong, empty and missing verifiers fail without burning the code', async () => {
      const code = codeOf(await authorize(alice, s.base, p({ code_challenge: V })));
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI, { code_verifier: Buffer.from('wrong').toString('base64url') }), 400, 'invalid_grant', 'Invalid PKCE verifier');
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI, { code_verifier: '' }), 400, 'invalid_grant', 'Invalid PKCE verifier');
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI, { code_verifier: s256(V) }), 400, 'invalid_grant', 'Invalid PKCE verifier');
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI), 400, 'invalid_request', 'Required parameter is missing: code_verifier');
      const res = await exchange(s.base, pkce, code, WEB_URI, { code_verifier: V });
      assert.equal(res.status, 200, res.body);
      assert.equal(res.json().token_type, 'Bearer');
    });

    it('explicit plain, pre-authorized', async () => {
      const res = await alice.fetch(`${s.base}/oauth2/authorize?${new URLSearchParams(p({ code_challenge: V, code_challenge_method: 'plain' }))}`);
      assert.equal(res.status, 302, 'pre-authorized: an immediate redirect');
      const ex = await exchange(s.base, pkce, codeOf(res), WEB_URI, { code_verifier: V });
      assert.equal(ex.status, 200, ex.body);
    });

    it('S256 with the verifier as challenge fails', async () => {
      const code = codeOf(await authorize(alice, s.base, p({ code_challenge: V, code_challenge_method: 'S256' })));
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI, { code_verifier: V }), 400, 'invalid_grant', 'Invalid PKCE verifier');
    });

    it('S256 succeeds with the right verifier, for web and installed apps', async () => {
      const code = codeOf(await authorize(alice, s.base, p({ code_challenge: s256(V), code_challenge_method: 'S256' })));
      assertOAuthError(await exchange(s.base, pkce, code, WEB_URI, { code_verifier: s256(V) }), 400, 'invalid_grant', 'Invalid PKCE verifier');
      const ex = await exchange(s.base, pkce, code, WEB_URI, { code_verifier: V });
      assert.equal(ex.status, 200, ex.body);

      const verifier = 'A'.repeat(20) + '-._~' + 'z'.repeat(40);
      const dcode = await newCode(desktop, OOB, { code_challenge: s256(verifier), code_challenge_method: 'S256' });
      assertOAuthError(await exchange(s.base, desktop, dcode, OOB), 400, 'invalid_request', 'Required parameter is missing: code_verifier');
      const dex = await exchange(s.base, desktop, dcode, OOB, { code_verifier: verifier });
      assert.equal(dex.status, 200, dex.body);
      assert.match(dex.json().refresh_token, TOKEN_RE);
    });

    it('refuses a verifier for a code issued without a challenge (no downgrade), without burning the code', async () => {
      const code = await newCode(web, WEB_URI);
      assertOAuthError(await exchange(s.base, web, code, WEB_URI, { code_verifier: V }), 400, 'invalid_grant');
      const res = await exchange(s.base, web, code, WEB_URI);
      assert.equal(res.status, 200, res.body);
    });
  });

  describe("refresh (state table: grant active → new access token; MusicBrainz's exchange refresh code cases)", () => {
    let tokens: { access_token: string; refresh_token: string };

    before(async () => {
      tokens = (await grant(alice, s.base, desktop, { redirect_uri: OOB, scope: 'profile email' })) as typeof tokens;
    });

    it("refuses unknown and other clients' refresh tokens", async () => {
      assertOAuthError(await refresh(s.base, desktop, 'x'.repeat(43)), 400, 'invalid_grant', 'Invalid refresh token');
      assertOAuthError(await refresh(s.base, web, tokens.refresh_token), 400, 'invalid_grant', 'Invalid refresh token');
      assertOAuthError(await refresh(s.base, desktop, tokens.access_token), 400, 'invalid_grant', 'Invalid refresh token');
      assertInvalidClient(await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: desktop.client_id, client_secret: 'wrong' }));
      // The client and the grant are read together when they belong together: a wrong secret sent as Basic is still invalid_client.
      assertInvalidClient(await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, { authorization: basic(desktop.client_id, 'wrong') }));
      // Another client's own secret with this client's token: that client is authenticated, the token is not its.
      assertOAuthError(await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, { authorization: basic(web.client_id, web.client_secret) }), 400, 'invalid_grant', 'Invalid refresh token');
    });

    it('gives a new access token and the same refresh token; the old access token dies', async () => {
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
      const res = await refresh(s.base, desktop, tokens.refresh_token);
      assert.equal(res.status, 200, res.body);
      assertNoStore(res);
      const body = res.json();
      assert.equal(body.token_type, 'Bearer');
      assert.equal(body.expires_in, 3600);
      assert.match(body.access_token, TOKEN_RE);
      assert.notEqual(body.access_token, tokens.access_token);
      assert.equal(body.refresh_token, tokens.refresh_token, 'not rotated');
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      assert.equal(await userinfoStatus(s.base, body.access_token), 200);
      const info = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${body.access_token}` } });
      assert.equal(info.json().email, 'alice@example.com', 'the refreshed token keeps the scopes');

      const again = await refresh(s.base, desktop, tokens.refresh_token);
      assert.equal(again.status, 200, again.body);
      assert.equal(await userinfoStatus(s.base, body.access_token), 401);
      assert.equal(await userinfoStatus(s.base, again.json().access_token), 200);
    });

    it('accepts client_secret_basic', async () => {
      const res = await token(s.base, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, { authorization: basic(desktop.client_id, desktop.client_secret) });
      assert.equal(res.status, 200, res.body);
    });
  });

  describe('expiry (state table: access token valid → expired)', () => {
    it('an access token stops working when its life time passes; refreshing gives a new one (SLEEVE_ACCESS_TOKEN_TTL=1)', async () => {
      const code = await newCode(desktop, OOB, {}, short);
      const res = await exchange(short.base, desktop, code, OOB);
      assert.equal(res.status, 200, res.body);
      const body = res.json();
      assert.equal(body.expires_in, 1);
      assert.equal(await userinfoStatus(short.base, body.access_token), 200);
      shortClock.advance(1200);
      const expired = await request(`${short.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${body.access_token}` } });
      assert.equal(expired.status, 401);
      assert.match(String(expired.headers['www-authenticate']), /error="invalid_token"/);
      const renewed = await refresh(short.base, desktop, body.refresh_token);
      assert.equal(renewed.status, 200, renewed.body);
      assert.equal(renewed.json().refresh_token, body.refresh_token);
      assert.equal(await userinfoStatus(short.base, renewed.json().access_token), 200);
    });

    it('an online grant cannot be renewed: consent is skipped but a new code is needed', async () => {
      const first = await grant(alice, short.base, web, webParams({ scope: 'profile tag' }));
      assert.equal(first.refresh_token, undefined);
      shortClock.advance(1200);
      assert.equal(await userinfoStatus(short.base, first.access_token), 401);
      const res = await alice.fetch(`${short.base}/oauth2/authorize?${new URLSearchParams(webParams({ scope: 'profile tag' }))}`);
      assert.equal(res.status, 302, 'still pre-authorized');
      assert.ok(!isConsent(res));
    });
  });
});

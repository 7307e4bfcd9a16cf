/*
 * /oauth2/userinfo (the claims musicbrainz.org's userinfo gives and the cases of
 * MusicBrainz's "User info" test, plus the age and country the interface's profile scope
 * names, docs/interface.md "Scopes"; token handling as docs/decisions.md "Authorization
 * service" decides), RFC 7662 introspection and RFC 8414 metadata.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, request, startAuthServer, type AuthServer, type Browser, type HttpsResponse } from '../helpers/auth.js';
import { ManualClock } from '../helpers/clock.js';
import { cliInProcess, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { assertOAuthError, grant, OOB, revoke, signIn, startSibling, type Client, type Tokens } from './support.js';

const ALL = 'profile email tag rating collection submit_isrc submit_barcode';
const BIRTH = '1990-06-15';

function ageToday(birth: string): number {
  const [y, m, d] = birth.split('-').map(Number) as [number, number, number];
  const now = new Date();
  let age = now.getUTCFullYear() - y;
  if (now.getUTCMonth() + 1 < m || (now.getUTCMonth() + 1 === m && now.getUTCDate() < d)) age--;
  return age;
}

function assertInvalidToken(res: HttpsResponse): void {
  assertOAuthError(res, 401, 'invalid_token');
  const challenge = String(res.headers['www-authenticate']);
  assert.match(challenge, /^Bearer realm="sleeve"/);
  assert.match(challenge, /error="invalid_token"/);
  assert.equal(res.headers['cache-control'], 'no-store');
}

describe(`/oauth2/userinfo, introspection and metadata (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let short: AuthServer;
  let desktop: Client;
  let web: Client;
  /** Registered with --resource-server: may introspect every application's tokens. */
  let resource: Client;
  /** editor1's tokens by scope string. */
  const editor1: Record<string, Tokens> = {};
  let editor2: Tokens;
  let editor2Email: Tokens;
  let unicode: Tokens;
  let editor1Id: number;
  let b2: Browser;
  /** A token of the short-lived server, whose clock stands still until the tests move it past the token's life. */
  let shortTokens: Tokens;
  const shortClock = new ManualClock();
  const whenExpired = () => shortClock.advance(1200);

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    short = await startSibling(t, { SLEEVE_ACCESS_TOKEN_TTL: '1' }, shortClock);
    await Promise.all([
      addUser(t, 'editor1', ['--email-verified', '--website', 'http://www.mysite.com/', '--gender', 'Male', '--zoneinfo', 'Europe/Bratislava', '--birth-date', BIRTH, '--country', 'GB']),
      addUser(t, 'editor2'),
      addUser(t, 'æditorⅣ'),
    ]);
    [desktop, web, resource] = await Promise.all([
      addApp(t, 'editor1', 'public', undefined, 'Test Desktop'),
      addApp(t, 'editor1', 'confidential', 'https://client.example/cb', 'Test Web'),
      cliInProcess(t.env, ['--json', 'app', 'add', '--owner', 'editor2', '--name', 'Resource Server', '--type', 'confidential', '--redirect-uri', 'https://api.example/cb', '--resource-server']),
    ]);
    let b1: Browser;
    let b3: Browser;
    [b1, b2, b3] = await Promise.all([signIn(s.base, 'editor1'), signIn(s.base, 'editor2'), signIn(s.base, 'æditorⅣ')]);
    // The session works on both servers (one database).
    shortTokens = await grant(b2, short.base, desktop, { redirect_uri: OOB });
    for (const scope of [ALL, 'profile', 'email', '', 'profile tag']) editor1[scope] = await grant(b1, s.base, desktop, { redirect_uri: OOB, scope });
    editor2 = await grant(b2, s.base, desktop, { redirect_uri: OOB, scope: 'profile' });
    editor2Email = await grant(b2, s.base, desktop, { redirect_uri: OOB, scope: 'profile email' });
    unicode = await grant(b3, s.base, desktop, { redirect_uri: OOB, scope: 'profile' });
    const introspected = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${editor1.profile?.access_token}` } });
    editor1Id = introspected.json().metabrainz_user_id;
  });

  after(async () => {
    await short?.server.close();
    await s?.server.close();
    await t?.cleanup();
  });

  const info = (tok: string) => request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tok}` } });

  describe('userinfo', () => {
    it('answers OPTIONS for a CORS preflight', async () => {
      const res = await request(`${s.base}/oauth2/userinfo`, { method: 'OPTIONS' });
      assert.equal(res.status, 200);
      assert.equal(res.headers.allow, 'GET, POST, OPTIONS');
      assert.equal(res.headers['access-control-allow-headers'], 'authorization, dpop');
      assert.equal(res.headers['access-control-allow-origin'], '*');
    });

    it('asks for a token with 401 and a Bearer challenge without error when none is sent', async () => {
      for (const res of [await request(`${s.base}/oauth2/userinfo`), await request(`${s.base}/oauth2/userinfo`, { form: {} }), await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: 'Basic Zm9vOmJhcg==' } })]) {
        assert.equal(res.status, 401);
        assert.equal(res.headers['www-authenticate'], 'Bearer realm="sleeve"');
        assert.equal(res.headers['access-control-allow-origin'], '*');
      }
    });

    it('answers unknown tokens 401 invalid_token in every position', async () => {
      assertInvalidToken(await info('x'.repeat(43)));
      assertInvalidToken(await request(`${s.base}/oauth2/userinfo?access_token=unknown`));
      assertInvalidToken(await request(`${s.base}/oauth2/userinfo`, { form: { access_token: 'unknown' } }));
      assertInvalidToken(await info(editor1.profile?.refresh_token as string));
    });

    it('answers an expired token 401 invalid_token', async () => {
      assert.equal(shortTokens.expires_in, 1);
      whenExpired();
      assertInvalidToken(await request(`${short.base}/oauth2/userinfo?access_token=${shortTokens.access_token}`));
      assertInvalidToken(await request(`${short.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${shortTokens.access_token}` } }));
    });

    it('answers a revoked token 401 invalid_token', async () => {
      const tokens = await grant(b2, s.base, desktop, { redirect_uri: OOB });
      assert.equal((await info(tokens.access_token)).status, 200);
      assert.equal((await revoke(s.base, desktop, tokens.refresh_token as string)).status, 200);
      assertInvalidToken(await info(tokens.access_token));
    });

    it("gives every claim with all scopes: MusicBrainz's keys, plus age and country", async () => {
      const res = await info(editor1[ALL]?.access_token as string);
      assert.equal(res.status, 200, res.body);
      assert.equal(res.headers['content-type'], 'application/json; charset=utf-8');
      assert.equal(res.headers['cache-control'], 'no-store');
      assert.equal(res.headers['access-control-allow-origin'], '*');
      assert.deepEqual(res.json(), {
        sub: 'editor1',
        profile: `${s.base}/user/editor1`,
        metabrainz_user_id: editor1Id,
        website: 'http://www.mysite.com/',
        gender: 'male',
        zoneinfo: 'Europe/Bratislava',
        age: ageToday(BIRTH),
        country: 'GB',
        email: 'editor1@example.com',
        email_verified: true,
      });
      assert.equal(typeof editor1Id, 'number');
    });

    it('leaves email and email_verified out without the email scope', async () => {
      for (const scope of ['profile', 'profile tag']) {
        const res = await info(editor1[scope]?.access_token as string);
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), {
          sub: 'editor1',
          profile: `${s.base}/user/editor1`,
          metabrainz_user_id: editor1Id,
          website: 'http://www.mysite.com/',
          gender: 'male',
          zoneinfo: 'Europe/Bratislava',
          age: ageToday(BIRTH),
          country: 'GB',
        });
      }
    });

    it('gives only what is known: zoneinfo defaults to UTC, email_verified false when unconfirmed', async () => {
      const minimal = (await info(editor2.access_token)).json();
      assert.deepEqual(Object.keys(minimal).sort(), ['metabrainz_user_id', 'profile', 'sub', 'zoneinfo']);
      assert.equal(minimal.sub, 'editor2');
      assert.equal(minimal.zoneinfo, 'UTC');
      assert.notEqual(minimal.metabrainz_user_id, editor1Id);
      const withEmail = (await info(editor2Email.access_token)).json();
      assert.equal(withEmail.email, 'editor2@example.com');
      assert.equal(withEmail.email_verified, false);
    });

    it('percent-encodes a non-ASCII name in profile and sends it as UTF-8 in sub', async () => {
      const res = await info(unicode.access_token);
      assert.equal(res.status, 200);
      assert.deepEqual(res.json(), { sub: 'æditorⅣ', profile: `${s.base}/user/%C3%A6ditor%E2%85%A3`, metabrainz_user_id: res.json().metabrainz_user_id, zoneinfo: 'UTC' });
      const profile = await request(res.json().profile);
      assert.equal(profile.status, 200);
      assert.ok(profile.body.includes('æditorⅣ'));
    });

    it('answers 403 insufficient_scope without the profile scope', async () => {
      for (const scope of ['email', '']) {
        const res = await info(editor1[scope]?.access_token as string);
        assertOAuthError(res, 403, 'insufficient_scope');
        assert.match(String(res.headers['www-authenticate']), /^Bearer realm="sleeve".*error="insufficient_scope"/);
        assert.ok(!res.body.includes('editor1'), 'no claims');
      }
    });

    it('takes the token from the header (any case of Bearer), a form body or the query', async () => {
      const tok = editor1.profile?.access_token as string;
      const expected = (await info(tok)).json();
      const ways: Promise<HttpsResponse>[] = [
        request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `bearer ${tok}` } }),
        request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `BEARER ${tok}` } }),
        request(`${s.base}/oauth2/userinfo`, { method: 'POST', headers: { authorization: `Bearer ${tok}` } }),
        request(`${s.base}/oauth2/userinfo`, { form: { access_token: tok } }),
        request(`${s.base}/oauth2/userinfo?access_token=${tok}`),
        request(`${s.base}/oauth2/userinfo?access_token=${tok}`, { method: 'POST' }),
      ];
      for (const res of await Promise.all(ways)) {
        assert.equal(res.status, 200, res.body);
        assert.deepEqual(res.json(), expected);
      }
    });

    it('refuses a token sent in more than one way with 400 (RFC 6750 §2)', async () => {
      const tok = editor1.profile?.access_token as string;
      const cases = [
        request(`${s.base}/oauth2/userinfo?access_token=${tok}`, { headers: { authorization: `Bearer ${tok}` } }),
        request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tok}` }, form: { access_token: tok } }),
        request(`${s.base}/oauth2/userinfo?access_token=${tok}`, { form: { access_token: tok } }),
        request(`${s.base}/oauth2/userinfo?access_token=${tok}&access_token=${tok}`),
        request(`${s.base}/oauth2/userinfo`, { form: [['access_token', tok], ['access_token', tok]] }),
      ];
      for (const res of await Promise.all(cases)) {
        assertOAuthError(res, 400, 'invalid_request');
        assert.ok(!res.body.includes('editor1'));
      }
    });
  });

  describe('introspection (RFC 7662)', () => {
    const introspect = (form: Record<string, string>, headers: Record<string, string> = {}) => request(`${s.base}/oauth2/introspect`, { form, headers });
    const as = (app: Client) => ({ client_id: app.client_id, client_secret: app.client_secret });

    /** The answer as each client sees it. */
    const seenBy = async (tok: string, clients: Client[], hint?: string) =>
      Promise.all(clients.map(async (c) => (await introspect({ token: tok, ...(hint ? { token_type_hint: hint } : {}), ...as(c) })).json()));

    it('describes an active access token to the client it was issued to, and to a resource server', async () => {
      const tok = editor1[ALL] as Tokens;
      for (const client of [desktop, resource]) {
        const res = await introspect({ token: tok.access_token, ...as(client) });
        assert.equal(res.status, 200, res.body);
        assert.equal(res.headers['cache-control'], 'no-store');
        const body = res.json();
        assert.equal(body.active, true);
        assert.deepEqual(body.scope.split(' ').sort(), ALL.split(' ').sort());
        assert.equal(body.client_id, desktop.client_id);
        assert.equal(body.username, 'editor1');
        assert.equal(typeof body.exp, 'number');
        assert.ok(Math.abs(body.exp - (Date.now() / 1000 + 3600)) < 120, `exp ${body.exp}`);
      }
    });

    it("tells any other client nothing about another client's tokens, access or refresh: {\"active\": false}", async () => {
      const tok = editor1[ALL] as Tokens;
      for (const [what, value, hint] of [
        ['access', tok.access_token, undefined],
        ['access with hint', tok.access_token, 'access_token'],
        ['refresh', tok.refresh_token as string, undefined],
        ['refresh with hint', tok.refresh_token as string, 'refresh_token'],
      ] as const) {
        const res = await introspect({ token: value, ...(hint ? { token_type_hint: hint } : {}), ...as(web) });
        assert.equal(res.status, 200, what);
        assert.equal(res.body, '{"active":false}', what);
      }
      // The same tokens still work for their own client: the answer above was no revocation.
      assert.deepEqual((await seenBy(tok.access_token, [desktop])).map((b) => b.active), [true]);
    });

    it('shows the owner that an application is a resource server on the applications page', async () => {
      const page = (await b2.fetch(`${s.base}/account/applications`)).body;
      const card = page.split('<div class="card">').find((c) => c.includes('<h3>Resource Server</h3>'));
      assert.match(card ?? '', /<dt>Resource server<\/dt>/);
    });

    it('describes an active refresh token to its client and to a resource server', async () => {
      for (const body of await seenBy(editor1.profile?.refresh_token as string, [desktop, resource], 'refresh_token')) {
        assert.equal(body.active, true);
        assert.equal(body.token_type, 'refresh_token');
        assert.equal(body.scope, 'profile');
        assert.equal(body.client_id, desktop.client_id);
        assert.equal(body.username, 'editor1');
      }
    });

    it('sleeve app edit CLIENT_ID --resource-server / --no-resource-server changes what a client may introspect, at once', async () => {
      const tok = editor1[ALL] as Tokens;
      const on = await cliInProcess(t.env, ['--json', 'app', 'edit', web.client_id, '--resource-server']);
      assert.deepEqual(on, { client_id: web.client_id, name: 'Test Web', redirect_uri: 'https://client.example/cb', redirect_uris: ['https://client.example/cb'], resource_server: true, id_token_alg: 'RS256', require_dpop: false });
      assert.equal((await seenBy(tok.access_token, [web]))[0].active, true);
      const off = await cliInProcess(t.env, ['--json', 'app', 'edit', web.client_id, '--no-resource-server']);
      assert.equal(off.resource_server, false);
      assert.deepEqual(await seenBy(tok.access_token, [web]), [{ active: false }]);
      for (const [args, message] of [
        [[web.client_id], /nothing to change/],
        [[web.client_id, '--resource-server', '--no-resource-server'], /contradict/],
        [['no-such-client', '--resource-server'], /no application with client_id no-such-client/],
        [[web.client_id, '--redirect-uri', 'https://client.example:99999/cb'], /between 1 and 65535/],
      ] as const) {
        const r = await runCli(t.env, ['app', 'edit', ...args]);
        assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
        assert.match(r.stderr, message);
      }
      assert.deepEqual(await seenBy(tok.access_token, [web]), [{ active: false }], 'the refused edits changed nothing');
    });

    it('answers {"active":false} for unknown, revoked and expired tokens', async () => {
      assert.deepEqual((await introspect({ token: 'nope', ...as(resource) })).json(), { active: false });
      const tokens = await grant(b2, s.base, desktop, { redirect_uri: OOB });
      await revoke(s.base, desktop, tokens.refresh_token as string);
      for (const tok of [tokens.access_token, tokens.refresh_token as string]) {
        const res = await introspect({ token: tok, ...as(desktop) });
        assert.equal(res.status, 200);
        assert.deepEqual(res.json(), { active: false });
      }
      whenExpired();
      assert.deepEqual((await request(`${short.base}/oauth2/introspect`, { form: { token: shortTokens.access_token, ...as(resource) } })).json(), { active: false });
    });

    it('requires client authentication (body or Basic) and a token', async () => {
      const tok = editor1.profile?.access_token as string;
      for (const res of [await introspect({ token: tok }), await introspect({ token: tok, client_id: web.client_id, client_secret: 'wrong' })]) {
        assertOAuthError(res, 401, 'invalid_client');
        assert.equal(res.headers['www-authenticate'], 'Basic realm="OAuth2-Client"');
        assert.ok(!res.body.includes('editor1'));
      }
      const viaBasic = await introspect({ token: tok }, { authorization: `Basic ${Buffer.from(`${resource.client_id}:${resource.client_secret}`).toString('base64')}` });
      assert.equal(viaBasic.json().active, true);
      assertOAuthError(await introspect({ ...as(web) }), 400, 'invalid_request', 'Required parameter is missing: token');
      assertOAuthError(await request(`${s.base}/oauth2/introspect?token=${tok}&client_id=${web.client_id}&client_secret=${web.client_secret}`), 400, 'invalid_request');
    });
  });

  describe('authorization server metadata (RFC 8414)', () => {
    it('describes the endpoints, scopes and methods sleeve offers', async () => {
      const res = await request(`${s.base}/.well-known/oauth-authorization-server`);
      assert.equal(res.status, 200);
      assert.match(String(res.headers['content-type']), /^application\/json/);
      const m = res.json();
      assert.equal(m.issuer, s.base);
      assert.equal(m.authorization_endpoint, `${s.base}/oauth2/authorize`);
      assert.equal(m.token_endpoint, `${s.base}/oauth2/token`);
      assert.equal(m.revocation_endpoint, `${s.base}/oauth2/revoke`);
      assert.equal(m.introspection_endpoint, `${s.base}/oauth2/introspect`);
      assert.equal(m.userinfo_endpoint, `${s.base}/oauth2/userinfo`);
      // The interface's scopes, OpenID Connect's openid and today's MetaBrainz names of the classic ones.
      const mb = ['tag', 'rating', 'collection', 'submit_isrc', 'submit_barcode'].map((n) => `musicbrainz:${n}`);
      assert.deepEqual([...m.scopes_supported].sort(), [...ALL.split(' '), 'openid', 'offline_access', 'cover_art', ...mb].sort());
      assert.deepEqual(m.response_types_supported, ['code']);
      assert.deepEqual([...m.grant_types_supported].sort(), ['authorization_code', 'refresh_token', 'urn:ietf:params:oauth:grant-type:device_code']);
      assert.equal(m.device_authorization_endpoint, `${s.base}/oauth2/device_authorization`);
      assert.deepEqual([...m.code_challenge_methods_supported].sort(), ['S256', 'plain']);
      assert.deepEqual([...m.response_modes_supported].sort(), ['form_post', 'query']);
      for (const key of ['token_endpoint_auth_methods_supported', 'revocation_endpoint_auth_methods_supported', 'introspection_endpoint_auth_methods_supported']) {
        // The token endpoint also takes `none` (a public client with PKCE; test/auth/rfc9700.test.ts).
        const none = key === 'token_endpoint_auth_methods_supported' ? ['none'] : [];
        assert.deepEqual([...m[key]].sort(), ['client_secret_basic', 'client_secret_post', ...none], key);
      }
      for (const endpoint of [m.token_endpoint, m.revocation_endpoint, m.userinfo_endpoint, m.introspection_endpoint, m.device_authorization_endpoint]) {
        assert.equal((await request(endpoint, { method: 'OPTIONS' })).status, 200, endpoint);
      }
    });
  });
});

/*
 * OpenID Connect RP-Initiated Logout 1.0 at the end_session_endpoint (docs/decisions.md,
 * "Sign-out (RP-Initiated Logout)"): over HTTPS with a cookie jar, id_tokens from a real code
 * flow. The pages in a real browser: test/auth/logout-browser.test.ts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, Browser, request, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { assertErrorPage, codeOf, exchange, signIn, startLoggedAuthServer, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';

describe(`RP-Initiated Logout (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer & { logs(): string };
  let rp: Client;
  let rp2: Client;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    s = await startLoggedAuthServer(t);
    await addUser(t, 'alice');
    await addUser(t, 'bob');
    [rp, rp2] = await Promise.all([addApp(t, 'alice', 'confidential', WEB_URI, 'Logout RP'), addApp(t, 'alice', 'confidential', 'https://other.example/cb', 'Other RP')]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  /** A signed-in browser and an id_token of its user for `app`. */
  async function session(name: string, app: Client = rp, redirectUri = WEB_URI): Promise<{ b: Browser; idToken: string }> {
    const b = await signIn(s.base, name);
    const res = await authorize(b, s.base, { client_id: app.client_id, response_type: 'code', scope: 'openid', redirect_uri: redirectUri });
    const ex = await exchange(s.base, app, codeOf(res), redirectUri);
    assert.equal(ex.status, 200, ex.body);
    return { b, idToken: ex.json().id_token };
  }

  const logoutUrl = (params: Record<string, string>) => `${s.base}/oauth2/logout?${new URLSearchParams(params)}`;

  /** Whether the browser's session still works (the applications page, not a redirect to sign in). */
  async function signedIn(b: Browser): Promise<boolean> {
    return (await b.fetch(`${s.base}/account/applications`)).status === 200;
  }

  function isConfirmation(res: HttpsResponse): boolean {
    return res.status === 200 && res.body.includes('Do you want to sign out?') && res.body.includes('action="/oauth2/logout"');
  }

  it('discovery names the end_session_endpoint', async () => {
    assert.equal((await request(`${s.base}/.well-known/openid-configuration`)).json().end_session_endpoint, `${s.base}/oauth2/logout`);
  });

  it("an id_token_hint of the signed-in user: signed out at once, sent to the registered post_logout_redirect_uri with state; the cookie and the session are gone", async () => {
    const { b, idToken } = await session('alice');
    const oldCookie = b.jar.get('__Host-sleeve-session');
    const res = await b.fetch(logoutUrl({ id_token_hint: idToken, post_logout_redirect_uri: WEB_URI, state: 'st 1' }));
    assert.equal(res.status, 303);
    const back = new URL(String(res.headers.location));
    assert.equal(`${back.origin}${back.pathname}`, WEB_URI);
    assert.equal(back.searchParams.get('state'), 'st 1');
    assert.match(String(res.headers['set-cookie']), /__Host-sleeve-session=;[^,]*Max-Age=0/);
    assert.equal(b.jar.has('__Host-sleeve-session'), false);
    // The old cookie, kept by a thief, no longer names a session.
    const stale = await request(`${s.base}/account/applications`, { headers: { cookie: `__Host-sleeve-session=${oldCookie}` } });
    assert.equal(stale.status, 303);
    const findLine = async () => s.logs().split('\n').find((l) => l.includes('"audit":"signout"') && l.includes('"via":"end_session"'));
    const line = (await pollUntil(findLine, (l) => l !== undefined)).value;
    assert.ok(line, 'a signout audit line');
    assert.equal(JSON.parse(line).clientId, rp.client_id);
    assert.equal(JSON.parse(line).user, 'alice');
  });

  it('without a hint: a confirmation page with its CSRF token; only its POST signs out, then the redirect with state', async () => {
    const { b } = await session('alice');
    const page = await b.fetch(logoutUrl({ client_id: rp.client_id, post_logout_redirect_uri: WEB_URI, state: 'xyz' }));
    assert.ok(isConfirmation(page), page.body.slice(0, 500));
    assert.match(page.body, /<strong>Logout RP<\/strong> asks to sign you out/);
    assert.ok(await signedIn(b), 'asking signed out nothing');
    const forged = await b.fetch(`${s.base}/oauth2/logout`, { form: { csrf_token: 'x'.repeat(43), client_id: rp.client_id, post_logout_redirect_uri: WEB_URI, state: 'xyz' } });
    assert.equal(forged.status, 400);
    assert.ok(await signedIn(b), 'a wrong CSRF token signs out nothing');
    const form = Object.fromEntries([...page.body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1] as string, m[2] as string]));
    const done = await b.fetch(`${s.base}/oauth2/logout`, { form });
    assert.equal(done.status, 303);
    assert.equal(done.headers.location, `${WEB_URI}?state=xyz`);
    assert.equal(await signedIn(b), false);
  });

  it("a hint of another user than the signed-in one asks first", async () => {
    const { idToken: bobs } = await session('bob');
    const { b } = await session('alice');
    assert.ok(isConfirmation(await b.fetch(logoutUrl({ id_token_hint: bobs, post_logout_redirect_uri: WEB_URI }))));
    assert.ok(await signedIn(b));
  });

  it("a client's form POST is sent on as a GET (which carries the SameSite=Lax session cookie), then signs out; without a URI, the signed-out page", async () => {
    const { b, idToken } = await session('alice');
    const res = await b.fetch(`${s.base}/oauth2/logout`, { form: { id_token_hint: idToken, state: 'p' } });
    assert.equal(res.status, 303);
    const again = await b.fetch(`${s.base}${res.headers.location}`);
    assert.equal(again.status, 303);
    assert.equal(again.headers.location, '/oauth2/signed_out');
    assert.equal(await signedIn(b), false);
    const page = await b.fetch(`${s.base}/oauth2/signed_out`);
    assert.match(page.body, /You are signed out of sleeve/);
  });

  it('never redirects to an unregistered URI, nor without knowing the client; a bad or mismatched hint is a 400 page', async () => {
    const { b, idToken } = await session('alice');
    const other = (await session('alice', rp2, 'https://other.example/cb')).idToken;
    const cases: [Record<string, string>, string][] = [
      [{ client_id: rp.client_id, post_logout_redirect_uri: 'https://client.example/elsewhere' }, 'The post_logout_redirect_uri is not registered for this application'],
      [{ client_id: rp.client_id, post_logout_redirect_uri: `${WEB_URI}?x=1` }, 'The post_logout_redirect_uri is not registered for this application'],
      [{ id_token_hint: other, post_logout_redirect_uri: WEB_URI }, 'The post_logout_redirect_uri is not registered for this application'],
      [{ post_logout_redirect_uri: WEB_URI }, 'A post_logout_redirect_uri needs a client_id or an id_token_hint'],
      [{ id_token_hint: idToken, client_id: rp2.client_id }, 'The id_token_hint was not issued to this client_id'],
      [{ id_token_hint: `${idToken}x` }, 'The id_token_hint is not an id_token of this service'],
      [{ id_token_hint: 'a'.repeat(5000) }, 'The id_token_hint is not an id_token of this service'],
      [{ client_id: 'no-such-client' }, 'Unknown client'],
    ];
    for (const [params, description] of cases) assertErrorPage(await b.fetch(logoutUrl(params)), 400, 'invalid_request', description);
    const twice = await b.fetch(`${s.base}/oauth2/logout?state=a&state=b`);
    assertErrorPage(twice, 400, 'invalid_request', 'Parameter is included more than once in the request: state');
    assert.ok(await signedIn(b), 'none of them signed out');
  });

  it('without a session: straight to the registered URI (or the signed-out page)', async () => {
    const res = await request(logoutUrl({ client_id: rp.client_id, post_logout_redirect_uri: WEB_URI, state: 's' }));
    assert.equal(res.status, 303);
    assert.equal(res.headers.location, `${WEB_URI}?state=s`);
    const plain = await request(logoutUrl({}));
    assert.equal(plain.headers.location, '/oauth2/signed_out');
  });

  it("the header's Sign out button (a POST with the CSRF token) still signs out", async () => {
    const b = await signIn(s.base, 'alice');
    const page = await b.fetch(`${s.base}/account/applications`);
    assert.match(page.body, /<form class="inline" method="post" action="\/logout"><input type="hidden" name="csrf_token" value="[^"]+"><button class="link" type="submit">Sign out<\/button>/);
    const res = await b.fetch(`${s.base}/logout`, { form: { csrf_token: Browser.csrf(page) } });
    assert.equal(res.status, 303);
    assert.equal(await signedIn(b), false);
  });
});


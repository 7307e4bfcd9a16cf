/*
 * GET/POST /oauth2/authorize and /oauth2/oob through HTTPS: the login interstitial, the
 * request checks musicbrainz.org's authorize makes (repeated and missing parameters, client,
 * redirect URI, response type, scope, PKCE challenge) as sleeve decides them
 * (docs/decisions.md, "Authorization service"), the consent page, and the cases of
 * MusicBrainz's own authorize tests: the web workflow online and offline, the desktop
 * workflow with oob and loopback redirects, PKCE, and response_mode=form_post.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, Browser, PASSWORD, startAuthServer, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { assertErrorPage, authorizeUrl, codeOf, exchange, isConsent, OOB, signIn, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';
const OFFLINE_BULLET = /Perform the above operations when I('|&#39;|&#x27;)m not using the application/;

function params(res: HttpsResponse): URLSearchParams {
  assert.equal(res.status, 302, `a redirect, got ${res.status}: ${res.body.slice(0, 400)}`);
  return new URL(String(res.headers.location)).searchParams;
}

function assertPageHeaders(res: HttpsResponse): void {
  assert.equal(res.headers['x-frame-options'], 'DENY');
  assert.match(String(res.headers['content-security-policy']), /frame-ancestors 'none'/);
  assert.equal(res.headers['referrer-policy'], 'strict-origin-when-cross-origin');
}

describe(`/oauth2/authorize (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let alice: Browser;
  let bob: Browser;
  let web: Client;
  let webOffline: Client;
  let webPkce: Client;
  let webFormPost: Client;
  let webQuery: Client;
  let webLoopback: Client;
  let desktop: Client;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await Promise.all([addUser(t, 'alice'), addUser(t, 'bob')]);
    [web, webOffline, webPkce, webFormPost, webQuery, webLoopback, desktop] = await Promise.all([
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web Offline'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web PKCE'),
      addApp(t, 'alice', 'confidential', WEB_URI, 'Test Web FormPost'),
      addApp(t, 'alice', 'confidential', 'https://client.example/cb?keep=1&code=old', 'Test Web Query'),
      addApp(t, 'alice', 'confidential', 'http://127.0.0.1:9000/cb', 'Test Web Loopback'),
      addApp(t, 'alice', 'public', undefined, 'Test Desktop'),
    ]);
    [alice, bob] = await Promise.all([signIn(s.base, 'alice'), signIn(s.base, 'bob')]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const base = (extra: Record<string, string> = {}, app: Client = web): Record<string, string> => ({
    client_id: app.client_id,
    response_type: 'code',
    scope: 'profile',
    state: 'xxx',
    redirect_uri: WEB_URI,
    ...extra,
  });
  const get = (p: Record<string, string> | [string, string][], browser = alice) => browser.fetch(authorizeUrl(s.base, p));

  describe('signing in', () => {
    it('shows the login form at the authorize URL, and signing in there returns to the same request', async () => {
      const b = new Browser();
      const url = authorizeUrl(s.base, base());
      const page = await b.fetch(url);
      assert.equal(page.status, 200);
      assert.match(page.body, /You need to be logged in to view this page/);
      assert.ok(!page.body.includes('name="decision"'), 'no consent before signing in');
      assertPageHeaders(page);
      const returnTo = /name="return_to" value="([^"]*)"/.exec(page.body)?.[1]?.replace(/&amp;/g, '&');
      assert.equal(returnTo, url.slice(s.base.length), 'the login form returns to this very request');
      const login = await b.fetch(`${s.base}/login`, { form: { csrf_token: Browser.csrf(page), username: 'alice', password: PASSWORD, return_to: returnTo as string } });
      assert.equal(login.status, 303, login.body.slice(0, 300));
      assert.equal(login.headers.location, returnTo);
      const consent = await b.fetch(`${s.base}${returnTo}`);
      assert.ok(isConsent(consent), consent.body.slice(0, 500));
    });

    it('asks even for a bogus client_id to sign in first (no information before login)', async () => {
      const res = await new Browser().fetch(authorizeUrl(s.base, base({ client_id: 'nope' })));
      assert.equal(res.status, 200);
      assert.match(res.body, /You need to be logged in/);
    });
  });

  describe('requests shown as a page, never redirected', () => {
    for (const name of ['client_id', 'response_type', 'scope', 'state', 'redirect_uri', 'access_type', 'approval_prompt', 'code_challenge', 'code_challenge_method', 'response_mode']) {
      it(`refuses a repeated ${name}`, async () => {
        const p: [string, string][] = Object.entries(base({ access_type: 'online', approval_prompt: 'auto', code_challenge: 'a'.repeat(43), code_challenge_method: 'plain', response_mode: 'query' }));
        p.push([name, name === 'redirect_uri' ? 'https://evil.example/cb' : 'again']);
        const res = await get(p);
        assertErrorPage(res, 400, 'invalid_request', `Parameter is included more than once in the request: ${name}`);
        assertPageHeaders(res);
      });
    }

    for (const name of ['client_id', 'scope', 'response_type', 'redirect_uri']) {
      it(`refuses a request without ${name}`, async () => {
        const p = base();
        delete p[name];
        const res = await get(p);
        assertErrorPage(res, 400, 'invalid_request', `Required parameter is missing: ${name}`);
      });
    }

    it('answers an unknown client_id with a 400 page and no Basic challenge', async () => {
      const res = await get(base({ client_id: 'no-such-client' }));
      assertErrorPage(res, 400, 'invalid_client', 'Unknown client');
      assert.equal(res.headers['www-authenticate'], undefined);
      assertPageHeaders(res);
    });

    it('refuses a redirect_uri that is not byte for byte the registered one, without redirecting', async () => {
      const lookalikes = [
        'https://client.example/callback/',
        'https://client.example/callback/extra',
        'https://client.example/callbackx',
        'https://client.example/callback?x=1',
        'https://client.example/callback#frag',
        'https://client.example:8443/callback',
        'https://client.example:443/callback',
        'http://client.example/callback',
        'HTTPS://client.example/callback',
        'https://CLIENT.example/callback',
        'https://client.example.evil.example/callback',
        'https://client.example@evil.example/callback',
        'https://evil.example/callback',
        'https://evil.example/?https://client.example/callback',
        ' https://client.example/callback',
        'https://client.example/%63allback',
        OOB,
        'http://localhost:5678/cb',
        'http://127.0.0.1:5678/cb',
      ];
      for (const uri of lookalikes) {
        const res = await get(base({ redirect_uri: uri }));
        assertErrorPage(res, 400, 'invalid_request', 'Mismatched redirect URI');
        assert.ok(!/name="decision"/.test(res.body), `no consent for ${uri}`);
      }
    });

    it('lets a confidential app with a loopback URL use it on any port (RFC 8252 §7.3), but only its host and path', async () => {
      for (const uri of ['http://127.0.0.1:9000/cb', 'http://127.0.0.1:9001/cb', 'http://127.0.0.1/cb']) {
        const ok = await get(base({ redirect_uri: uri }, webLoopback));
        assert.ok(isConsent(ok), `${uri}: ${ok.body.slice(0, 300)}`);
      }
      for (const uri of ['http://127.0.0.1:9000/cb2', 'http://localhost:9000/cb', 'http://[::1]:9000/cb', OOB]) {
        assertErrorPage(await get(base({ redirect_uri: uri }, webLoopback)), 400, 'invalid_request', 'Mismatched redirect URI');
      }
    });
  });

  describe('errors redirected to the verified redirect_uri', () => {
    const assertErrorRedirect = (res: HttpsResponse, error: string, description?: string, state: string | null = 'xxx') => {
      const q = params(res);
      const loc = new URL(String(res.headers.location));
      assert.equal(`${loc.origin}${loc.pathname}`, WEB_URI);
      assert.equal(q.get('error'), error);
      if (description !== undefined) assert.equal(q.get('error_description'), description);
      assert.equal(q.get('state'), state);
      assert.equal(q.has('code'), false);
      assert.equal(q.has('code_challenge'), false);
      assert.equal(q.has('code_challenge_method'), false);
    };

    it('unsupported_response_type, with state', async () => {
      for (const rt of ['yyy', 'token', 'code token', '']) assertErrorRedirect(await get(base({ response_type: rt })), 'unsupported_response_type', 'Unsupported response type');
    });

    it('invalid_scope for unknown and mis-cased scopes (openid is accepted: test/auth/openid.test.ts)', async () => {
      assertErrorRedirect(await get(base({ scope: 'does-not-exist' })), 'invalid_scope', 'Unsupported scope: does-not-exist');
      assertErrorRedirect(await get(base({ scope: 'profile OpenID' })), 'invalid_scope', 'Unsupported scope: OpenID');
      assertErrorRedirect(await get(base({ scope: 'Profile' })), 'invalid_scope', 'Unsupported scope: Profile');
    });

    it('leaves state out when none was sent, and passes an empty state back as empty', async () => {
      const none = base({ scope: 'nope' });
      delete none.state;
      assertErrorRedirect(await get(none), 'invalid_scope', undefined, null);
      const empty = await get(base({ scope: 'nope', state: '' }));
      assertErrorRedirect(empty, 'invalid_scope', undefined, '');
      assert.match(String(empty.headers.location), /[?&]state=(&|$)/);
    });

    it('passes state back unchanged, however odd', async () => {
      const state = 'a b&c=d/é?#%20+';
      assertErrorRedirect(await get(base({ scope: 'nope', state })), 'invalid_scope', undefined, state);
    });

    it('refuses an unknown response_mode but accepts query (decision)', async () => {
      assertErrorRedirect(await get(base({ response_mode: 'fragment' })), 'invalid_request', 'Unsupported response mode');
      assert.ok(isConsent(await get(base({ response_mode: 'query' }))));
    });

    it('PKCE challenge errors are invalid_request redirects with state', async () => {
      const p = (extra: Record<string, string>) => get(base({ state: 'xyz', ...extra }, webPkce));
      const cases: [Record<string, string>, string][] = [
        [{ code_challenge_method: 'idk' }, "The code_challenge_method must be 'S256' or 'plain'"],
        [{ code_challenge_method: 's256', code_challenge: 'a'.repeat(43) }, "The code_challenge_method must be 'S256' or 'plain'"],
        [{ code_challenge_method: 'S256' }, 'A code_challenge_method was supplied without an accompanying code_challenge'],
        [{ code_challenge: '', code_challenge_method: 'S256' }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: 'abc', code_challenge_method: 'S256' }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: 'a'.repeat(129), code_challenge_method: 'S256' }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: 'a'.repeat(44), code_challenge_method: 'S256' }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: 'a'.repeat(42) }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: 'a'.repeat(129), code_challenge_method: 'plain' }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
        [{ code_challenge: `${'a'.repeat(42)}=` }, 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1'],
      ];
      for (const [extra, description] of cases) {
        const q = params(await p(extra));
        assert.equal(q.get('error'), 'invalid_request', JSON.stringify(extra));
        assert.equal(q.get('error_description'), description, JSON.stringify(extra));
        assert.equal(q.get('state'), 'xyz');
        assert.equal(q.has('code'), false);
      }
      // Valid challenges of both methods reach the consent page.
      assert.ok(isConsent(await p({ code_challenge: 'A-._~'.repeat(10) + 'abc' })));
      assert.ok(isConsent(await p({ code_challenge: 'x'.repeat(128), code_challenge_method: 'plain' })));
      assert.ok(isConsent(await p({ code_challenge: 'a'.repeat(43), code_challenge_method: 'S256' })));
    });

    it('access_denied when the user says no, with and without state', async () => {
      assertErrorRedirect(await authorize(alice, s.base, base(), 'deny'), 'access_denied', 'User denied the authorization request');
      const none = base();
      delete none.state;
      assertErrorRedirect(await authorize(alice, s.base, none, 'deny'), 'access_denied', undefined, null);
    });

    it('redirects errors in the query even with response_mode=form_post', async () => {
      assertErrorRedirect(await get(base({ scope: 'nope', response_mode: 'form_post' })), 'invalid_scope');
      assertErrorRedirect(await authorize(alice, s.base, base({ response_mode: 'form_post' }), 'deny'), 'access_denied');
    });

    it('shows errors for the oob redirect as a page', async () => {
      const oob = (extra: Record<string, string>) => base({ redirect_uri: OOB, ...extra }, desktop);
      const badScope = await get(oob({ scope: 'nope' }));
      assertErrorPage(badScope, 400, 'invalid_scope', 'Unsupported scope: nope');
      assertErrorPage(await get(oob({ response_type: 'token' })), 400, 'unsupported_response_type');
      assertErrorPage(await get(oob({ code_challenge_method: 'idk' })), 400, 'invalid_request', "The code_challenge_method must be 'S256' or 'plain'");
    });

    it('"No thanks" on an oob request: 303 to a page that says the user declined, without blaming the application', async () => {
      const denied = await authorize(alice, s.base, base({ redirect_uri: OOB }, desktop), 'deny');
      assert.equal(denied.status, 303, denied.body.slice(0, 300));
      const location = String(denied.headers.location);
      assert.ok(!location.includes('code='), location);
      const page = await alice.fetch(new URL(location, s.base).href);
      assert.equal(page.status, 200, page.body.slice(0, 400));
      assertPageHeaders(page);
      assert.match(page.body, /You did not give <strong>Test Desktop<\/strong> access to your account/);
      assert.doesNotMatch(page.body, /Error:|made a request|cannot accept/, 'no blame');
      // Reloading it repeats nothing and issues nothing: it is a plain page.
      assert.equal((await alice.fetch(new URL(location, s.base).href)).body, page.body);
    });

    it('keeps the registered query of the redirect URI and overrides a same-named parameter', async () => {
      const res = await authorize(alice, s.base, base({ redirect_uri: 'https://client.example/cb?keep=1&code=old' }, webQuery));
      const q = params(res);
      assert.equal(q.get('keep'), '1');
      assert.equal(q.getAll('code').length, 1);
      assert.notEqual(q.get('code'), 'old');
      assert.equal(q.get('state'), 'xxx');
      const ex = await exchange(s.base, webQuery, q.get('code') as string, 'https://client.example/cb?keep=1&code=old');
      assert.equal(ex.status, 200, ex.body);
    });
  });

  describe('consent', () => {
    it('refuses a consent POST without a decision and issues nothing', async () => {
      const url = authorizeUrl(s.base, base({ scope: 'profile tag' }));
      const page = await alice.fetch(url);
      const res = await alice.fetch(url, { form: { csrf_token: Browser.csrf(page), decision: 'maybe' } });
      assert.equal(res.status, 400);
      assert.equal(res.headers.location, undefined);
      assert.ok(isConsent({ ...res, status: 200 }), 'the consent page again');
    });

    it("lists every requested permission in musicbrainz.org's order, not the request's", async () => {
      const res = await get(base({ scope: 'submit_barcode collection profile  email\ttag rating submit_isrc' }));
      assert.ok(isConsent(res));
      const texts = [
        'View your public account information',
        'View your email address',
        'View and modify your private tags',
        'View and modify your private ratings',
        'View and modify your private collections',
        'Submit new ISRCs to the database',
        'Submit new barcodes to the database',
      ];
      const positions = texts.map((x) => res.body.indexOf(x));
      assert.ok(positions.every((p) => p > 0), JSON.stringify(positions));
      assert.deepEqual([...positions].sort((a, b) => a - b), positions);
      assert.match(res.body, /Test Web<\/strong> is requesting permission to/);
    });
  });

  describe("web application, online (MusicBrainz's web workflow online cases)", () => {
    let first: string;

    it('approve → a code at the redirect URL with state; the code gives an access token and no refresh token', async () => {
      const consent = await get(base());
      assert.ok(isConsent(consent));
      assert.match(consent.body, /Test Web/);
      assert.match(consent.body, /View your public account information/);
      assert.doesNotMatch(consent.body, OFFLINE_BULLET);
      assertPageHeaders(consent);
      assert.equal(consent.headers['cache-control'], 'no-store');

      const res = await authorize(alice, s.base, base());
      const q = params(res);
      const loc = new URL(String(res.headers.location));
      assert.equal(`${loc.origin}${loc.pathname}`, WEB_URI);
      assert.equal(q.get('state'), 'xxx');
      assert.ok((q.get('code') ?? '').length >= 43, 'a code of at least 256 bits');
      assert.equal(q.has('code_challenge'), false);
      assert.equal(q.has('error'), false);
      first = q.get('code') as string;
      const ex = await exchange(s.base, web, first, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(ex.json().token_type, 'Bearer');
      assert.equal(ex.json().refresh_token, undefined);
    });

    it('the same request again is pre-authorized: an immediate redirect with a new online code', async () => {
      const res = await get(base({ state: 'yyy' }));
      const q = params(res);
      assert.equal(q.get('state'), 'yyy');
      const code = q.get('code') as string;
      assert.ok(code.length >= 43);
      assert.notEqual(code, first);
      const ex = await exchange(s.base, web, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(ex.json().refresh_token, undefined);
    });

    it('asks again for other scopes, with approval_prompt=force, and for another user', async () => {
      assert.ok(isConsent(await get(base({ scope: 'profile email' }))), 'more scopes');
      assert.ok(isConsent(await get(base({ scope: '' }))), 'fewer scopes');
      assert.ok(isConsent(await get(base({ approval_prompt: 'force' }))), 'force');
      assert.ok(isConsent(await get(base(), bob)), 'bob never approved');
    });
  });

  describe("web application, offline (MusicBrainz's web workflow offline cases)", () => {
    const offline = (extra: Record<string, string> = {}) => base({ access_type: 'offline', ...extra }, webOffline);
    const codes: string[] = [];

    it('shows the offline bullet; the approved code gives a refresh token', async () => {
      const consent = await get(offline());
      assert.ok(isConsent(consent));
      assert.match(consent.body, OFFLINE_BULLET);
      const code = codeOf(await authorize(alice, s.base, offline()));
      codes.push(code);
      const ex = await exchange(s.base, webOffline, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(typeof ex.json().refresh_token, 'string');
    });

    it('is then pre-authorized, and the auto-approved code is online', async () => {
      const res = await get(offline({ state: 'yyy' }));
      const code = params(res).get('code') as string;
      assert.ok(!codes.includes(code));
      codes.push(code);
      const ex = await exchange(s.base, webOffline, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(ex.json().refresh_token, undefined);
    });

    it('approval_prompt=force shows the consent (with the bullet) again and gives a refresh token', async () => {
      const consent = await get(offline({ approval_prompt: 'force' }));
      assert.ok(isConsent(consent));
      assert.match(consent.body, OFFLINE_BULLET);
      const code = codeOf(await authorize(alice, s.base, offline({ approval_prompt: 'force' })));
      assert.ok(!codes.includes(code));
      const ex = await exchange(s.base, webOffline, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(typeof ex.json().refresh_token, 'string');
    });

    it('an online grant does not pre-authorize an offline request', async () => {
      assert.ok(isConsent(await get(base({ access_type: 'offline' }))), 'Test Web has only online grants');
    });
  });

  describe("installed application, out of band (MusicBrainz's desktop workflow oob cases)", () => {
    const oob = (extra: Record<string, string> = {}) => base({ redirect_uri: OOB, ...extra }, desktop);

    it('approve → redirect to /oauth2/oob with the code; that page shows it; the code is offline', async () => {
      const consent = await get(oob());
      assert.ok(isConsent(consent));
      assert.match(consent.body, /Test Desktop<\/strong> is requesting permission to/);
      assert.doesNotMatch(consent.body, OFFLINE_BULLET);
      const res = await authorize(alice, s.base, oob());
      assert.equal(res.status, 302);
      const loc = new URL(String(res.headers.location));
      assert.equal(`${loc.origin}${loc.pathname}`, `${s.base}/oauth2/oob`);
      assert.equal(loc.searchParams.get('state'), 'xxx');
      const code = loc.searchParams.get('code') as string;

      const page = await alice.fetch(String(res.headers.location));
      assert.equal(page.status, 200);
      assert.match(page.body, /Success!/);
      assert.match(page.body, /You have granted access to <strong>Test Desktop<\/strong>/);
      assert.ok(page.body.includes(`<code id="code">${code}</code>`));
      assertPageHeaders(page);

      assertErrorPage(await bob.fetch(String(res.headers.location)), 400, 'invalid_request', 'Invalid authorization code');
      const anonymous = await new Browser().fetch(String(res.headers.location));
      assert.match(anonymous.body, /You need to be logged in/);
      assert.ok(!anonymous.body.includes('<code id="code">') && !anonymous.body.includes('Success!'), 'no code page for someone not signed in');

      const ex = await exchange(s.base, desktop, code, OOB);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(typeof ex.json().refresh_token, 'string', 'installed apps are always offline');
      assertErrorPage(await alice.fetch(String(res.headers.location)), 400, 'invalid_request', 'Invalid authorization code');
    });

    it('asks again every time (installed apps are never pre-authorized) and is offline even with access_type=online', async () => {
      const consent = await get(oob({ state: 'yyy', access_type: 'online' }));
      assert.ok(isConsent(consent));
      const code = codeOf(await authorize(alice, s.base, oob({ state: 'yyy', access_type: 'online' })));
      const ex = await exchange(s.base, desktop, code, OOB);
      assert.equal(ex.status, 200, ex.body);
      assert.equal(typeof ex.json().refresh_token, 'string');
    });

    it('refuses oob page requests for unknown or malformed codes', async () => {
      assertErrorPage(await alice.fetch(`${s.base}/oauth2/oob?code=${'x'.repeat(43)}`), 400, 'invalid_request', 'Invalid authorization code');
      assertErrorPage(await alice.fetch(`${s.base}/oauth2/oob`), 400, 'invalid_request', 'Invalid authorization code');
      assertErrorPage(await alice.fetch(`${s.base}/oauth2/oob?code=%3Cscript%3E`), 400, 'invalid_request');
    });
  });

  describe("installed application, loopback redirects (MusicBrainz's desktop workflow localhost cases)", () => {
    const loop = (uri: string, extra: Record<string, string> = {}) => base({ redirect_uri: uri, ...extra }, desktop);

    for (const host of ['localhost', '127.0.0.1', '[::1]']) {
      it(`redirects to http://${host}:5678/cb with an offline code bound to that URI`, async () => {
        const uri = `http://${host}:5678/cb`;
        const res = await authorize(alice, s.base, loop(uri));
        const q = params(res);
        assert.ok(String(res.headers.location).startsWith(`${uri}?`), String(res.headers.location));
        assert.equal(q.get('state'), 'xxx');
        const code = q.get('code') as string;
        // Decision: codes are bound to the redirect_uri of the authorization request.
        const wrong = await exchange(s.base, desktop, code, OOB);
        assert.equal(wrong.status, 400);
        assert.equal(wrong.json().error, 'invalid_grant');
        const ex = await exchange(s.base, desktop, code, uri);
        assert.equal(ex.status, 200, ex.body);
        assert.equal(typeof ex.json().refresh_token, 'string');
      });
    }

    it('gives a different code each time', async () => {
      const a = codeOf(await authorize(alice, s.base, loop('http://localhost:5678/cb')));
      const b = codeOf(await authorize(alice, s.base, loop('http://localhost:5678/cb', { state: 'yyy' })));
      assert.notEqual(a, b);
    });

    it('accepts any port and path on the loopback hosts', async () => {
      for (const uri of ['http://localhost/', 'http://localhost', 'http://localhost:1/x', 'http://127.0.0.1:65535/a/b?c=d', 'http://[::1]/cb', 'http://127.0.0.1:8080']) {
        assert.ok(isConsent(await get(loop(uri))), uri);
      }
    });

    it("refuses look-alike loopback URIs (musicbrainz.org's http://127x0x0x1:5678/cb case, and more)", async () => {
      for (const uri of [
        'http://127x0x0x1:5678/cb',
        'https://localhost:5678/cb',
        'http://LOCALHOST:5678/cb',
        'http://localhost.evil.example/cb',
        'http://localhost:5678@evil.example/cb',
        'http://localhost@evil.example/cb',
        'http://127.0.0.2:5678/cb',
        'http://[::2]:5678/cb',
        'http://0.0.0.0:5678/cb',
        'http://localhost:5678/cb#x',
        'https://client.example/callback',
        'org.example.app://auth',
      ]) {
        assertErrorPage(await get(loop(uri)), 400, 'invalid_request', 'Mismatched redirect URI');
      }
    });

    it('refuses malformed loopback URIs with the 400 page before any code exists (ports 0 and over 65535, control characters)', async () => {
      const cases: [string, RegExp][] = [
        ['http://localhost:99999/cb', /port .* between 1 and 65535, not 99999/],
        ['http://127.0.0.1:65536/cb', /not 65536/],
        ['http://[::1]:70000/cb', /not 70000/],
        ['http://localhost:0/cb', /not 0/],
        ['http://localhost:00000/cb', /not 00000/],
        ['http://localhost/a\r\nSet-Cookie:x=1', /control characters/],
        ['http://localhost/a b', /spaces/],
        ['http://localhost/a\tb', /control characters/],
      ];
      for (const [uri, message] of cases) {
        const asked = await get(loop(uri));
        assertErrorPage(asked, 400, 'invalid_request');
        assert.match(asked.body, message, uri);
        // Allow, deny and a bad scope all stop at the same page: nothing reaches a 5xx.
        const url = authorizeUrl(s.base, loop(uri));
        for (const decision of ['allow', 'deny']) {
          assertErrorPage(await alice.fetch(url, { form: { csrf_token: alice.jar.get('__Host-sleeve-csrf') ?? '', decision } }), 400, 'invalid_request');
        }
        assertErrorPage(await get(loop(uri, { scope: 'nope' })), 400, 'invalid_request');
      }
    });
  });

  describe("response_mode=form_post (MusicBrainz's form_post case)", () => {
    const fp = (extra: Record<string, string> = {}) => base({ state: 'zyx', response_mode: 'form_post', ...extra }, webFormPost);
    const hidden = (body: string) => [...body.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)].map((m) => [m[1], m[2]]);

    it('answers 200 with a self-submitting form to the redirect URI, allowed by its script hash', async () => {
      const res = await authorize(alice, s.base, fp());
      assert.equal(res.status, 200, res.body.slice(0, 300));
      assert.equal(res.headers.location, undefined);
      assert.match(res.body, /<title>Redirecting to Test Web FormPost<\/title>/);
      const action = /<form action="([^"]+)" method="post">/.exec(res.body)?.[1];
      assert.equal(action, WEB_URI);
      const inputs = hidden(res.body);
      assert.equal(inputs.length, 3);
      assert.deepEqual(inputs.find(([n]) => n === 'state'), ['state', 'zyx']);
      assert.deepEqual(inputs.find(([n]) => n === 'iss'), ['iss', s.base], 'the issuer (RFC 9207)');
      const code = inputs.find(([n]) => n === 'code')?.[1] as string;
      assert.ok(code.length >= 43);

      const script = /<script>([^<]*)<\/script>/.exec(res.body)?.[1];
      assert.ok(script, 'an inline script');
      const hash = createHash('sha256').update(script).digest('base64');
      const csp = String(res.headers['content-security-policy']);
      assert.ok(csp.includes(`script-src 'sha256-${hash}'`), csp);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.doesNotMatch(csp, /unsafe-inline/);
      assert.equal(res.headers['x-frame-options'], 'DENY');
      assert.equal(res.headers['cache-control'], 'no-store', 'the page carries a code');

      const ex = await exchange(s.base, webFormPost, code, WEB_URI);
      assert.equal(ex.status, 200, ex.body);
    });

    it('carries only the code when no state was sent, also when pre-authorized', async () => {
      const p = fp();
      delete p.state;
      const res = await get(p);
      assert.equal(res.status, 200);
      const inputs = hidden(res.body);
      assert.deepEqual(inputs.map(([n]) => n), ['code', 'iss']);
    });
  });
});

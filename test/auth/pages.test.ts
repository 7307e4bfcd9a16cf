/*
 * The website's account pages, modelled on musicbrainz.org's /account/applications as sleeve
 * decides (docs/decisions.md, "Registration" and "Account pages"): registering, listing,
 * editing and removing applications, resetting secrets, and the list of authorized
 * applications with its revoke button.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addUser, Browser, PASSWORD, request, startAuthServer, token, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { assertErrorPage, assertOAuthError, authorizeUrl, escapeHtml, grant, isConsent, OOB, refresh, revoke, signIn, userinfoStatus, type Client } from './support.js';

interface Card {
  title: string;
  html: string;
}

/** The cards of the applications page: `authorized` (with a revoke form) and `developer` (with an edit link). */
function cards(page: HttpsResponse): { authorized: Card[]; developer: Card[] } {
  const all = page.body
    .split('<div class="card">')
    .slice(1)
    .map((html) => ({ title: /<h3>([^<]*)<\/h3>/.exec(html)?.[1] ?? '', html }));
  return { authorized: all.filter((c) => c.html.includes('/account/applications/revoke/')), developer: all.filter((c) => c.html.includes('/account/applications/edit/')) };
}

function devCard(page: HttpsResponse, name: string): Card | undefined {
  return cards(page).developer.find((c) => c.title === escapeHtml(name));
}

function appId(card: Card | undefined): string {
  const id = /\/account\/applications\/edit\/(\d+)/.exec(card?.html ?? '')?.[1];
  assert.ok(id, 'an application id');
  return id;
}

/** The secret block shown once after registering or resetting. */
function shownCredentials(page: HttpsResponse): Client | undefined {
  const m = /<dt>Client ID<\/dt><dd><code>([^<]+)<\/code><\/dd><dt>Client secret<\/dt><dd><code>([^<]+)<\/code>/.exec(page.body);
  return m === null ? undefined : { client_id: m[1] as string, client_secret: m[2] as string };
}

describe(`account pages (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let alice: Browser;
  let bob: Browser;

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await Promise.all([addUser(t, 'alice'), addUser(t, 'bob')]);
    [alice, bob] = await Promise.all([signIn(s.base, 'alice'), signIn(s.base, 'bob')]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const list = (b = alice) => b.fetch(`${s.base}/account/applications`);
  const csrf = async (b = alice) => Browser.csrf(await list(b));
  const register = async (form: Record<string, string>, b = alice) => b.fetch(`${s.base}/account/applications/register`, { form: { csrf_token: await csrf(b), ...form } });
  /** A form post's answer: 303 to the applications page, which is then fetched (Post/Redirect/Get). */
  const followed = async (res: HttpsResponse, b = alice): Promise<HttpsResponse> => {
    assert.equal(res.status, 303, res.body.slice(0, 600));
    assert.equal(res.headers.location, '/account/applications');
    const page = await list(b);
    assert.equal(page.status, 200);
    return page;
  };
  const registerOk = async (name: string, kind: string, redirectUri: string): Promise<Client> => {
    const page = await followed(await register({ name, kind, redirect_uri: redirectUri }));
    const creds = shownCredentials(page);
    assert.ok(creds, 'the credentials are shown');
    assert.ok(!page.body.includes('<form method="post" action="/account/applications/register"'), 'not the form again');
    return creds;
  };
  const post = async (path: string, form: Record<string, string> = {}, b = alice) => b.fetch(`${s.base}${path}`, { form: { csrf_token: await csrf(b), ...form } });
  /** A destructive action: its confirmation page (GET), then the confirmation's own form posted. */
  const confirm = async (path: string, b = alice): Promise<HttpsResponse> => {
    const ask = await b.fetch(`${s.base}${path}`);
    assert.equal(ask.status, 200, ask.body.slice(0, 600));
    assert.match(ask.body, /Are you sure/);
    assert.ok(ask.body.includes(`<form method="post" action="${path}">`), 'the form posts to the same URL');
    return b.fetch(`${s.base}${path}`, { form: { csrf_token: Browser.csrf(ask) } });
  };

  it('sends a visitor who is not signed in to the login page', async () => {
    for (const path of ['/account/applications', '/account/applications/register', '/account/applications/edit/1']) {
      const res = await new Browser().fetch(`${s.base}${path}`);
      assert.equal(res.status, 303, path);
      assert.equal(res.headers.location, `/login?return_to=${encodeURIComponent(path)}`);
    }
    const anon = new Browser();
    const login = await anon.fetch(`${s.base}/login`);
    const res = await anon.fetch(`${s.base}/account/applications/register`, { form: { csrf_token: Browser.csrf(login), name: 'x', kind: 'public', redirect_uri: '' } });
    assert.equal(res.status, 303);
    assert.doesNotMatch((await list(bob)).body, /<h3>x<\/h3>/);
  });

  it('shows the empty states', async () => {
    const page = await list(bob);
    assert.equal(page.status, 200);
    assert.match(page.body, /You have not authorized any applications\./);
    assert.match(page.body, /You do not have any registered applications\./);
    assert.match(page.body, /href="\/account\/applications\/register"/);
  });

  describe('registering', () => {
    it('shows the form', async () => {
      const res = await alice.fetch(`${s.base}/account/applications/register`);
      assert.equal(res.status, 200);
      for (const field of ['name="name"', 'name="kind"', 'name="redirect_uri"', 'name="csrf_token"', 'value="confidential"', 'value="public"']) assert.ok(res.body.includes(field), field);
    });

    it('registers a confidential app, shows its secret once, and the credentials work', async () => {
      const uri = 'https://web.example/cb';
      const app = await registerOk('Web One', 'confidential', uri);
      assert.match(app.client_id, /^[A-Za-z0-9_-]{32,}$/);
      assert.match(app.client_secret, /^[A-Za-z0-9_-]{43,}$/);
      const page = await list();
      const card = devCard(page, 'Web One');
      assert.ok(card, 'listed');
      assert.ok(card.html.includes(app.client_id));
      assert.ok(card.html.includes(uri));
      assert.match(card.html, /Confidential/);
      assert.ok(!page.body.includes(app.client_secret), 'the secret is not shown again');
      const tokens = await grant(alice, s.base, app, { redirect_uri: uri });
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200);
    });

    it('registers public apps without a redirect URL or with a reverse-DNS scheme', async () => {
      const none = await registerOk('Desktop None', 'public', '');
      const custom = await registerOk('Desktop Custom', 'public', 'org.example.app://auth');
      const page = await list();
      assert.match(devCard(page, 'Desktop None')?.html ?? '', /Public/);
      assert.ok(isConsent(await alice.fetch(authorizeUrl(s.base, { client_id: custom.client_id, response_type: 'code', scope: 'profile', redirect_uri: 'org.example.app://auth' }))));
      for (const uri of [OOB, 'http://127.0.0.1:4321/cb']) {
        assert.ok(isConsent(await alice.fetch(authorizeUrl(s.base, { client_id: none.client_id, response_type: 'code', scope: 'profile', redirect_uri: uri }))), uri);
      }
      const tokens = await grant(alice, s.base, custom, { redirect_uri: OOB });
      assert.equal(typeof tokens.refresh_token, 'string');
    });

    it('allows http for confidential apps only on loopback hosts', async () => {
      for (const uri of ['http://localhost:8080/cb', 'http://127.0.0.1:8080/cb', 'http://[::1]:8080/cb']) await registerOk(`Loopback ${uri}`, 'confidential', uri);
    });

    it('refuses bad registrations with a message and creates nothing', async () => {
      const cases: [Record<string, string>, RegExp][] = [
        [{ kind: 'confidential', redirect_uri: '' }, /redirect URL must be entered/],
        [{ kind: 'confidential', redirect_uri: 'http://web.example/cb' }, /must use https/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example/cb#frag' }, /fragment/],
        [{ kind: 'confidential', redirect_uri: 'org.example.app://auth' }, /must use https/],
        [{ kind: 'confidential', redirect_uri: 'not a url' }, /not an absolute URL/],
        [{ kind: 'confidential', redirect_uri: 'javascript:alert(1)' }, /must use https/],
        [{ kind: 'confidential', redirect_uri: 'http://localhost:99999/cb' }, /between 1 and 65535, not 99999/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example:65536/cb' }, /not 65536/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example:0/cb' }, /not 0/],
        [{ kind: 'confidential', redirect_uri: 'https://user:pw@web.example/cb' }, /user name or password/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example@evil.example/cb' }, /user name or password/],
        // Several URLs are separated by spaces: the second is no URL.
        [{ kind: 'confidential', redirect_uri: 'https://web.example/a b' }, /redirect URL &quot;b&quot; is not an absolute URL/],
        [{ kind: 'public', redirect_uri: 'org.example.app://auth:99999/cb' }, /not 99999/],
        [{ kind: 'public', redirect_uri: 'https://web.example/cb' }, /reverse-DNS/],
        [{ kind: 'public', redirect_uri: 'myapp://cb' }, /reverse-DNS/],
        [{ kind: 'public', redirect_uri: 'http://app.example:8080/cb' }, /reverse-DNS/],
        [{ kind: 'web', redirect_uri: 'https://web.example/cb' }, /confidential or public/],
        [{ redirect_uri: 'https://web.example/cb' }, /confidential or public/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example/cb', name: '   ' }, /needs a name/],
        [{ kind: 'confidential', redirect_uri: 'https://web.example/cb', name: 'n'.repeat(101) }, /at most 100/],
      ];
      for (const [form, message] of cases) {
        const res = await register({ name: 'Refused App', ...form });
        assert.equal(res.status, 400, JSON.stringify(form));
        assert.match(res.body, message, JSON.stringify(form));
        assert.equal(shownCredentials(res), undefined);
        if (form.redirect_uri !== undefined) assert.ok(res.body.includes(`value="${escapeHtml(form.redirect_uri)}"`), 'the form keeps what was typed');
      }
      const page = await list();
      assert.equal(devCard(page, 'Refused App'), undefined);
      assert.equal(cards(page).developer.filter((c) => c.title.startsWith('nnnn')).length, 0);
    });
  });

  describe('Post/Redirect/Get and confirmation', () => {
    const developerCount = async (name: string) => cards(await list()).developer.filter((c) => c.title === name).length;

    it('answers every account form post with 303; reloading the page it leads to repeats nothing and shows the secret no more', async () => {
      const res = await register({ name: 'Reloaded', kind: 'public', redirect_uri: '' });
      assert.equal(res.status, 303);
      assert.equal(res.headers.location, '/account/applications');
      assert.equal(res.body.includes('Client secret'), false, 'nothing secret in the redirect');
      assert.ok(!String(res.headers.location).includes('secret'));
      const first = await list();
      const shown = shownCredentials(first);
      assert.ok(shown, 'shown on the page after the redirect');
      assert.match(first.body, /Registered Reloaded\./);
      for (let i = 0; i < 3; i++) {
        const again = await list();
        assert.equal(shownCredentials(again), undefined, 'shown once');
        assert.doesNotMatch(again.body, /Registered Reloaded\./, 'said once');
      }
      assert.equal(await developerCount('Reloaded'), 1, 'registered once');
      const id = appId(devCard(await list(), 'Reloaded'));
      // The confirmation page alone does nothing; its post (303) does, once.
      for (let i = 0; i < 2; i++) assert.match((await alice.fetch(`${s.base}/account/applications/reset-secret/${id}`)).body, /Are you sure/);
      assert.equal((await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', ...shown } })).status, 200, 'asking reset nothing');
      const reset = await followed(await confirm(`/account/applications/reset-secret/${id}`));
      const fresh = shownCredentials(reset);
      assert.ok(fresh && fresh.client_secret !== shown.client_secret);
      assert.equal(shownCredentials(await list()), undefined, 'the reload shows no secret');
      assert.equal((await request(`${s.base}/oauth2/revoke`, { form: { token: 'x', ...fresh } })).status, 200, 'the reload reset nothing: the shown secret works');
    });

    it('refuses a confirmation post without the CSRF token with the confirmation page again, and does nothing', async () => {
      await registerOk('Kept', 'public', '');
      const id = appId(devCard(await list(), 'Kept'));
      for (const path of [`/account/applications/remove/${id}`, `/account/applications/reset-secret/${id}`]) {
        const res = await alice.fetch(`${s.base}${path}`, { form: { csrf_token: 'x'.repeat(43) } });
        assert.equal(res.status, 400, path);
        assert.match(res.body, /has expired/);
        assert.match(res.body, /Are you sure/);
      }
      assert.equal(await developerCount('Kept'), 1);
    });

    it("shows a flash only to the user it is for, and a secret only while it is the application's secret", async () => {
      assert.equal((await register({ name: 'Flashy', kind: 'public', redirect_uri: '' })).status, 303);
      const flash = alice.jar.get('__Host-sleeve-flash');
      assert.ok(flash, 'a flash cookie');
      // Carried to bob's browser, it shows him nothing.
      bob.jar.set('__Host-sleeve-flash', flash);
      const bobs = await list(bob);
      assert.equal(shownCredentials(bobs), undefined);
      assert.doesNotMatch(bobs.body, /Flashy/);
      // A flash naming a secret that is not (or no longer) the application's shows none.
      const decoded = JSON.parse(Buffer.from(flash, 'base64url').toString('utf8'));
      alice.jar.set('__Host-sleeve-flash', Buffer.from(JSON.stringify({ ...decoded, s: 'A'.repeat(43) })).toString('base64url'));
      const forged = await list();
      assert.equal(shownCredentials(forged), undefined);
      assert.match(forged.body, /Registered Flashy\./);
      alice.jar.set('__Host-sleeve-flash', 'not-base64-json');
      assert.equal((await list()).status, 200, 'a mangled flash is ignored');
    });

    it('drops a flash left unread (a new secret) at sign-out and at the next sign-in', async () => {
      const carol = await signIn(s.base, 'bob');
      assert.equal((await register({ name: 'Unread', kind: 'public', redirect_uri: '' }, carol)).status, 303);
      assert.ok(carol.jar.get('__Host-sleeve-flash'), 'a flash cookie');
      assert.equal((await post('/logout', {}, carol)).status, 303);
      assert.ok(!carol.jar.get('__Host-sleeve-flash'), 'gone after sign-out');
      const dave = new Browser();
      dave.jar.set('__Host-sleeve-flash', 'left-over');
      assert.equal((await dave.login(s.base, 'bob', PASSWORD)).status, 303);
      assert.ok(!dave.jar.has('__Host-sleeve-flash'), 'gone after the next sign-in');
    });
  });

  describe('editing', () => {
    let app: Client;
    let id: string;
    before(async () => {
      app = await registerOk('Editable', 'confidential', 'https://edit.example/old');
      id = appId(devCard(await list(), 'Editable'));
    });
    const consentFor = async (uri: string) => alice.fetch(authorizeUrl(s.base, { client_id: app.client_id, response_type: 'code', scope: 'profile', redirect_uri: uri }));

    it('shows the current values and a type that cannot change', async () => {
      const res = await alice.fetch(`${s.base}/account/applications/edit/${id}`);
      assert.equal(res.status, 200);
      assert.ok(res.body.includes('value="Editable"'));
      assert.ok(res.body.includes('value="https://edit.example/old"'));
      assert.match(res.body, /<strong>Type:<\/strong> Confidential/);
      assert.ok(!res.body.includes('<select name="kind">'), 'no type selector');
    });

    it('refuses an invalid change and keeps the old values', async () => {
      const forms: Record<string, string>[] = [
        { name: 'Editable', redirect_uri: 'http://edit.example/new' },
        { name: 'Editable', redirect_uri: '', kind: 'public' },
        { name: '', redirect_uri: 'https://edit.example/new' },
      ];
      for (const form of forms) {
        const res = await post(`/account/applications/edit/${id}`, form);
        assert.equal(res.status, 400, JSON.stringify(form));
      }
      assert.ok(isConsent(await consentFor('https://edit.example/old')));
      assertErrorPage(await consentFor(OOB), 400, 'invalid_request', 'Mismatched redirect URI');
    });

    it('changes the name and the redirect URL; only the new URL is accepted afterwards', async () => {
      const res = await followed(await post(`/account/applications/edit/${id}`, { name: 'Edited', redirect_uri: 'https://edit.example/new', kind: 'public' }));
      assert.match(res.body, /Updated Edited\./);
      assert.doesNotMatch((await list()).body, /Updated Edited\./, 'said once');
      const page = await list();
      assert.equal(devCard(page, 'Editable'), undefined);
      assert.match(devCard(page, 'Edited')?.html ?? '', /Confidential/);
      assertErrorPage(await consentFor('https://edit.example/old'), 400, 'invalid_request', 'Mismatched redirect URI');
      assert.ok(isConsent(await consentFor('https://edit.example/new')));
      const tokens = await grant(alice, s.base, app, { redirect_uri: 'https://edit.example/new' });
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200, 'the secret did not change');
    });
  });

  describe('resetting the secret', () => {
    it('shows a new secret once; the old one stops at once; grants carry on', async () => {
      const app = await registerOk('Resettable', 'public', '');
      const tokens = await grant(alice, s.base, app, { redirect_uri: OOB });
      const id = appId(devCard(await list(), 'Resettable'));
      const res = await followed(await confirm(`/account/applications/reset-secret/${id}`));
      const fresh = shownCredentials(res);
      assert.ok(fresh);
      assert.equal(fresh.client_id, app.client_id);
      assert.notEqual(fresh.client_secret, app.client_secret);
      assert.match(fresh.client_secret, /^[A-Za-z0-9_-]{43,}$/);
      assertOAuthError(await refresh(s.base, app, tokens.refresh_token as string), 401, 'invalid_client');
      assertOAuthError(await revoke(s.base, app, 'x'), 401, 'invalid_client');
      const renewed = await refresh(s.base, fresh, tokens.refresh_token as string);
      assert.equal(renewed.status, 200, renewed.body);
      assert.ok(!(await list()).body.includes(fresh.client_secret), 'shown once');
    });
  });

  describe('removing', () => {
    it('removes the app; its grants and tokens stop working', async () => {
      const uri = 'https://remove.example/cb';
      const app = await registerOk('Removable', 'confidential', uri);
      const tokens = await grant(alice, s.base, app, { redirect_uri: uri, access_type: 'offline' });
      const id = appId(devCard(await list(), 'Removable'));
      assert.ok(cards(await list()).authorized.some((c) => c.title === 'Removable'));
      const res = await followed(await confirm(`/account/applications/remove/${id}`));
      assert.match(res.body, /Removed Removable/);
      const page = await list();
      assert.equal(devCard(page, 'Removable'), undefined);
      assert.ok(!cards(page).authorized.some((c) => c.title === 'Removable'), 'no longer among the authorized applications');
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 401);
      assertOAuthError(await refresh(s.base, app, tokens.refresh_token as string), 401, 'invalid_client');
      assertErrorPage(await alice.fetch(authorizeUrl(s.base, { client_id: app.client_id, response_type: 'code', scope: 'profile', redirect_uri: uri })), 400, 'invalid_client', 'Unknown client');
      assert.equal((await request(`${s.base}/oauth2/introspect`, { form: { token: tokens.refresh_token as string, client_id: app.client_id, client_secret: app.client_secret } })).status, 401);
    });
  });

  describe("other users' applications", () => {
    let app: Client;
    let id: string;
    before(async () => {
      app = await registerOk('Alice Private', 'public', '');
      id = appId(devCard(await list(), 'Alice Private'));
    });

    it('are not listed, answer 404 to every page and change nothing on any action', async () => {
      const page = await list(bob);
      assert.ok(!page.body.includes('Alice Private'));
      assert.ok(!page.body.includes(app.client_id));
      for (const path of [`/account/applications/edit/${id}`, `/account/applications/reset-secret/${id}`, `/account/applications/remove/${id}`]) {
        assert.equal((await bob.fetch(`${s.base}${path}`)).status, 404, path);
      }
      const edit = await post(`/account/applications/edit/${id}`, { name: 'Bob Owns This', redirect_uri: '' }, bob);
      assert.equal(edit.status, 404);
      for (const path of [`/account/applications/reset-secret/${id}`, `/account/applications/remove/${id}`]) {
        const after = await followed(await post(path, {}, bob), bob);
        assert.match(after.body, /There is no such application/, path);
        assert.equal(shownCredentials(after), undefined);
      }
      for (const bogus of ['999999', 'abc', '-1', '1e3']) assert.equal((await alice.fetch(`${s.base}/account/applications/edit/${bogus}`)).status, 404, bogus);

      const mine = devCard(await list(), 'Alice Private');
      assert.ok(mine, 'still there, unchanged');
      const tokens = await grant(alice, s.base, app, { redirect_uri: OOB });
      assert.equal(await userinfoStatus(s.base, tokens.access_token), 200, 'the secret was not reset');
    });
  });

  describe('authorized applications', () => {
    let offline: Client;
    let online: Client;
    let offlineTokens: { access_token: string; refresh_token?: string };
    let onlineTokens: { access_token: string };

    before(async () => {
      offline = await registerOk('Granted Offline', 'public', '');
      online = await registerOk('Granted Online', 'confidential', 'https://granted.example/cb');
      offlineTokens = await grant(alice, s.base, offline, { redirect_uri: OOB, scope: 'profile email' });
      onlineTokens = await grant(alice, s.base, online, { redirect_uri: 'https://granted.example/cb', scope: 'profile tag' });
    });

    it('lists each grant with its permissions and whether it is offline', async () => {
      const { authorized } = cards(await list());
      const off = authorized.find((c) => c.title === 'Granted Offline');
      const on = authorized.find((c) => c.title === 'Granted Online');
      assert.ok(off && on);
      assert.match(off.html, /View your public account information/);
      assert.match(off.html, /View your email address/);
      assert.doesNotMatch(off.html, /private tags/);
      assert.match(off.html, /offline/);
      assert.match(on.html, /View and modify your private tags/);
      assert.doesNotMatch(on.html, /email address/);
      assert.match(on.html, /online/);
      assert.doesNotMatch(on.html, /offline/i);
      assert.ok(!cards(await list(bob)).authorized.some((c) => c.title.startsWith('Granted')), "not on another user's page");
    });

    it("refuses to revoke another user's grant", async () => {
      const grantId = /\/account\/applications\/revoke\/(\d+)/.exec(cards(await list()).authorized.find((c) => c.title === 'Granted Online')?.html ?? '')?.[1];
      assert.equal((await bob.fetch(`${s.base}/account/applications/revoke/${grantId}`)).status, 404);
      const res = await followed(await post(`/account/applications/revoke/${grantId}`, {}, bob), bob);
      assert.match(res.body, /There is no such authorization/);
      assert.equal(await userinfoStatus(s.base, onlineTokens.access_token), 200);
    });

    it('revoke access ends the grant at once', async () => {
      for (const [title, tokens, app] of [
        ['Granted Offline', offlineTokens, offline],
        ['Granted Online', onlineTokens, online],
      ] as const) {
        const grantId = /\/account\/applications\/revoke\/(\d+)/.exec(cards(await list()).authorized.find((c) => c.title === title)?.html ?? '')?.[1];
        assert.ok(grantId);
        const res = await followed(await confirm(`/account/applications/revoke/${grantId}`));
        assert.match(res.body, /Access revoked/);
        assert.ok(!cards(res).authorized.some((c) => c.title === title));
        assert.equal(await userinfoStatus(s.base, tokens.access_token), 401, title);
        if ('refresh_token' in tokens && tokens.refresh_token !== undefined) assertOAuthError(await refresh(s.base, app, tokens.refresh_token), 400, 'invalid_grant');
        assert.match((await followed(await post(`/account/applications/revoke/${grantId}`))).body, /There is no such authorization/, 'already revoked');
        assert.equal((await alice.fetch(`${s.base}/account/applications/revoke/${grantId}`)).status, 404, 'nothing left to confirm');
      }
      const code = await token(s.base, { grant_type: 'refresh_token', refresh_token: offlineTokens.refresh_token as string, client_id: offline.client_id, client_secret: offline.client_secret });
      assert.equal(code.status, 400);
    });
  });

  it('offers the home page and user profile pages', async () => {
    const home = await new Browser().fetch(`${s.base}/`);
    assert.equal(home.status, 200);
    assert.match(home.body, /Sign in/);
    const signedIn = await alice.fetch(`${s.base}/`);
    assert.match(signedIn.body, /Your applications/);
    assert.equal((await request(`${s.base}/user/alice`)).status, 200);
    assert.equal((await request(`${s.base}/user/nobody`)).status, 404);
  });
});

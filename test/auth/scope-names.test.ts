/*
 * Today's MetaBrainz scope names (`musicbrainz:tag`, `musicbrainz:rating`,
 * `musicbrainz:collection`, `musicbrainz:submit_isrc`, `musicbrainz:submit_barcode`) are the
 * classic scopes under other names (docs/decisions.md, "Scope names"): the consent page
 * describes them the same, they grant the same bits, a grant made under one name
 * pre-authorizes the other, and the token response echoes the names the client wrote (a
 * classic request's response still has no scope key).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addApp, addUser, authorize, locationParams, request, startAuthServer, type AuthServer, type Browser } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { authorizeUrl, codeOf, exchange, isConsent, refresh, signIn, type Client } from './support.js';

const WEB_URI = 'https://client.example/callback';
const ALL_PREFIXED = 'profile email musicbrainz:tag musicbrainz:rating musicbrainz:collection musicbrainz:submit_isrc musicbrainz:submit_barcode';

describe(`MetaBrainz scope names (${DIALECT})`, () => {
  let t: TestEnv;
  let s: AuthServer;
  let alice: Browser;
  let web: Client;
  let desktop: Client;

  const introspect = async (accessToken: string) =>
    (await request(`${s.base}/oauth2/introspect`, { form: { token: accessToken, client_id: web.client_id, client_secret: web.client_secret } })).json();

  before(async () => {
    t = await makeTestEnv();
    s = await startAuthServer(t);
    await addUser(t, 'alice');
    [web, desktop] = await Promise.all([addApp(t, 'alice', 'confidential', WEB_URI, 'Tagger Web'), addApp(t, 'alice', 'public', undefined, 'Tagger Desktop')]);
    alice = await signIn(s.base, 'alice');
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('grants every classic scope under its MetaBrainz name, and echoes the names as asked', async () => {
    const params = { client_id: web.client_id, response_type: 'code', scope: ALL_PREFIXED, redirect_uri: WEB_URI, approval_prompt: 'force', state: 's1' };
    const consent = await alice.fetch(authorizeUrl(s.base, params));
    assert.ok(isConsent(consent), consent.body.slice(0, 400));
    for (const text of ['View and modify your private tags', 'View and modify your private ratings', 'View and modify your private collections', 'Submit new ISRCs', 'Submit new barcodes']) {
      assert.ok(consent.body.includes(text), `the consent page says: ${text}`);
    }
    const res = await authorize(alice, s.base, params);
    const ex = await exchange(s.base, web, codeOf(res), WEB_URI);
    assert.equal(ex.status, 200, ex.body);
    const body = ex.json();
    assert.equal(body.scope, ALL_PREFIXED);
    const info = await introspect(body.access_token);
    assert.equal(info.active, true);
    assert.deepEqual(String(info.scope).split(' ').sort(), ['collection', 'email', 'profile', 'rating', 'submit_barcode', 'submit_isrc', 'tag']);
    const userinfo = await request(`${s.base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${body.access_token}` } });
    assert.equal(userinfo.status, 200);
    assert.equal(userinfo.json().email, 'alice@example.com', 'the email scope holds');
  });

  it('echoes the scope on refresh too, for an installed application', async () => {
    const params = { client_id: desktop.client_id, response_type: 'code', scope: 'profile musicbrainz:collection', redirect_uri: 'http://127.0.0.1:5678/auth' };
    const ex = await exchange(s.base, desktop, codeOf(await authorize(alice, s.base, params)), params.redirect_uri);
    assert.equal(ex.status, 200, ex.body);
    assert.equal(ex.json().scope, 'profile musicbrainz:collection');
    const again = await refresh(s.base, desktop, ex.json().refresh_token);
    assert.equal(again.status, 200, again.body);
    assert.equal(again.json().scope, 'profile musicbrainz:collection');
  });

  it('keeps the classic response (no scope key) for classic names, and a classic grant pre-authorizes the same scopes under MetaBrainz names', async () => {
    const classic = { client_id: web.client_id, response_type: 'code', scope: 'profile tag', redirect_uri: WEB_URI };
    const ex = await exchange(s.base, web, codeOf(await authorize(alice, s.base, classic)), WEB_URI);
    assert.equal(ex.status, 200, ex.body);
    assert.deepEqual(Object.keys(ex.json()).sort(), ['access_token', 'expires_in', 'token_type']);
    // The same bits: no consent page, straight back with a code.
    const prefixed = await alice.fetch(authorizeUrl(s.base, { ...classic, scope: 'musicbrainz:tag profile musicbrainz:tag' }));
    assert.equal(prefixed.status, 302, prefixed.body.slice(0, 300));
    const code = locationParams(prefixed).get('code') as string;
    const ex2 = await exchange(s.base, web, code, WEB_URI);
    assert.equal(ex2.status, 200, ex2.body);
    assert.equal(ex2.json().scope, 'musicbrainz:tag profile', 'each name once, in the order asked');
  });

  it('refuses other projects\' and unknown prefixed names with invalid_scope', async () => {
    for (const name of ['listenbrainz:submit-listens', 'musicbrainz:profile', 'musicbrainz:TAG', 'musicbrainz:submit_puid']) {
      const res = await alice.fetch(authorizeUrl(s.base, { client_id: web.client_id, response_type: 'code', scope: `profile ${name}`, redirect_uri: WEB_URI, state: 'x' }));
      assert.equal(res.status, 302, name);
      const q = locationParams(res);
      assert.equal(q.get('error'), 'invalid_scope', name);
      assert.equal(q.get('error_description'), `Unsupported scope: ${name}`);
      assert.equal(q.get('state'), 'x');
    }
  });
});

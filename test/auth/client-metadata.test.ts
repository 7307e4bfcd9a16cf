/*
 * Client ID Metadata Documents (docs/oauth.md, "Applications nobody registered"): a client_id
 * that is the https URL of a JSON document. The documents are served over HTTPS on 127.0.0.1 by
 * a server of this test, with a certificate of a local CA made as `sleeve tls init` makes one;
 * sleeve runs as `sleeve serve` in a process of its own that trusts that CA through
 * NODE_EXTRA_CA_CERTS, as an operator's would, and with SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE (the
 * documents are on loopback). The refusals of private addresses, of hosts not listed and of the
 * feature turned off need no document: they run in this process, without the allowance.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeJwt } from 'jose';
import * as client from 'openid-client';
import { initLocalCa } from '../../src/auth/local-ca.js';
import { addUser, Browser, request, token, type HttpsResponse } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { fetchTrustingDataDir } from '../helpers/openid-fetch.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait.js';
import { assertErrorPage, assertOAuthError, authorizeUrl, isConsent, s256, signIn, startLoggedAuthServer, startSibling } from './support.js';

const VERIFIER = 'a-verifier-of-at-least-forty-three-characters-0123456789';
const CALLBACK = 'http://127.0.0.1/callback';

interface Served {
  body: string | Buffer;
  status?: number;
  headers?: Record<string, string>;
  /** Never answer (the fetch's time limit is what ends it). */
  hang?: boolean;
}

/** The documents' HTTPS server: what each path answers, how often it was asked, and how many requests it held at once. */
class DocumentHost {
  readonly served = new Map<string, Served>();
  readonly fetches = new Map<string, number>();
  open = 0;
  mostOpen = 0;
  private readonly sockets = new Set<Socket>();
  private server!: https.Server;
  base = '';

  async start(cert: string, key: string): Promise<void> {
    this.server = https.createServer({ cert, key }, (req, res) => {
      const p = req.url ?? '';
      this.fetches.set(p, (this.fetches.get(p) ?? 0) + 1);
      this.open++;
      this.mostOpen = Math.max(this.mostOpen, this.open);
      res.on('close', () => this.open--);
      const s = this.served.get(p.replace(/\/hang\/\d+\.json$/, '/hang.json'));
      if (s === undefined) res.writeHead(404).end();
      else if (s.hang !== true) res.writeHead(s.status ?? 200, { 'content-type': 'application/json', ...s.headers }).end(s.body);
    });
    this.server.on('secureConnection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.base = `https://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Serves `doc` as JSON at `p` (its client_id the URL, unless the document says otherwise). */
  json(p: string, doc: Record<string, unknown>, headers: Record<string, string> = { 'cache-control': 'max-age=3600' }): string {
    const url = `${this.base}${p}`;
    this.served.set(p, { body: JSON.stringify({ client_id: url, ...doc }), headers });
    return url;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

function pkce(extra: Record<string, string> = {}): Record<string, string> {
  return { response_type: 'code', scope: 'profile', code_challenge: s256(VERIFIER), code_challenge_method: 'S256', state: 'st', ...extra };
}

describe(`Client ID Metadata Documents (${DIALECT})`, () => {
  let t: TestEnv;
  let sleeve: ServeProcess;
  let base: string;
  const host = new DocumentHost();
  let alice: Browser;

  before(async () => {
    t = await makeTestEnv();
    const caDir = path.join(t.dir, 'document-host');
    const ca = await initLocalCa(caDir, ['127.0.0.1', 'localhost']);
    await host.start(readFileSync(ca.cert, 'utf8'), readFileSync(ca.key, 'utf8'));
    await addUser(t, 'alice');
    sleeve = await startServe({
      ...t.env,
      NODE_EXTRA_CA_CERTS: ca.ca,
      SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE: '1',
      SLEEVE_CLIENT_METADATA_TIMEOUT_MS: '500',
      SLEEVE_CLIENT_METADATA_CACHE_MIN_SECONDS: '0',
      SLEEVE_LOG_LEVEL: 'info',
    });
    base = sleeve.authBase;
    alice = await signIn(base, 'alice');
  });

  after(async () => {
    await sleeve?.stop();
    await host.stop();
    await t?.cleanup();
  });

  /** The audit lines sleeve wrote about refused documents. */
  const refusals = () => logLines(sleeve).filter((l) => l.audit === 'client_document.refused');

  it('is advertised in discovery', async () => {
    const res = await request(`${base}/.well-known/openid-configuration`);
    assert.equal(res.json().client_id_metadata_document_supported, true);
  });

  it('runs the code flow with openid-client: consent naming the host, tokens, userinfo, rotation, the applications page, revocation', async () => {
    const clientId = host.json('/apps/tagger.json', { client_name: 'Desktop Tagger', redirect_uris: [CALLBACK], client_uri: 'https://tagger.example/' });
    const config = await client.discovery(new URL(base), clientId, undefined, client.None(), { [client.customFetch]: fetchTrustingDataDir(t.env.SLEEVE_DATA_DIR) });
    const verifier = client.randomPKCECodeVerifier();
    const nonce = client.randomNonce();
    // A loopback redirect URI on any port, as RFC 8252 §7.3 has it.
    const redirectUri = 'http://127.0.0.1:43210/callback';
    const url = client.buildAuthorizationUrl(config, { redirect_uri: redirectUri, scope: 'openid profile', nonce, code_challenge: await client.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' });
    const page = await alice.fetch(String(url));
    assert.ok(isConsent(page), page.body.slice(0, 500));
    const docHost = new URL(host.base).host;
    assert.match(page.body, new RegExp(`<h2 class="client-host">${docHost}</h2>`));
    assert.match(page.body, /not registered here/);
    assert.match(page.body, /<strong>Desktop Tagger<\/strong> \(from 127\.0\.0\.1:\d+\)/);
    const allowed = await alice.fetch(String(url), { form: { csrf_token: Browser.csrf(page), decision: 'allow' } });
    assert.equal(allowed.status, 302, allowed.body.slice(0, 300));
    const tokens = await client.authorizationCodeGrant(config, new URL(String(allowed.headers.location)), { pkceCodeVerifier: verifier, expectedNonce: nonce });
    assert.equal(decodeJwt(tokens.id_token as string).aud, clientId);
    assert.ok(tokens.refresh_token);
    const claims = tokens.claims();
    assert.equal(claims?.sub, 'alice');
    assert.equal((await client.fetchUserInfo(config, tokens.access_token, 'alice')).sub, 'alice');
    // Fetched once: the authorization request's copy served the exchange too (max-age=3600).
    assert.equal(host.fetches.get('/apps/tagger.json'), 1);

    // Such a client's refresh tokens rotate.
    const refreshed = await client.refreshTokenGrant(config, tokens.refresh_token as string);
    assert.ok(refreshed.refresh_token);
    assert.notEqual(refreshed.refresh_token, tokens.refresh_token);

    const apps = await alice.fetch(`${base}/account/applications`);
    assert.match(apps.body, /<h3>Desktop Tagger<\/h3>/);
    assert.match(apps.body, new RegExp(`From <strong>${docHost}</strong>: not registered here`));

    await client.tokenRevocation(config, refreshed.refresh_token as string);
    const after = await request(`${base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${refreshed.access_token}` } });
    assert.equal(after.status, 401, 'the grant ended with its refresh token');
  });

  it('takes only the redirect URIs the document lists (a listed loopback one on any port), and requires PKCE with S256', async () => {
    const clientId = host.json('/apps/strict.json', { client_name: 'Strict', redirect_uris: [CALLBACK, 'https://strict.example/cb'] });
    for (const redirect of ['https://strict.example/other', 'http://127.0.0.1:5000/elsewhere', 'urn:ietf:wg:oauth:2.0:oob', 'http://localhost/callback']) {
      const res = await alice.fetch(authorizeUrl(base, { ...pkce(), client_id: clientId, redirect_uri: redirect }));
      assertErrorPage(res, 400, 'invalid_request', 'Mismatched redirect URI');
    }
    const plain = await alice.fetch(authorizeUrl(base, { ...pkce({ code_challenge: VERIFIER, code_challenge_method: 'plain' }), client_id: clientId, redirect_uri: 'https://strict.example/cb' }));
    assert.equal(plain.status, 302);
    const back = new URL(String(plain.headers.location));
    assert.equal(back.searchParams.get('error'), 'invalid_request');
    assert.match(back.searchParams.get('error_description') ?? '', /PKCE with code_challenge_method=S256/);
  });

  it('refuses a document that is too large, slow, not JSON, redirected, for another client_id, without redirect URIs or with http ones, or asking for private_key_jwt: a page, an audit line, nothing stored', async () => {
    const cases: [string, (p: string) => void, string, RegExp][] = [
      ['/bad/large.json', (p) => host.served.set(p, { body: JSON.stringify({ client_id: `${host.base}${p}`, client_name: 'x'.repeat(6000), redirect_uris: [CALLBACK] }) }), 'too_large', /larger than 5120 bytes/],
      ['/bad/slow.json', (p) => host.served.set(p, { body: '', hang: true }), 'timeout', /did not arrive within 500 ms/],
      ['/bad/html.json', (p) => host.served.set(p, { body: '<html>hello</html>' }), 'not_json', /is not JSON/],
      ['/bad/moved.json', (p) => host.served.set(p, { body: '', status: 302, headers: { location: `${host.base}/apps/tagger.json` } }), 'redirect', /redirect \(302\), which is not followed/],
      ['/bad/other.json', (p) => host.json(p, { client_id: `${host.base}/apps/tagger.json`, client_name: 'Other', redirect_uris: [CALLBACK] }), 'client_id_mismatch', /names another client_id than its URL/],
      ['/bad/nouris.json', (p) => host.json(p, { client_name: 'No URIs' }), 'bad_document', /redirect_uris must list at least one/],
      ['/bad/http.json', (p) => host.json(p, { client_name: 'Plain', redirect_uris: ['http://app.example/cb'] }), 'bad_document', /uses http on a host that is not loopback/],
      ['/bad/jwt.json', (p) => host.json(p, { client_name: 'JWT', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'private_key_jwt', jwks_uri: 'https://x.example/jwks' }), 'bad_document', /private_key_jwt is not supported here/],
    ];
    for (const [p, serve, reason, message] of cases) {
      serve(p);
      const clientId = `${host.base}${p}`;
      const res = await alice.fetch(authorizeUrl(base, { ...pkce(), client_id: clientId, redirect_uri: CALLBACK }));
      assert.equal(res.status, 400, `${p}: ${res.body.slice(0, 300)}`);
      assert.equal(res.headers.location, undefined, `${p}: no redirect`);
      assert.match(res.body, /Error: invalid_client/);
      assert.match(res.body.replace(/&#39;/g, "'"), message, p);
      await waitFor(() => refusals().some((l) => l.clientId === clientId && l.reason === reason), { what: `the audit line of ${p}` });
      // Nothing stored: the client has no row, so it cannot even revoke.
      const ex = await token(base, { grant_type: 'refresh_token', refresh_token: '1.x', client_id: clientId });
      assertOAuthError(ex, 401, 'invalid_client');
    }
    const apps = await alice.fetch(`${base}/account/applications`);
    assert.doesNotMatch(apps.body, /\/bad\//);
  });

  it('refuses the exchange of a code whose document changed since the authorization request, and issues nothing', async () => {
    const p = '/apps/changing.json';
    const clientId = host.json(p, { client_name: 'Changing', redirect_uris: [CALLBACK] }, { 'cache-control': 'no-store' });
    const url = authorizeUrl(base, { ...pkce(), client_id: clientId, redirect_uri: CALLBACK });
    const page = await alice.fetch(url);
    const allowed = await alice.fetch(url, { form: { csrf_token: Browser.csrf(page), decision: 'allow' } });
    const code = new URL(String(allowed.headers.location)).searchParams.get('code') as string;
    host.json(p, { client_name: 'Changing', redirect_uris: ['https://attacker.example/cb'] }, { 'cache-control': 'no-store' });
    const ex = await token(base, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, client_id: clientId, code_verifier: VERIFIER });
    assertOAuthError(ex, 400, 'invalid_grant', /metadata document changed since the authorization request/);
    await waitFor(() => refusals().some((l) => l.clientId === clientId && l.reason === 'changed'), { what: 'the audit line' });
    // Put back as it was, the code still works: the refusal used nothing up.
    host.json(p, { client_name: 'Changing', redirect_uris: [CALLBACK] }, { 'cache-control': 'no-store' });
    const again = await token(base, { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, client_id: clientId, code_verifier: VERIFIER });
    assert.equal(again.status, 200, again.body);
    assert.equal(host.fetches.get(p), 4, 'no-store: fetched for the page, the consent and each exchange');
  });

  it('fetches no more than 8 documents at once, however many distinct URLs are asked for; the rest are told to retry', async () => {
    host.served.set('/hang.json', { body: '', hang: true });
    host.mostOpen = 0;
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => alice.fetch(authorizeUrl(base, { ...pkce(), client_id: `${host.base}/hang/${i}.json`, redirect_uri: CALLBACK }))));
    const statuses = answers.map((a: HttpsResponse) => a.status);
    assert.ok(host.mostOpen <= 8, `at most 8 fetches at once, saw ${host.mostOpen}`);
    assert.ok(statuses.includes(503), `some told to retry: ${statuses}`);
    assert.ok(statuses.every((s) => s === 400 || s === 503), `only 400 (timed out) and 503: ${statuses}`);
  });
});

describe(`Client ID Metadata Documents: where sleeve will not fetch from (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    await addUser(t, 'bob');
  });

  after(async () => {
    await t?.cleanup();
  });

  it('refuses loopback addresses, written or resolved, without SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE', async () => {
    const s = await startLoggedAuthServer(t, {});
    try {
      const bob = await signIn(s.base, 'bob');
      const port = new URL(s.base).port;
      for (const [clientId, message] of [
        [`https://127.0.0.1:${port}/doc.json`, '127.0.0.1 is not a public address'],
        [`https://localhost:${port}/doc.json`, 'localhost resolves to'],
        [`https://[::1]:${port}/doc.json`, '[::1] is not a public address'],
      ] as const) {
        const res = await bob.fetch(authorizeUrl(s.base, { ...pkce(), client_id: clientId, redirect_uri: CALLBACK }));
        assertErrorPage(res, 400, 'invalid_client');
        assert.ok(res.body.includes(message), `${clientId}: ${res.body.slice(0, 600)}`);
      }
      await waitFor(() => s.logs().split('\n').filter((l) => l.includes('"audit":"client_document.refused"') && l.includes('"reason":"private_address"')).length === 3, { what: 'three audit lines' });
    } finally {
      await s.server.close();
    }
  });

  it('refuses hosts not listed in SLEEVE_CLIENT_METADATA, and everything when it is off (discovery then says nothing)', async () => {
    const listed = await startSibling(t, { SLEEVE_CLIENT_METADATA: 'apps.example, tagger.example' });
    try {
      const bob = await signIn(listed.base, 'bob');
      const res = await bob.fetch(authorizeUrl(listed.base, { ...pkce(), client_id: 'https://other.example/doc.json', redirect_uri: CALLBACK }));
      assertErrorPage(res, 400, 'invalid_client', 'Client metadata documents from other.example are not accepted here');
      assert.equal((await request(`${listed.base}/.well-known/openid-configuration`)).json().client_id_metadata_document_supported, true);
    } finally {
      await listed.server.close();
    }
    const off = await startSibling(t, { SLEEVE_CLIENT_METADATA: 'off' });
    try {
      const bob = await signIn(off.base, 'bob');
      const res = await bob.fetch(authorizeUrl(off.base, { ...pkce(), client_id: 'https://apps.example/doc.json', redirect_uri: CALLBACK }));
      assertErrorPage(res, 400, 'invalid_client', 'Client ID Metadata Documents are not accepted here: register the application');
      assert.equal((await request(`${off.base}/.well-known/openid-configuration`)).json().client_id_metadata_document_supported, undefined);
    } finally {
      await off.server.close();
    }
  });

  it('refuses a client_id URL that is not https, has no path, or carries credentials', async () => {
    const s = await startSibling(t, {});
    try {
      const bob = await signIn(s.base, 'bob');
      for (const [clientId, message] of [
        ['http://apps.example/doc.json', 'A client_id URL must use https'],
        ['https://apps.example/', 'A client_id URL must have a path'],
        ['https://user:pw@apps.example/doc.json', 'A client_id URL must not contain a user name, password or fragment'],
        ['https://apps.example/a/../doc.json', 'A client_id URL must be written in its normal form (lower-case host, no default port, no dot segments)'],
      ] as const) {
        const res = await bob.fetch(authorizeUrl(s.base, { ...pkce(), client_id: clientId, redirect_uri: CALLBACK }));
        assertErrorPage(res, 400, 'invalid_client', message);
      }
    } finally {
      await s.server.close();
    }
  });
});

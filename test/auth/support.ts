/*
 * Helpers shared by the authorization service tests (test/auth/*.test.ts): signing in,
 * running authorize → consent → token, and talking to the auth port in plain HTTP.
 * Everything goes through HTTPS (or plain HTTP on purpose) and the CLI.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { PassThrough } from 'node:stream';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import type { Clock } from '../../src/shared/clock.js';
import { authorize, Browser, PASSWORD, request, startAuthServer, token, type AuthServer, type HttpsResponse } from '../helpers/auth.js';
import { freePort, type TestEnv } from '../helpers/env.js';

export const OOB = 'urn:ietf:wg:oauth:2.0:oob';

export interface Client {
  client_id: string;
  client_secret: string;
}

/**
 * A second auth server on the same database (same users, apps and sessions), e.g. with short
 * lifetimes and a clock the test moves; `t.env` is left as it was.
 */
export function startSibling(t: TestEnv, extra: Record<string, string>, clock?: Clock): Promise<AuthServer> {
  return startAuthServer({ ...t, env: { ...t.env } }, extra, clock);
}

/** An auth server whose log lines (JSON, one per line) are kept in memory. */
export async function startLoggedAuthServer(t: TestEnv, extra: Record<string, string> = {}, clock?: Clock): Promise<AuthServer & { logs(): string }> {
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_URL: base, ...extra });
  const chunks: Buffer[] = [];
  const stream = new PassThrough();
  stream.on('data', (c: Buffer) => chunks.push(c));
  const server = await serve(loadConfig(t.env), { only: 'auth', logStream: stream, clock });
  return { server, base, logs: () => Buffer.concat(chunks).toString('utf8') };
}

/** Signs in a fresh browser (with the test password) and checks that it worked. */
export async function signIn(base: string, name: string, password = PASSWORD): Promise<Browser> {
  const b = new Browser();
  const res = await b.login(base, name, password);
  assert.equal(res.status, 303, `sign-in of ${name}: ${res.body.slice(0, 300)}`);
  assert.ok(b.jar.has('__Host-sleeve-session'), 'a session cookie was set');
  return b;
}

/** A sign-in attempt with extra headers (e.g. X-Forwarded-For behind a trusted proxy). */
export async function tryLogin(base: string, name: string, password: string, headers: Record<string, string> = {}): Promise<HttpsResponse> {
  const b = new Browser();
  const form = await b.fetch(`${base}/login`, { headers });
  return b.fetch(`${base}/login`, { headers, form: { csrf_token: Browser.csrf(form), username: name, password, return_to: '/account/applications' } });
}

export function authorizeUrl(base: string, params: Record<string, string> | [string, string][]): string {
  return `${base}/oauth2/authorize?${new URLSearchParams(params)}`;
}

/** The code of an authorization response: from its Location, or from the form_post page. */
export function codeOf(res: HttpsResponse): string {
  if (res.status === 302) {
    const code = new URL(String(res.headers.location)).searchParams.get('code');
    assert.ok(code, `a code in ${res.headers.location}`);
    return code;
  }
  const m = /name="code" value="([^"]+)"/.exec(res.body);
  assert.ok(m, `a code in the response (status ${res.status}): ${res.body.slice(0, 400)}`);
  return m[1] as string;
}

/** Whether the response is the consent page. */
export function isConsent(res: HttpsResponse): boolean {
  return res.status === 200 && res.body.includes('is requesting permission to') && res.body.includes('name="decision"');
}

export function exchange(base: string, app: Client, code: string, redirectUri: string, extra: Record<string, string> = {}): Promise<HttpsResponse> {
  return token(base, { grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id: app.client_id, client_secret: app.client_secret, ...extra });
}

export function refresh(base: string, app: Client, refreshToken: string): Promise<HttpsResponse> {
  return token(base, { grant_type: 'refresh_token', refresh_token: refreshToken, client_id: app.client_id, client_secret: app.client_secret });
}

export function revoke(base: string, app: Client, tok: string): Promise<HttpsResponse> {
  return request(`${base}/oauth2/revoke`, { form: { token: tok, client_id: app.client_id, client_secret: app.client_secret } });
}

export interface Tokens {
  access_token: string;
  token_type: string;
  expires_in: number;
  refresh_token?: string;
}

/** authorize (consenting when asked) → code → tokens; fails the test unless each step succeeds. */
export async function grant(browser: Browser, base: string, app: Client, params: Record<string, string>, exchangeExtra: Record<string, string> = {}): Promise<Tokens> {
  const res = await authorize(browser, base, { client_id: app.client_id, response_type: 'code', scope: 'profile', ...params });
  const code = codeOf(res);
  const ex = await exchange(base, app, code, params.redirect_uri as string, exchangeExtra);
  assert.equal(ex.status, 200, ex.body);
  return ex.json();
}

/** The status of GET /oauth2/userinfo with this bearer token. */
export async function userinfoStatus(base: string, accessToken: string): Promise<number> {
  return (await request(`${base}/oauth2/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } })).status;
}

export function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

/** Asserts an RFC 6749 JSON error. */
export function assertOAuthError(res: HttpsResponse, status: number, error: string, description?: string | RegExp): void {
  assert.equal(res.status, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/json/);
  const body = res.json();
  assert.equal(body.error, error, res.body);
  if (typeof description === 'string') assert.equal(body.error_description, description);
  else if (description !== undefined) assert.match(body.error_description, description);
}

/** Asserts an HTML error page (not a redirect) naming the error. */
export function assertErrorPage(res: HttpsResponse, status: number, error: string, description?: string): void {
  assert.equal(res.status, status, res.body.slice(0, 500));
  assert.equal(res.headers.location, undefined, 'no redirect');
  assert.match(String(res.headers['content-type']), /^text\/html/);
  assert.ok(res.body.includes(`Error: ${error}`), `page names ${error}: ${res.body.slice(0, 800)}`);
  if (description !== undefined) assert.ok(res.body.includes(escapeHtml(description)), `page says ${description}`);
}

export interface PlainResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A plain-HTTP request (no TLS) to the auth listener's port. */
export function plainHttp(base: string, path: string, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<PlainResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: Number(url.port), path, method: opts.method ?? 'GET', headers: opts.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
    req.end(opts.body);
  });
}

export function escapeHtml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');
}

export { fetchTrusting, fetchTrustingDataDir } from '../helpers/openid-fetch.js';

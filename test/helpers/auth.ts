import https from 'node:https';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import type { Clock } from '../../src/shared/clock.js';
import { cliInProcess, freePort, type TestEnv } from './env.js';

export interface AuthServer {
  server: Server;
  /** https://127.0.0.1:PORT, also SLEEVE_AUTH_URL. */
  base: string;
}

/** Starts the auth listener (self-signed) in this process on a free port; on the system clock unless given one. */
export async function startAuthServer(t: TestEnv, extra: Record<string, string> = {}, clock?: Clock): Promise<AuthServer> {
  const port = await freePort();
  const base = `https://127.0.0.1:${port}`;
  Object.assign(t.env, { SLEEVE_AUTH_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_URL: base, ...extra });
  const server = await serve(loadConfig(t.env), { only: 'auth', clock });
  return { server, base };
}

export interface HttpsResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json(): any;
}

/**
 * One HTTPS request that accepts the self-signed certificate. `form` is sent form-encoded and
 * `json` as JSON (each with its Content-Type unless one is given); a write cut short by the
 * server is not an error once its answer is read.
 */
export function request(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; form?: Record<string, string> | [string, string][]; json?: unknown; body?: Buffer | string } = {},
): Promise<HttpsResponse> {
  const headers: Record<string, string> = { ...opts.headers };
  let body = opts.body;
  if (opts.form !== undefined) {
    body = new URLSearchParams(opts.form).toString();
    headers['content-type'] ??= 'application/x-www-form-urlencoded';
  } else if (opts.json !== undefined) {
    body = JSON.stringify(opts.json);
    headers['content-type'] ??= 'application/json';
  }
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: opts.method ?? (body === undefined ? 'GET' : 'POST'), headers, rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text, json: () => JSON.parse(text) });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** A minimal cookie jar for the website's session and CSRF cookies. */
export class Browser {
  readonly jar = new Map<string, string>();

  async fetch(url: string, opts: Parameters<typeof request>[1] = {}): Promise<HttpsResponse> {
    const cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    const res = await request(url, { ...opts, headers: { ...opts.headers, ...(cookie ? { cookie } : {}) } });
    const set = res.headers['set-cookie'];
    for (const c of Array.isArray(set) ? set : set ? [set] : []) {
      const [pair = ''] = c.split(';');
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      if (/Max-Age=0/i.test(c) || value === '') this.jar.delete(name);
      else this.jar.set(name, value);
    }
    return res;
  }

  /** The CSRF token of the page's first form. */
  static csrf(page: HttpsResponse): string {
    const m = /name="csrf_token" value="([^"]+)"/.exec(page.body);
    if (m === null) throw new Error(`no CSRF token on the page (status ${page.status}):\n${page.body.slice(0, 500)}`);
    return m[1] as string;
  }

  /** Signs in through the login form. */
  async login(base: string, username: string, password: string): Promise<HttpsResponse> {
    const form = await this.fetch(`${base}/login`);
    return this.fetch(`${base}/login`, { form: { csrf_token: Browser.csrf(form), username, password, return_to: '/account/applications' } });
  }
}

export const PASSWORD = 'correct horse battery staple';

/** Adds a user through the CLI (in this process: setup). */
export async function addUser(t: TestEnv, name: string, extra: string[] = []): Promise<void> {
  await cliInProcess(t.env, ['user', 'add', name, '--email', `${name}@example.com`, '--password-stdin', ...extra], { stdin: `${PASSWORD}\n` });
}

/** Registers an application through the CLI (in this process: setup); returns its credentials. */
export async function addApp(t: TestEnv, owner: string, kind: 'confidential' | 'public', redirectUri?: string, name = `App ${kind}`): Promise<{ client_id: string; client_secret: string }> {
  const args = ['--json', 'app', 'add', '--owner', owner, '--name', name, '--type', kind];
  if (redirectUri !== undefined) args.push('--redirect-uri', redirectUri);
  return cliInProcess(t.env, args);
}

/** Query parameters of a Location header. */
export function locationParams(res: HttpsResponse): URLSearchParams {
  const loc = res.headers.location;
  if (typeof loc !== 'string') throw new Error(`no Location (status ${res.status}): ${res.body.slice(0, 300)}`);
  return new URL(loc).searchParams;
}

/**
 * Runs authorize → consent (Allow) for a signed-in browser and returns the response
 * that carries the code (a redirect, or the form_post page).
 */
export async function authorize(browser: Browser, base: string, params: Record<string, string>, decision: 'allow' | 'deny' = 'allow'): Promise<HttpsResponse> {
  const url = `${base}/oauth2/authorize?${new URLSearchParams(params)}`;
  const first = await browser.fetch(url);
  if (first.status !== 200 || !first.body.includes('name="decision"')) return first;
  return browser.fetch(url, { form: { csrf_token: Browser.csrf(first), decision } });
}

/** POST /oauth2/token with the form given. */
export function token(base: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<HttpsResponse> {
  return request(`${base}/oauth2/token`, { form, headers });
}

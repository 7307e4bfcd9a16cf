import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import { constantTimeEqual, randomToken } from './crypto.js';

/** Form bodies keep every value of a repeated field, so duplicates can be refused. */
declare module 'fastify' {
  interface FastifyRequest {
    form?: URLSearchParams;
  }
}

/**
 * What the JSON endpoints read of a request: Fastify's, or a token request the fast lane read
 * (auth/token-lane.ts), with its form body, a logger that names its request id, and its peer.
 */
export interface RequestView {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly form?: URLSearchParams | undefined;
  readonly log: FastifyBaseLogger;
  readonly raw: { readonly socket: { readonly remoteAddress?: string | undefined } };
}

export function queryParams(req: RequestView): URLSearchParams {
  const q = req.url.indexOf('?');
  return new URLSearchParams(q === -1 ? '' : req.url.slice(q + 1));
}

export function formParams(req: RequestView): URLSearchParams {
  return req.form ?? new URLSearchParams();
}

export function cookies(req: FastifyRequest): Map<string, string> {
  const out = new Map<string, string>();
  const header = req.headers.cookie;
  if (header === undefined) return out;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq === -1) continue;
    const name = part.slice(0, eq).trim();
    if (!out.has(name)) out.set(name, part.slice(eq + 1).trim());
  }
  return out;
}

/** The headers every answer of the authorization listener carries (pages, JSON, errors). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'strict-transport-security': 'max-age=31536000',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'strict-origin-when-cross-origin',
};

export const SESSION_COOKIE = '__Host-sleeve-session';
const CSRF_COOKIE = '__Host-sleeve-csrf';
/** A browser that signed in to an account before (docs/decisions.md, "Sign-in throttling"). */
export const DEVICE_COOKIE = '__Host-sleeve-device';

export function setCookie(reply: FastifyReply, name: string, value: string, opts: { maxAge?: number; sameSite?: 'Lax' | 'Strict' } = {}): void {
  const parts = [`${name}=${value}`, 'Path=/', 'Secure', 'HttpOnly', `SameSite=${opts.sameSite ?? 'Lax'}`];
  if (opts.maxAge !== undefined) parts.push(`Max-Age=${opts.maxAge}`);
  const existing = reply.getHeader('set-cookie');
  const list = existing === undefined ? [] : Array.isArray(existing) ? existing.map(String) : [String(existing)];
  reply.header('set-cookie', [...list, parts.join('; ')]);
}

/** The CSRF token set on a request's answer, when the request carried none. */
const csrfGiven = new WeakMap<FastifyRequest, string>();

/**
 * The CSRF token for forms: a random value in a `__Host-` cookie (which no other site
 * or subdomain can set), repeated in a hidden field and compared on submission.
 */
export function csrfToken(req: FastifyRequest, reply: FastifyReply): string {
  const existing = cookies(req).get(CSRF_COOKIE);
  if (existing !== undefined && /^[A-Za-z0-9_-]{43}$/.test(existing)) return existing;
  // Later calls in the same request reuse the token it was given (its cookie is not in this request).
  const given = csrfGiven.get(req);
  if (given !== undefined) return given;
  const token = randomToken();
  setCookie(reply, CSRF_COOKIE, token, { sameSite: 'Strict' });
  csrfGiven.set(req, token);
  return token;
}

export function csrfValid(req: FastifyRequest): boolean {
  const cookie = cookies(req).get(CSRF_COOKIE);
  const field = formParams(req).get('csrf_token');
  return cookie !== undefined && field !== null && cookie.length === 43 && constantTimeEqual(cookie, field);
}

/** Appends parameters to a redirect URI, replacing same-named ones and keeping the rest. */
export function withParams(uri: string, params: Record<string, string | undefined>): string {
  const url = new URL(uri);
  for (const [k, v] of Object.entries(params)) if (v !== undefined) url.searchParams.set(k, v);
  return url.href;
}

/** Form fields only ever checked by pattern or hashed, never put in a query as they are; their own errors (e.g. "Malformed authorization code") stay. */
const HASHED_FIELDS = new Set(['code', 'refresh_token', 'token', 'code_verifier', 'password']);

/** Whether the URL (path or query), a form field or Basic credentials carry a NUL (raw NUL cannot pass Node's parser). */
export function holdsNul(req: Pick<RequestView, 'url' | 'form' | 'headers'>): boolean {
  if (/%00/i.test(req.url)) return true;
  let nul = false;
  // forEach rather than for…of: no iterator and no [name, value] array per field.
  req.form?.forEach((v, k) => {
    if (k.includes('\0') || (v.includes('\0') && !HASHED_FIELDS.has(k))) nul = true;
  });
  if (nul) return true;
  const basic = /^basic\s+(\S+)/i.exec(req.headers.authorization ?? '');
  if (basic === null) return false;
  const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8');
  return decoded.includes('\0') || /%00/i.test(decoded);
}

import type { FastifyBaseLogger, FastifyReply, FastifyRequest } from 'fastify';
import type { AuthDeps } from '../../deps.js';
import { authenticateClient, type Application } from '../../applications.js';
import { isTransientDbError } from '../../../db/transient.js';
import { failedRequest, OAuthError, refusedRequest } from '../../errors.js';
import { formParams, queryParams, type RequestView } from '../../http-util.js';

/*
 * What the JSON endpoints (token, revoke, introspect, userinfo) share: their headers, their
 * parameters, client authentication, bearer tokens, and their one error mapping.
 */

export const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
export const CORS = { 'access-control-allow-origin': '*' };
/** The JSON endpoints' content type. */
export const JSON_TYPE = 'application/json; charset=utf-8';
/** The endpoints answer every method themselves (a wrong one is an OAuth error, not a 404). */
export const ANY_METHOD = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'] as const;

/** An RFC 6749 JSON error's headers besides the listener's (401 invalid_client with its Basic challenge); the fast lane's token answers use them too (auth/token-lane.ts). */
export function oauthErrorHeaders(err: OAuthError, extra: Record<string, string> = {}): Record<string, string> {
  const headers: Record<string, string> = { ...NO_STORE, ...CORS, ...extra };
  if (err.error === 'invalid_client') headers['www-authenticate'] = 'Basic realm="OAuth2-Client"';
  if (err.retryAfterSeconds !== undefined) headers['retry-after'] ??= String(err.retryAfterSeconds);
  return headers;
}

/** An RFC 6749 JSON error's body. */
export function oauthErrorBody(err: OAuthError): string {
  return JSON.stringify({ error: err.error, error_description: err.message });
}

/** Sends an RFC 6749 JSON error. */
export function sendOAuthError(reply: FastifyReply, err: OAuthError, extra: Record<string, string> = {}): FastifyReply {
  return reply.code(err.status).headers(oauthErrorHeaders(err, extra)).type(JSON_TYPE).send(oauthErrorBody(err));
}

/**
 * A database that is busy or away is not the request's fault: never a 400, which some clients
 * (Picard) take as "forget the refresh token"; 503 with a time to try again, logged as a
 * warning. Undefined for any other error.
 */
export function busyAnswer(err: unknown, log: FastifyBaseLogger): { err: OAuthError; extra: Record<string, string> } | undefined {
  if (!isTransientDbError(err)) return undefined;
  log.warn({ err }, 'auth request failed: the database is busy or unreachable');
  return { err: new OAuthError('temporarily_unavailable', 'The service is busy; try again shortly'), extra: { 'retry-after': '1' } };
}

/**
 * Any error of a JSON endpoint's request as its RFC 6749 answer: an OAuthError as it is; a busy
 * database as 503 (busyAnswer); another error with a 4xx status (a body too large, one that
 * cannot be parsed) as invalid_request; anything else as server_error, logged. The one mapping
 * of the endpoints' error handler (oauthErrors) and of the token endpoint's answer in the fast
 * lane (auth/token-lane.ts).
 */
export function oauthErrorOf(err: unknown, log: FastifyBaseLogger): { err: OAuthError; extra?: Record<string, string> } {
  if (err instanceof OAuthError) return { err };
  const busy = busyAnswer(err, log);
  if (busy !== undefined) return busy;
  const status = (err as { statusCode?: number } | undefined)?.statusCode;
  if (status !== undefined && status >= 400 && status < 500) return { err: refusedRequest(status) };
  log.error({ err }, 'auth request failed');
  return { err: failedRequest() };
}

/** The JSON endpoints' error handler (Fastify's): every error answered as oauthErrorOf maps it. */
export async function oauthErrors(err: Error, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const answer = oauthErrorOf(err, req.log);
  return sendOAuthError(reply, answer.err, answer.extra);
}

export function sendJson(reply: FastifyReply, body: unknown, headers: Record<string, string> = {}): FastifyReply {
  return reply
    .code(200)
    .headers({ ...NO_STORE, ...headers })
    .type(JSON_TYPE)
    .send(JSON.stringify(body));
}

/**
 * A CORS preflight's answer. `allowHeaders`: the request headers a page may send (as MusicBrainz:
 * `authorization` at userinfo and revoke, none at the token endpoint; sleeve adds `dpop` where
 * a DPoP proof is read, so that a browser client can send one).
 */
export function optionsReply(reply: FastifyReply, allow: string, allowHeaders?: string): FastifyReply {
  reply.headers({ ...NO_STORE, ...CORS, allow });
  if (allowHeaders !== undefined) reply.header('access-control-allow-headers', allowHeaders);
  return reply.code(200).type(JSON_TYPE).send('{"message":"OK"}');
}

export function onlyPost(req: FastifyRequest): void {
  if (req.method !== 'POST') throw new OAuthError('invalid_request', 'Only POST requests are allowed');
}

/** All values of `name` from query and form body together (a parameter in both counts twice). */
export function values(req: RequestView, name: string, source: 'both' | 'body' = 'both'): string[] {
  return valuesIn(formParams(req), source === 'body' ? undefined : queryOf(req), name);
}

/** The query string's parameters; undefined when the URL has no query string (none to parse, the usual POST). */
function queryOf(req: RequestView): URLSearchParams | undefined {
  return req.url.includes('?') ? queryParams(req) : undefined;
}

function valuesIn(form: URLSearchParams, query: URLSearchParams | undefined, name: string): string[] {
  const body = form.getAll(name);
  return query === undefined ? body : [...query.getAll(name), ...body];
}

/** Checks each name in order for repetition, and the required ones for presence (empty counts as missing). */
export function checkParams(req: RequestView, names: string[], required: Set<string>, source: 'both' | 'body' = 'both'): Map<string, string> {
  const out = new Map<string, string>();
  // Parsed once for all the names.
  const form = formParams(req);
  const query = source === 'body' ? undefined : queryOf(req);
  for (const name of names) {
    const v = valuesIn(form, query, name);
    if (v.length > 1) throw new OAuthError('invalid_request', `Parameter is included more than once in the request: ${name}`);
    if (required.has(name) && (v[0] === undefined || v[0] === '')) throw new OAuthError('invalid_request', `Required parameter is missing: ${name}`);
    if (v[0] !== undefined) out.set(name, v[0]);
  }
  return out;
}

/** Whether the request carries HTTP Basic credentials. */
export function hasBasicAuth(req: RequestView): boolean {
  return req.headers.authorization !== undefined && /^basic\s/i.test(req.headers.authorization);
}

/** Client credentials: HTTP Basic (RFC 6749 §2.3.1, form-encoded) wins over the body's client_id/client_secret. */
export function clientCredentials(req: RequestView, params: Map<string, string>): { id: string | undefined; secret: string | undefined } {
  const header = req.headers.authorization;
  const m = header === undefined ? null : /^basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
  if (m !== null) {
    const decoded = Buffer.from(m[1] as string, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon > 0) {
      try {
        return { id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' ')), secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' ')) };
      } catch {
        return { id: undefined, secret: undefined };
      }
    }
  }
  return { id: params.get('client_id'), secret: params.get('client_secret') };
}

/** The authenticated client of the request, or 401 invalid_client. */
export async function requireClient(deps: AuthDeps, req: RequestView, params: Map<string, string>): Promise<Application> {
  const { id, secret } = clientCredentials(req, params);
  const app = id === undefined || secret === undefined ? undefined : await authenticateClient(deps, id, secret);
  // "authentified" is kept on purpose: byte-for-byte as upstream (docs/interface.md, "What sleeve serves").
  if (app === undefined) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

/** Every bearer token of a request: header, form body and query (RFC 6750 §2; more than one is an error). */
export function bearerTokens(req: FastifyRequest): string[] {
  const found: string[] = [];
  const header = req.headers.authorization;
  if (header !== undefined) {
    const m = /^bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
    if (m !== null) found.push(m[1] as string);
  }
  found.push(...formParams(req).getAll('access_token'), ...queryParams(req).getAll('access_token'));
  return found;
}

/** The WWW-Authenticate challenge of a protected resource (RFC 6750 §3). */
export function bearerChallenge(err?: OAuthError, scope?: string): string {
  let v = 'Bearer realm="sleeve"';
  if (err !== undefined) v += `, error="${err.error}", error_description="${err.message.replace(/"/g, "'")}"`;
  if (scope !== undefined) v += `, scope="${scope}"`;
  return v;
}

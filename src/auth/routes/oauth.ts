import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findAccount, type AuthDeps } from '../accounts.js';
import { audit } from '../audit.js';
import { authenticateClient, findAppByClientId, OOB_URI, redirectUriRefusal, type Application } from '../applications.js';
import { tokenHash } from '../crypto.js';
import { OAuthError } from '../errors.js';
import { CodeReplayed, exchangeCode, findAccessToken, hasActiveGrant, introspect, issueCode, refreshGrant, revokeToken } from '../grants.js';
import { csrfValid, formParams, queryParams, withParams } from '../http-util.js';
import { parseScope, PROFILE, scopeNames, SCOPES } from '../scopes.js';
import { userinfoClaims } from '../userinfo.js';
import { consentPage, declinedPage, errorPage, FORM_POST_SCRIPT, formPostPage, oobPage } from '../views/pages.js';
import { currentViewer, sendPage, type PageContext } from './pages.js';

const NO_STORE = { 'cache-control': 'no-store', pragma: 'no-cache' };
const CORS = { 'access-control-allow-origin': '*' };
const FORM_POST_CSP = `default-src 'none'; script-src 'sha256-${createHash('sha256').update(FORM_POST_SCRIPT).digest('base64')}'; frame-ancestors 'none'; base-uri 'none'`;

/** Sends an RFC 6749 JSON error (401 invalid_client with its Basic challenge). */
export function sendOAuthError(reply: FastifyReply, err: OAuthError, extra: Record<string, string> = {}): FastifyReply {
  reply.code(err.status).headers({ ...NO_STORE, ...CORS, ...extra });
  if (err.error === 'invalid_client') reply.header('www-authenticate', 'Basic realm="OAuth2-Client"');
  return reply.type('application/json; charset=utf-8').send(JSON.stringify({ error: err.error, error_description: err.message }));
}

function sendJson(reply: FastifyReply, body: unknown, headers: Record<string, string> = {}): FastifyReply {
  return reply
    .code(200)
    .headers({ ...NO_STORE, ...headers })
    .type('application/json; charset=utf-8')
    .send(JSON.stringify(body));
}

/** All values of `name` from query and form body together (a parameter in both counts twice). */
function values(req: FastifyRequest, name: string, source: 'both' | 'body' = 'both'): string[] {
  const body = formParams(req).getAll(name);
  return source === 'body' ? body : [...queryParams(req).getAll(name), ...body];
}

/** Checks each name in order for repetition, and the required ones for presence (empty counts as missing). */
function checkParams(req: FastifyRequest, names: string[], required: Set<string>, source: 'both' | 'body' = 'both'): Map<string, string> {
  const out = new Map<string, string>();
  for (const name of names) {
    const v = values(req, name, source);
    if (v.length > 1) throw new OAuthError('invalid_request', `Parameter is included more than once in the request: ${name}`);
    if (required.has(name) && (v[0] === undefined || v[0] === '')) throw new OAuthError('invalid_request', `Required parameter is missing: ${name}`);
    if (v[0] !== undefined) out.set(name, v[0]);
  }
  return out;
}

/** Client credentials: HTTP Basic (RFC 6749 §2.3.1, form-encoded) wins over the body's client_id/client_secret. */
function clientCredentials(req: FastifyRequest, params: Map<string, string>): { id: string | undefined; secret: string | undefined } {
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

async function requireClient(deps: AuthDeps, req: FastifyRequest, params: Map<string, string>): Promise<Application> {
  const { id, secret } = clientCredentials(req, params);
  const app = id === undefined || secret === undefined ? undefined : await authenticateClient(deps, id, secret);
  if (app === undefined) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

function optionsReply(reply: FastifyReply, allow: string, allowHeaders = false): FastifyReply {
  reply.headers({ ...NO_STORE, ...CORS, allow });
  if (allowHeaders) reply.header('access-control-allow-headers', 'authorization');
  return reply.code(200).type('application/json; charset=utf-8').send('{"message":"OK"}');
}

/** The bearer token of a request: header, form body or query; more than one way is an error (RFC 6750 §2). */
function bearerToken(req: FastifyRequest): string | undefined {
  const found: string[] = [];
  const header = req.headers.authorization;
  if (header !== undefined) {
    const m = /^bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
    if (m !== null) found.push(m[1] as string);
  }
  const body = formParams(req).getAll('access_token');
  const query = queryParams(req).getAll('access_token');
  found.push(...body, ...query);
  if (found.length > 1) throw new OAuthError('invalid_request', 'Use exactly one way of sending the access token');
  return found[0];
}

function bearerChallenge(err?: OAuthError, scope?: string): string {
  let v = 'Bearer realm="sleeve"';
  if (err !== undefined) v += `, error="${err.error}", error_description="${err.message.replace(/"/g, "'")}"`;
  if (scope !== undefined) v += `, scope="${scope}"`;
  return v;
}

const AUTHORIZE_PARAMS = ['client_id', 'scope', 'response_type', 'redirect_uri', 'access_type', 'approval_prompt', 'state', 'code_challenge', 'code_challenge_method', 'response_mode'];
const AUTHORIZE_REQUIRED = new Set(['client_id', 'scope', 'response_type', 'redirect_uri']);

/** An error of the authorize request that goes back to the (verified) redirect URI. */
class RedirectableError extends OAuthError {}

export async function oauthRoutes(app: FastifyInstance, ctx: PageContext): Promise<void> {
  const { deps } = ctx;

  const authorize = async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header('referrer-policy', 'strict-origin-when-cross-origin');
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer === undefined) return ctx.loginInterstitial(req, reply);
    // Only the query carries the authorization request; a POST body is the consent form.
    const q = queryParams(req);
    let params: Map<string, string>;
    let client: Application | undefined;
    try {
      params = new Map();
      for (const name of AUTHORIZE_PARAMS) {
        const v = q.getAll(name);
        if (v.length > 1) throw new OAuthError('invalid_request', `Parameter is included more than once in the request: ${name}`);
        if (AUTHORIZE_REQUIRED.has(name) && v[0] === undefined) throw new OAuthError('invalid_request', `Required parameter is missing: ${name}`);
        if (v[0] !== undefined) params.set(name, v[0]);
      }
      client = await findAppByClientId(deps, params.get('client_id') as string);
      if (client === undefined) throw new OAuthError('invalid_client', 'Unknown client', 400);
      const refusal = redirectUriRefusal(client, params.get('redirect_uri') as string);
      if (refusal !== undefined) throw new OAuthError('invalid_request', refusal);
    } catch (err) {
      if (!(err instanceof OAuthError)) throw err;
      return sendPage(reply, err.status, errorPage({ error: err.error, description: err.message, viewer, blame: true }));
    }
    const redirectUri = params.get('redirect_uri') as string;
    const state = params.get('state');
    const sendBack = (fields: Record<string, string | undefined>, mode: 'query' | 'form_post') => {
      if (redirectUri === OOB_URI) {
        if (fields.error === 'access_denied') {
          // The user said no: Post/Redirect/Get to a page that says so, without blaming the application.
          return reply.redirect(`/oauth2/oob?${new URLSearchParams({ declined: client.client_id })}`, 303);
        }
        if (fields.error !== undefined) {
          return sendPage(reply, fields.error === 'temporarily_unavailable' ? 503 : 400, errorPage({ error: fields.error, description: fields.error_description ?? '', viewer, blame: true }));
        }
        return reply.redirect(withParams(`${deps.authUrl}/oauth2/oob`, fields), 302);
      }
      if (mode === 'form_post' && fields.error === undefined) {
        // A page like the others (no framing, not cached: it carries the code), with its own script allowed.
        reply.headers({ 'content-security-policy': FORM_POST_CSP, 'x-frame-options': 'DENY', 'cache-control': 'no-store' });
        return reply.code(200).type('text/html; charset=utf-8').send(formPostPage({ appName: client.name, action: redirectUri, fields }));
      }
      return reply.redirect(withParams(redirectUri, fields), 302);
    };
    try {
      if (params.get('response_type') !== 'code') throw new RedirectableError('unsupported_response_type', 'Unsupported response type');
      const responseMode = params.get('response_mode');
      if (responseMode !== undefined && responseMode !== 'form_post' && responseMode !== 'query') throw new RedirectableError('invalid_request', 'Unsupported response mode');
      const scope = parseScope(params.get('scope') as string);
      if ('unknown' in scope) throw new RedirectableError('invalid_scope', `Unsupported scope: ${scope.unknown}`);
      const method = params.get('code_challenge_method');
      const challenge = params.get('code_challenge');
      if (method !== undefined && method !== 'plain' && method !== 'S256') throw new RedirectableError('invalid_request', "The code_challenge_method must be 'S256' or 'plain'");
      if (method !== undefined && challenge === undefined) throw new RedirectableError('invalid_request', 'A code_challenge_method was supplied without an accompanying code_challenge');
      if (challenge !== undefined && !(method === 'S256' ? /^[A-Za-z0-9_-]{43}$/ : /^[A-Za-z0-9.~_-]{43,128}$/).test(challenge)) {
        throw new RedirectableError('invalid_request', 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1');
      }
      const installed = client.kind === 'public';
      const wantsOffline = installed || params.get('access_type') === 'offline';
      const account = await findAccount(deps, viewer.accountId);
      if (account === undefined) return ctx.loginInterstitial(req, reply);
      const mode = responseMode === 'form_post' ? 'form_post' : 'query';
      const grantCode = async (offline: boolean) => {
        const code = await issueCode(deps, {
          account,
          app: client,
          scope: scope.mask,
          offline,
          redirectUri,
          codeChallenge: challenge,
          codeChallengeMethod: method as 'plain' | 'S256' | undefined,
          scopeText: scope.spelled,
        });
        return sendBack({ code, state }, mode);
      };
      // Web applications that already hold this exact grant skip the consent page; such a code is online.
      if (!installed && params.get('approval_prompt') !== 'force' && (await hasActiveGrant(deps, account.id, client.id, scope.mask, wantsOffline))) {
        return await grantCode(false);
      }
      const consent = (status: number, error?: string) =>
        sendPage(reply, status, consentPage({ viewer, app: client, scope: scope.mask, offlineBullet: !installed && wantsOffline, redirectHost: describeRedirect(redirectUri), error }));
      if (req.method !== 'POST') return consent(200);
      if (!csrfValid(req)) return consent(400, 'The form you submitted has expired. Please try again.');
      const decision = formParams(req).get('decision');
      if (decision !== 'allow' && decision !== 'deny') return consent(400, 'Choose "Allow access" or "No thanks".');
      const facts = { user: account.name, address: ctx.clientAddress(req), clientId: client.client_id, scope: scopeNames(scope.mask).join(' ') };
      if (decision === 'deny') {
        audit(req.log, 'consent.denied', facts);
        throw new RedirectableError('access_denied', 'User denied the authorization request');
      }
      audit(req.log, 'consent.given', { ...facts, reason: wantsOffline ? 'offline' : 'online' });
      return await grantCode(wantsOffline);
    } catch (err) {
      if (!(err instanceof RedirectableError)) throw err;
      return sendBack({ error: err.error, error_description: err.message, state }, 'query');
    }
  };
  app.get('/oauth2/authorize', authorize);
  app.post('/oauth2/authorize', authorize);

  app.get('/oauth2/oob', async function oob(req, reply) {
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer === undefined) return ctx.loginInterstitial(req, reply);
    const q = queryParams(req);
    const declined = q.get('declined');
    if (declined !== null && !q.has('code')) {
      const app = await findAppByClientId(deps, declined);
      if (app !== undefined) return sendPage(reply, 200, declinedPage({ appName: app.name, viewer }));
    }
    const code = q.get('code') ?? '';
    const row = /^[A-Za-z0-9_-]{1,200}$/.test(code)
      ? await deps.db
          .selectFrom('oauth_code as c')
          .innerJoin('oauth_application as a', 'a.id', 'c.application_id')
          .select(['a.name', 'c.account_id', 'c.used_at', 'c.expires_at'])
          .where('c.code_hash', '=', tokenHash(code))
          .executeTakeFirst()
      : undefined;
    // Only the user who granted access sees the code, and only while it can still be used.
    if (row === undefined || row.used_at !== null || row.account_id !== viewer.accountId) {
      return sendPage(reply, 400, errorPage({ error: 'invalid_request', description: 'Invalid authorization code', viewer }));
    }
    if (row.expires_at <= deps.clock.now()) return sendPage(reply, 400, errorPage({ error: 'invalid_request', description: 'Expired authorization code', viewer }));
    return sendPage(reply, 200, oobPage({ appName: row.name, code, state: q.get('state') ?? undefined, viewer }));
  });

  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
    url: '/oauth2/token',
    handler: async function token(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS');
      try {
        if (req.method !== 'POST') throw new OAuthError('invalid_request', 'Only POST requests are allowed');
        const grantType = values(req, 'grant_type')[0];
        const required = new Set(['grant_type']);
        if (grantType === 'authorization_code') ['code', 'redirect_uri'].forEach((n) => required.add(n));
        if (grantType === 'refresh_token') required.add('refresh_token');
        const params = checkParams(req, ['client_id', 'client_secret', 'grant_type', 'code', 'refresh_token', 'redirect_uri', 'token_type', 'code_verifier'], required);
        const client = await requireClient(deps, req, params);
        if (grantType !== 'authorization_code' && grantType !== 'refresh_token') {
          throw new OAuthError('unsupported_grant_type', 'Unsupported grant_type, only authorization_code and refresh_token are supported');
        }
        if ((params.get('token_type') ?? 'bearer').toLowerCase() !== 'bearer') throw new OAuthError('invalid_request', 'Invalid requested token type, only bearer is allowed');
        const body =
          grantType === 'authorization_code'
            ? await exchangeCode(deps, client, { code: params.get('code') as string, redirectUri: params.get('redirect_uri') as string, codeVerifier: params.get('code_verifier') })
            : await refreshGrant(deps, client, params.get('refresh_token') as string);
        return sendJson(reply, body, CORS);
      } catch (err) {
        if (err instanceof CodeReplayed) {
          const user = (await findAccount(deps, err.accountId))?.name;
          audit(req.log, 'grant.revoked', { user, clientId: err.clientId, address: ctx.clientAddress(req), via: 'oauth2/token', reason: 'code_replayed' });
        }
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    },
  });

  app.route({
    method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS'],
    url: '/oauth2/revoke',
    handler: async function revoke(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', true);
      try {
        if (req.method !== 'POST') throw new OAuthError('invalid_request', 'Only POST requests are allowed');
        const basic = req.headers.authorization !== undefined && /^basic\s/i.test(req.headers.authorization);
        const params = checkParams(req, ['token', 'client_id', 'client_secret'], new Set(basic ? ['token'] : ['token', 'client_id', 'client_secret']), 'body');
        const client = await requireClient(deps, req, params);
        const ended = await revokeToken(deps, client, params.get('token') as string);
        if (ended !== undefined) {
          const user = (await findAccount(deps, ended.accountId))?.name;
          audit(req.log, ended.ended === 'grant' ? 'grant.revoked' : 'token.revoked', { user, clientId: client.client_id, address: ctx.clientAddress(req), via: 'oauth2/revoke' });
        }
        return reply.code(200).headers(CORS).send();
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    },
  });

  app.route({
    method: ['GET', 'HEAD', 'POST', 'OPTIONS'],
    url: '/oauth2/userinfo',
    handler: async function userinfo(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'GET, POST, OPTIONS', true);
      let token: string | undefined;
      try {
        token = bearerToken(req);
      } catch (err) {
        return sendOAuthError(reply, err as OAuthError, { 'www-authenticate': bearerChallenge(err as OAuthError) });
      }
      if (token === undefined) {
        return reply
          .code(401)
          .headers({ ...NO_STORE, ...CORS, 'www-authenticate': bearerChallenge() })
          .type('application/json; charset=utf-8')
          .send(JSON.stringify({ error: 'invalid_request', error_description: 'Authorization required' }));
      }
      const active = await findAccessToken(deps, token);
      if (active === undefined) {
        const err = new OAuthError('invalid_token', 'The access token is invalid, expired or revoked', 401);
        return sendOAuthError(reply, err, { 'www-authenticate': bearerChallenge(err) });
      }
      if ((active.scope & PROFILE) === 0) {
        const err = new OAuthError('insufficient_scope', 'The access token lacks the profile scope', 403);
        return sendOAuthError(reply, err, { 'www-authenticate': bearerChallenge(err, 'profile') });
      }
      return sendJson(reply, userinfoClaims(deps, active.account, active.scope), CORS);
    },
  });

  app.route({
    method: ['GET', 'POST', 'OPTIONS'],
    url: '/oauth2/introspect',
    handler: async function introspection(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', true);
      try {
        if (req.method !== 'POST') throw new OAuthError('invalid_request', 'Only POST requests are allowed');
        const params = checkParams(req, ['token', 'token_type_hint', 'client_id', 'client_secret'], new Set(['token']), 'body');
        const client = await requireClient(deps, req, params);
        return sendJson(reply, await introspect(deps, client, params.get('token') as string), CORS);
      } catch (err) {
        if (err instanceof OAuthError) return sendOAuthError(reply, err);
        throw err;
      }
    },
  });

  app.get('/.well-known/oauth-authorization-server', async function metadata(_req, reply) {
    const base = deps.authUrl;
    return reply
      .headers({ ...CORS, 'cache-control': 'public, max-age=3600' })
      .type('application/json; charset=utf-8')
      .send(
        JSON.stringify({
          issuer: base,
          authorization_endpoint: `${base}/oauth2/authorize`,
          token_endpoint: `${base}/oauth2/token`,
          revocation_endpoint: `${base}/oauth2/revoke`,
          introspection_endpoint: `${base}/oauth2/introspect`,
          userinfo_endpoint: `${base}/oauth2/userinfo`,
          scopes_supported: SCOPES.map((s) => s.name),
          response_types_supported: ['code'],
          response_modes_supported: ['query', 'form_post'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          code_challenge_methods_supported: ['S256', 'plain'],
          service_documentation: `${base}/`,
        }),
      );
  });
}

function describeRedirect(uri: string): string {
  if (uri === OOB_URI) return 'a page showing a code to copy';
  try {
    const u = new URL(uri);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.host : `${u.protocol}//${u.host}`;
  } catch {
    return uri;
  }
}

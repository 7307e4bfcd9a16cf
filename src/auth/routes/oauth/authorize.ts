import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findAccount, type Account } from '../../accounts.js';
import { audit } from '../../audit.js';
import { authorizeRequest, authorizeTarget, type AuthorizeRequest, type AuthorizeTarget } from '../../authorize.js';
import { OAuthError } from '../../errors.js';
import { DocumentRefused } from '../../client-metadata.js';
import { storeDocumentClient } from '../../applications.js';
import { issueCode } from '../../grants/authorization-code.js';
import { hasActiveGrant } from '../../user-grants.js';
import { verifyIdTokenHint } from '../../id-token.js';
import { csrfValid, formParams, queryParams, withParams } from '../../http-util.js';
import { OOB_URI } from '../../redirect-uris.js';
import { scopeNames } from '../../scopes.js';
import { consentPage, errorPage, FORM_POST_SCRIPT, formPostPage } from '../../views/pages.js';
import { currentViewer, EXPIRED, sendPage, type PageContext, type SignedIn } from '../pages/shared.js';

const FORM_POST_CSP = `default-src 'none'; script-src 'sha256-${createHash('sha256').update(FORM_POST_SCRIPT).digest('base64')}'; frame-ancestors 'none'; base-uri 'none'`;

type Fields = Record<string, string | undefined>;

/**
 * The authorization endpoint (RFC 6749 §3.1), a website page: GET shows the consent page
 * (or grants at once what the user already granted), POST is that page's form. Errors of
 * the request itself are error pages (by the pages' error mapping); once the client and its
 * redirect URI are known to be good, errors and codes go back to it. OpenID Connect's
 * prompt, max_age and id_token_hint may ask for a sign-in again first (signInReason).
 */
export function authorizeEndpoint(app: FastifyInstance, ctx: PageContext): void {
  const authorize = async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header('referrer-policy', 'strict-origin-when-cross-origin');
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer === undefined) return signedOut(ctx, req, reply);
    // Only the query carries the authorization request; a POST body is the consent form.
    const target = await targetOf(ctx, req, queryParams(req));
    const back = (fields: Fields, mode: 'query' | 'form_post') => sendBack(ctx, reply, viewer, target, fields, mode);
    const request = authorizeRequest(target, ctx.deps.pkce);
    if ('refused' in request) return back({ error: request.refused.error, error_description: request.refused.message, state: target.state }, 'query');
    const again = await signInReason(ctx, viewer, request);
    if (again instanceof OAuthError) return back({ error: again.error, error_description: again.message, state: target.state }, 'query');
    if (again !== undefined) {
      if (request.prompt.has('none')) return back({ error: 'login_required', error_description: again.reason, state: target.state }, 'query');
      return ctx.loginInterstitial(req, reply, { name: request.loginHint ?? again.name, returnTo: afterSignIn(request), notice: `Sign in again to continue to ${request.client.name}.` });
    }
    const account = await findAccount(ctx.deps, viewer.accountId);
    if (account === undefined) return ctx.loginInterstitial(req, reply);
    return consent(ctx, req, reply, viewer, account, request, back);
  };
  app.get('/oauth2/authorize', authorize);
  app.post('/oauth2/authorize', authorize);
}

/**
 * A request with no signed-in user: the sign-in form at the same URL (its name field holding
 * login_hint); with prompt=none, once the client and redirect URI are known to be good,
 * `login_required` back to the client (or the request's own error), and no page.
 */
async function signedOut(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const query = queryParams(req);
  if (query.get('prompt') !== 'none') {
    const hint = query.get('login_hint') ?? undefined;
    return ctx.loginInterstitial(req, reply, { name: hint !== undefined && hint.length <= 255 ? hint : undefined });
  }
  const target = await targetOf(ctx, req, query);
  const request = authorizeRequest(target, ctx.deps.pkce);
  const error = 'refused' in request ? request.refused : new OAuthError('login_required', 'The user is not signed in');
  return sendBack(ctx, reply, undefined, target, { error: error.error, error_description: error.message, state: target.state }, 'query');
}

/** authorizeTarget, with a client metadata document that cannot be used in the audit trail (the page then says why). */
async function targetOf(ctx: PageContext, req: FastifyRequest, query: URLSearchParams): Promise<AuthorizeTarget> {
  try {
    return await authorizeTarget(ctx.deps, query);
  } catch (err) {
    if (err instanceof DocumentRefused && err.reason !== 'busy') {
      audit(req.log, 'client_document.refused', { clientId: query.get('client_id') ?? undefined, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/authorize' });
    }
    throw err;
  }
}

/**
 * Why the user must sign in (again) before this request goes on, if they must (OpenID Connect
 * Core §3.1.2.3): prompt=login; a sign-in older than max_age (in whole seconds); an
 * id_token_hint naming another user (whose name the form then holds). An id_token_hint that is
 * not one of this service's id_tokens for this client is the request's error.
 */
async function signInReason(ctx: PageContext, viewer: SignedIn, request: AuthorizeRequest): Promise<{ reason: string; name?: string } | OAuthError | undefined> {
  if (request.idTokenHint !== undefined) {
    const hint = await verifyIdTokenHint(ctx.deps.signingKeys, ctx.deps.authUrl, request.idTokenHint);
    if (hint === undefined || !hint.aud.includes(request.client.client_id)) return new OAuthError('invalid_request', 'Invalid id_token_hint: not an id_token of this service for this client');
    if (hint.sub !== viewer.name) return { reason: 'The id_token_hint names another user than the one signed in', name: hint.sub };
  }
  if (request.prompt.has('login')) return { reason: 'The client asked for a new sign-in' };
  if (request.maxAge !== undefined && Math.floor((ctx.deps.clock.now() - viewer.signedInAt) / 1000) > request.maxAge) {
    return { reason: 'The sign-in is older than the client allows (max_age)' };
  }
  return undefined;
}

/**
 * Where the sign-in form asked for by signInReason returns: the same request without what asked
 * for it (prompt's `login`, max_age), which the new sign-in has just met, so it does not ask again.
 */
function afterSignIn(request: AuthorizeRequest): string {
  const query = new URLSearchParams([...request.params]);
  query.delete('max_age');
  const prompt = [...request.prompt].filter((p) => p !== 'login');
  if (prompt.length > 0) query.set('prompt', prompt.join(' '));
  else query.delete('prompt');
  return `/oauth2/authorize?${query}`;
}

/** Asks for consent, or takes the answer; web applications that already hold this exact grant are not asked (such a code is online). */
async function consent(
  ctx: PageContext,
  req: FastifyRequest,
  reply: FastifyReply,
  viewer: SignedIn,
  account: Account,
  request: AuthorizeRequest,
  back: (fields: Fields, mode: 'query' | 'form_post') => FastifyReply,
): Promise<FastifyReply> {
  const { client, scope, state, document } = request;
  const grantCode = async (offline: boolean) => {
    const code = await issueCode(ctx.deps, {
      account,
      // A client known by its document: its row made (or brought up to date) now, when a user allows it.
      app: document === undefined ? client : await storeDocumentClient(ctx.deps, document),
      documentHash: document?.hash,
      scope,
      offline,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      codeChallengeMethod: request.codeChallengeMethod,
      scopeText: request.scopeText,
      nonce: request.nonce,
      authTime: viewer.signedInAt,
    });
    return back({ code, state }, request.responseMode);
  };
  if (!request.installed && !request.forcePrompt && (await hasActiveGrant(ctx.deps, account.id, client.id, scope, request.offline))) return grantCode(false);
  // prompt=none: the consent page would be needed, so the client hears why instead.
  if (request.prompt.has('none')) return back({ error: 'consent_required', error_description: 'The user has not authorized this application for this request', state }, 'query');
  const ask = (status: number, error?: string) =>
    sendPage(reply, status, consentPage({ viewer, app: client, scope, offlineBullet: !request.installed && request.offline, redirectHost: describeRedirect(request.redirectUri), error, document }));
  if (req.method !== 'POST') return ask(200);
  if (!csrfValid(req)) return ask(400, EXPIRED);
  const decision = formParams(req).get('decision');
  if (decision !== 'allow' && decision !== 'deny') return ask(400, 'Choose "Allow access" or "No thanks".');
  const facts = { user: account.name, address: ctx.clientAddress(req), clientId: client.client_id, scope: scopeNames(scope).join(' ') };
  if (decision === 'deny') {
    audit(req.log, 'consent.denied', facts);
    return back({ error: 'access_denied', error_description: 'User denied the authorization request', state }, 'query');
  }
  audit(req.log, 'consent.given', { ...facts, reason: request.offline ? 'offline' : 'online' });
  return grantCode(request.offline);
}

/** Sends a code or an error back to the client: by redirect, by a self-submitting form, or on sleeve's out-of-band page. */
function sendBack(ctx: PageContext, reply: FastifyReply, viewer: SignedIn | undefined, target: AuthorizeTarget, fields: Fields, mode: 'query' | 'form_post'): FastifyReply {
  const { client, redirectUri } = target;
  if (redirectUri === OOB_URI) {
    if (fields.error === 'access_denied') {
      // The user said no: Post/Redirect/Get to a page that says so, without blaming the application.
      return reply.redirect(`/oauth2/oob?${new URLSearchParams({ declined: client.client_id })}`, 303);
    }
    if (fields.error !== undefined) {
      return sendPage(reply, fields.error === 'temporarily_unavailable' ? 503 : 400, errorPage({ error: fields.error, description: fields.error_description ?? '', viewer, blame: true }));
    }
    return reply.redirect(withParams(`${ctx.deps.authUrl}/oauth2/oob`, fields), 302);
  }
  // RFC 9207: every answer that goes back to the client names its issuer, so a client that talks to
  // several servers can tell which one answered.
  fields = { ...fields, iss: ctx.deps.authUrl };
  if (mode === 'form_post' && fields.error === undefined) {
    // A page like the others (no framing, not cached: it carries the code), with its own script allowed.
    reply.headers({ 'content-security-policy': FORM_POST_CSP, 'x-frame-options': 'DENY', 'cache-control': 'no-store' });
    return reply.code(200).type('text/html; charset=utf-8').send(formPostPage({ appName: client.name, action: redirectUri, fields }));
  }
  return reply.redirect(withParams(redirectUri, fields), 302);
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

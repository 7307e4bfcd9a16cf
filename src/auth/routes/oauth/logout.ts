/*
 * OpenID Connect RP-Initiated Logout 1.0 at the discovery document's end_session_endpoint:
 * a client sends the user here to sign out of sleeve, and may have them sent back to one of
 * its registered URIs. See docs/decisions.md, "Sign-out (RP-Initiated Logout)".
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findAppByClientId, type Application } from '../../applications.js';
import { OAuthError } from '../../errors.js';
import { csrfValid, formParams, queryParams, withParams } from '../../http-util.js';
import { verifyIdTokenHint, type IdTokenHint } from '../../id-token.js';
import { OOB_URI, redirectUriProblem } from '../../redirect-uris.js';
import { logoutConfirmPage, signedOutPage } from '../../views/pages.js';
import { EXPIRED, currentViewer, sendPage, type PageContext } from '../pages/shared.js';
import { signOut } from '../pages/sign-in.js';

export const END_SESSION_PATH = '/oauth2/logout';
const SIGNED_OUT_PATH = '/oauth2/signed_out';

/** The parameters of RP-Initiated Logout §2 (logout_hint and ui_locales are read by nothing). */
const PARAMS = ['id_token_hint', 'logout_hint', 'client_id', 'post_logout_redirect_uri', 'state', 'ui_locales'];

/** A checked logout request: the client (named by client_id, or by the hint's audience), where to send the user after, and the hint. */
interface LogoutRequest {
  client: Application | undefined;
  redirectUri: string | undefined;
  state: string | undefined;
  hint: IdTokenHint | undefined;
}

/**
 * Whether `uri` is one of the application's registered redirect URIs, byte for byte (no
 * loopback port freedom, not out-of-band): those are its logout URIs too (docs/decisions.md,
 * "Sign-out (RP-Initiated Logout)"). The column holds one or more, one per line.
 */
function logoutUriRegistered(app: Pick<Application, 'redirect_uri'>, uri: string): boolean {
  if (uri === OOB_URI || redirectUriProblem(uri) !== undefined) return false;
  return (app.redirect_uri ?? '').split('\n').includes(uri);
}

/** Checks a logout request; an OAuthError is shown as a page (nothing is redirected). */
async function logoutRequest(ctx: PageContext, params: URLSearchParams): Promise<LogoutRequest> {
  const one = new Map<string, string>();
  for (const name of PARAMS) {
    const v = params.getAll(name);
    if (v.length > 1) throw new OAuthError('invalid_request', `Parameter is included more than once in the request: ${name}`);
    if (v[0] !== undefined && v[0] !== '') one.set(name, v[0]);
  }
  const hintText = one.get('id_token_hint');
  const hint = hintText === undefined ? undefined : await verifyIdTokenHint(ctx.deps.signingKeys, ctx.deps.authUrl, hintText);
  if (hintText !== undefined && hint === undefined) throw new OAuthError('invalid_request', 'The id_token_hint is not an id_token of this service');
  let clientId = one.get('client_id');
  if (clientId !== undefined && hint !== undefined && !hint.aud.includes(clientId)) throw new OAuthError('invalid_request', 'The id_token_hint was not issued to this client_id');
  clientId ??= hint?.aud.length === 1 ? hint.aud[0] : undefined;
  const client = clientId === undefined ? undefined : await findAppByClientId(ctx.deps, clientId);
  if (clientId !== undefined && client === undefined) throw new OAuthError('invalid_request', 'Unknown client');
  const redirectUri = one.get('post_logout_redirect_uri');
  if (redirectUri !== undefined) {
    if (client === undefined) throw new OAuthError('invalid_request', 'A post_logout_redirect_uri needs a client_id or an id_token_hint');
    if (!logoutUriRegistered(client, redirectUri)) throw new OAuthError('invalid_request', 'The post_logout_redirect_uri is not registered for this application');
  }
  return { client, redirectUri, state: one.get('state'), hint };
}

/**
 * GET (or the client's form POST) ends the session at once when the id_token_hint names the
 * signed-in user; otherwise the user confirms on a page whose form (with its CSRF token) POSTs
 * here again. Then the session and its cookie are gone, and the user goes to the client's
 * post_logout_redirect_uri (with state) or to a page saying they are signed out.
 */
export function endSessionEndpoint(app: FastifyInstance, ctx: PageContext): void {
  const endSession = async (req: FastifyRequest, reply: FastifyReply) => {
    reply.header('referrer-policy', 'no-referrer');
    const form = req.method === 'POST' ? formParams(req) : undefined;
    // The client's own form POST: sent again as a GET, the way a top-level navigation carries the (SameSite=Lax) session cookie.
    if (form !== undefined && !form.has('csrf_token')) return reply.redirect(`${END_SESSION_PATH}?${form}`, 303);
    const request = await logoutRequest(ctx, form ?? queryParams(req));
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer !== undefined) {
      const ask = (status: number, error?: string) =>
        sendPage(reply, status, logoutConfirmPage({ viewer, appName: request.client?.name, fields: { client_id: request.client?.client_id, post_logout_redirect_uri: request.redirectUri, state: request.state }, error }));
      if (form === undefined && request.hint?.sub !== viewer.name) return ask(200);
      if (form !== undefined && !csrfValid(req)) return ask(400, EXPIRED);
      await signOut(ctx, req, reply, { via: 'end_session', clientId: request.client?.client_id });
    }
    if (request.redirectUri === undefined) return reply.redirect(SIGNED_OUT_PATH, 303);
    return reply.redirect(withParams(request.redirectUri, { state: request.state }), 303);
  };
  app.get(END_SESSION_PATH, endSession);
  app.post(END_SESSION_PATH, endSession);
  app.get(SIGNED_OUT_PATH, async function signedOut(req, reply) {
    const viewer = await currentViewer(ctx, req, reply);
    return sendPage(reply, 200, signedOutPage({ viewer }));
  });
}

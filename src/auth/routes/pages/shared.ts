import type { FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../../../shared/errors.js';
import { sessionAccount } from '../../accounts.js';
import type { AuthContext } from '../../context.js';
import { OAuthError } from '../../errors.js';
import { cookies, csrfToken, SESSION_COOKIE } from '../../http-util.js';
import { errorPage, loginPage, type Viewer } from '../../views/pages.js';

/** What the website's routes (the account pages and the OAuth pages) need of the listener. */
export interface PageContext extends AuthContext {
  /** Answers a request that needs a signed-in user with the login form, at the same URL (or returning to `opts.returnTo`), the name field holding `opts.name`. */
  loginInterstitial(req: FastifyRequest, reply: FastifyReply, opts?: { name?: string | undefined; returnTo?: string; notice?: string }): FastifyReply;
}

export interface SignedIn extends Viewer {
  accountId: number;
  /** When this session's sign-in happened (epoch ms): OpenID Connect's auth_time. */
  signedInAt: number;
}

const PAGE_CSP = "default-src 'none'; style-src 'self'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'";

/** Sends a page with the headers every page carries. */
export function sendPage(reply: FastifyReply, status: number, body: string): FastifyReply {
  return reply
    .code(status)
    .headers({ 'content-security-policy': PAGE_CSP, 'x-frame-options': 'DENY', 'cache-control': 'no-store' })
    .type('text/html; charset=utf-8')
    .send(body);
}

/** The signed-in user of each request that looked, for its error page. */
const viewers = new WeakMap<FastifyRequest, SignedIn>();

/** The signed-in user of this request (and a CSRF token for the page's forms), if any. */
export async function currentViewer(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined> {
  const account = await sessionAccount(ctx.deps, cookies(req).get(SESSION_COOKIE));
  if (account === undefined) return undefined;
  const viewer = { accountId: account.id, signedInAt: account.signed_in_at, name: account.name, csrf: csrfToken(req, reply) };
  viewers.set(req, viewer);
  return viewer;
}

/** The signed-in user, or undefined after redirecting to the login page (which comes back here). */
export async function requireViewer(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined> {
  const viewer = await currentViewer(ctx, req, reply);
  if (viewer === undefined) {
    reply.redirect(`/login?return_to=${encodeURIComponent(req.url)}`, 303);
    return undefined;
  }
  return viewer;
}

export function renderLoginInterstitial(req: FastifyRequest, reply: FastifyReply, opts: { name?: string | undefined; returnTo?: string; notice?: string } = {}): FastifyReply {
  const notice = opts.notice ?? 'You need to be logged in to view this page.';
  return sendPage(reply, 200, loginPage({ csrf: csrfToken(req, reply), returnTo: opts.returnTo ?? req.url, notice, name: opts.name }));
}

export const EXPIRED = 'The form you submitted has expired. Please try again.';

/**
 * The website's error mapping (a Fastify error handler for a group of pages): an OAuthError
 * (a bad authorization request) is an error page blaming the application, at its status; a
 * NOT_FOUND AppError is a 404 page with its message. Anything else goes on to the listener's
 * handler (a 4xx page, or a logged 500).
 */
export async function pageErrors(err: Error, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const viewer = viewers.get(req);
  if (err instanceof OAuthError) return sendPage(reply, err.status, errorPage({ error: err.error, description: err.message, viewer, blame: true }));
  if (isAppError(err) && err.code === 'NOT_FOUND') return sendPage(reply, 404, errorPage({ error: 'not_found', description: err.message, viewer }));
  throw err;
}

/** Runs a form's action; input the domain refuses (an AppError meant for the user) shows the form again with the reason, 400. */
export async function formAction(act: () => Promise<FastifyReply>, again: (status: number, error: string) => FastifyReply): Promise<FastifyReply> {
  try {
    return await act();
  } catch (err) {
    if (isAppError(err) && err.expose) return again(400, err.message);
    throw err;
  }
}

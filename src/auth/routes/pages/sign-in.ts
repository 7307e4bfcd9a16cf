import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticate, createSession, endSession, sessionAccount } from '../../accounts.js';
import { audit } from '../../audit.js';
import { cookies, csrfToken, csrfValid, DEVICE_COOKIE, formParams, queryParams, SESSION_COOKIE, setCookie } from '../../http-util.js';
import { loginPage } from '../../views/pages.js';
import { clearFlash } from './flash.js';
import { currentViewer, EXPIRED, sendPage, type PageContext } from './shared.js';

const AFTER_SIGNIN = '/account/applications';
const SAME_SITE = 'https://sleeve.invalid';

/**
 * A same-site path to return to after signing in, as it may go in a Location header:
 * anything that is not a path of this site, or holds a control character, becomes the
 * applications page; other characters outside ASCII are percent-encoded (a raw one above
 * U+00FF cannot go in a header at all).
 */
function safeReturn(raw: string | null | undefined): string {
  if (raw === null || raw === undefined || raw.length > 4000) return AFTER_SIGNIN;
  if (!raw.startsWith('/') || raw.startsWith('//') || /[\\\u0000-\u001f\u007f-\u009f]/.test(raw)) return AFTER_SIGNIN;
  let url: URL;
  try {
    url = new URL(raw, SAME_SITE);
  } catch {
    return AFTER_SIGNIN;
  }
  const path = `${url.pathname}${url.search}${url.hash}`;
  return url.origin === SAME_SITE && /^\/[\x21-\x7e]*$/.test(path) && !path.startsWith('//') ? path : AFTER_SIGNIN;
}

/** Sign-in and sign-out. */
export function signInPages(app: FastifyInstance, ctx: PageContext): void {
  app.get('/login', async function loginForm(req, reply) {
    const returnTo = safeReturn(queryParams(req).get('return_to'));
    if ((await currentViewer(ctx, req, reply)) !== undefined) return reply.redirect(returnTo, 303);
    return sendPage(reply, 200, loginPage({ csrf: csrfToken(req, reply), returnTo }));
  });

  app.post('/login', async function login(req, reply) {
    return signIn(ctx, req, reply);
  });

  app.post('/logout', async function logout(req, reply) {
    if (csrfValid(req)) await signOut(ctx, req, reply, {});
    return reply.redirect('/', 303);
  });
}

/**
 * Ends this browser's session: its row, its cookie and any flash message left unread, with
 * the `signout` audit line (`facts`: how, and for which client, when not the header's button).
 */
export async function signOut(ctx: PageContext, req: FastifyRequest, reply: FastifyReply, facts: { via?: string; clientId?: string | undefined }): Promise<void> {
  const token = cookies(req).get(SESSION_COOKIE);
  const account = await sessionAccount(ctx.deps, token);
  await endSession(ctx.deps, token);
  if (account !== undefined) audit(req.log, 'signout', { user: account.name, address: ctx.clientAddress(req), ...facts });
  setCookie(reply, SESSION_COOKIE, '', { maxAge: 0 });
  clearFlash(reply);
}

/** The sign-in form's post: a new session, or the form again saying why not. */
async function signIn(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const form = formParams(req);
  const returnTo = safeReturn(form.get('return_to'));
  const name = form.get('username') ?? '';
  const again = (status: number, error: string) => sendPage(reply, status, loginPage({ csrf: csrfToken(req, reply), returnTo, error, name }));
  if (!csrfValid(req)) return again(400, EXPIRED);
  const password = form.get('password') ?? '';
  if (name === '' || password === '') return again(400, 'Enter your user name and password.');
  const address = ctx.clientAddress(req);
  const result = await authenticate(ctx.deps, { name, password, address, device: cookies(req).get(DEVICE_COOKIE) });
  if (!result.ok) {
    audit(req.log, 'signin.failed', { user: name, address, reason: result.reason });
    if (result.reason === 'throttled') {
      reply.header('retry-after', String(result.retryAfterSeconds));
      return again(429, `Too many failed sign-in attempts. Try again in ${Math.ceil(result.retryAfterSeconds / 60)} minute(s).`);
    }
    if (result.reason === 'busy') {
      reply.header('retry-after', '5');
      return again(503, 'Too many people are signing in right now. Please try again in a few seconds.');
    }
    return again(400, 'Incorrect user name or password.');
  }
  audit(req.log, 'signin.succeeded', { user: result.account.name, address });
  // A new session id at every sign-in (no fixation), only its hash stored.
  await endSession(ctx.deps, cookies(req).get(SESSION_COOKIE));
  const session = await createSession(ctx.deps, result.account.id);
  setCookie(reply, SESSION_COOKIE, session.token, { maxAge: session.maxAgeSeconds });
  // This browser has now signed in to this account: its later attempts are counted on it alone.
  setCookie(reply, DEVICE_COOKIE, result.device.token, { maxAge: result.device.maxAgeSeconds, sameSite: 'Strict' });
  // A message (a new secret) left unread by an earlier session does not outlive it.
  clearFlash(reply);
  return reply.redirect(returnTo, 303);
}

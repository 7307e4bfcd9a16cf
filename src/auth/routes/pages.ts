import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../../shared/errors.js';
import { authenticate, createSession, endSession, findAccountByName, sessionAccount, type AuthDeps } from '../accounts.js';
import { editApp, listOwnApps, ownApp, registerApp, removeApp, resetSecret } from '../applications.js';
import { listUserGrants, revokeUserGrant } from '../grants.js';
import { audit } from '../audit.js';
import { cookies, csrfToken, csrfValid, DEVICE_COOKIE, formParams, queryParams, SESSION_COOKIE, setCookie } from '../http-util.js';
import { html } from '../views/html.js';
import { page } from '../views/layout.js';
import { applicationFormPage, applicationsPage, errorPage, homePage, loginPage, type Viewer } from '../views/pages.js';
import { STYLESHEET } from '../views/style.js';

export interface PageContext {
  deps: AuthDeps;
  /** The client's address, for login throttling. */
  clientAddress(req: FastifyRequest): string;
  /** Answers a request that needs a signed-in user with the login form, at the same URL. */
  loginInterstitial(req: FastifyRequest, reply: FastifyReply): FastifyReply;
}

export interface SignedIn extends Viewer {
  accountId: number;
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

/** The signed-in user of this request (and a CSRF token for the page's forms), if any. */
export async function currentViewer(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined> {
  const account = await sessionAccount(ctx.deps, cookies(req).get(SESSION_COOKIE));
  if (account === undefined) return undefined;
  return { accountId: account.id, name: account.name, csrf: csrfToken(req, reply) };
}

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

export function renderLoginInterstitial(req: FastifyRequest, reply: FastifyReply): FastifyReply {
  return sendPage(reply, 200, loginPage({ csrf: csrfToken(req, reply), returnTo: req.url, notice: 'You need to be logged in to view this page.' }));
}

const ETAG = `"${createHash('sha256').update(STYLESHEET).digest('base64url').slice(0, 22)}"`;

export async function pageRoutes(app: FastifyInstance, ctx: PageContext): Promise<void> {
  const { deps } = ctx;

  const requireViewer = async (req: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined> => {
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer === undefined) {
      reply.redirect(`/login?return_to=${encodeURIComponent(req.url)}`, 303);
      return undefined;
    }
    return viewer;
  };
  /** Form posts must carry the CSRF token; a failure re-shows the applications page with a message. */
  const requirePost = async (req: FastifyRequest, reply: FastifyReply): Promise<SignedIn | undefined> => {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return undefined;
    if (!csrfValid(req)) {
      await showApplications(reply, viewer, 400, { notice: 'The form you submitted has expired. Please try again.' });
      return undefined;
    }
    return viewer;
  };
  const showApplications = async (reply: FastifyReply, viewer: SignedIn, status: number, extra: Parameters<typeof applicationsPage>[0] extends infer P ? Partial<P> : never) =>
    sendPage(reply, status, applicationsPage({ viewer, grants: await listUserGrants(deps, viewer.accountId), apps: await listOwnApps(deps, viewer.accountId), ...extra }));
  const idParam = (req: FastifyRequest): number => {
    const raw = (req.params as Record<string, string>).id ?? '';
    return /^\d{1,9}$/.test(raw) ? Number(raw) : -1;
  };

  app.get('/static/sleeve.css', async function stylesheet(req, reply) {
    reply.headers({ etag: ETAG, 'cache-control': 'public, max-age=86400' });
    if (req.headers['if-none-match'] === ETAG) return reply.code(304).send();
    return reply.type('text/css; charset=utf-8').send(STYLESHEET);
  });

  app.get('/', async function home(req, reply) {
    return sendPage(reply, 200, homePage(await currentViewer(ctx, req, reply)));
  });

  app.get('/user/:name', async function profile(req, reply) {
    const viewer = await currentViewer(ctx, req, reply);
    const account = await findAccountByName(deps, (req.params as { name: string }).name);
    if (account === undefined) return sendPage(reply, 404, errorPage({ error: 'not_found', description: 'There is no such user.', viewer }));
    const body = html`<dl><dt>User name</dt><dd>${account.name}</dd>${account.website ? html`<dt>Website</dt><dd>${account.website}</dd>` : ''}</dl>`;
    return sendPage(reply, 200, page({ title: account.name, body, user: viewer?.name, csrf: viewer?.csrf }));
  });

  app.get('/login', async function loginForm(req, reply) {
    const returnTo = safeReturn(queryParams(req).get('return_to'));
    if ((await currentViewer(ctx, req, reply)) !== undefined) return reply.redirect(returnTo, 303);
    return sendPage(reply, 200, loginPage({ csrf: csrfToken(req, reply), returnTo }));
  });

  app.post('/login', async function login(req, reply) {
    const form = formParams(req);
    const returnTo = safeReturn(form.get('return_to'));
    const name = form.get('username') ?? '';
    const again = (status: number, error: string) => sendPage(reply, status, loginPage({ csrf: csrfToken(req, reply), returnTo, error, name }));
    if (!csrfValid(req)) return again(400, 'The form you submitted has expired. Please try again.');
    const password = form.get('password') ?? '';
    if (name === '' || password === '') return again(400, 'Enter your user name and password.');
    const address = ctx.clientAddress(req);
    const result = await authenticate(deps, { name, password, address, device: cookies(req).get(DEVICE_COOKIE) });
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
    await endSession(deps, cookies(req).get(SESSION_COOKIE));
    const session = await createSession(deps, result.account.id);
    setCookie(reply, SESSION_COOKIE, session.token, { maxAge: session.maxAgeSeconds });
    // This browser has now signed in to this account: its later attempts are counted on it alone.
    setCookie(reply, DEVICE_COOKIE, result.device.token, { maxAge: result.device.maxAgeSeconds, sameSite: 'Strict' });
    return reply.redirect(returnTo, 303);
  });

  app.post('/logout', async function logout(req, reply) {
    if (csrfValid(req)) {
      const token = cookies(req).get(SESSION_COOKIE);
      const account = await sessionAccount(deps, token);
      await endSession(deps, token);
      if (account !== undefined) audit(req.log, 'signout', { user: account.name, address: ctx.clientAddress(req) });
      setCookie(reply, SESSION_COOKIE, '', { maxAge: 0 });
    }
    return reply.redirect('/', 303);
  });

  app.get('/account/applications', async function applications(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    return showApplications(reply, viewer, 200, {});
  });

  app.post('/account/applications/revoke/:id', async function revokeGrant(req, reply) {
    const viewer = await requirePost(req, reply);
    if (viewer === undefined) return reply;
    const ok = await revokeUserGrant(deps, viewer.accountId, idParam(req));
    return showApplications(reply, viewer, ok ? 200 : 404, { notice: ok ? 'Access revoked.' : 'There is no such authorization.' });
  });

  app.get('/account/applications/register', async function registerForm(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    return sendPage(reply, 200, applicationFormPage({ viewer, mode: 'register', action: '/account/applications/register', values: {} }));
  });

  app.post('/account/applications/register', async function register(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const values = { name: form.get('name') ?? undefined, kind: form.get('kind') ?? undefined, redirectUri: form.get('redirect_uri') ?? undefined };
    const again = (status: number, error: string) => sendPage(reply, status, applicationFormPage({ viewer, mode: 'register', action: '/account/applications/register', values, error }));
    if (!csrfValid(req)) return again(400, 'The form you submitted has expired. Please try again.');
    try {
      const { app: created, clientSecret } = await registerApp(deps, { ownerId: viewer.accountId, ...values });
      return showApplications(reply, viewer, 200, { notice: `Registered ${created.name}.`, secret: { appName: created.name, clientId: created.client_id, secret: clientSecret } });
    } catch (err) {
      if (isAppError(err) && err.expose) return again(400, err.message);
      throw err;
    }
  });

  app.get('/account/applications/edit/:id', async function editForm(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    try {
      const a = await ownApp(deps, viewer.accountId, idParam(req));
      return sendPage(reply, 200, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${a.id}`, values: { name: a.name, kind: a.kind, redirectUri: a.redirect_uri ?? '' } }));
    } catch (err) {
      if (isAppError(err) && err.code === 'NOT_FOUND') return sendPage(reply, 404, errorPage({ error: 'not_found', description: 'There is no such application.', viewer }));
      throw err;
    }
  });

  app.post('/account/applications/edit/:id', async function edit(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const id = idParam(req);
    try {
      const current = await ownApp(deps, viewer.accountId, id);
      const values = { name: form.get('name') ?? undefined, kind: current.kind, redirectUri: form.get('redirect_uri') ?? undefined };
      const again = (status: number, error: string) => sendPage(reply, status, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${id}`, values, error }));
      if (!csrfValid(req)) return again(400, 'The form you submitted has expired. Please try again.');
      try {
        const updated = await editApp(deps, viewer.accountId, id, values);
        return showApplications(reply, viewer, 200, { notice: `Updated ${updated.name}.` });
      } catch (err) {
        if (isAppError(err) && err.code === 'INVALID_INPUT') return again(400, err.message);
        throw err;
      }
    } catch (err) {
      if (isAppError(err) && err.code === 'NOT_FOUND') return sendPage(reply, 404, errorPage({ error: 'not_found', description: 'There is no such application.', viewer }));
      throw err;
    }
  });

  app.post('/account/applications/remove/:id', async function remove(req, reply) {
    const viewer = await requirePost(req, reply);
    if (viewer === undefined) return reply;
    try {
      const a = await ownApp(deps, viewer.accountId, idParam(req));
      await removeApp(deps, viewer.accountId, a.id);
      return showApplications(reply, viewer, 200, { notice: `Removed ${a.name}; its grants and tokens no longer work.` });
    } catch (err) {
      if (isAppError(err) && err.code === 'NOT_FOUND') return showApplications(reply, viewer, 404, { notice: 'There is no such application.' });
      throw err;
    }
  });

  app.post('/account/applications/reset-secret/:id', async function reset(req, reply) {
    const viewer = await requirePost(req, reply);
    if (viewer === undefined) return reply;
    try {
      const { app: a, clientSecret } = await resetSecret(deps, viewer.accountId, idParam(req));
      return showApplications(reply, viewer, 200, { notice: `New secret for ${a.name}; the old one no longer works.`, secret: { appName: a.name, clientId: a.client_id, secret: clientSecret } });
    } catch (err) {
      if (isAppError(err) && err.code === 'NOT_FOUND') return showApplications(reply, viewer, 404, { notice: 'There is no such application.' });
      throw err;
    }
  });
}

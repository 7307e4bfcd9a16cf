import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../../shared/errors.js';
import { authenticate, createSession, endSession, findAccountByName, sessionAccount } from '../accounts.js';
import type { AuthDeps } from '../deps.js';
import { authenticateClient, editApp, listOwnApps, ownApp, registerApp, removeApp, resetSecret, type Application } from '../applications.js';
import { audit } from '../audit.js';
import { findUserGrant, listUserGrants, revokeUserGrant } from '../grants.js';
import { cookies, csrfToken, csrfValid, DEVICE_COOKIE, formParams, queryParams, SESSION_COOKIE, setCookie } from '../http-util.js';
import { html } from '../views/html.js';
import { page } from '../views/layout.js';
import {
  applicationFormPage,
  applicationsPage,
  confirmRemovePage,
  confirmResetPage,
  confirmRevokePage,
  errorPage,
  homePage,
  loginPage,
  type ShownSecret,
  type Viewer,
} from '../views/pages.js';
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

const EXPIRED = 'The form you submitted has expired. Please try again.';

/*
 * Post/Redirect/Get: every form post on the account pages answers 303, and what it did is
 * said once on the page it redirects to, by a flash cookie that page reads and clears. A
 * new client secret travels the same way (never in a URL): the cookie is Secure, HttpOnly,
 * SameSite=Strict and lives 5 minutes at most, names the user it is for, and the secret is
 * shown only while it is still the application's secret. So a reload repeats nothing and
 * shows the secret no more. See docs/decisions.md ("Account pages").
 */
const FLASH_COOKIE = '__Host-sleeve-flash';

interface Flash {
  /** The account it is for. */
  a: number;
  /** The notice. */
  n: string;
  /** A new secret to show once, with its client_id. */
  c?: string;
  s?: string;
}

function redirectWithFlash(reply: FastifyReply, flash: Flash): FastifyReply {
  setCookie(reply, FLASH_COOKIE, Buffer.from(JSON.stringify(flash)).toString('base64url'), { maxAge: 300, sameSite: 'Strict' });
  return reply.redirect('/account/applications', 303);
}

/** Reads and clears the flash, if it is for this user. */
async function takeFlash(deps: AuthDeps, req: FastifyRequest, reply: FastifyReply, viewer: SignedIn): Promise<{ notice?: string; secret?: ShownSecret }> {
  const raw = cookies(req).get(FLASH_COOKIE);
  if (raw === undefined) return {};
  setCookie(reply, FLASH_COOKIE, '', { maxAge: 0, sameSite: 'Strict' });
  let flash: Partial<Flash> | null;
  try {
    flash = raw.length <= 2000 ? (JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as Partial<Flash> | null) : null;
  } catch {
    return {};
  }
  if (typeof flash !== 'object' || flash === null || flash.a !== viewer.accountId || typeof flash.n !== 'string') return {};
  const notice = flash.n.slice(0, 300);
  if (typeof flash.c !== 'string' || typeof flash.s !== 'string') return { notice };
  const app = await authenticateClient(deps, flash.c, flash.s);
  if (app === undefined || app.owner_id !== viewer.accountId) return { notice };
  return { notice, secret: { appName: app.name, clientId: app.client_id, secret: flash.s } };
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
  const showApplications = async (reply: FastifyReply, viewer: SignedIn, extra: { notice?: string; secret?: ShownSecret }) =>
    sendPage(reply, 200, applicationsPage({ viewer, grants: await listUserGrants(deps, viewer.accountId), apps: await listOwnApps(deps, viewer.accountId), ...extra }));
  const facts = (req: FastifyRequest, viewer: SignedIn, clientId: string) => ({ user: viewer.name, address: ctx.clientAddress(req), clientId });
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
    // A message (a new secret) left unread by an earlier session does not outlive it.
    setCookie(reply, FLASH_COOKIE, '', { maxAge: 0, sameSite: 'Strict' });
    return reply.redirect(returnTo, 303);
  });

  app.post('/logout', async function logout(req, reply) {
    if (csrfValid(req)) {
      const token = cookies(req).get(SESSION_COOKIE);
      const account = await sessionAccount(deps, token);
      await endSession(deps, token);
      if (account !== undefined) audit(req.log, 'signout', { user: account.name, address: ctx.clientAddress(req) });
      setCookie(reply, SESSION_COOKIE, '', { maxAge: 0 });
      setCookie(reply, FLASH_COOKIE, '', { maxAge: 0, sameSite: 'Strict' });
    }
    return reply.redirect('/', 303);
  });

  app.get('/account/applications', async function applications(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    return showApplications(reply, viewer, await takeFlash(deps, req, reply, viewer));
  });

  /**
   * A destructive action behind a confirmation page, as on musicbrainz.org: GET asks "Are
   * you sure…", its form POSTs to the same URL with the CSRF token, and only that POST acts,
   * then redirects. A second POST (a double tap, a reload) finds nothing left to do and says so.
   */
  const confirmed = <T>(
    path: string,
    missing: string,
    load: (viewer: SignedIn, id: number) => Promise<T | undefined>,
    ask: (viewer: SignedIn, item: T, error?: string) => string,
    act: (req: FastifyRequest, viewer: SignedIn, item: T) => Promise<Flash>,
  ): void => {
    app.get(path, async function confirmForm(req, reply) {
      const viewer = await requireViewer(req, reply);
      if (viewer === undefined) return reply;
      const item = await load(viewer, idParam(req));
      if (item === undefined) return sendPage(reply, 404, errorPage({ error: 'not_found', description: missing, viewer }));
      return sendPage(reply, 200, ask(viewer, item));
    });
    app.post(path, async function confirm(req, reply) {
      const viewer = await requireViewer(req, reply);
      if (viewer === undefined) return reply;
      const item = await load(viewer, idParam(req));
      if (item === undefined) return redirectWithFlash(reply, { a: viewer.accountId, n: missing });
      if (!csrfValid(req)) return sendPage(reply, 400, ask(viewer, item, EXPIRED));
      return redirectWithFlash(reply, await act(req, viewer, item));
    });
  };
  const loadApp = async (viewer: SignedIn, id: number): Promise<Application | undefined> => {
    try {
      return await ownApp(deps, viewer.accountId, id);
    } catch (err) {
      if (isAppError(err) && err.code === 'NOT_FOUND') return undefined;
      throw err;
    }
  };
  const noApp = 'There is no such application (or it was removed).';

  confirmed(
    '/account/applications/revoke/:id',
    'There is no such authorization (or it was revoked).',
    (viewer, id) => findUserGrant(deps, viewer.accountId, id),
    (viewer, grant, error) => confirmRevokePage({ viewer, grant, error }),
    async (req, viewer, grant) => {
      const ended = await revokeUserGrant(deps, viewer.accountId, grant.id);
      if (ended !== undefined) audit(req.log, 'grant.revoked', { ...facts(req, viewer, ended.clientId), via: 'account page' });
      return { a: viewer.accountId, n: `Access revoked: ${grant.appName} can no longer act for you.` };
    },
  );

  confirmed('/account/applications/remove/:id', noApp, loadApp, (viewer, a, error) => confirmRemovePage({ viewer, app: a, error }), async (req, viewer, a) => {
    await removeApp(deps, viewer.accountId, a.id);
    audit(req.log, 'app.removed', facts(req, viewer, a.client_id));
    return { a: viewer.accountId, n: `Removed ${a.name}; its grants and tokens no longer work.` };
  });

  confirmed('/account/applications/reset-secret/:id', noApp, loadApp, (viewer, a, error) => confirmResetPage({ viewer, app: a, error }), async (req, viewer, a) => {
    const { clientSecret } = await resetSecret(deps, viewer.accountId, a.id);
    audit(req.log, 'app.secret_reset', facts(req, viewer, a.client_id));
    return { a: viewer.accountId, n: `New secret for ${a.name}; the old one no longer works.`, c: a.client_id, s: clientSecret };
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
    if (!csrfValid(req)) return again(400, EXPIRED);
    try {
      const { app: created, clientSecret } = await registerApp(deps, { ownerId: viewer.accountId, ...values });
      audit(req.log, 'app.registered', facts(req, viewer, created.client_id));
      return redirectWithFlash(reply, { a: viewer.accountId, n: `Registered ${created.name}.`, c: created.client_id, s: clientSecret });
    } catch (err) {
      if (isAppError(err) && err.expose) return again(400, err.message);
      throw err;
    }
  });

  app.get('/account/applications/edit/:id', async function editForm(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    const a = await loadApp(viewer, idParam(req));
    if (a === undefined) return sendPage(reply, 404, errorPage({ error: 'not_found', description: noApp, viewer }));
    return sendPage(reply, 200, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${a.id}`, values: { name: a.name, kind: a.kind, redirectUri: a.redirect_uri ?? '' } }));
  });

  app.post('/account/applications/edit/:id', async function edit(req, reply) {
    const viewer = await requireViewer(req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const current = await loadApp(viewer, idParam(req));
    if (current === undefined) return sendPage(reply, 404, errorPage({ error: 'not_found', description: noApp, viewer }));
    const values = { name: form.get('name') ?? undefined, kind: current.kind, redirectUri: form.get('redirect_uri') ?? undefined };
    const again = (status: number, error: string) => sendPage(reply, status, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${current.id}`, values, error }));
    if (!csrfValid(req)) return again(400, EXPIRED);
    try {
      const updated = await editApp(deps, viewer.accountId, current.id, values);
      audit(req.log, 'app.changed', facts(req, viewer, updated.client_id));
      return redirectWithFlash(reply, { a: viewer.accountId, n: `Updated ${updated.name}.` });
    } catch (err) {
      if (isAppError(err) && err.expose) return again(400, err.message);
      throw err;
    }
  });
}

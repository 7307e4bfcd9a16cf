import type { FastifyInstance, FastifyRequest } from 'fastify';
import { notFound } from '../../../shared/errors.js';
import { findOwnApp, removeApp, resetSecret } from '../../applications.js';
import { audit } from '../../audit.js';
import { findUserGrant, revokeUserGrant } from '../../user-grants.js';
import { csrfValid } from '../../http-util.js';
import { confirmRemovePage, confirmResetPage, confirmRevokePage } from '../../views/pages.js';
import { redirectWithFlash, type Flash } from './flash.js';
import { EXPIRED, requireViewer, sendPage, type PageContext, type SignedIn } from './shared.js';

/** The numeric `:id` of an account page's URL, or -1 (which names nothing). */
export function idParam(req: FastifyRequest): number {
  const raw = (req.params as Record<string, string>).id ?? '';
  return /^\d{1,9}$/.test(raw) ? Number(raw) : -1;
}

/** What the audit trail says of an action on the account pages. */
export function actionFacts(ctx: PageContext, req: FastifyRequest, viewer: SignedIn, clientId: string) {
  return { user: viewer.name, address: ctx.clientAddress(req), clientId };
}

export const NO_APP = 'There is no such application (or it was removed).';

interface Confirmed<T> {
  path: string;
  /** The notice when there is nothing (left) to act on. */
  missing: string;
  load(viewer: SignedIn, id: number): Promise<T | undefined>;
  ask(viewer: SignedIn, item: T, error?: string): string;
  act(req: FastifyRequest, viewer: SignedIn, item: T): Promise<Flash>;
}

/**
 * A destructive action behind a confirmation page, as on musicbrainz.org: GET asks "Are
 * you sure…", its form POSTs to the same URL with the CSRF token, and only that POST acts,
 * then redirects. A second POST (a double tap, a reload) finds nothing left to do and says so.
 */
function confirmed<T>(app: FastifyInstance, ctx: PageContext, action: Confirmed<T>): void {
  app.get(action.path, async function confirmForm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const item = await action.load(viewer, idParam(req));
    if (item === undefined) throw notFound(action.missing);
    return sendPage(reply, 200, action.ask(viewer, item));
  });
  app.post(action.path, async function confirm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const item = await action.load(viewer, idParam(req));
    if (item === undefined) return redirectWithFlash(reply, { a: viewer.accountId, n: action.missing });
    if (!csrfValid(req)) return sendPage(reply, 400, action.ask(viewer, item, EXPIRED));
    return redirectWithFlash(reply, await action.act(req, viewer, item));
  });
}

/** Revoking an authorization, removing an application, and resetting its secret. */
export function confirmedActions(app: FastifyInstance, ctx: PageContext): void {
  const { deps } = ctx;
  const loadApp = (viewer: SignedIn, id: number) => findOwnApp(deps, viewer.accountId, id);

  confirmed(app, ctx, {
    path: '/account/applications/revoke/:id',
    missing: 'There is no such authorization (or it was revoked).',
    load: (viewer, id) => findUserGrant(deps, viewer.accountId, id),
    ask: (viewer, grant, error) => confirmRevokePage({ viewer, grant, error }),
    act: async (req, viewer, grant) => {
      const ended = await revokeUserGrant(deps, viewer.accountId, grant.id);
      if (ended !== undefined) audit(req.log, 'grant.revoked', { ...actionFacts(ctx, req, viewer, ended.clientId), via: 'account page' });
      return { a: viewer.accountId, n: `Access revoked: ${grant.appName} can no longer act for you.` };
    },
  });

  confirmed(app, ctx, {
    path: '/account/applications/remove/:id',
    missing: NO_APP,
    load: loadApp,
    ask: (viewer, a, error) => confirmRemovePage({ viewer, app: a, error }),
    act: async (req, viewer, a) => {
      await removeApp(deps, viewer.accountId, a.id);
      audit(req.log, 'app.removed', actionFacts(ctx, req, viewer, a.client_id));
      return { a: viewer.accountId, n: `Removed ${a.name}; its grants and tokens no longer work.` };
    },
  });

  confirmed(app, ctx, {
    path: '/account/applications/reset-secret/:id',
    missing: NO_APP,
    load: loadApp,
    ask: (viewer, a, error) => confirmResetPage({ viewer, app: a, error }),
    act: async (req, viewer, a) => {
      const { clientSecret } = await resetSecret(deps, viewer.accountId, a.id);
      audit(req.log, 'app.secret_reset', actionFacts(ctx, req, viewer, a.client_id));
      return { a: viewer.accountId, n: `New secret for ${a.name}; the old one no longer works.`, c: a.client_id, s: clientSecret };
    },
  });
}

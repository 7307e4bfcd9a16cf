import type { FastifyInstance } from 'fastify';
import { notFound } from '../../../shared/errors.js';
import { editApp, findOwnApp, listOwnApps, registeredRedirectUris, registerApp } from '../../applications.js';
import { audit } from '../../audit.js';
import { listUserGrants } from '../../user-grants.js';
import { csrfValid, formParams } from '../../http-util.js';
import { applicationFormPage, applicationsPage } from '../../views/pages.js';
import { actionFacts, confirmedActions, idParam, NO_APP } from './confirm.js';
import { redirectWithFlash, takeFlash } from './flash.js';
import { EXPIRED, formAction, requireViewer, sendPage, type PageContext } from './shared.js';

/** The account's applications page: authorizations given, applications registered, and their forms. */
export function applicationPages(app: FastifyInstance, ctx: PageContext): void {
  const { deps } = ctx;

  app.get('/account/applications', async function applications(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const flash = await takeFlash(deps, req, reply, viewer);
    return sendPage(reply, 200, applicationsPage({ viewer, grants: await listUserGrants(deps, viewer.accountId), apps: await listOwnApps(deps, viewer.accountId), ...flash }));
  });

  confirmedActions(app, ctx);
  registerForm(app, ctx);
  editForm(app, ctx);
}

function registerForm(app: FastifyInstance, ctx: PageContext): void {
  const action = '/account/applications/register';
  app.get(action, async function registerForm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    return sendPage(reply, 200, applicationFormPage({ viewer, mode: 'register', action, values: {} }));
  });

  app.post(action, async function register(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const values = { name: form.get('name') ?? undefined, kind: form.get('kind') ?? undefined, redirectUri: form.get('redirect_uri') ?? undefined, idTokenAlg: form.get('id_token_alg') ?? undefined, rotateRefresh: form.get('rotate_refresh') === 'on' };
    const again = (status: number, error: string) => sendPage(reply, status, applicationFormPage({ viewer, mode: 'register', action, values, error }));
    if (!csrfValid(req)) return again(400, EXPIRED);
    return formAction(async () => {
      const { app: created, clientSecret } = await registerApp(ctx.deps, { ownerId: viewer.accountId, ...values });
      audit(req.log, 'app.registered', actionFacts(ctx, req, viewer, created.client_id));
      return redirectWithFlash(reply, { a: viewer.accountId, n: `Registered ${created.name}.`, c: created.client_id, s: clientSecret });
    }, again);
  });
}

function editForm(app: FastifyInstance, ctx: PageContext): void {
  app.get('/account/applications/edit/:id', async function editForm(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const a = await findOwnApp(ctx.deps, viewer.accountId, idParam(req));
    if (a === undefined) throw notFound(NO_APP);
    return sendPage(reply, 200, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${a.id}`, values: { name: a.name, kind: a.kind, redirectUri: registeredRedirectUris(a).join(' '), idTokenAlg: a.id_token_alg, rotateRefresh: a.rotate_refresh === 1 } }));
  });

  app.post('/account/applications/edit/:id', async function edit(req, reply) {
    const viewer = await requireViewer(ctx, req, reply);
    if (viewer === undefined) return reply;
    const form = formParams(req);
    const current = await findOwnApp(ctx.deps, viewer.accountId, idParam(req));
    if (current === undefined) throw notFound(NO_APP);
    const values = { name: form.get('name') ?? undefined, kind: current.kind, redirectUri: form.get('redirect_uri') ?? undefined, idTokenAlg: form.get('id_token_alg') ?? undefined, rotateRefresh: form.get('rotate_refresh') === 'on' };
    const again = (status: number, error: string) => sendPage(reply, status, applicationFormPage({ viewer, mode: 'edit', action: `/account/applications/edit/${current.id}`, values, error }));
    if (!csrfValid(req)) return again(400, EXPIRED);
    return formAction(async () => {
      const updated = await editApp(ctx.deps, viewer.accountId, current.id, values);
      audit(req.log, 'app.changed', actionFacts(ctx, req, viewer, updated.client_id));
      return redirectWithFlash(reply, { a: viewer.accountId, n: `Updated ${updated.name}.` });
    }, again);
  });
}

import type { FastifyInstance } from 'fastify';
import { findAppByClientId } from '../../applications.js';
import { codeToShow } from '../../grants/authorization-code.js';
import { queryParams } from '../../http-util.js';
import { declinedPage, errorPage, oobPage } from '../../views/pages.js';
import { currentViewer, sendPage, type PageContext } from '../pages/shared.js';

/** The out-of-band page: the code for the user to copy, or that they said no. */
export function oobEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.get('/oauth2/oob', async function oob(req, reply) {
    const viewer = await currentViewer(ctx, req, reply);
    if (viewer === undefined) return ctx.loginInterstitial(req, reply);
    const q = queryParams(req);
    const declined = q.get('declined');
    if (declined !== null && !q.has('code')) {
      const app = await findAppByClientId(ctx.deps, declined);
      if (app !== undefined) return sendPage(reply, 200, declinedPage({ appName: app.name, viewer }));
    }
    const code = q.get('code') ?? '';
    const shown = await codeToShow(ctx.deps, viewer.accountId, code);
    if ('refused' in shown) return sendPage(reply, 400, errorPage({ error: 'invalid_request', description: shown.refused, viewer }));
    return sendPage(reply, 200, oobPage({ appName: shown.appName, code, state: q.get('state') ?? undefined, viewer }));
  });
}

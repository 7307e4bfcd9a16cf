import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { notFound } from '../../../shared/errors.js';
import { accountRoles, findAccountByName } from '../../accounts.js';
import { html } from '../../views/html.js';
import { page } from '../../views/layout.js';
import { STYLESHEET } from '../../views/style.js';
import { currentViewer, sendPage, type PageContext } from './shared.js';

const ETAG = `"${createHash('sha256').update(STYLESHEET).digest('base64url').slice(0, 22)}"`;

/** The pages anyone may see: user profiles and the stylesheet (the home page is the website's, src/website). */
export function publicPages(app: FastifyInstance, ctx: PageContext): void {
  app.get('/static/sleeve.css', async function stylesheet(req, reply) {
    reply.headers({ etag: ETAG, 'cache-control': 'public, max-age=86400' });
    if (req.headers['if-none-match'] === ETAG) return reply.code(304).send();
    return reply.type('text/css; charset=utf-8').send(STYLESHEET);
  });

  app.get('/user/:name', async function profile(req, reply) {
    const viewer = await currentViewer(ctx, req, reply);
    const account = await findAccountByName(ctx.deps, (req.params as { name: string }).name);
    if (account === undefined) throw notFound('There is no such user.');
    const role = (await accountRoles(ctx.deps, account.id)).includes('approver') ? 'Editor and approver (decides the pending cover art edits of others)' : 'Editor';
    const edits = `/user/${encodeURIComponent(account.name)}/edits`;
    const body = html`<dl><dt>User name</dt><dd>${account.name}</dd><dt>Role</dt><dd>${role}</dd>${account.website ? html`<dt>Website</dt><dd>${account.website}</dd>` : ''}</dl>
<p><a href="${edits}">Cover art edits by ${account.name}</a></p>`;
    return sendPage(reply, 200, page({ title: account.name, body, user: viewer?.name, csrf: viewer?.csrf }));
  });
}

import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { REORDER_SCRIPT } from '../views/script.js';

const ETAG = `"${createHash('sha256').update(REORDER_SCRIPT).digest('base64url').slice(0, 22)}"`;

/** The website's script, same-origin (the pages' CSP allows no other). */
export function assetRoutes(app: FastifyInstance): void {
  app.get('/static/reorder.js', async function reorderScript(req, reply) {
    reply.headers({ etag: ETAG, 'cache-control': 'public, max-age=86400' });
    if (req.headers['if-none-match'] === ETAG) return reply.code(304).send();
    return reply.type('text/javascript; charset=utf-8').send(REORDER_SCRIPT);
  });
}

import type { FastifyInstance } from 'fastify';
import { introspect } from '../../tokens.js';
import type { PageContext } from '../pages/shared.js';
import { checkParams, CORS, onlyPost, optionsReply, requireClient, sendJson } from './shared.js';

/** Token introspection (RFC 7662). */
export function introspectEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: ['GET', 'POST', 'OPTIONS'],
    url: '/oauth2/introspect',
    handler: async function introspection(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'authorization');
      onlyPost(req);
      const params = checkParams(req, ['token', 'token_type_hint', 'client_id', 'client_secret'], new Set(['token']), 'body');
      const client = await requireClient(ctx.deps, req, params);
      return sendJson(reply, await introspect(ctx.deps, client, params.get('token') as string), CORS);
    },
  });
}

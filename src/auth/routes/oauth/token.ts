import type { FastifyInstance } from 'fastify';
import { tokenGrant } from '../../grants/index.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, CORS, NO_STORE, onlyPost, optionsReply, sendJson, values } from './shared.js';

/** A token's answer's headers besides the listener's; the fast lane's token answers have them too (auth/token-lane.ts). */
export const TOKEN_HEADERS: Readonly<Record<string, string>> = { ...NO_STORE, ...CORS };

/**
 * The token endpoint (RFC 6749 §3.2): a POST answered by its grant type's handler (auth/grants/,
 * dispatched by tokenGrant, which the fast lane calls too: auth/token-lane.ts).
 */
export function tokenEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/token',
    handler: async function token(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'dpop');
      onlyPost(req);
      return sendJson(reply, await tokenGrant(ctx, req, values(req, 'grant_type')[0]), TOKEN_HEADERS);
    },
  });
}

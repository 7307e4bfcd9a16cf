import type { FastifyInstance } from 'fastify';
import { findAccount } from '../../accounts.js';
import { audit } from '../../audit.js';
import { revokeToken } from '../../grants.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, CORS, hasBasicAuth, onlyPost, optionsReply, requireClient } from './shared.js';

/** Token revocation (RFC 7009). */
export function revokeEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/revoke',
    handler: async function revoke(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'authorization');
      onlyPost(req);
      const required = new Set(hasBasicAuth(req) ? ['token'] : ['token', 'client_id', 'client_secret']);
      const params = checkParams(req, ['token', 'client_id', 'client_secret'], required, 'body');
      const client = await requireClient(ctx.deps, req, params);
      const ended = await revokeToken(ctx.deps, client, params.get('token') as string);
      if (ended !== undefined) {
        const user = (await findAccount(ctx.deps, ended.accountId))?.name;
        audit(req.log, ended.ended === 'grant' ? 'grant.revoked' : 'token.revoked', { user, clientId: client.client_id, address: ctx.clientAddress(req), via: 'oauth2/revoke' });
      }
      return reply.code(200).headers(CORS).send();
    },
  });
}

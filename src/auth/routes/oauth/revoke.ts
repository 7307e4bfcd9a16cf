import type { FastifyInstance } from 'fastify';
import { findAccount } from '../../accounts.js';
import { audit } from '../../audit.js';
import { revokeToken } from '../../tokens.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, CORS, hasBasicAuth, onlyPost, optionsReply, requireClient, values } from './shared.js';
import { findAppByClientId, type Application } from '../../applications.js';
import { isDocumentClientId } from '../../client-metadata.js';
import { OAuthError } from '../../errors.js';

/** The row of a client known by its metadata document (made when a user first allowed it), or invalid_client. */
async function documentClientRow(ctx: PageContext, clientId: string): Promise<Application> {
  const app = ctx.deps.clientDocuments?.enabled === true ? await findAppByClientId(ctx.deps, clientId) : undefined;
  if (app === undefined || app.owner_id !== null) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

/** Token revocation (RFC 7009). */
export function revokeEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/revoke',
    handler: async function revoke(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'authorization');
      onlyPost(req);
      // A client known by its metadata document has no secret: it names itself (RFC 7009 §2.1, a public client).
      const byDocument = !hasBasicAuth(req) && isDocumentClientId(values(req, 'client_id', 'body')[0] ?? '');
      const required = new Set(hasBasicAuth(req) ? ['token'] : byDocument ? ['token', 'client_id'] : ['token', 'client_id', 'client_secret']);
      const params = checkParams(req, ['token', 'client_id', 'client_secret'], required, 'body');
      const client = byDocument && !params.has('client_secret') ? await documentClientRow(ctx, params.get('client_id') as string) : await requireClient(ctx.deps, req, params);
      const ended = await revokeToken(ctx.deps, client, params.get('token') as string);
      if (ended !== undefined) {
        const user = (await findAccount(ctx.deps, ended.accountId))?.name;
        audit(req.log, ended.ended === 'grant' ? 'grant.revoked' : 'token.revoked', { user, clientId: client.client_id, address: ctx.clientAddress(req), via: 'oauth2/revoke' });
      }
      return reply.code(200).headers(CORS).send();
    },
  });
}

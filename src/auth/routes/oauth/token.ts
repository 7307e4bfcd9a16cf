import type { FastifyInstance, FastifyRequest } from 'fastify';
import { findAccount } from '../../accounts.js';
import type { Application } from '../../applications.js';
import { audit } from '../../audit.js';
import { OAuthError } from '../../errors.js';
import { CodeReplayed, DpopKeyMismatch, exchangeCode, refreshGrant, type TokenResponse } from '../../grants.js';
import { tokenRequestProof } from './dpop.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, CORS, onlyPost, optionsReply, requireClient, sendJson, values } from './shared.js';

const PARAMS = ['client_id', 'client_secret', 'grant_type', 'code', 'refresh_token', 'redirect_uri', 'token_type', 'code_verifier'];

/** The token endpoint (RFC 6749 §3.2): authorization_code and refresh_token grants. */
export function tokenEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/token',
    handler: async function token(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS');
      onlyPost(req);
      const grantType = values(req, 'grant_type')[0];
      const required = new Set(['grant_type']);
      if (grantType === 'authorization_code') ['code', 'redirect_uri'].forEach((n) => required.add(n));
      if (grantType === 'refresh_token') required.add('refresh_token');
      const params = checkParams(req, PARAMS, required);
      const client = await requireClient(ctx.deps, req, params);
      if (grantType !== 'authorization_code' && grantType !== 'refresh_token') {
        throw new OAuthError('unsupported_grant_type', 'Unsupported grant_type, only authorization_code and refresh_token are supported');
      }
      if ((params.get('token_type') ?? 'bearer').toLowerCase() !== 'bearer') throw new OAuthError('invalid_request', 'Invalid requested token type, only bearer is allowed');
      const dpopJkt = await tokenRequestProof(ctx, req, client);
      const body =
        grantType === 'authorization_code'
          ? await exchange(ctx, req, client, params, dpopJkt)
          : await refreshGrant(ctx.deps, client, params.get('refresh_token') as string, dpopJkt).catch((err: unknown) => {
              if (err instanceof DpopKeyMismatch) audit(req.log, 'dpop.rejected', { clientId: client.client_id, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/token' });
              throw err;
            });
      return sendJson(reply, body, CORS);
    },
  });
}

/** exchangeCode, with a replayed code (which revoked its grant) in the audit trail. */
async function exchange(ctx: PageContext, req: FastifyRequest, client: Application, params: Map<string, string>, dpopJkt: string | undefined): Promise<TokenResponse> {
  const request = { code: params.get('code') as string, redirectUri: params.get('redirect_uri') as string, codeVerifier: params.get('code_verifier'), dpopJkt };
  return exchangeCode(ctx.deps, client, request).catch(async (err: unknown) => {
    if (err instanceof CodeReplayed) {
      const user = (await findAccount(ctx.deps, err.accountId))?.name;
      audit(req.log, 'grant.revoked', { user, clientId: err.clientId, address: ctx.clientAddress(req), via: 'oauth2/token', reason: 'code_replayed' });
    }
    throw err;
  });
}

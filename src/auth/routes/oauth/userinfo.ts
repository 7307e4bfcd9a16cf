import type { FastifyInstance } from 'fastify';
import { OAuthError } from '../../errors.js';
import { findAccessToken } from '../../tokens.js';
import { mayReadUserinfo, userinfoClaims } from '../../userinfo.js';
import type { PageContext } from '../pages/shared.js';
import { dpopChallenge } from '../../dpop.js';
import { dpopPresented, tokenUseRefusal } from './dpop.js';
import { formParams, queryParams } from '../../http-util.js';
import { bearerChallenge, bearerTokens, CORS, NO_STORE, optionsReply, sendJson, sendOAuthError } from './shared.js';

/** The user's profile for a bearer token with the profile (or openid) scope; every refusal carries its challenge (RFC 6750 §3). */
export function userinfoEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: ['GET', 'HEAD', 'POST', 'OPTIONS'],
    url: '/oauth2/userinfo',
    handler: async function userinfo(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'GET, POST, OPTIONS', 'authorization, dpop');
      const dpopToken = dpopPresented(req);
      const challenge: (err?: OAuthError, scope?: string) => string = dpopToken === undefined ? bearerChallenge : dpopChallenge;
      const refuse = (err: OAuthError, scope?: string) => sendOAuthError(reply, err, { 'www-authenticate': challenge(err, scope) });
      const [token, ...more] = dpopToken === undefined ? bearerTokens(req) : [dpopToken, ...formParams(req).getAll('access_token'), ...queryParams(req).getAll('access_token')];
      if (more.length > 0) return refuse(new OAuthError('invalid_request', 'Use exactly one way of sending the access token'));
      if (token === undefined) {
        return reply
          .code(401)
          .headers({ ...NO_STORE, ...CORS, 'www-authenticate': bearerChallenge() })
          .type('application/json; charset=utf-8')
          .send(JSON.stringify({ error: 'invalid_request', error_description: 'Authorization required' }));
      }
      const active = await findAccessToken(ctx.deps, token);
      if (active === undefined) return refuse(new OAuthError('invalid_token', 'The access token is invalid, expired or revoked', 401));
      // A DPoP-bound token is refused as a bearer token, with the DPoP challenge (RFC 9449 §7.1).
      const misuse = await tokenUseRefusal(ctx, req, active, token, dpopToken !== undefined, '/oauth2/userinfo');
      if (misuse !== undefined) return sendOAuthError(reply, misuse, { 'www-authenticate': dpopChallenge(misuse) });
      if (!mayReadUserinfo(active.scope)) return refuse(new OAuthError('insufficient_scope', 'The access token lacks the profile scope', 403), 'profile');
      return sendJson(reply, userinfoClaims(ctx.deps, active.account, active), CORS);
    },
  });
}

import type { FastifyInstance } from 'fastify';
import { SCOPES } from '../../scopes.js';
import type { PageContext } from '../pages/shared.js';
import { CORS } from './shared.js';

/** Authorization server metadata (RFC 8414). */
export function metadataEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.get('/.well-known/oauth-authorization-server', async function metadata(_req, reply) {
    const base = ctx.deps.authUrl;
    return reply
      .headers({ ...CORS, 'cache-control': 'public, max-age=3600' })
      .type('application/json; charset=utf-8')
      .send(
        JSON.stringify({
          issuer: base,
          authorization_endpoint: `${base}/oauth2/authorize`,
          token_endpoint: `${base}/oauth2/token`,
          revocation_endpoint: `${base}/oauth2/revoke`,
          introspection_endpoint: `${base}/oauth2/introspect`,
          userinfo_endpoint: `${base}/oauth2/userinfo`,
          scopes_supported: SCOPES.map((s) => s.name),
          response_types_supported: ['code'],
          response_modes_supported: ['query', 'form_post'],
          grant_types_supported: ['authorization_code', 'refresh_token'],
          token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          revocation_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
          code_challenge_methods_supported: ['S256', 'plain'],
          service_documentation: `${base}/`,
        }),
      );
  });
}

import type { FastifyInstance, FastifyReply } from 'fastify';
import { GRANT_TYPES } from '../../grants/index.js';
import { DPOP_ALGS } from '../../dpop.js';
import { OFFLINE_ACCESS, SCOPE_ALIASES, SCOPES } from '../../scopes.js';
import { SIGNING_ALGS } from '../../signing-keys.js';
import { JWKS_PATH } from '../jwks.js';
import type { PageContext } from '../pages/shared.js';
import { END_SESSION_PATH } from './logout.js';
import { CORS } from './shared.js';

const CLIENT_AUTH = ['client_secret_basic', 'client_secret_post'];

/** What userinfo and the id_token may carry (docs/interface.md, "What sleeve serves"). */
const CLAIMS = [
  'sub',
  'iss',
  'aud',
  'exp',
  'iat',
  'auth_time',
  'nonce',
  'at_hash',
  'username',
  'preferred_username',
  'profile',
  'metabrainz_user_id',
  'website',
  'gender',
  'zoneinfo',
  'age',
  'country',
  'email',
  'email_verified',
];

/**
 * One description of the service for both documents: RFC 8414 authorization server metadata
 * and OpenID Connect Discovery 1.0 (§3) share their registry, so they say the same things.
 */
function describe(base: string, clientDocuments: boolean): Record<string, unknown> {
  return {
    issuer: base,
    authorization_endpoint: `${base}/oauth2/authorize`,
    token_endpoint: `${base}/oauth2/token`,
    revocation_endpoint: `${base}/oauth2/revoke`,
    introspection_endpoint: `${base}/oauth2/introspect`,
    device_authorization_endpoint: `${base}/oauth2/device_authorization`,
    userinfo_endpoint: `${base}/oauth2/userinfo`,
    jwks_uri: `${base}${JWKS_PATH}`,
    end_session_endpoint: `${base}${END_SESSION_PATH}`,
    scopes_supported: [...SCOPES.map((s) => s.name), OFFLINE_ACCESS, ...Object.keys(SCOPE_ALIASES)],
    response_types_supported: ['code'],
    response_modes_supported: ['query', 'form_post'],
    grant_types_supported: GRANT_TYPES,
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: [...SIGNING_ALGS],
    // `none`: a public application may leave out its (non-secret) secret when it uses PKCE.
    token_endpoint_auth_methods_supported: [...CLIENT_AUTH, 'none'],
    revocation_endpoint_auth_methods_supported: CLIENT_AUTH,
    introspection_endpoint_auth_methods_supported: CLIENT_AUTH,
    code_challenge_methods_supported: ['S256', 'plain'],
    authorization_response_iss_parameter_supported: true,
    dpop_signing_alg_values_supported: [...DPOP_ALGS],
    claims_supported: CLAIMS,
    claims_parameter_supported: false,
    prompt_values_supported: ['none', 'login', 'consent', 'select_account'],
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    service_documentation: `${base}/`,
    // draft-ietf-oauth-client-id-metadata-document: an https client_id is its registration (SLEEVE_CLIENT_METADATA).
    ...(clientDocuments ? { client_id_metadata_document_supported: true } : {}),
  };
}

/** Authorization server metadata (RFC 8414) and OpenID Connect discovery, the same document. */
export function metadataEndpoint(app: FastifyInstance, ctx: PageContext): void {
  const body = JSON.stringify(describe(ctx.deps.authUrl, ctx.deps.clientDocuments?.enabled === true));
  const send = async function metadata(_req: unknown, reply: FastifyReply) {
    return reply.headers({ ...CORS, 'cache-control': 'public, max-age=3600' }).type('application/json; charset=utf-8').send(body);
  };
  app.get('/.well-known/oauth-authorization-server', send);
  app.get('/.well-known/openid-configuration', send);
}

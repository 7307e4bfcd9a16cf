import type { FastifyInstance } from 'fastify';
import { findAccount } from '../../accounts.js';
import { findAppByClientId, type Application } from '../../applications.js';
import { DocumentRefused, isDocumentClientId } from '../../client-metadata.js';
import { audit } from '../../audit.js';
import type { RequestView } from '../../http-util.js';
import { DEVICE_CODE_GRANT } from '../../device.js';
import { OAuthError } from '../../errors.js';
import { clientWithCode, clientWithGrant, CodeReplayed, type CodeRow, DocumentChanged, documentClientWithCode, DpopKeyMismatch, exchangeCode, type ExchangeParams, type Redeemed, refreshGrant, type TokenResponse } from '../../grants.js';
import { RefreshReused, rotateRefresh } from '../../rotation.js';
import { tokenRequestProof, type TokenProof } from './dpop.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, clientCredentials, CORS, hasBasicAuth, onlyPost, optionsReply, requireClient, sendJson, values } from './shared.js';
import { deviceTokenRequest } from './device.js';

const PARAMS = ['client_id', 'client_secret', 'grant_type', 'code', 'refresh_token', 'redirect_uri', 'token_type', 'code_verifier'];
/** The parameters every token request needs, and those of each grant type (made once, not per request). */
const REQUIRED_ALWAYS = new Set(['grant_type']);
const REQUIRED = new Map([
  ['authorization_code', new Set(['grant_type', 'code', 'redirect_uri'])],
  ['refresh_token', new Set(['grant_type', 'refresh_token'])],
]);

/** The token endpoint (RFC 6749 §3.2): authorization_code and refresh_token grants, and the device grant (oauth/device.ts). */
export function tokenEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/token',
    handler: async function token(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'dpop');
      onlyPost(req);
      const grantType = values(req, 'grant_type')[0];
      if (grantType === DEVICE_CODE_GRANT) return deviceTokenRequest(ctx, req, reply);
      return sendJson(reply, await tokenGrant(ctx, req, grantType), CORS);
    },
  });
}

/**
 * A POST to the token endpoint of any grant type but the device's (`grantType`, the request's
 * first): its answer's body, or the error (an OAuthError, mostly) that is its answer. The route
 * above and the fast lane (auth/token-lane.ts) both answer through it.
 */
export async function tokenGrant(ctx: PageContext, req: RequestView, grantType: string | undefined): Promise<TokenResponse> {
  const params = checkParams(req, PARAMS, REQUIRED.get(grantType ?? '') ?? REQUIRED_ALWAYS);
  const { client, secretless, grant, code, redeemed, documentHash } = await tokenClient(ctx, req, params, grantType);
  if (grantType !== 'authorization_code' && grantType !== 'refresh_token') {
    throw new OAuthError('unsupported_grant_type', 'Unsupported grant_type, only authorization_code and refresh_token are supported');
  }
  if ((params.get('token_type') ?? 'bearer').toLowerCase() !== 'bearer') throw new OAuthError('invalid_request', 'Invalid requested token type, only bearer is allowed');
  const proof = await tokenRequestProof(ctx, req, client);
  return grantType === 'authorization_code'
    ? exchange(ctx, req, client, params, { secretless, proof, code, redeemed, documentHash })
    : refresh(ctx, req, client, params.get('refresh_token') as string, proof, grant);
}

/**
 * The client of a token request: authenticated by its secret (HTTP Basic or the body), as the
 * interface says; or a public (installed) application by its client_id alone, sending no secret
 * at all (`token_endpoint_auth_method=none`, RFC 8252 §8.4), whose code must then carry PKCE
 * (exchangeCode checks). A confidential application without its secret is refused as before.
 * A code exchange that nothing can refuse between this lookup and its writes (no DPoP proof,
 * bearer tokens asked for) may have its writes made with the lookup (`redeemed`, clientWithCode).
 */
async function tokenClient(
  ctx: PageContext,
  req: RequestView,
  params: Map<string, string>,
  grantType: string | undefined,
): Promise<{ client: Application; secretless: boolean; grant?: Parameters<typeof refreshGrant>[4]; code?: CodeRow; redeemed?: Redeemed; documentHash?: string }> {
  const { deps } = ctx;
  const id = params.get('client_id');
  if (!hasBasicAuth(req) && params.get('client_secret') === undefined && id !== undefined && isDocumentClientId(id)) {
    return documentTokenClient(ctx, req, params, id, grantType);
  }
  if (!hasBasicAuth(req) && params.get('client_secret') === undefined && id !== undefined && id !== '') {
    const app = await findAppByClientId(deps, id);
    if (app?.kind === 'public') return { client: app, secretless: true };
  }
  // A refresh or a code exchange: the client and the refresh token's grant, or the code, in one lookup when they belong together.
  const refreshToken = grantType === 'refresh_token' ? params.get('refresh_token') : undefined;
  const code = grantType === 'authorization_code' ? params.get('code') : undefined;
  const credentials = refreshToken === undefined && code === undefined ? undefined : clientCredentials(req, params);
  if (credentials?.id !== undefined && credentials.secret !== undefined) {
    if (refreshToken !== undefined) {
      const found = await clientWithGrant(deps, credentials.id, credentials.secret, refreshToken);
      if (found !== undefined) return { client: found.app, secretless: false, grant: found.grant };
    } else {
      // What the handler checks after this lookup and before the exchange: the token type, and the DPoP proof (tokenRequestProof).
      const bearer = (params.get('token_type') ?? 'bearer').toLowerCase() === 'bearer' && req.headers.dpop === undefined;
      const found = await clientWithCode(deps, credentials.id, credentials.secret, code as string, bearer ? exchangeParams(params, false, undefined) : undefined);
      if (found !== undefined) return { client: found.app, secretless: false, code: found.code, ...(found.redeemed === undefined ? {} : { redeemed: found.redeemed }) };
    }
  }
  return { client: await requireClient(deps, req, params), secretless: false };
}

/**
 * A client known by its metadata document (auth/client-metadata.ts), by its client_id alone: the
 * row a user's consent made for it. A code exchange also reads its document (from the cache, or
 * fetched again) for the hash its code must match; a refresh does not (its grant stands as a
 * registered application's does). With the documents turned off, such clients get no tokens.
 */
async function documentTokenClient(
  ctx: PageContext,
  req: RequestView,
  params: Map<string, string>,
  id: string,
  grantType: string | undefined,
): Promise<{ client: Application; secretless: true; documentHash?: string; code?: CodeRow }> {
  const documents = ctx.deps.clientDocuments;
  if (documents?.enabled !== true) throw new OAuthError('invalid_client', 'Client not authentified');
  // A code exchange: the client's row and the code in one lookup when they belong together.
  const code = grantType === 'authorization_code' ? params.get('code') : undefined;
  const found = code === undefined ? undefined : await documentClientWithCode(ctx.deps, id, code);
  const app = found?.app ?? (await findAppByClientId(ctx.deps, id));
  if (app === undefined || app.owner_id !== null) throw new OAuthError('invalid_client', 'Client not authentified');
  if (grantType !== 'authorization_code') return { client: app, secretless: true };
  try {
    const documentHash = (await documents.resolve(id)).hash;
    return { client: app, secretless: true, documentHash, ...(found === undefined ? {} : { code: found.code }) };
  } catch (err) {
    if (err instanceof DocumentRefused && err.reason !== 'busy') audit(req.log, 'client_document.refused', { clientId: id, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/token' });
    throw err;
  }
}

/** exchangeCode, with a replayed code (which revoked its grant) in the audit trail. */
async function exchange(
  ctx: PageContext,
  req: RequestView,
  client: Application,
  params: Map<string, string>,
  how: { secretless: boolean; proof: TokenProof | undefined; code: CodeRow | undefined; redeemed: Redeemed | undefined; documentHash: string | undefined },
): Promise<TokenResponse> {
  const request = exchangeParams(params, how.secretless, how.proof);
  request.documentHash = how.documentHash;
  return exchangeCode(ctx.deps, client, request, how.code, how.redeemed).catch((err: unknown) => {
    if (err instanceof DocumentChanged) audit(req.log, 'client_document.refused', { clientId: client.client_id, address: ctx.clientAddress(req), reason: 'changed', via: 'oauth2/token' });
    return auditRevoked(ctx, req, CodeReplayed, 'code_replayed')(err);
  });
}

/** A code exchange's parameters (checkParams made sure of `code` and `redirect_uri`). */
function exchangeParams(params: Map<string, string>, withoutSecret: boolean, proof: TokenProof | undefined): ExchangeParams {
  const request: ExchangeParams = { code: params.get('code') as string, redirectUri: params.get('redirect_uri') as string, codeVerifier: params.get('code_verifier'), withoutSecret };
  if (proof !== undefined) {
    request.dpopJkt = proof.jkt;
    request.rememberProof = proof.remember;
  }
  return request;
}

/**
 * A refresh: with rotation when the application was registered with it. A used refresh token
 * presented again (which ended its grant) and a refresh token bound to another DPoP key go in
 * the audit trail.
 */
async function refresh(
  ctx: PageContext,
  req: RequestView,
  client: Application,
  refreshToken: string,
  proof: TokenProof | undefined,
  grant: Parameters<typeof refreshGrant>[4],
): Promise<TokenResponse> {
  const run =
    client.rotate_refresh === 1
      ? rotateRefresh(ctx.deps, client, refreshToken, proof?.jkt, proof?.remember)
      : refreshGrant(ctx.deps, client, refreshToken, proof?.jkt, grant, proof?.remember);
  return run.catch((err: unknown) => {
    if (err instanceof DpopKeyMismatch) audit(req.log, 'dpop.rejected', { clientId: client.client_id, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/token' });
    return auditRevoked(ctx, req, RefreshReused, 'refresh_reused')(err);
  });
}

/** A rejection handler: an error of `kind` (a grant ended by a replay) is audited, then every error goes on. */
function auditRevoked(ctx: PageContext, req: RequestView, kind: typeof CodeReplayed | typeof RefreshReused, reason: string) {
  return async (err: unknown): Promise<never> => {
    if (err instanceof kind) {
      const user = (await findAccount(ctx.deps, err.accountId))?.name;
      audit(req.log, 'grant.revoked', { user, clientId: err.clientId, address: ctx.clientAddress(req), via: 'oauth2/token', reason });
    }
    throw err;
  };
}

/*
 * The token endpoint's grant types (RFC 6749 §4.1.3 and §6, RFC 8628 §3.4): one file each,
 * each with its handler from the request to the answer, in its RFC's order; shared.ts holds
 * what they share. The token route (routes/oauth/token.ts) and the fast lane (token-lane.ts)
 * both answer through tokenGrant.
 */
import type { AuthContext } from '../context.js';
import type { RequestView } from '../http-util.js';
import { isDocumentClientId } from '../client-metadata.js';
import { OAuthError } from '../errors.js';
import { checkParams } from '../routes/oauth/shared.js';
import * as authorizationCode from './authorization-code.js';
import * as deviceCode from './device-code.js';
import * as refreshToken from './refresh-token.js';
import { documentClient, sendsNoSecret, TOKEN_PARAMETERS, tokenClient, type TokenResponse } from './shared.js';

export { DEVICE_CODE_GRANT } from './device-code.js';

/** The handler of each grant type the token endpoint answers, by `grant_type`. */
const GRANTS = new Map<string, (ctx: AuthContext, req: RequestView) => Promise<TokenResponse>>([
  ['authorization_code', authorizationCode.handler],
  ['refresh_token', refreshToken.handler],
  [deviceCode.DEVICE_CODE_GRANT, deviceCode.handler],
]);

/** The grant types answered (the metadata's `grant_types_supported`, in this order). */
export const GRANT_TYPES: readonly string[] = [...GRANTS.keys()];

/**
 * A POST to the token endpoint whose grant type is `grantType` (the request's first): its
 * answer's body, or the error (an OAuthError, mostly) that is its answer.
 */
export function tokenGrant(ctx: AuthContext, req: RequestView, grantType: string | undefined): Promise<TokenResponse> {
  const handler = grantType === undefined ? undefined : GRANTS.get(grantType);
  return handler === undefined ? unsupported(ctx, req) : handler(ctx, req);
}

const REQUIRED_ALWAYS = new Set(['grant_type']);

/**
 * Any other grant type (or none): the parameters are checked and the client authenticated as
 * for the code and refresh grants (so their errors come first), then `unsupported_grant_type`
 * (RFC 6749 §5.2).
 */
async function unsupported(ctx: AuthContext, req: RequestView): Promise<never> {
  const params = checkParams(req, TOKEN_PARAMETERS, REQUIRED_ALWAYS);
  const id = params.get('client_id');
  if (sendsNoSecret(req, params) && id !== undefined && isDocumentClientId(id)) await documentClient(ctx, id);
  else await tokenClient(ctx, req, params);
  throw new OAuthError('unsupported_grant_type', 'Unsupported grant_type, only authorization_code and refresh_token are supported');
}

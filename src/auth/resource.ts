import type { FastifyRequest } from 'fastify';
import { dpopChallenge } from './dpop.js';
import { OAuthError } from './errors.js';
import { findAccessToken } from './tokens.js';
import { dpopPresented, tokenUseRefusal } from './routes/oauth/dpop.js';
import type { PageContext } from './routes/pages/shared.js';
import { SCOPES } from './scopes.js';

/** A scope a protected resource of sleeve's own may ask for. */
export type ResourceScope = (typeof SCOPES)[number]['name'];

/** Who a valid access token speaks for. */
export interface TokenHolder {
  account: { id: number; name: string };
  clientId: string;
  grantId: number;
}

/** A refusal as RFC 6750 §3 and RFC 9449 §7.1 word it: the status, the error code, a text, and the WWW-Authenticate challenge. */
export interface TokenRefusal {
  status: 400 | 401 | 403 | 503;
  error: 'invalid_token' | 'insufficient_scope' | 'invalid_dpop_proof' | 'invalid_request' | 'temporarily_unavailable';
  description: string;
  challenge: string;
}

const TOKEN_PATTERN = /^bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i;

function refusal(status: TokenRefusal['status'], error: TokenRefusal['error'] | undefined, description: string, scope?: string): TokenRefusal {
  let challenge = 'Bearer realm="sleeve"';
  if (error !== undefined) challenge += `, error="${error}", error_description="${description.replace(/"/g, "'")}"`;
  if (scope !== undefined) challenge += `, scope="${scope}"`;
  return { status, error: error ?? 'invalid_token', description, challenge };
}

/**
 * Checks the access token of a request to one of sleeve's own protected resources (the cover
 * art write API), as userinfo does: the token only in the Authorization header (Bearer, or
 * DPoP with a proof of its key for this request, RFC 9449 §7), found by its grant id and
 * compared with its stored hash in constant time, unexpired on the injected clock, its grant
 * not revoked. No header at all is 401 without an error code (RFC 6750 §3.1); a malformed or
 * unknown, expired or revoked token 401 `invalid_token`; a DPoP-bound token sent as Bearer, or
 * a bearer token sent as DPoP, 401 `invalid_token`, and a missing or refused proof 401
 * `invalid_dpop_proof`, each with the DPoP challenge; a valid token without `scope` 403
 * `insufficient_scope`.
 */
export async function checkAccessToken(ctx: PageContext, req: FastifyRequest, scope: ResourceScope): Promise<TokenHolder | TokenRefusal> {
  const authorization = req.headers.authorization;
  if (authorization === undefined || authorization === '') return refusal(401, undefined, 'An access token is required (Authorization: Bearer …)', scope);
  const dpopToken = dpopPresented(req);
  const token = dpopToken ?? TOKEN_PATTERN.exec(authorization)?.[1];
  if (token === undefined) return refusal(401, 'invalid_token', 'The Authorization header must be "Bearer" and an access token', scope);
  const active = await findAccessToken(ctx.deps, token);
  if (active === undefined) return refusal(401, 'invalid_token', 'The access token is invalid, expired or revoked', scope);
  const path = req.url.split('?')[0] as string;
  const misuse = await tokenUseRefusal(ctx, req, active, token, dpopToken !== undefined, path);
  if (misuse?.error === 'temporarily_unavailable') return { status: 503, error: misuse.error, description: misuse.message, challenge: dpopChallenge() };
  if (misuse !== undefined) {
    return { status: 401, error: misuse.error === 'invalid_dpop_proof' ? 'invalid_dpop_proof' : 'invalid_token', description: misuse.message, challenge: dpopChallenge(misuse) };
  }
  const bit = SCOPES.find((s) => s.name === scope)?.bit ?? 0;
  if ((active.scope & bit) === 0) {
    const lacks = refusal(403, 'insufficient_scope', `The access token lacks the ${scope} scope`, scope);
    return dpopToken === undefined ? lacks : { ...lacks, challenge: `${dpopChallenge(new OAuthError('insufficient_scope', lacks.description, 403))}, scope="${scope}"` };
  }
  return { account: { id: active.account.id, name: active.account.name }, clientId: active.clientId, grantId: active.grantId };
}

export function isRefusal(result: TokenHolder | TokenRefusal): result is TokenRefusal {
  return 'challenge' in result;
}

import { audit, type AuditLogger } from './audit.js';
import type { AuthDeps } from './deps.js';
import { dpopAuthorization, dpopChallenge, DpopRefused, proofHeader, verifyProof } from './dpop.js';
import { OAuthError } from './errors.js';
import { findAccessToken, type ActiveToken } from './grants.js';
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
  status: 400 | 401 | 403;
  error: 'invalid_token' | 'insufficient_scope' | 'invalid_dpop_proof' | 'invalid_request';
  description: string;
  challenge: string;
}

/** The parts of a request to a protected resource that decide whether its token may be used. */
export interface ResourceRequest {
  headers: Record<string, string | string[] | undefined>;
  method: string;
  /** The request's path under the public URL (deps.authUrl), without its query: a DPoP proof's htu. */
  path: string;
  /** For the audit line of a refused DPoP proof. */
  log: AuditLogger;
  address: string;
}

const TOKEN_PATTERN = /^bearer\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i;

function refusal(status: TokenRefusal['status'], error: TokenRefusal['error'] | undefined, description: string, scope?: string): TokenRefusal {
  let challenge = 'Bearer realm="sleeve"';
  if (error !== undefined) challenge += `, error="${error}", error_description="${description.replace(/"/g, "'")}"`;
  if (scope !== undefined) challenge += `, scope="${scope}"`;
  return { status, error: error ?? 'invalid_token', description, challenge };
}

function dpopRefusal(err: OAuthError): TokenRefusal {
  return { status: 401, error: err.error as TokenRefusal['error'], description: err.message, challenge: dpopChallenge(err) };
}

/**
 * Checks the access token of a request to one of sleeve's own protected resources (the cover
 * art write API), as userinfo does: the token only in the Authorization header, found by its
 * grant id and compared with its stored hash in constant time, unexpired on the injected
 * clock, its grant not revoked. A bearer token comes as `Bearer`; a DPoP-bound one (RFC 9449)
 * only as `DPoP` with a proof of its key for this method and URL carrying its hash (`ath`),
 * never seen before. No header at all is 401 without an error code (RFC 6750 §3.1); a
 * malformed or unknown, expired or revoked token 401 `invalid_token`; a bound token sent as
 * Bearer, or a bearer one as DPoP, 401 `invalid_token`; a bad proof 401 `invalid_dpop_proof`
 * (with the DPoP challenge and an audit line); a valid token without `scope` 403 `insufficient_scope`.
 */
export async function checkAccessToken(deps: AuthDeps, req: ResourceRequest, scope: ResourceScope): Promise<TokenHolder | TokenRefusal> {
  const authorization = req.headers.authorization;
  if (authorization === undefined || authorization === '' || Array.isArray(authorization)) {
    return refusal(401, undefined, 'An access token is required (Authorization: Bearer …, or DPoP … with a DPoP proof)', scope);
  }
  const dpopToken = dpopAuthorization(authorization);
  const bearer = dpopToken === undefined ? TOKEN_PATTERN.exec(authorization)?.[1] : undefined;
  const token = dpopToken ?? bearer;
  if (token === undefined) return refusal(401, 'invalid_token', 'The Authorization header must be "Bearer" or "DPoP" and an access token', scope);
  const active = await findAccessToken(deps, token);
  if (active === undefined) {
    const err = new OAuthError('invalid_token', 'The access token is invalid, expired or revoked', 401);
    return dpopToken === undefined ? refusal(401, 'invalid_token', err.message, scope) : dpopRefusal(err);
  }
  const misuse = await dpopMisuse(deps, req, active, token, dpopToken !== undefined);
  if (misuse !== undefined) return dpopRefusal(misuse);
  const bit = SCOPES.find((s) => s.name === scope)?.bit ?? 0;
  if ((active.scope & bit) === 0) {
    const lacks = refusal(403, 'insufficient_scope', `The access token lacks the ${scope} scope`, scope);
    return dpopToken === undefined ? lacks : { ...lacks, challenge: `${dpopChallenge(new OAuthError('insufficient_scope', lacks.description, 403))}, scope="${scope}"` };
  }
  return { account: { id: active.account.id, name: active.account.name }, clientId: active.clientId, grantId: active.grantId };
}

/** Why this use of the token is refused (RFC 9449 §7.1), as userinfo refuses it; undefined when it may be used. */
async function dpopMisuse(deps: AuthDeps, req: ResourceRequest, active: ActiveToken, token: string, viaDpop: boolean): Promise<OAuthError | undefined> {
  const via = req.path.replace(/^\/+/, '');
  if (active.dpopJkt === null) return viaDpop ? new OAuthError('invalid_token', 'The access token is not DPoP-bound: send it as a Bearer token', 401) : undefined;
  if (!viaDpop) {
    audit(req.log, 'dpop.rejected', { clientId: active.clientId, address: req.address, reason: 'bound_token_as_bearer', via });
    return new OAuthError('invalid_token', 'The access token is DPoP-bound: send it with Authorization: DPoP and a DPoP proof', 401);
  }
  try {
    const proof = proofHeader(req.headers, 401);
    if (proof === undefined) throw new DpopRefused('missing', 'A DPoP proof is required with a DPoP-bound access token', 401);
    const jkt = await verifyProof(deps, proof, { method: req.method, path: req.path, accessToken: token }, 401);
    if (jkt !== active.dpopJkt) throw new DpopRefused('wrong_key', 'The DPoP proof is signed with another key than the access token is bound to', 401);
    return undefined;
  } catch (err) {
    if (!(err instanceof DpopRefused)) throw err;
    audit(req.log, err.reason === 'replayed' ? 'dpop.replayed' : 'dpop.rejected', { clientId: active.clientId, address: req.address, reason: err.reason, via });
    return err;
  }
}

export function isRefusal(result: TokenHolder | TokenRefusal): result is TokenRefusal {
  return 'challenge' in result;
}

import type { FastifyRequest } from 'fastify';
import type { Application } from '../../applications.js';
import { audit } from '../../audit.js';
import type { AuthContext } from '../../context.js';
import { dpopAuthorization, DpopRefused, proofHeader, rememberProof, ReplayStoreFull, verifyProof } from '../../dpop.js';
import { OAuthError } from '../../errors.js';
import type { RequestView } from '../../http-util.js';
import type { ActiveToken } from '../../tokens.js';

/*
 * DPoP (RFC 9449) at the endpoints: the token endpoint's proof, which binds the tokens it issues,
 * and the proof that must come with a DPoP-bound access token. Each refusal is an audit line.
 */

/** Logs a refused proof (`dpop.replayed` for a jti seen before; reason `store_full` when there was no room to remember it) and passes the error on. */
function auditRefusal(ctx: AuthContext, req: RequestView, err: unknown, clientId: string | undefined, via: string): void {
  if (err instanceof ReplayStoreFull) audit(req.log, 'dpop.rejected', { clientId, address: ctx.clientAddress(req), reason: 'store_full', via });
  if (!(err instanceof DpopRefused)) return;
  audit(req.log, err.reason === 'replayed' ? 'dpop.replayed' : 'dpop.rejected', { clientId, address: ctx.clientAddress(req), reason: err.reason, via });
}

/**
 * A token request's checked DPoP proof: the key (its thumbprint) the answer is bound to, and
 * `remember`, which the grant calls once the request proved valid (the client authenticated,
 * the code, refresh token or device code its own and usable) and before anything is issued:
 * it refuses a replayed proof, or 503 when the replay store is full (auth/replay-store.ts).
 */
export interface TokenProof {
  jkt: string;
  remember(): Promise<void>;
}

/**
 * The token request's DPoP proof, checked, or undefined without one. An application that
 * requires DPoP is refused without one.
 */
export async function tokenRequestProof(ctx: AuthContext, req: RequestView, client: Application): Promise<TokenProof | undefined> {
  try {
    const proof = proofHeader(req.headers);
    if (proof === undefined) {
      if (client.require_dpop !== 1) return undefined;
      // A missing proof is a missing parameter (RFC 6749's invalid_request), as a missing code_verifier is.
      audit(req.log, 'dpop.rejected', { clientId: client.client_id, address: ctx.clientAddress(req), reason: 'required', via: 'oauth2/token' });
      throw new OAuthError('invalid_request', 'This application must send a DPoP proof with each token request');
    }
    const checked = await verifyProof(ctx.deps, proof, { method: req.method, path: '/oauth2/token' });
    const remember = () =>
      rememberProof(ctx.deps, checked, client.client_id).catch((err: unknown) => {
        auditRefusal(ctx, req, err, client.client_id, 'oauth2/token');
        throw err;
      });
    return { jkt: checked.jkt, remember };
  } catch (err) {
    auditRefusal(ctx, req, err, client.client_id, 'oauth2/token');
    throw err;
  }
}

/** How the access token came: `Authorization: DPoP`, or any bearer way. */
export function dpopPresented(req: FastifyRequest): string | undefined {
  return dpopAuthorization(req.headers.authorization);
}

/**
 * Why a resource refuses this use of an access token, or undefined when it may be used: a
 * DPoP-bound token must come as `Authorization: DPoP` with a proof of its key for this request
 * (with `ath`); a bearer token must not come with the DPoP scheme. Errors are 401 (RFC 9449 §7.1),
 * or 503 `temporarily_unavailable` (with Retry-After) when the replay store is full.
 */
export async function tokenUseRefusal(ctx: AuthContext, req: FastifyRequest, active: ActiveToken, token: string, viaDpop: boolean, path: string): Promise<OAuthError | undefined> {
  if (active.dpopJkt === null) {
    return viaDpop ? new OAuthError('invalid_token', 'The access token is not DPoP-bound: send it as a Bearer token', 401) : undefined;
  }
  if (!viaDpop) {
    audit(req.log, 'dpop.rejected', { clientId: active.clientId, address: ctx.clientAddress(req), reason: 'bound_token_as_bearer', via: path.slice(1) });
    return new OAuthError('invalid_token', 'The access token is DPoP-bound: send it with Authorization: DPoP and a DPoP proof', 401);
  }
  try {
    const proof = proofHeader(req.headers, 401);
    if (proof === undefined) throw new DpopRefused('missing', 'A DPoP proof is required with a DPoP-bound access token', 401);
    const checked = await verifyProof(ctx.deps, proof, { method: req.method, path, accessToken: token }, 401);
    if (checked.jkt !== active.dpopJkt) throw new DpopRefused('wrong_key', 'The DPoP proof is signed with another key than the access token is bound to', 401);
    // The access token is valid and the proof its key's: only now is its jti remembered.
    await rememberProof(ctx.deps, checked, active.clientId, 401);
    return undefined;
  } catch (err) {
    auditRefusal(ctx, req, err, active.clientId, path.slice(1));
    if (err instanceof OAuthError) return err;
    throw err;
  }
}

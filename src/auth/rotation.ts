import { createHmac } from 'node:crypto';
import type { AuthDeps } from './deps.js';
import type { Application } from './applications.js';
import { tokenHash } from './crypto.js';
import { OAuthError } from './errors.js';
import { DpopKeyMismatch, GrantEndedByReuse, grantIdOf, revokeGrant, tokenMatches, type TokenResponse } from './grants.js';

/*
 * Refresh token rotation, for applications registered with it (docs/decisions.md, "Refresh
 * token rotation"). Each refresh ends the presented refresh token and gives a new one, and
 * a new access token. A refresh token that was already used, presented again:
 *
 * - within the grace window (SLEEVE_REFRESH_GRACE_SECONDS) of its first use, and while what
 *   that use gave is still the grant's current pair, gets the same answer again: the same
 *   refresh token and the same access token (a client racing itself stays signed in);
 * - otherwise ends the whole grant (reuse detection) and is answered invalid_grant.
 *
 * Only hashes are stored. The answer to a refresh token can be given twice because it is
 * derived from that token: HMAC-SHA256 keyed by the presented refresh token, so only its
 * holder can compute it, and the server only checks the result against the stored hashes.
 */

/** How long the hashes of used refresh tokens are kept (a token older than this is just unknown). */
const USED_RETENTION_MS = 90 * 24 * 3600 * 1000;

/** The refresh or access token that follows `token` (same `{grant id}.{43 characters}` form as every grant token). */
function successor(token: string, grantId: number, purpose: 'refresh' | 'access'): string {
  const mac = createHmac('sha256', token).update(`sleeve refresh token rotation: ${purpose}`).digest('base64url');
  return `${grantId.toString(36)}.${mac}`;
}

/** A used refresh token presented again outside the grace window: its grant was ended (`invalid_grant`), for the audit trail. */
export class RefreshReused extends GrantEndedByReuse {
  constructor(accountId: number, clientId: string) {
    super('Invalid refresh token', accountId, clientId);
  }
}

function grantRow(deps: AuthDeps, id: number) {
  return deps.db
    .selectFrom('oauth_grant')
    .select(['id', 'account_id', 'application_id', 'refresh_hash', 'access_hash', 'access_expires_at', 'revoked_at', 'scope_text', 'refresh_jkt', 'access_jkt'])
    .where('id', '=', id)
    .executeTakeFirst();
}

/**
 * `grant_type=refresh_token` for an application with rotation. With `dpopJkt` (the request's
 * DPoP proof) the new access token is bound to that key; a refresh token bound to a key (a
 * public application's, RFC 9449 §5) stays bound through every rotation, and is refused
 * without a proof of that key before anything changes.
 */
export async function rotateRefresh(deps: AuthDeps, app: Application, refreshToken: string, dpopJkt?: string): Promise<TokenResponse> {
  const invalid = () => new OAuthError('invalid_grant', 'Invalid refresh token');
  const id = grantIdOf(refreshToken);
  const grant = id === undefined ? undefined : await grantRow(deps, id);
  if (id === undefined || grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null) throw invalid();
  if (grant.refresh_jkt !== null && grant.refresh_jkt !== dpopJkt) throw new DpopKeyMismatch(dpopJkt === undefined ? 'no_proof' : 'wrong_key');
  const next = successor(refreshToken, id, 'refresh');
  const access = successor(refreshToken, id, 'access');
  const now = deps.clock.now();
  const answer = (expiresAt: number): TokenResponse => {
    const body: TokenResponse = { access_token: access, token_type: dpopJkt === undefined ? 'Bearer' : 'DPoP', expires_in: Math.max(1, Math.ceil((expiresAt - now) / 1000)), refresh_token: next };
    if (grant.scope_text !== null) body.scope = grant.scope_text;
    return body;
  };

  if (tokenMatches(refreshToken, grant.refresh_hash)) {
    // Its first use: the new pair replaces it, and its hash is kept as used, in one transaction. The
    // UPDATE names the current hash, so of concurrent first uses one wins (PostgreSQL: the others wait
    // on the row lock, then find the hash changed) and the others take the path below.
    const expiresAt = now + deps.accessTokenTtl * 1000;
    const won = await deps.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('oauth_grant')
        .set({ refresh_hash: tokenHash(next), access_hash: tokenHash(access), access_created_at: now, access_expires_at: expiresAt, access_jkt: dpopJkt ?? null })
        .where('id', '=', id)
        .where('refresh_hash', '=', grant.refresh_hash as string)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) !== 1) return false;
      await trx.insertInto('oauth_refresh_used').values({ token_hash: tokenHash(refreshToken), grant_id: id, used_at: now }).execute();
      await trx.deleteFrom('oauth_refresh_used').where('grant_id', '=', id).where('used_at', '<', now - USED_RETENTION_MS).execute();
      return true;
    });
    if (won) return answer(expiresAt);
  }
  return usedAgain(deps, app, refreshToken, { id, now, dpopJkt }, answer);
}

/** A refresh token presented after its first use: the same answer within the grace window, else the grant ends. */
async function usedAgain(
  deps: AuthDeps,
  app: Application,
  refreshToken: string,
  { id, now, dpopJkt }: { id: number; now: number; dpopJkt: string | undefined },
  answer: (expiresAt: number) => TokenResponse,
): Promise<TokenResponse> {
  const used = await deps.db.selectFrom('oauth_refresh_used').select('used_at').where('token_hash', '=', tokenHash(refreshToken)).where('grant_id', '=', id).executeTakeFirst();
  // Never a refresh token of this grant (or one used too long ago to be remembered).
  if (used === undefined) throw new OAuthError('invalid_grant', 'Invalid refresh token');
  const grant = await grantRow(deps, id);
  if (grant === undefined || grant.revoked_at !== null) throw new OAuthError('invalid_grant', 'Invalid refresh token');
  const inGrace = now - used.used_at <= deps.refreshGraceSeconds * 1000;
  const stillCurrent =
    tokenMatches(successor(refreshToken, id, 'refresh'), grant.refresh_hash) &&
    tokenMatches(successor(refreshToken, id, 'access'), grant.access_hash) &&
    grant.access_expires_at !== null &&
    grant.access_expires_at > now &&
    // The same answer is an access token bound to the same key (or to none).
    (grant.access_jkt ?? undefined) === dpopJkt;
  if (inGrace && stillCurrent) return answer(grant.access_expires_at as number);
  await revokeGrant(deps, id);
  throw new RefreshReused(grant.account_id, app.client_id);
}

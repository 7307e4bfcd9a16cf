import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { AuthDeps } from './deps.js';
import type { Application } from './applications.js';
import { tokenHash } from './crypto.js';
import { OAuthError } from './errors.js';
import { DpopKeyMismatch, GrantEndedByReuse, grantIdOf, grantToken, revokeGrant, tokenMatches, type TokenResponse } from './grants.js';

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
 * Every token is 256 bits from the CSPRNG (grants.ts grantToken), related to no other token;
 * the grant keeps only their hashes. So that a second use can be answered again, the row that
 * marks a refresh token used also keeps, for the grace window only, the pair its first use gave,
 * sealed with AES-256-GCM under that refresh token's own 32 random bytes: neither the database
 * alone nor the old token alone opens it, and the seal stores the pair, it does not make it.
 */

/** How long the hashes of used refresh tokens are kept (a token older than this is just unknown). */
const USED_RETENTION_MS = 90 * 24 * 3600 * 1000;

interface Pair {
  refresh: string;
  access: string;
}

/** The AES-256-GCM key of a refresh token's sealed successor: the token's own 32 random bytes (after `{grant id}.`). */
function sealKey(refreshToken: string): Buffer {
  return Buffer.from(refreshToken.slice(refreshToken.indexOf('.') + 1), 'base64url');
}

/** The additional data of a seal: which grant's pair it is. */
const sealAad = (grantId: number) => Buffer.from(`sleeve refresh successor of grant ${grantId}`);

/** `pair`, sealed under `refreshToken` (a random 96-bit IV each time): `{iv}.{ciphertext}.{tag}`, base64url. */
function seal(refreshToken: string, grantId: number, pair: Pair): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', sealKey(refreshToken), iv).setAAD(sealAad(grantId));
  const sealed = Buffer.concat([cipher.update(`${pair.refresh} ${pair.access}`, 'utf8'), cipher.final()]);
  return [iv, sealed, cipher.getAuthTag()].map((b) => b.toString('base64url')).join('.');
}

/** The pair sealed under `refreshToken`, or undefined when it cannot be opened with it. */
function open(refreshToken: string, grantId: number, sealed: string): Pair | undefined {
  const [iv, data, tag] = sealed.split('.').map((p) => Buffer.from(p, 'base64url'));
  if (iv === undefined || data === undefined || tag?.length !== 16) return undefined;
  try {
    const decipher = createDecipheriv('aes-256-gcm', sealKey(refreshToken), iv).setAAD(sealAad(grantId)).setAuthTag(tag);
    const [refresh, access] = Buffer.concat([decipher.update(data), decipher.final()]).toString('utf8').split(' ');
    return refresh === undefined || access === undefined ? undefined : { refresh, access };
  } catch {
    return undefined;
  }
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
 * without a proof of that key before anything changes. `rememberProof` runs once the refresh
 * token proved to be one of the grant's, before anything changes.
 */
export async function rotateRefresh(deps: AuthDeps, app: Application, refreshToken: string, dpopJkt?: string, rememberProof?: () => Promise<void>): Promise<TokenResponse> {
  const invalid = () => new OAuthError('invalid_grant', 'Invalid refresh token');
  const id = grantIdOf(refreshToken);
  const grant = id === undefined ? undefined : await grantRow(deps, id);
  if (id === undefined || grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null) throw invalid();
  if (grant.refresh_jkt !== null && grant.refresh_jkt !== dpopJkt) throw new DpopKeyMismatch(dpopJkt === undefined ? 'no_proof' : 'wrong_key');
  const now = deps.clock.now();
  const answer = (pair: Pair, expiresAt: number): TokenResponse => {
    const body: TokenResponse = { access_token: pair.access, token_type: dpopJkt === undefined ? 'Bearer' : 'DPoP', expires_in: Math.max(1, Math.ceil((expiresAt - now) / 1000)), refresh_token: pair.refresh };
    if (grant.scope_text !== null) body.scope = grant.scope_text;
    return body;
  };

  const current = tokenMatches(refreshToken, grant.refresh_hash);
  if (current) {
    await rememberProof?.();
    // Its first use: a fresh random pair replaces it, and its hash is kept as used (with the pair
    // sealed under it), in one transaction. The UPDATE names the current hash, so of concurrent
    // first uses one wins (PostgreSQL: the others wait on the row lock, then find the hash
    // changed) and the others take the path below, where the winner's sealed pair answers them.
    const next = grantToken(id);
    const access = grantToken(id);
    const expiresAt = now + deps.accessTokenTtl * 1000;
    const won = await deps.db.transaction().execute(async (trx) => {
      const r = await trx
        .updateTable('oauth_grant')
        .set({ refresh_hash: next.hash, access_hash: access.hash, access_created_at: now, access_expires_at: expiresAt, access_jkt: dpopJkt ?? null })
        .where('id', '=', id)
        .where('refresh_hash', '=', grant.refresh_hash as string)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
      if (Number(r.numUpdatedRows) !== 1) return false;
      // The pairs sealed for earlier refresh tokens of this grant are no longer current: gone.
      await trx.updateTable('oauth_refresh_used').set({ successor_sealed: null }).where('grant_id', '=', id).where('successor_sealed', 'is not', null).execute();
      const sealed = seal(refreshToken, id, { refresh: next.token, access: access.token });
      await trx.insertInto('oauth_refresh_used').values({ token_hash: tokenHash(refreshToken), grant_id: id, used_at: now, successor_sealed: sealed }).execute();
      await trx.deleteFrom('oauth_refresh_used').where('grant_id', '=', id).where('used_at', '<', now - USED_RETENTION_MS).execute();
      return true;
    });
    if (won) return answer({ refresh: next.token, access: access.token }, expiresAt);
  }
  // A first use that lost a race has had its proof remembered already.
  return usedAgain(deps, app, refreshToken, { id, now, dpopJkt, rememberProof: current ? undefined : rememberProof }, answer);
}

/** A refresh token presented after its first use: the same answer within the grace window, else the grant ends. */
async function usedAgain(
  deps: AuthDeps,
  app: Application,
  refreshToken: string,
  { id, now, dpopJkt, rememberProof }: { id: number; now: number; dpopJkt: string | undefined; rememberProof: (() => Promise<void>) | undefined },
  answer: (pair: Pair, expiresAt: number) => TokenResponse,
): Promise<TokenResponse> {
  const hash = tokenHash(refreshToken);
  const used = await deps.db.selectFrom('oauth_refresh_used').select(['used_at', 'successor_sealed']).where('token_hash', '=', hash).where('grant_id', '=', id).executeTakeFirst();
  // Never a refresh token of this grant (or one used too long ago to be remembered).
  if (used === undefined) throw new OAuthError('invalid_grant', 'Invalid refresh token');
  const grant = await grantRow(deps, id);
  if (grant === undefined || grant.revoked_at !== null) throw new OAuthError('invalid_grant', 'Invalid refresh token');
  await rememberProof?.();
  const inGrace = now - used.used_at <= deps.refreshGraceSeconds * 1000;
  // Opened only within the window (after it the seal is ignored, and cleared below).
  const pair = inGrace && used.successor_sealed !== null ? open(refreshToken, id, used.successor_sealed) : undefined;
  const stillCurrent =
    pair !== undefined &&
    tokenMatches(pair.refresh, grant.refresh_hash) &&
    tokenMatches(pair.access, grant.access_hash) &&
    grant.access_expires_at !== null &&
    grant.access_expires_at > now &&
    // The same answer is an access token bound to the same key (or to none).
    (grant.access_jkt ?? undefined) === dpopJkt;
  if (stillCurrent) return answer(pair, grant.access_expires_at as number);
  await deps.db.transaction().execute(async (trx) => {
    await revokeGrant(deps, id, trx);
    await trx.updateTable('oauth_refresh_used').set({ successor_sealed: null }).where('grant_id', '=', id).where('successor_sealed', 'is not', null).execute();
  });
  throw new RefreshReused(grant.account_id, app.client_id);
}

/*
 * `grant_type=refresh_token`: refreshing an access token (RFC 6749 §6), with the tokens bound to
 * a DPoP key (RFC 9449 §5) and, for applications registered with it, refresh token rotation
 * with reuse detection (RFC 9700 §4.14.2; docs/decisions.md, "Refresh token rotation").
 *
 * §6 in its order (handler): the request's parameters (`refresh_token`); the client
 * authenticated (§3.2.1), and the refresh token issued to it; the refresh token valid (its
 * grant not ended) and, when it is bound to a DPoP key, presented with a proof of that key
 * (RFC 9449 §5); then a new access token (the grant's previous one ends). The refresh token
 * stays (§6 allows the same one), or, with rotation, is replaced (rotateRefresh).
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { preparedQuery } from '../../db/prepared.js';
import { APP_COLUMNS, type Application } from '../applications.js';
import { audit } from '../audit.js';
import { isDocumentClientId } from '../client-metadata.js';
import type { AuthContext } from '../context.js';
import { constantTimeEqual, tokenHash } from '../crypto.js';
import type { AuthDeps } from '../deps.js';
import { OAuthError } from '../errors.js';
import type { RequestView } from '../http-util.js';
import { tokenRequestProof, type TokenProof } from '../routes/oauth/dpop.js';
import { checkParams } from '../routes/oauth/shared.js';
import {
  auditReuse,
  documentClient,
  GrantEndedByReuse,
  grantById,
  grantIdOf,
  type GrantRow,
  grantToken,
  lookupForWrite,
  onlyBearer,
  revokeGrant,
  sendsNoSecret,
  TOKEN_PARAMETERS,
  tokenClient,
  type TokenClient,
  tokenMatches,
  type TokenResponse,
} from './shared.js';

/** §6: `refresh_token` is required (`scope`, which may narrow the grant, is not taken: the interface has none). */
const REQUIRED = new Set(['grant_type', 'refresh_token']);

/**
 * The token endpoint's answer to `grant_type=refresh_token`: the request's parameters, its
 * client, the token type asked for, its DPoP proof, then the refresh itself, with rotation when
 * the application was registered with it. A used refresh token presented again (which ended its
 * grant) and a refresh token bound to another DPoP key go in the audit trail.
 */
export async function handler(ctx: AuthContext, req: RequestView): Promise<TokenResponse> {
  const params = checkParams(req, TOKEN_PARAMETERS, REQUIRED);
  const refreshToken = params.get('refresh_token') as string;
  const { client, grant } = await refreshClient(ctx, req, params, refreshToken);
  onlyBearer(params);
  const proof: TokenProof | undefined = await tokenRequestProof(ctx, req, client);
  const run =
    client.rotate_refresh === 1
      ? rotateRefresh(ctx.deps, client, refreshToken, proof?.jkt, proof?.remember)
      : refreshGrant(ctx.deps, client, refreshToken, proof?.jkt, grant, proof?.remember);
  return run.catch((err: unknown) => {
    if (err instanceof DpopKeyMismatch) audit(req.log, 'dpop.rejected', { clientId: client.client_id, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/token' });
    return auditReuse(ctx, req, RefreshReused, 'refresh_reused')(err);
  });
}

/**
 * The client of a refresh (§3.2.1), with the refresh token's grant in the same lookup when they
 * belong together. A client known by its metadata document, by its client_id alone: its grant
 * stands as a registered application's does (its document is not read again).
 */
async function refreshClient(ctx: AuthContext, req: RequestView, params: Map<string, string>, refreshToken: string): Promise<TokenClient & { grant?: GrantRow }> {
  const id = params.get('client_id');
  if (sendsNoSecret(req, params) && id !== undefined && isDocumentClientId(id)) return { client: await documentClient(ctx, id), secretless: true };
  return tokenClient<TokenClient & { grant: GrantRow }>(ctx, req, params, async (clientId, secret) => {
    const found = await clientWithGrant(ctx.deps, clientId, secret, refreshToken);
    return found === undefined ? undefined : { client: found.app, secretless: false, grant: found.grant };
  });
}

/** A refresh token's grant with its application (and the application's secret hash), when the application is `clientId`: one lookup by primary key. */
const grantWithClient = preparedQuery(['id', 'clientId'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select([
      'g.id as grant_id',
      'g.account_id as grant_account_id',
      'g.offline as grant_offline',
      'g.refresh_hash as grant_refresh_hash',
      'g.access_hash as grant_access_hash',
      'g.revoked_at as grant_revoked_at',
      'g.scope_text as grant_scope_text',
      'g.refresh_jkt as grant_refresh_jkt',
      ...APP_COLUMNS.map((c) => `a.${c}` as const),
      'a.secret_hash',
    ])
    .where('g.id', '=', p.id)
    .where('a.client_id', '=', p.clientId),
);

/**
 * A refresh request's client and grant in one lookup (docs/decisions.md, "Token endpoint CPU"):
 * when the refresh token names a grant of the client `clientId` and `secret` is that client's
 * secret. Otherwise undefined, and the caller authenticates the client as usual (whose
 * answers, invalid_client first, are the ones given).
 */
async function clientWithGrant(deps: AuthDeps, clientId: string, secret: string, refreshToken: string): Promise<{ app: Application; grant: GrantRow } | undefined> {
  const id = grantIdOf(refreshToken);
  if (id === undefined || clientId.length > 200 || secret.length > 200) return undefined;
  const row = (await lookupForWrite(deps, (db) => grantWithClient(db, { id, clientId }))).rows[0];
  const candidate = tokenHash(secret);
  if (row === undefined || !constantTimeEqual(candidate, row.secret_hash)) return undefined;
  const { grant_id, grant_account_id, grant_offline, grant_refresh_hash, grant_access_hash, grant_revoked_at, grant_scope_text, grant_refresh_jkt, secret_hash: _omit, ...app } = row;
  const grant: GrantRow = {
    id: grant_id,
    account_id: grant_account_id,
    application_id: app.id,
    offline: grant_offline,
    refresh_hash: grant_refresh_hash,
    access_hash: grant_access_hash,
    revoked_at: grant_revoked_at,
    scope_text: grant_scope_text,
    refresh_jkt: grant_refresh_jkt,
  };
  return { app, grant };
}

/** Replaces a grant's access token, unless the grant ended or its refresh token changed meanwhile. */
const replaceAccessToken = preparedQuery(['id', 'hash', 'createdAt', 'expiresAt', 'refresh', 'jkt'] as const, (db, p) =>
  db
    .updateTable('oauth_grant')
    .set({ access_hash: p.hash, access_created_at: p.createdAt, access_expires_at: p.expiresAt, access_jkt: p.jkt })
    .where('id', '=', p.id)
    .where('refresh_hash', '=', p.refresh)
    .where('revoked_at', 'is', null),
);

/** A DPoP-bound refresh token presented without a proof, or with a proof of another key (RFC 9449 §5): for the audit trail. */
class DpopKeyMismatch extends OAuthError {
  readonly reason: 'no_proof' | 'wrong_key';
  constructor(reason: 'no_proof' | 'wrong_key') {
    super('invalid_grant', reason === 'no_proof' ? 'The refresh token is DPoP-bound: send a DPoP proof of its key' : 'The refresh token is bound to another DPoP key');
    this.reason = reason;
  }
}

/**
 * A refresh without rotation (§6): a new access token (the grant's previous one ends); the
 * refresh token stays. With `dpopJkt` (the request's DPoP proof) the new access token is bound to that
 * key; a DPoP-bound refresh token needs a proof of its own key. `rememberProof` runs once the
 * refresh token proved valid, before the new access token is stored.
 */
async function refreshGrant(deps: AuthDeps, app: Application, refreshToken: string, dpopJkt?: string, read?: GrantRow, rememberProof?: () => Promise<void>): Promise<TokenResponse> {
  const invalid = () => new OAuthError('invalid_grant', 'Invalid refresh token');
  const id = grantIdOf(refreshToken);
  // `read`: the grant as clientWithGrant read it for this request (its update below checks it is still so).
  const grant = id === undefined ? undefined : read?.id === id ? read : (await grantById(deps.db, { id })).rows[0];
  if (grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null || !tokenMatches(refreshToken, grant.refresh_hash)) throw invalid();
  if (grant.refresh_jkt !== null && grant.refresh_jkt !== dpopJkt) throw new DpopKeyMismatch(dpopJkt === undefined ? 'no_proof' : 'wrong_key');
  await rememberProof?.();
  const access = grantToken(grant.id);
  const now = deps.clock.now();
  const values = { id: grant.id, hash: access.hash, createdAt: now, expiresAt: now + deps.accessTokenTtl * 1000, refresh: grant.refresh_hash, jkt: dpopJkt ?? null };
  const result = deps.writes === undefined ? await replaceAccessToken(deps.db, values) : await deps.writes.run((trx) => replaceAccessToken(trx, values));
  if (result.numAffectedRows !== 1n) throw invalid();
  const body: TokenResponse = { access_token: access.token, token_type: dpopJkt === undefined ? 'Bearer' : 'DPoP', expires_in: deps.accessTokenTtl, refresh_token: refreshToken };
  if (grant.scope_text !== null) body.scope = grant.scope_text;
  return body;
}

/*
 * Refresh token rotation (RFC 9700 §4.14.2), for applications registered with it (docs/decisions.md, "Refresh
 * token rotation"). Each refresh ends the presented refresh token and gives a new one, and
 * a new access token. A refresh token that was already used, presented again:
 *
 * - within the grace window (SLEEVE_REFRESH_GRACE_SECONDS) of its first use, and while what
 *   that use gave is still the grant's current pair, gets the same answer again: the same
 *   refresh token and the same access token (a client racing itself stays signed in);
 * - otherwise ends the whole grant (reuse detection) and is answered invalid_grant.
 *
 * Every token is 256 bits from the CSPRNG (shared.ts grantToken), related to no other token;
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
class RefreshReused extends GrantEndedByReuse {
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
 * A refresh for an application with rotation. With `dpopJkt` (the request's
 * DPoP proof) the new access token is bound to that key; a refresh token bound to a key (a
 * public application's, RFC 9449 §5) stays bound through every rotation, and is refused
 * without a proof of that key before anything changes. `rememberProof` runs once the refresh
 * token proved to be one of the grant's, before anything changes.
 */
async function rotateRefresh(deps: AuthDeps, app: Application, refreshToken: string, dpopJkt?: string, rememberProof?: () => Promise<void>): Promise<TokenResponse> {
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

import type { Account, AuthDeps } from './accounts.js';
import { redirectUriAllowed, type Application } from './applications.js';
import { constantTimeEqual, randomToken, s256, tokenHash } from './crypto.js';
import { OAuthError } from './errors.js';
import { scopeNames } from './scopes.js';

export interface CodeRequest {
  account: Account;
  app: Application;
  scope: number;
  offline: boolean;
  redirectUri: string;
  codeChallenge: string | undefined;
  codeChallengeMethod: 'plain' | 'S256' | undefined;
}

/** Issues a single-use authorization code bound to client, user, scope and redirect URI. */
export async function issueCode(deps: AuthDeps, req: CodeRequest): Promise<string> {
  const code = randomToken();
  const now = deps.clock.now();
  await deps.db
    .insertInto('oauth_code')
    .values({
      code_hash: tokenHash(code),
      account_id: req.account.id,
      application_id: req.app.id,
      scope: req.scope,
      offline: req.offline ? 1 : 0,
      redirect_uri: req.redirectUri,
      code_challenge: req.codeChallenge ?? null,
      code_challenge_method: req.codeChallenge === undefined ? null : (req.codeChallengeMethod ?? 'plain'),
      expires_at: now + deps.authCodeTtl * 1000,
      used_at: null,
      grant_id: null,
    })
    .execute();
  // Codes are short-lived; old ones only matter for reuse detection within their life.
  await deps.db.deleteFrom('oauth_code').where('expires_at', '<', now - 24 * 3600 * 1000).execute();
  return code;
}

/**
 * Whether the user already granted this application exactly these scopes (and offline
 * access, when asked for) in a grant that is still active: then consent is not asked again.
 */
export async function hasActiveGrant(deps: AuthDeps, accountId: number, appId: number, scope: number, offline: boolean): Promise<boolean> {
  let q = deps.db
    .selectFrom('oauth_grant')
    .select('id')
    .where('account_id', '=', accountId)
    .where('application_id', '=', appId)
    .where('scope', '=', scope)
    .where('revoked_at', 'is', null);
  if (offline) q = q.where('refresh_hash', 'is not', null);
  return (await q.limit(1).executeTakeFirst()) !== undefined;
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token?: string;
}

async function newAccessToken(deps: AuthDeps, grantId: number, db = deps.db): Promise<{ token: string; expiresIn: number }> {
  const token = randomToken();
  const now = deps.clock.now();
  await db
    .insertInto('oauth_access_token')
    .values({ token_hash: tokenHash(token), grant_id: grantId, created_at: now, expires_at: now + deps.accessTokenTtl * 1000 })
    .execute();
  return { token, expiresIn: deps.accessTokenTtl };
}

/** Ends a grant: its refresh token and every access token stop working. */
async function revokeGrant(deps: AuthDeps, grantId: number, db = deps.db): Promise<void> {
  await db.updateTable('oauth_grant').set({ revoked_at: deps.clock.now(), refresh_hash: null }).where('id', '=', grantId).execute();
  await db.deleteFrom('oauth_access_token').where('grant_id', '=', grantId).execute();
}

const CODE_RE = /^[A-Za-z0-9_-]+$/;

/** `grant_type=authorization_code` for an authenticated client. */
export async function exchangeCode(
  deps: AuthDeps,
  app: Application,
  params: { code: string; redirectUri: string; codeVerifier: string | undefined },
): Promise<TokenResponse> {
  if (!redirectUriAllowed(app, params.redirectUri)) throw new OAuthError('invalid_request', 'Mismatched redirect URI');
  if (!CODE_RE.test(params.code) || params.code.length > 200) throw new OAuthError('invalid_request', 'Malformed authorization code');
  const row = await deps.db.selectFrom('oauth_code').selectAll().where('code_hash', '=', tokenHash(params.code)).executeTakeFirst();
  if (row === undefined || row.application_id !== app.id) throw new OAuthError('invalid_grant', 'Invalid authorization code');
  if (row.used_at !== null) {
    // A second use of a code: whoever holds it is not to be trusted, so what the first use issued is revoked (RFC 6749 §4.1.2).
    if (row.grant_id !== null) await revokeGrant(deps, row.grant_id);
    throw new OAuthError('invalid_grant', 'Invalid authorization code');
  }
  if (params.redirectUri !== row.redirect_uri) throw new OAuthError('invalid_grant', 'redirect_uri does not match the one of the authorization request');
  if (row.code_challenge !== null) {
    if (params.codeVerifier === undefined) throw new OAuthError('invalid_request', 'Required parameter is missing: code_verifier');
    const derived = row.code_challenge_method === 'S256' ? s256(params.codeVerifier) : params.codeVerifier;
    if (!constantTimeEqual(derived, row.code_challenge)) throw new OAuthError('invalid_grant', 'Invalid PKCE verifier');
  } else if (params.codeVerifier !== undefined) {
    throw new OAuthError('invalid_grant', 'A code_verifier was sent but the authorization request had no code_challenge');
  }
  const now = deps.clock.now();
  if (row.expires_at <= now) throw new OAuthError('invalid_grant', 'Expired authorization code');

  return deps.db.transaction().execute(async (trx) => {
    const claimed = await trx.updateTable('oauth_code').set({ used_at: now }).where('code_hash', '=', row.code_hash).where('used_at', 'is', null).executeTakeFirst();
    if (Number(claimed.numUpdatedRows) !== 1) throw new OAuthError('invalid_grant', 'Invalid authorization code');
    const refresh = row.offline === 1 ? randomToken() : undefined;
    const grant = await trx
      .insertInto('oauth_grant')
      .values({
        account_id: row.account_id,
        application_id: app.id,
        scope: row.scope,
        offline: row.offline,
        refresh_hash: refresh === undefined ? null : tokenHash(refresh),
        created_at: now,
        revoked_at: null,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx.updateTable('oauth_code').set({ grant_id: grant.id }).where('code_hash', '=', row.code_hash).execute();
    const access = await newAccessToken(deps, grant.id, trx);
    const body: TokenResponse = { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn };
    if (refresh !== undefined) body.refresh_token = refresh;
    return body;
  });
}

/** `grant_type=refresh_token`: a new access token (the grant's previous ones end); the refresh token stays. */
export async function refreshGrant(deps: AuthDeps, app: Application, refreshToken: string): Promise<TokenResponse> {
  const grant =
    refreshToken.length > 200
      ? undefined
      : await deps.db
          .selectFrom('oauth_grant')
          .select(['id', 'application_id'])
          .where('refresh_hash', '=', tokenHash(refreshToken))
          .where('revoked_at', 'is', null)
          .executeTakeFirst();
  if (grant === undefined || grant.application_id !== app.id) throw new OAuthError('invalid_grant', 'Invalid refresh token');
  return deps.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('oauth_access_token').where('grant_id', '=', grant.id).execute();
    const access = await newAccessToken(deps, grant.id, trx);
    return { access_token: access.token, token_type: 'Bearer', expires_in: access.expiresIn, refresh_token: refreshToken };
  });
}

/**
 * RFC 7009 revocation with the interface's effects: a refresh token ends the whole grant;
 * an access token ends only itself when the grant is offline (its refresh token still
 * works), and the whole grant when it is online. Unknown tokens and other clients' tokens
 * change nothing.
 */
export async function revokeToken(deps: AuthDeps, app: Application, token: string): Promise<void> {
  if (token.length > 200) return;
  const hash = tokenHash(token);
  const byRefresh = await deps.db
    .selectFrom('oauth_grant')
    .select('id')
    .where('refresh_hash', '=', hash)
    .where('application_id', '=', app.id)
    .executeTakeFirst();
  if (byRefresh !== undefined) return deps.db.transaction().execute((trx) => revokeGrant(deps, byRefresh.id, trx));
  const byAccess = await deps.db
    .selectFrom('oauth_access_token as t')
    .innerJoin('oauth_grant as g', 'g.id', 't.grant_id')
    .select(['g.id as grant_id', 'g.offline'])
    .where('t.token_hash', '=', hash)
    .where('g.application_id', '=', app.id)
    .executeTakeFirst();
  if (byAccess === undefined) return;
  if (byAccess.offline === 1) await deps.db.deleteFrom('oauth_access_token').where('token_hash', '=', hash).execute();
  else await deps.db.transaction().execute((trx) => revokeGrant(deps, byAccess.grant_id, trx));
}

export interface ActiveToken {
  accountId: number;
  grantId: number;
  scope: number;
  offline: boolean;
  clientId: string;
  issuedAt: number;
  expiresAt: number;
}

/** The grant behind a valid, unexpired access token. */
export async function findAccessToken(deps: AuthDeps, token: string): Promise<ActiveToken | undefined> {
  if (token.length === 0 || token.length > 200) return undefined;
  const row = await deps.db
    .selectFrom('oauth_access_token as t')
    .innerJoin('oauth_grant as g', 'g.id', 't.grant_id')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select(['g.account_id', 'g.id as grant_id', 'g.scope', 'g.offline', 'a.client_id', 't.created_at', 't.expires_at'])
    .where('t.token_hash', '=', tokenHash(token))
    .where('g.revoked_at', 'is', null)
    .executeTakeFirst();
  if (row === undefined || row.expires_at <= deps.clock.now()) return undefined;
  return {
    accountId: row.account_id,
    grantId: row.grant_id,
    scope: row.scope,
    offline: row.offline === 1,
    clientId: row.client_id,
    issuedAt: row.created_at,
    expiresAt: row.expires_at,
  };
}

/** RFC 7662 introspection of an access or refresh token, for any authenticated client. */
export async function introspect(deps: AuthDeps, token: string, hint: string | undefined): Promise<Record<string, unknown>> {
  const inactive = { active: false };
  if (token.length === 0 || token.length > 200) return inactive;
  const describe = async (accountId: number, scope: number, clientId: string, extra: Record<string, unknown>) => {
    const account = await deps.db.selectFrom('account').select('name').where('id', '=', accountId).executeTakeFirst();
    return { active: true, scope: scopeNames(scope).join(' '), client_id: clientId, username: account?.name, sub: account?.name, ...extra };
  };
  const tryAccess = async () => {
    const t = await findAccessToken(deps, token);
    return t === undefined
      ? undefined
      : describe(t.accountId, t.scope, t.clientId, { token_type: 'Bearer', exp: Math.floor(t.expiresAt / 1000), iat: Math.floor(t.issuedAt / 1000), iss: deps.authUrl });
  };
  const tryRefresh = async () => {
    const g = await deps.db
      .selectFrom('oauth_grant as g')
      .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
      .select(['g.account_id', 'g.scope', 'a.client_id', 'g.created_at'])
      .where('g.refresh_hash', '=', tokenHash(token))
      .where('g.revoked_at', 'is', null)
      .executeTakeFirst();
    return g === undefined ? undefined : describe(g.account_id, g.scope, g.client_id, { token_type: 'refresh_token', iat: Math.floor(g.created_at / 1000), iss: deps.authUrl });
  };
  const order = hint === 'refresh_token' ? [tryRefresh, tryAccess] : [tryAccess, tryRefresh];
  for (const attempt of order) {
    const found = await attempt();
    if (found !== undefined) return found;
  }
  return inactive;
}

export interface UserGrant {
  id: number;
  appName: string;
  scope: number;
  offline: boolean;
  createdAt: number;
}

/**
 * The user's authorizations, for the authorized-applications page: one entry per
 * application and scope set (a user who approved an application twice sees it once),
 * named by its newest grant, offline when any of those grants is.
 */
export async function listUserGrants(deps: AuthDeps, accountId: number): Promise<UserGrant[]> {
  const rows = await deps.db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select(['g.id', 'g.application_id', 'a.name', 'g.scope', 'g.offline', 'g.created_at'])
    .where('g.account_id', '=', accountId)
    .where('g.revoked_at', 'is', null)
    .orderBy('a.name')
    .orderBy('g.created_at', 'desc')
    .orderBy('g.id', 'desc')
    .execute();
  const groups = new Map<string, UserGrant>();
  for (const r of rows) {
    const key = `${r.application_id}/${r.scope}`;
    const seen = groups.get(key);
    if (seen === undefined) groups.set(key, { id: r.id, appName: r.name, scope: r.scope, offline: r.offline === 1, createdAt: r.created_at });
    else if (r.offline === 1) seen.offline = true;
  }
  return [...groups.values()];
}

/**
 * The user ends an authorization: the named grant and every other active grant of the
 * same application with the same scopes. Returns false when it is not theirs or already ended.
 */
export async function revokeUserGrant(deps: AuthDeps, accountId: number, grantId: number): Promise<boolean> {
  const grant = await deps.db
    .selectFrom('oauth_grant')
    .select(['id', 'application_id', 'scope'])
    .where('id', '=', grantId)
    .where('account_id', '=', accountId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  if (grant === undefined) return false;
  await deps.db.transaction().execute(async (trx) => {
    const all = await trx
      .selectFrom('oauth_grant')
      .select('id')
      .where('account_id', '=', accountId)
      .where('application_id', '=', grant.application_id)
      .where('scope', '=', grant.scope)
      .where('revoked_at', 'is', null)
      .execute();
    for (const g of all) await revokeGrant(deps, g.id, trx);
  });
  return true;
}

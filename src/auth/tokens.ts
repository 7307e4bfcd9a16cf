/*
 * The tokens the grants issue (grants/), once issued: looked up for a protected resource
 * (RFC 6750; resource.ts, userinfo), introspected (RFC 7662) and revoked (RFC 7009).
 */
import { preparedQuery } from '../db/prepared.js';
import type { Account } from './accounts.js';
import type { Application } from './applications.js';
import type { AuthDeps } from './deps.js';
import { grantById, grantIdOf, revokeGrant, tokenMatches } from './grants/shared.js';
import { scopeNames } from './scopes.js';

/**
 * RFC 7009 revocation with the interface's effects: a refresh token ends the whole grant;
 * an access token ends only itself when the grant is offline (its refresh token still
 * works), and the whole grant when it is online. Unknown tokens and other clients' tokens
 * change nothing. Says what ended (for the audit trail), or undefined when nothing did.
 */
export async function revokeToken(deps: AuthDeps, app: Application, token: string): Promise<{ ended: 'grant' | 'access_token'; accountId: number } | undefined> {
  const id = grantIdOf(token);
  const grant = id === undefined ? undefined : (await grantById(deps.db, { id })).rows[0];
  if (grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null) return undefined;
  const ended = { accountId: grant.account_id };
  if (tokenMatches(token, grant.refresh_hash)) {
    await revokeGrant(deps, grant.id);
    return { ended: 'grant', ...ended };
  }
  if (!tokenMatches(token, grant.access_hash)) return undefined;
  if (grant.offline === 1) {
    await deps.db.updateTable('oauth_grant').set({ access_hash: null }).where('id', '=', grant.id).where('access_hash', '=', grant.access_hash).execute();
    return { ended: 'access_token', ...ended };
  }
  await revokeGrant(deps, grant.id);
  return { ended: 'grant', ...ended };
}

export interface ActiveToken {
  account: Account;
  grantId: number;
  scope: number;
  offline: boolean;
  clientId: string;
  issuedAt: number;
  expiresAt: number;
  /** Whether the grant was asked for with today's MetaBrainz scope names. */
  metabrainzNames: boolean;
  /** The thumbprint of the key the token is DPoP-bound to, or null for a bearer token. */
  dpopJkt: string | null;
}

const grantOwner = preparedQuery(['id'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .innerJoin('account as u', 'u.id', 'g.account_id')
    .select([
      'g.id as grant_id',
      'g.scope',
      'g.offline',
      'g.access_hash',
      'g.refresh_hash',
      'g.created_at as granted_at',
      'g.scope_text',
      'a.client_id',
      'g.access_created_at',
      'g.access_expires_at',
      'g.access_jkt',
      'g.refresh_jkt',
      'u.id',
      'u.name',
      'u.email',
      'u.email_verified',
      'u.website',
      'u.gender',
      'u.zoneinfo',
      'u.birth_date',
      'u.country',
    ])
    .where('g.id', '=', p.id)
    .where('g.revoked_at', 'is', null),
);

async function activeGrantOf(deps: AuthDeps, token: string) {
  const id = grantIdOf(token);
  return id === undefined ? undefined : (await grantOwner(deps.db, { id })).rows[0];
}

/** The grant (and user) behind a valid, unexpired access token, in one query. */
export async function findAccessToken(deps: AuthDeps, token: string): Promise<ActiveToken | undefined> {
  const row = await activeGrantOf(deps, token);
  if (row === undefined || !tokenMatches(token, row.access_hash) || row.access_expires_at === null || row.access_expires_at <= deps.clock.now()) return undefined;
  const { grant_id, scope, offline, client_id, access_created_at, access_expires_at, scope_text, access_jkt, refresh_jkt: _rj, access_hash: _a, refresh_hash: _r, granted_at: _g, ...account } = row;
  return {
    account,
    grantId: grant_id,
    scope,
    offline: offline === 1,
    clientId: client_id,
    issuedAt: access_created_at ?? 0,
    expiresAt: access_expires_at,
    metabrainzNames: scope_text !== null,
    dpopJkt: access_jkt,
  };
}

/**
 * RFC 7662 introspection of an access or refresh token. A client learns only about its
 * own tokens, unless the operator made it a resource server; any other token is, to it,
 * `{"active": false}` (RFC 7662 §2.2), so it cannot tell whether the token exists.
 */
export async function introspect(deps: AuthDeps, caller: Pick<Application, 'client_id' | 'resource_server'>, token: string): Promise<Record<string, unknown>> {
  const row = await activeGrantOf(deps, token);
  if (row === undefined || (caller.resource_server !== 1 && row.client_id !== caller.client_id)) return { active: false };
  const common = { active: true, scope: scopeNames(row.scope).join(' '), client_id: row.client_id, username: row.name, sub: row.name, iss: deps.authUrl };
  // A DPoP-bound token says its key (RFC 9449 §6.2), so a resource server can check the proof.
  const cnf = (jkt: string | null) => (jkt === null ? {} : { cnf: { jkt } });
  if (tokenMatches(token, row.refresh_hash)) return { ...common, token_type: 'refresh_token', iat: Math.floor(row.granted_at / 1000), ...cnf(row.refresh_jkt) };
  if (tokenMatches(token, row.access_hash) && row.access_expires_at !== null && row.access_expires_at > deps.clock.now()) {
    const tokenType = row.access_jkt === null ? 'Bearer' : 'DPoP';
    return { ...common, token_type: tokenType, exp: Math.floor(row.access_expires_at / 1000), iat: Math.floor((row.access_created_at ?? 0) / 1000), ...cnf(row.access_jkt) };
  }
  return { active: false };
}


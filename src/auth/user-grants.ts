/*
 * A user's grants, as the pages show them: whether consent was given already (the
 * authorization endpoint asks again only when not), the authorized-applications page, and
 * the user ending an authorization there.
 */
import type { AuthDeps } from './deps.js';
import { revokeGrant } from './grants/shared.js';

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

export interface UserGrant {
  id: number;
  appName: string;
  /** A client known by its metadata document: the document's host (its name is only what the document says). */
  documentHost?: string | undefined;
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
    .select(['g.id', 'g.application_id', 'a.name', 'a.owner_id', 'a.client_id', 'g.scope', 'g.offline', 'g.created_at'])
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
    if (seen === undefined) groups.set(key, { id: r.id, appName: r.name, documentHost: r.owner_id === null ? hostOf(r.client_id) : undefined, scope: r.scope, offline: r.offline === 1, createdAt: r.created_at });
    else if (r.offline === 1) seen.offline = true;
  }
  return [...groups.values()];
}

/** The host of a client_id that is a document's URL. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** One of the user's active authorizations (for the confirmation page before revoking), or undefined. */
export async function findUserGrant(deps: AuthDeps, accountId: number, grantId: number): Promise<(UserGrant & { applicationId: number; clientId: string }) | undefined> {
  const r = await deps.db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select(['g.id', 'g.application_id', 'a.name', 'a.client_id', 'g.scope', 'g.offline', 'g.created_at'])
    .where('g.id', '=', grantId)
    .where('g.account_id', '=', accountId)
    .where('g.revoked_at', 'is', null)
    .executeTakeFirst();
  return r === undefined ? undefined : { id: r.id, appName: r.name, scope: r.scope, offline: r.offline === 1, createdAt: r.created_at, applicationId: r.application_id, clientId: r.client_id };
}

/**
 * The user ends an authorization: the named grant and every other active grant of the
 * same application with the same scopes. Returns what ended, or undefined when it is not
 * theirs or already ended.
 */
export async function revokeUserGrant(deps: AuthDeps, accountId: number, grantId: number): Promise<{ appName: string; clientId: string; scope: number } | undefined> {
  const grant = await findUserGrant(deps, accountId, grantId);
  if (grant === undefined) return undefined;
  await deps.db.transaction().execute(async (trx) => {
    const all = await trx
      .selectFrom('oauth_grant')
      .select('id')
      .where('account_id', '=', accountId)
      .where('application_id', '=', grant.applicationId)
      .where('scope', '=', grant.scope)
      .where('revoked_at', 'is', null)
      .execute();
    for (const g of all) await revokeGrant(deps, g.id, trx);
  });
  return { appName: grant.appName, clientId: grant.clientId, scope: grant.scope };
}

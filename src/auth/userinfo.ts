import type { Account } from './accounts.js';
import type { AuthDeps } from './deps.js';
import type { ActiveToken } from './tokens.js';
import { EMAIL, OPENID, PROFILE } from './scopes.js';

function ageOn(birthDate: string, now: Date): number {
  const [y, m, d] = birthDate.split('-').map(Number) as [number, number, number];
  let age = now.getUTCFullYear() - y;
  if (now.getUTCMonth() + 1 < m || (now.getUTCMonth() + 1 === m && now.getUTCDate() < d)) age--;
  return age;
}

/** Whether a token may read userinfo: the interface's profile scope, or OpenID Connect's openid (Core §5.3). */
export function mayReadUserinfo(scope: number): boolean {
  return (scope & (PROFILE | OPENID)) !== 0;
}

/**
 * The userinfo claims. With the profile scope, the keys musicbrainz.org's userinfo answers
 * with (sub is the username, profile, metabrainz_user_id, website, gender, zoneinfo), plus age
 * and country when known, which the interface's profile scope names (docs/interface.md,
 * Scopes). email and email_verified only with the email scope. A token with `openid` or
 * asked for with today's MetaBrainz scope names also gets `username` (what Picard reads
 * first) and OpenID Connect's `preferred_username`, both the account name; with `openid`
 * alone, only those and `sub` (docs/decisions.md, "OpenID Connect"). Without either, the
 * answer is the classic one, key for key. (The caller checks mayReadUserinfo.)
 */
export function userinfoClaims(deps: AuthDeps, account: Account, token: Pick<ActiveToken, 'scope' | 'metabrainzNames'>): Record<string, unknown> {
  const { scope } = token;
  const claims: Record<string, unknown> = { sub: account.name };
  if ((scope & PROFILE) !== 0) {
    claims.profile = `${deps.authUrl}/user/${encodeURIComponent(account.name)}`;
    claims.metabrainz_user_id = account.id;
    if (account.website !== null) claims.website = account.website;
    if (account.gender !== null) claims.gender = account.gender;
    claims.zoneinfo = account.zoneinfo;
    if (account.birth_date !== null) claims.age = ageOn(account.birth_date, new Date(deps.clock.now()));
    if (account.country !== null) claims.country = account.country;
  }
  if ((scope & EMAIL) !== 0 && account.email !== null) {
    claims.email = account.email;
    claims.email_verified = account.email_verified === 1;
  }
  if ((scope & OPENID) !== 0 || token.metabrainzNames) {
    claims.username = account.name;
    claims.preferred_username = account.name;
  }
  return claims;
}

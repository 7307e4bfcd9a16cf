import type { Account } from './accounts.js';
import type { AuthDeps } from './deps.js';
import { EMAIL } from './scopes.js';

function ageOn(birthDate: string, now: Date): number {
  const [y, m, d] = birthDate.split('-').map(Number) as [number, number, number];
  let age = now.getUTCFullYear() - y;
  if (now.getUTCMonth() + 1 < m || (now.getUTCMonth() + 1 === m && now.getUTCDate() < d)) age--;
  return age;
}

/**
 * The userinfo claims: the keys musicbrainz.org's userinfo answers with (sub is the username,
 * profile, metabrainz_user_id, website, gender, zoneinfo), plus age and country when known, which
 * the interface's profile scope names (docs/interface.md, Scopes); email and email_verified only
 * with the email scope. (The caller checks the profile scope.)
 */
export function userinfoClaims(deps: AuthDeps, account: Account, scope: number): Record<string, unknown> {
  const claims: Record<string, unknown> = {
    sub: account.name,
    profile: `${deps.authUrl}/user/${encodeURIComponent(account.name)}`,
    metabrainz_user_id: account.id,
  };
  if (account.website !== null) claims.website = account.website;
  if (account.gender !== null) claims.gender = account.gender;
  claims.zoneinfo = account.zoneinfo;
  if (account.birth_date !== null) claims.age = ageOn(account.birth_date, new Date(deps.clock.now()));
  if (account.country !== null) claims.country = account.country;
  if ((scope & EMAIL) !== 0 && account.email !== null) {
    claims.email = account.email;
    claims.email_verified = account.email_verified === 1;
  }
  return claims;
}

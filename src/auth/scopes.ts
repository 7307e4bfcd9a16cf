/**
 * The interface's scopes, with MusicBrainz's bits and consent texts, and OpenID Connect's
 * `openid` (a bit MusicBrainz never used), in display order.
 */
export const SCOPES = [
  { name: 'openid', bit: 256, text: 'Know who you are (your account name)' },
  { name: 'profile', bit: 1, text: 'View your public account information' },
  { name: 'email', bit: 2, text: 'View your email address' },
  { name: 'tag', bit: 4, text: 'View and modify your private tags' },
  { name: 'rating', bit: 8, text: 'View and modify your private ratings' },
  { name: 'collection', bit: 16, text: 'View and modify your private collections' },
  { name: 'submit_isrc', bit: 64, text: 'Submit new ISRCs to the database' },
  { name: 'submit_barcode', bit: 128, text: 'Submit new barcodes to the database' },
  { name: 'cover_art', bit: 512, text: 'Add, edit and reorder cover art' },
] as const;

export const PROFILE = 1;
export const EMAIL = 2;
/** OpenID Connect: the token response carries an id_token, userinfo its standard claims. */
export const OPENID = 256;

/**
 * The names today's MetaBrainz provider gives the classic scopes, accepted as the same scopes
 * (`profile` and `email` keep their names there). See docs/decisions.md, "Scope names".
 */
export const SCOPE_ALIASES: Readonly<Record<string, (typeof SCOPES)[number]['name']>> = {
  'musicbrainz:tag': 'tag',
  'musicbrainz:rating': 'rating',
  'musicbrainz:collection': 'collection',
  'musicbrainz:submit_isrc': 'submit_isrc',
  'musicbrainz:submit_barcode': 'submit_barcode',
};

/**
 * OpenID Connect scope values that are no scope of sleeve's own: `offline_access` (Core §11)
 * asks for a refresh token, as `access_type=offline` does; `address` and `phone` (Core §5.4) ask
 * for claims sleeve does not hold, so in an OpenID Connect request (one with `openid`) they grant
 * nothing and are otherwise ignored; in a classic one they stay unknown, as on musicbrainz.org
 * (docs/decisions.md, "OpenID Connect conformance"). None is a bit of the grant's scope, and none
 * is echoed.
 */
export const OFFLINE_ACCESS = 'offline_access';
const IGNORED_SCOPES: ReadonlySet<string> = new Set(['address', 'phone']);

/**
 * Parses a space-delimited scope list into a bitmask, or names the first unknown scope.
 * `spelled`: when the list uses a MetaBrainz name, the names as the client wrote them (each
 * once, in its order), which the token response then echoes; null for classic names only.
 * `offline`: whether it holds `offline_access`.
 */
export function parseScope(text: string): { mask: number; spelled: string | null; offline: boolean } | { unknown: string } {
  let mask = 0;
  let aliased = false;
  let offline = false;
  const asked: string[] = [];
  const names = text.split(/\s+/);
  const openid = names.includes('openid');
  for (const [i, name] of names.entries()) {
    if (name === '' && (i === 0 || i === names.length - 1)) continue;
    if (name === OFFLINE_ACCESS) {
      offline = true;
      continue;
    }
    if (openid && IGNORED_SCOPES.has(name)) continue;
    const alias = Object.hasOwn(SCOPE_ALIASES, name) ? SCOPE_ALIASES[name] : undefined;
    const scope = SCOPES.find((s) => s.name === (alias ?? name));
    if (scope === undefined) return { unknown: name };
    mask |= scope.bit;
    aliased ||= alias !== undefined;
    if (!asked.includes(name)) asked.push(name);
  }
  return { mask, spelled: aliased ? asked.join(' ') : null, offline };
}

export function scopeNames(mask: number): string[] {
  return SCOPES.filter((s) => (mask & s.bit) !== 0).map((s) => s.name);
}

export function scopeTexts(mask: number): string[] {
  return SCOPES.filter((s) => (mask & s.bit) !== 0).map((s) => s.text);
}

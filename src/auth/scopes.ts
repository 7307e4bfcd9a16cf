/** The interface's scopes, with MusicBrainz's bits and consent texts, in display order. */
export const SCOPES = [
  { name: 'profile', bit: 1, text: 'View your public account information' },
  { name: 'email', bit: 2, text: 'View your email address' },
  { name: 'tag', bit: 4, text: 'View and modify your private tags' },
  { name: 'rating', bit: 8, text: 'View and modify your private ratings' },
  { name: 'collection', bit: 16, text: 'View and modify your private collections' },
  { name: 'submit_isrc', bit: 64, text: 'Submit new ISRCs to the database' },
  { name: 'submit_barcode', bit: 128, text: 'Submit new barcodes to the database' },
] as const;

export const PROFILE = 1;
export const EMAIL = 2;

/** Parses a space-delimited scope list into a bitmask, or names the first unknown scope. */
export function parseScope(text: string): { mask: number } | { unknown: string } {
  let mask = 0;
  const names = text.split(/\s+/);
  for (const [i, name] of names.entries()) {
    if (name === '' && (i === 0 || i === names.length - 1)) continue;
    const scope = SCOPES.find((s) => s.name === name);
    if (scope === undefined) return { unknown: name };
    mask |= scope.bit;
  }
  return { mask };
}

export function scopeNames(mask: number): string[] {
  return SCOPES.filter((s) => (mask & s.bit) !== 0).map((s) => s.name);
}

export function scopeTexts(mask: number): string[] {
  return SCOPES.filter((s) => (mask & s.bit) !== 0).map((s) => s.text);
}

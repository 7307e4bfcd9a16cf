const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Parses an MBID case-insensitively (docs/decisions.md, Cover art API) and returns it lower-case, or
 * undefined when it is not a hyphenated 8-4-4-4-12 hex UUID.
 */
export function parseMbid(text: string): string | undefined {
  if (text.length !== 36) return undefined;
  const lower = text.toLowerCase();
  return UUID_RE.test(lower) ? lower : undefined;
}

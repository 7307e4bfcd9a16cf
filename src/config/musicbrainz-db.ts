/*
 * The mirror's live database as the catalogue (docs/mirror-database.md): where the
 * MusicBrainz schema is, and how often sleeve looks for what replication changed there.
 * Kept apart so loadConfig takes them in one call.
 */

export interface MusicBrainzDatabaseConfig {
  /** postgres:// URL of the mirror's database (musicbrainz-docker's musicbrainz_db); sleeve only reads it. */
  url: string;
  /** How often the following process looks for changes there, ms. */
  pollMs: number;
  /** Longest one statement on the mirror's database may take, ms. */
  statementTimeoutMs: number;
}

export const MUSICBRAINZ_DATABASE_VARIABLES = {
  SLEEVE_MUSICBRAINZ_DATABASE_URL: "postgres://… of a MusicBrainz mirror's database whose release, cover art and edit tables are the catalogue; a read-only role is enough (unset: off)",
  SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: 'how often sleeve looks for changes replication applied there, ms (default 10000; at most 45000, so a change is answered within 60 s)',
  SLEEVE_MUSICBRAINZ_DATABASE_TIMEOUT_MS: "longest one statement on the mirror's database may take, ms (default 30000)",
} as const;

type Name = keyof typeof MUSICBRAINZ_DATABASE_VARIABLES;

/** Reads the settings with loadConfig's own helpers; undefined when SLEEVE_MUSICBRAINZ_DATABASE_URL is unset. */
export function musicBrainzDatabaseConfig(
  get: (name: Name) => string | undefined,
  bad: (name: Name, why: string) => void,
  int: (name: Name, fallback: number, min: number, max: number) => number,
): MusicBrainzDatabaseConfig | undefined {
  const pollMs = int('SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS', 10_000, 10, 45_000);
  const statementTimeoutMs = int('SLEEVE_MUSICBRAINZ_DATABASE_TIMEOUT_MS', 30_000, 100, 600_000);
  const url = get('SLEEVE_MUSICBRAINZ_DATABASE_URL');
  if (url === undefined) return undefined;
  if (!/^postgres(ql)?:\/\//.test(url)) {
    bad('SLEEVE_MUSICBRAINZ_DATABASE_URL', 'must start with postgres:// (the MusicBrainz schema is PostgreSQL)');
    return undefined;
  }
  try {
    new URL(url);
  } catch {
    bad('SLEEVE_MUSICBRAINZ_DATABASE_URL', 'not a valid postgres:// URL');
    return undefined;
  }
  return { url, pollMs, statementTimeoutMs };
}

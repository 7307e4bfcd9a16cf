/*
 * The pull-through settings (docs/mirroring.md, "Pull-through"): where `/download/…` misses are
 * fetched from, and the bounds on those fetches. Kept apart so loadConfig takes them in one call.
 */

/** Where the built-in file server fetches the files its store lacks, and how (docs/decisions.md, "Pull-through"). */
export interface UpstreamConfig {
  /** archive.org-layout base URL without a trailing slash (`https://archive.org/download`). */
  url: string;
  /** An answer's headers must arrive within this, ms; its whole body within three times this. */
  timeoutMs: number;
  /** Largest file fetched, bytes; a larger one is refused (502) and not stored. */
  maxBytes: number;
  /** Upstream requests in flight at once, per process; more wait for a turn. */
  concurrency: number;
  /** How long an upstream 404 is remembered (no upstream request for that file meanwhile), ms. */
  notFoundTtlMs: number;
  /** Whether a redirect off the upstream's origin may reach any address, not public ones only. */
  redirectAllowPrivate: boolean;
}

export const UPSTREAM_VARIABLES = {
  SLEEVE_UPSTREAM_URL: 'archive.org-layout base URL that /download/ misses are fetched from, e.g. https://archive.org/download (unset: off)',
  SLEEVE_UPSTREAM_TIMEOUT_MS: "time for an upstream answer's headers, ms; the whole file gets three times this (default 10000)",
  SLEEVE_UPSTREAM_MAX_BYTES: 'largest file fetched from the upstream, bytes (default 52428800)',
  SLEEVE_UPSTREAM_CONCURRENCY: 'upstream requests in flight at once per process (default 8)',
  SLEEVE_UPSTREAM_NOT_FOUND_TTL_MS: 'how long an upstream 404 is remembered, ms (default 600000)',
  SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE: "on|off: whether a redirect off the upstream's origin may reach any address, loopback, private and link-local ones included (default off: public ones only)",
} as const;

type Name = keyof typeof UPSTREAM_VARIABLES;

/** Reads the pull-through settings with loadConfig's own helpers; undefined when SLEEVE_UPSTREAM_URL is unset. */
export function upstreamConfig(
  get: (name: Name) => string | undefined,
  url: (name: Name, fallback: string, schemes: string[]) => string,
  int: (name: Name, fallback: number, min: number, max: number) => number,
  onOff: (name: Name, fallback: boolean) => boolean,
): UpstreamConfig | undefined {
  const timeoutMs = int('SLEEVE_UPSTREAM_TIMEOUT_MS', 10_000, 10, 600_000);
  const maxBytes = int('SLEEVE_UPSTREAM_MAX_BYTES', 50 * 1024 * 1024, 1, 2 ** 31 - 1);
  const concurrency = int('SLEEVE_UPSTREAM_CONCURRENCY', 8, 1, 1024);
  const notFoundTtlMs = int('SLEEVE_UPSTREAM_NOT_FOUND_TTL_MS', 600_000, 0, 7 * 86_400_000);
  const redirectAllowPrivate = onOff('SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE', false);
  if (get('SLEEVE_UPSTREAM_URL') === undefined) return undefined;
  return { url: url('SLEEVE_UPSTREAM_URL', '', ['http', 'https']), timeoutMs, maxBytes, concurrency, notFoundTtlMs, redirectAllowPrivate };
}

import { availableParallelism } from 'node:os';

/**
 * The default size of the password hashing pool (auth/crypto.ts's PasswordHasher). Here, not in
 * src/auth, because the settings (config/load.ts) give them as defaults and src/config sits
 * below the auth module (docs/decisions.md, "Layering").
 */

/** One thread per two cores (at least one, at most four): the event loop keeps a core. */
export function defaultHashThreads(cores = availableParallelism()): number {
  return Math.max(1, Math.min(4, Math.floor(cores / 2)));
}

/** Sign-ins that may wait for a hashing thread by default (SLEEVE_PASSWORD_HASH_QUEUE). */
export const DEFAULT_HASH_QUEUE = 64;

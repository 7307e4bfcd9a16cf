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

/**
 * scrypt's cost by default, as log2 of N (SLEEVE_PASSWORD_HASH_COST): N = 2^15, r = 8, p = 1,
 * 32 MiB and about 0.1 s of a core per hash. Each stored hash names its own parameters, so a
 * change of cost applies to new passwords, and to old ones at their next sign-in.
 */
export const DEFAULT_HASH_COST = 15;
/** The costs an operator may choose: 2^10 (1 MiB, for test suites) to 2^20 (1 GiB). */
export const HASH_COST_RANGE = [10, 20] as const;

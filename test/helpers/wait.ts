/**
 * Waiting in tests: on a condition, with a bound, never for a fixed time (docs/decisions.md,
 * "Tests"). A fixed sleep is either too short under load (a flake) or longer than needed (a slow
 * suite); a bounded wait is as short as the machine allows and fails with what it waited for.
 */

export interface WaitOptions {
  /** Give up after this long (ms): the wait then throws. */
  timeoutMs?: number;
  /** How often the check runs (ms). */
  intervalMs?: number;
  /** What is waited for, for the error. */
  what?: string;
}

/**
 * Calls `check` until it answers something truthy, and answers that; throws once `timeoutMs`
 * has passed without it (the error names `what` and the last value seen).
 */
export async function waitFor<T>(check: () => T | Promise<T>, opts: WaitOptions = {}): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 10, what = 'the condition' } = opts;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() >= deadline) throw new Error(`waited ${timeoutMs} ms for ${what}; last seen: ${String(value)}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * `promise`, or an error naming `what` once `timeoutMs` has passed. The timer is cleared when
 * the promise settles: a bound left running would keep the test file's process alive after its
 * last test.
 */
export async function within<T>(promise: Promise<T>, timeoutMs: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

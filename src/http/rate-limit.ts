import type { RateLimitConfig } from '../config/load.js';

export interface RateDecision {
  allowed: boolean;
  /** Seconds until the client's window resets (for Retry-After). */
  retryAfter: number;
}

/**
 * Decides whether a client may make one more request. A limiter that asks another
 * process (Redis) answers with a promise; one that knows at once answers directly, so
 * the front door stays synchronous when it can.
 */
export interface RequestLimiter {
  hit(key: string, now: number): RateDecision | Promise<RateDecision>;
}

/** Fixed-window request counter per client address, in this process. */
export class RateLimiter implements RequestLimiter {
  private readonly windows = new Map<string, { count: number; resetAt: number }>();
  private readonly limit: RateLimitConfig;

  constructor(limit: RateLimitConfig) {
    this.limit = limit;
  }

  hit(key: string, now: number): RateDecision {
    let w = this.windows.get(key);
    if (w === undefined || w.resetAt <= now) {
      if (this.windows.size >= 100_000) this.sweep(now);
      w = { count: 0, resetAt: now + this.limit.windowMs };
      this.windows.set(key, w);
    }
    w.count++;
    return { allowed: w.count <= this.limit.requests, retryAfter: Math.max(1, Math.ceil((w.resetAt - now) / 1000)) };
  }

  private sweep(now: number): void {
    for (const [key, w] of this.windows) if (w.resetAt <= now) this.windows.delete(key);
    // Under a flood of distinct addresses, forget the oldest windows rather than grow without bound.
    if (this.windows.size >= 100_000) this.windows.clear();
  }
}

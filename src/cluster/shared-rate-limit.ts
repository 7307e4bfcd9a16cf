import type { RateLimitConfig } from '../config/load.js';
import { RateLimiter, type RateDecision, type RequestLimiter } from '../http/rate-limit.js';
import type { RedisConnection } from './redis.js';

/**
 * One fixed window per client, atomically: count this request, start the window (its
 * expiry) on the first one, and answer the count and the time left. Redis's own clock
 * times the window, so the processes' clocks need not agree.
 */
const HIT = `
local count = redis.call('INCR', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[1])
  ttl = tonumber(ARGV[1])
end
return {count, ttl}
`;

interface HitCommand {
  sleeveRateHit(key: string, windowMs: number): Promise<[number, number]>;
}

const MAX_BLOCKED = 100_000;

/**
 * SLEEVE_RATE_LIMIT counted in Redis, so every process shares one budget per client.
 * A client found over the limit is refused locally until its window ends (no round trip
 * for a flood). While Redis is unreachable or slow, each process counts alone with the
 * same limit (see docs/decisions.md: neither fail-open nor fail-closed).
 */
export class SharedRateLimiter implements RequestLimiter {
  private readonly limit: RateLimitConfig;
  private readonly redis: RedisConnection;
  private readonly local: RateLimiter;
  /** Client → when (this process's clock) its exhausted window ends. */
  private readonly blocked = new Map<string, number>();

  constructor(limit: RateLimitConfig, redis: RedisConnection) {
    this.limit = limit;
    this.redis = redis;
    this.local = new RateLimiter(limit);
    redis.client.defineCommand('sleeveRateHit', { numberOfKeys: 1, lua: HIT });
  }

  hit(key: string, now: number): RateDecision | Promise<RateDecision> {
    const until = this.blocked.get(key);
    if (until !== undefined) {
      if (until > now) return { allowed: false, retryAfter: Math.max(1, Math.ceil((until - now) / 1000)) };
      this.blocked.delete(key);
    }
    if (!this.redis.usable) return this.local.hit(key, now);
    return (this.redis.client as unknown as HitCommand).sleeveRateHit(`sleeve:rate:${key}`, this.limit.windowMs).then(
      ([count, ttl]) => {
        const allowed = count <= this.limit.requests;
        if (!allowed) this.block(key, now, now + ttl);
        return { allowed, retryAfter: Math.max(1, Math.ceil(ttl / 1000)) };
      },
      (err: unknown) => {
        this.redis.failed(err);
        return this.local.hit(key, now);
      },
    );
  }

  private block(key: string, now: number, until: number): void {
    if (this.blocked.size >= MAX_BLOCKED) {
      for (const [k, u] of this.blocked) if (u <= now) this.blocked.delete(k);
      if (this.blocked.size >= MAX_BLOCKED) this.blocked.clear();
    }
    this.blocked.set(key, until);
  }
}

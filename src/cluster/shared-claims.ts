import type { RedisConnection } from './redis.js';

/**
 * Keys claimed once across every process, each until it expires (`SET … NX PX`): the DPoP
 * replay store's shared part (auth/replay-store.ts SharedReplay). Undefined when Redis cannot
 * answer now, and the caller checks alone (as the shared rate limit falls back to counting alone).
 */
export class SharedClaims {
  constructor(
    private readonly redis: RedisConnection,
    private readonly prefix: string,
  ) {}

  async claim(key: string, ttlMs: number): Promise<boolean | undefined> {
    if (!this.redis.usable) return undefined;
    try {
      return (await this.redis.client.set(`${this.prefix}${key}`, '1', 'PX', ttlMs, 'NX')) === 'OK';
    } catch (err) {
      this.redis.failed(err);
      return undefined;
    }
  }
}

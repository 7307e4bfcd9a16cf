import type { Redis } from 'ioredis';
import { describeRedis, redisClient, redisOptions } from './redis.js';

/**
 * The pub/sub channel of catalogue changes. Channels are not per database number, so the
 * number is part of the name: deployments sharing one Redis on different databases do not
 * hear each other.
 */
export function catalogueChannel(url: string): string {
  const db = new URL(url).pathname.replace(/^\//, '') || '0';
  return `sleeve:${db}:catalogue-changed`;
}

/**
 * Tells serving processes that the catalogue changed, after the change committed. It
 * connects when made (so a command connects while it works, and only publishes at the
 * end); with Redis away, `announce` fails within about a second, with a message naming
 * it (never its password).
 */
export class ChangeAnnouncer {
  private readonly url: string;
  private readonly client: Redis;
  private readonly connected: Promise<void>;

  constructor(url: string) {
    this.url = url;
    this.client = redisClient(url, { ...redisOptions('cli'), connectTimeout: 1000, commandTimeout: 1000, retryStrategy: () => null });
    this.client.on('error', () => {});
    this.connected = this.client.connect();
    this.connected.catch(() => {});
  }

  /** Publishes that the catalogue is now at `version`. */
  async announce(version: number): Promise<void> {
    try {
      await this.connected;
      await this.client.publish(catalogueChannel(this.url), String(version));
    } catch (err) {
      throw new Error(`Redis at ${describeRedis(this.url)}: ${(err as Error).message}`);
    }
  }

  close(): void {
    this.client.disconnect();
  }
}

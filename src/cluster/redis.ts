import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';

const requireHere = createRequire(import.meta.url);
let ioredis: typeof import('ioredis') | undefined;

/**
 * ioredis's client class, loaded on first use: a server without SLEEVE_REDIS_URL never makes
 * a connection, and loading the package costs such a server ~5 MB of heap and ~10 MB of RSS
 * for nothing (bench/RESULTS-archive.md, "Session 12: cold set peak RSS"). Synchronous (a require), as the constructors
 * that use it are.
 */
export function redisClient(url: string, options: RedisOptions): Redis {
  ioredis ??= requireHere('ioredis') as typeof import('ioredis');
  return new ioredis.Redis(url, options);
}

/** The little of a pino logger this module uses (Fastify's `app.log` is one). */
export interface Log {
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
}

const SILENT: Log = { info() {}, warn() {} };

/**
 * The longest a command may take before it counts as failed. Requests that need Redis
 * (the shared rate limit) wait at most this long, then use the per-process fallback.
 */
const COMMAND_TIMEOUT_MS = 250;
/** How often a connection that answered badly is probed with PING before it is trusted again. */
const PROBE_MS = 1000;

/**
 * ioredis settings shared by every sleeve connection: no offline queue (a command sent while
 * disconnected fails at once instead of waiting), bounded command and connect times, no
 * resending after a reconnect, and reconnecting forever at most a second apart.
 */
export function redisOptions(role: string): RedisOptions {
  return {
    lazyConnect: true,
    enableOfflineQueue: false,
    commandTimeout: COMMAND_TIMEOUT_MS,
    connectTimeout: 2000,
    maxRetriesPerRequest: 0,
    autoResendUnfulfilledCommands: false,
    autoResubscribe: false,
    keepAlive: 10_000,
    connectionName: `sleeve-${role}`,
    retryStrategy: (times) => Math.min(100 * times, 1000),
  };
}

/** host:port/db of a Redis URL, for logs and messages (never its password). */
export function describeRedis(url: string): string {
  const u = new URL(url);
  const db = u.pathname.replace(/^\//, '') || '0';
  return `${u.protocol}//${u.hostname}:${u.port || '6379'}/${db}`;
}

function reason(err: unknown): string {
  const e = err as { message?: string; code?: string } | undefined;
  return e?.code ?? e?.message ?? String(err);
}

/**
 * One connection to Redis that knows whether it may be relied on now: connected and
 * ready, and not suspected after a failed or timed-out command (a server that accepts
 * connections but does not answer). Logs each change of state once, with the reason.
 */
export class RedisConnection {
  readonly client: Redis;
  readonly role: string;
  private readonly where: string;
  private up = false;
  private suspect = false;
  private wasUsable = false;
  private everUp = false;
  private lastError: string | undefined;
  private probe: NodeJS.Timeout | undefined;
  private closed = false;
  private log: Log = SILENT;
  private startFailureLogged = false;
  private readonly fallback: string;
  private readonly watchers: ((usable: boolean) => void)[] = [];

  /**
   * @param role what the connection is for, in logs (`commands`, `notifications`)
   * @param fallback what its user does while Redis is away, in logs
   */
  constructor(url: string, role: string, fallback: string, options: RedisOptions = {}) {
    this.role = role;
    this.fallback = fallback;
    this.where = describeRedis(url);
    this.client = redisClient(url, { ...redisOptions(role), ...options });
  }

  /** Connects (in the background; reconnecting whenever the connection is lost). */
  start(log: Log): void {
    this.log = log;
    this.client.on('ready', () => {
      this.up = true;
      this.everUp = true;
      this.changed();
    });
    this.client.on('close', () => {
      this.up = false;
      this.changed();
    });
    this.client.on('error', (err: unknown) => {
      this.lastError = reason(err);
      // Not connected since start: no change of state to log, so say it here, once.
      if (!this.everUp && !this.startFailureLogged) {
        this.startFailureLogged = true;
        this.log.warn({ redis: this.where, role: this.role, reason: this.lastError }, `Redis unavailable (${this.role}); ${this.fallback}`);
      }
    });
    this.client.connect().catch(() => {});
  }

  /** Whether to use Redis now (else the caller uses its fallback). */
  get usable(): boolean {
    return this.up && !this.suspect;
  }

  /** Called with the new state whenever `usable` changes. */
  onChange(fn: (usable: boolean) => void): void {
    this.watchers.push(fn);
  }

  /**
   * A command failed or timed out although the connection looked up: stop relying on it
   * until a PING answers in time.
   */
  failed(err: unknown): void {
    if (this.closed) return;
    this.lastError = reason(err);
    if (!this.suspect) {
      this.suspect = true;
      this.changed();
    }
    if (this.probe === undefined) {
      this.probe = setInterval(() => {
        if (!this.up) return;
        this.client.ping().then(
          () => {
            clearInterval(this.probe);
            this.probe = undefined;
            this.suspect = false;
            this.changed();
          },
          (e: unknown) => {
            this.lastError = reason(e);
          },
        );
      }, PROBE_MS);
      this.probe.unref();
    }
  }

  private changed(): void {
    const usable = this.usable;
    if (usable === this.wasUsable || this.closed) return;
    this.wasUsable = usable;
    if (usable) this.log.info({ redis: this.where, role: this.role }, `Redis connected (${this.role})`);
    else this.log.warn({ redis: this.where, role: this.role, reason: this.lastError ?? 'connection closed' }, `Redis unavailable (${this.role}); ${this.fallback}`);
    for (const fn of this.watchers) fn(usable);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.probe);
    this.probe = undefined;
    this.client.disconnect();
  }
}

/*
 * The DPoP proofs' jti seen (RFC 9449 §11.1; docs/decisions.md, "DPoP"), each until its proof
 * would be refused as stale anyway. Only proofs of requests that authenticated are remembered
 * (auth/dpop.ts rememberProof), counted per client: one client cannot take more than its share,
 * and a full store refuses new proofs instead of forgetting live ones (which would let a captured
 * proof be replayed). Nothing here knows Redis: serve() gives a SharedReplay that does.
 */

/** The largest number of jti remembered by one process (about 150 bytes each). */
const REPLAY_STORE_MAX = 200_000;
/** The most one client may have remembered at once, in one process: a quarter of the store. */
const REPLAY_PER_CLIENT_MAX = 50_000;

/** Where processes share what they saw (Redis `SET … NX PX`): true when `key` was new, false when seen, undefined when it cannot answer now. */
export interface SharedReplay {
  claim(key: string, ttlMs: number): Promise<boolean | undefined>;
}

export interface ReplayLimits {
  /** Entries in all. */
  max: number;
  /** Entries of one client. */
  perClient: number;
}

/** What claim says: a new proof (now remembered), one seen before, or no room to remember it. */
export type ReplayAnswer = 'fresh' | 'replayed' | 'full';

interface Entry {
  until: number;
  client: string;
}

/**
 * The jti seen, in this process always; with a SharedReplay also there, so a proof replayed
 * against another process is caught. While the shared store cannot answer, each process keeps
 * checking on its own (as the shared rate limit does).
 */
export class ReplayStore {
  private readonly seen = new Map<string, Entry>();
  private readonly perClient = new Map<string, number>();
  private readonly shared: SharedReplay | undefined;
  private readonly limits: ReplayLimits;
  /** When the whole map was last swept for expired entries (a full store is not swept at every request). */
  private sweptAt = -Infinity;

  constructor(shared?: SharedReplay, limits: ReplayLimits = { max: REPLAY_STORE_MAX, perClient: REPLAY_PER_CLIENT_MAX }) {
    this.shared = shared;
    this.limits = limits;
  }

  get size(): number {
    return this.seen.size;
  }

  /** Records `key` of `client` until `until` (epoch ms). */
  async claim(client: string, key: string, until: number, now: number): Promise<ReplayAnswer> {
    const known = this.seen.get(key);
    if (known !== undefined && known.until > now) return 'replayed';
    if (known !== undefined) this.forget(key, known);
    this.expire(now);
    if (this.full(client) && now - this.sweptAt >= 1000) {
      // Full (for everyone, or for this client): every expired entry goes, at most once a second.
      this.sweptAt = now;
      for (const [k, e] of this.seen) if (e.until <= now) this.forget(k, e);
    }
    if (this.full(client)) return 'full';
    this.seen.set(key, { until, client });
    this.perClient.set(client, (this.perClient.get(client) ?? 0) + 1);
    const fresh = await this.shared?.claim(key, Math.max(1000, until - now));
    return fresh === false ? 'replayed' : 'fresh';
  }

  /** Drops expired entries from the front (insertion order is roughly expiry order). */
  private expire(now: number): void {
    for (const [k, e] of this.seen) {
      if (e.until > now) break;
      this.forget(k, e);
    }
  }

  private full(client: string): boolean {
    return this.seen.size >= this.limits.max || (this.perClient.get(client) ?? 0) >= this.limits.perClient;
  }

  private forget(key: string, e: Entry): void {
    this.seen.delete(key);
    const n = (this.perClient.get(e.client) ?? 1) - 1;
    if (n <= 0) this.perClient.delete(e.client);
    else this.perClient.set(e.client, n);
  }
}

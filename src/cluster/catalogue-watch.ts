import { finishPendingIndexes, readCounter, ResponseCache, type CoverArtDeps } from '../cover-art/index.js';
import { isStoreUnavailable } from '../shared/errors.js';
import type { Log } from './redis.js';

export interface CatalogueWatchOptions {
  coverArt: CoverArtDeps;
  cache: ResponseCache;
  /** Emptied with the response cache: the file server's cache (index.json, removed images). */
  files?: { clear(): void };
  /** Poll interval while no announcements arrive (no Redis, or Redis away). */
  pollMs: number;
  /** Poll interval while announcements arrive: the poll is then only the safety net. */
  announcedPollMs: number;
  log: Log;
}

/** Dirty index.json files older than this are finished by the sweep (younger ones by their own process). */
const SWEEP_AGE_MS = 10_000;

/**
 * Keeps a serving process's response cache in step with the catalogue, which other
 * processes change: the cache is emptied when the catalogue version in the database
 * moves (polled), when a change is announced (Redis), and whenever the process may have
 * missed announcements (the subscription started or stopped). Every 10 s it also
 * finishes index.json files that a crashed change left dirty.
 */
export class CatalogueWatch {
  private readonly opts: CatalogueWatchOptions;
  private last: number | undefined;
  private announced = false;
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private stopped = false;
  private failing = false;
  private storeFailing = false;
  private lastSweep: number;

  constructor(opts: CatalogueWatchOptions) {
    this.opts = opts;
    this.lastSweep = Date.now();
  }

  start(): void {
    void this.tick();
  }

  /** A change was announced: forget cached answers now. */
  changed(version: number | undefined): void {
    this.opts.cache.clear();
    this.opts.files?.clear();
    // The poll need not empty the cache again for this version.
    if (version !== undefined && (this.last === undefined || version > this.last)) this.last = version;
  }

  /**
   * Whether announcements arrive. On every switch the cache is emptied (announcements may
   * have been missed while the subscription was away) and the poll changes pace.
   */
  setAnnounced(on: boolean): void {
    if (on === this.announced) return;
    this.announced = on;
    this.opts.cache.clear();
    this.opts.files?.clear();
    if (!on) this.schedule(0);
    else this.schedule(this.opts.announcedPollMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  /**
   * Finishes dirty index.json files. The store being away is not the database being away:
   * the cache stays, the marks stay for the next sweep, and it is said once per spell.
   */
  private async sweep(): Promise<void> {
    const { coverArt, log } = this.opts;
    try {
      await finishPendingIndexes(coverArt, coverArt.clock.now() - SWEEP_AGE_MS);
      if (this.storeFailing) {
        this.storeFailing = false;
        log.info({}, 'catalogue watch: index.json files left to rewrite are finished');
      }
    } catch (err) {
      if (!isStoreUnavailable(err)) throw err;
      if (!this.storeFailing) {
        this.storeFailing = true;
        log.warn({ err }, 'catalogue watch: index.json files left to rewrite wait for the store');
      }
    }
  }

  private async tick(): Promise<void> {
    if (this.busy || this.stopped) return;
    this.busy = true;
    const { coverArt, cache, log } = this.opts;
    try {
      const version = await readCounter(coverArt.db, 'catalogue_version');
      if (this.last !== undefined && version !== this.last) {
        cache.clear();
        this.opts.files?.clear();
      }
      this.last = version;
      if (this.failing) {
        this.failing = false;
        log.info({}, 'catalogue watch: the database answers again');
      }
      if (Date.now() - this.lastSweep >= SWEEP_AGE_MS) {
        this.lastSweep = Date.now();
        await this.sweep();
      }
    } catch (err) {
      // Changes cannot be seen meanwhile: answers cached before are not trusted.
      cache.clear();
      this.opts.files?.clear();
      if (!this.failing) {
        this.failing = true;
        log.warn({ err }, 'catalogue watch: cannot read the catalogue version; cached answers are dropped until the database answers');
      }
    } finally {
      this.busy = false;
      this.schedule(this.announced ? this.opts.announcedPollMs : this.opts.pollMs);
    }
  }
}

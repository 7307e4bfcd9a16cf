import type { Db } from '../db/schema.js';
import { isStoreUnavailable } from '../shared/errors.js';
import type { CacheFreshness } from './cache-freshness.js';
import { listingRefreshesSince } from './listing-refresh.js';
import { publishCatalogue, readCatalogueMark } from './mark.js';
import type { Log } from './redis.js';

export interface CatalogueWatchOptions {
  db: Db;
  /**
   * Finishes the index.json files a change left dirty more than `ageMs` ago and answers how
   * many (cover-art's finishPendingIndexes, given by the caller: src/cluster sits below the
   * cover-art module and does not import it; docs/decisions.md, "Layering").
   */
  finishDirtyIndexes(ageMs: number): Promise<number>;
  /**
   * The caches, which the watch's events reach (cluster/cache-freshness.ts): `catalogue-changed`,
   * `watch-blind` and `listing-refreshed`, each raised before the mark it follows is acknowledged.
   */
  caches: CacheFreshness;
  /** Poll interval while no announcements arrive (no Redis, or Redis away). */
  pollMs: number;
  /** Poll interval while announcements arrive: the poll is then only the safety net. */
  announcedPollMs: number;
  log: Log;
}

/** Dirty index.json files older than this are finished by the sweep (younger ones by their own process). */
const SWEEP_AGE_MS = 10_000;

/**
 * Keeps a serving process's caches in step with the catalogue, which other processes
 * change. It follows the catalogue mark (cluster/mark.ts) and raises the events the caches
 * declare (cluster/cache-freshness.ts): `catalogue-changed` when the mark in the database
 * moves, found by a poll, at once when a command signals its change (`refresh`, which also
 * answers the mark the caches now follow, for the acknowledgement), or when a change is
 * announced on Redis; `watch-blind` whenever the process may have missed announcements or
 * cannot read the database; `listing-refreshed` for the listings refreshed since its last
 * look. Every 10 s it also finishes index.json files that a crashed change left dirty.
 */
export class CatalogueWatch {
  private readonly opts: CatalogueWatchOptions;
  private readonly caches: CacheFreshness;
  private last: number | undefined;
  private announced = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The look under way (tick), which stop waits for. */
  private ticking: Promise<void> | undefined;
  private failing = false;
  private storeFailing = false;
  private lastSweep: number;
  private running: Promise<number> | undefined;
  private queued: Promise<number> | undefined;
  private readonly advanced: ((mark: number) => void)[] = [];
  /** The `listing_refreshed` counter as last followed (undefined before the first read). */
  private refreshed: number | undefined;

  constructor(opts: CatalogueWatchOptions) {
    this.opts = opts;
    this.caches = opts.caches;
    this.lastSweep = Date.now();
  }

  /** Calls `fn` with the mark each time the caches have been brought up to a newer one. */
  onAdvance(fn: (mark: number) => void): void {
    this.advanced.push(fn);
  }

  /** The mark the caches follow (undefined before the first read). */
  get mark(): number | undefined {
    return this.last;
  }

  start(): void {
    void this.tick();
  }

  /** A change was announced: forget cached answers now. */
  changed(mark: number | undefined): void {
    this.caches.raise('catalogue-changed');
    // The poll need not empty the caches again for this mark.
    if (mark !== undefined && (this.last === undefined || mark > this.last)) this.advance(mark);
  }

  /**
   * Reads the mark from the database (in a read that starts after this call), empties the
   * caches if it moved, and answers the mark they now follow. Calls that arrive while a
   * read is under way share the next one.
   */
  refresh(): Promise<number> {
    if (this.queued !== undefined) return this.queued;
    if (this.running === undefined) return this.check();
    const next = this.running.then(
      () => undefined,
      () => undefined,
    ).then(() => {
      this.queued = undefined;
      return this.check();
    });
    this.queued = next;
    return next;
  }

  /**
   * Whether announcements arrive. On every switch the caches are emptied (announcements may
   * have been missed while the subscription was away) and the poll changes pace.
   */
  setAnnounced(on: boolean): void {
    if (on === this.announced) return;
    this.announced = on;
    this.caches.raise('watch-blind');
    if (!on) this.schedule(0);
    else this.schedule(this.opts.announcedPollMs);
  }

  /** Stops polling; resolves once a look under way has finished (the database may close then). */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    return this.ticking ?? Promise.resolve();
  }

  /** Follows the listings refreshed since the last look (cluster/listing-refresh.ts). */
  async followRefreshes(): Promise<void> {
    const { seq, gids } = await listingRefreshesSince(this.opts.db, this.refreshed);
    if (gids === 'all') this.caches.listingRefreshed('all');
    else for (const gid of gids) this.caches.listingRefreshed(gid);
    this.refreshed = seq;
  }

  private advance(mark: number): void {
    this.last = mark;
    for (const fn of this.advanced) fn(mark);
  }

  private check(): Promise<number> {
    const run = (async () => {
      const mark = await readCatalogueMark(this.opts.db);
      if (this.last === undefined || mark > this.last) {
        if (this.last !== undefined) this.caches.raise('catalogue-changed');
        this.advance(mark);
      } else if (mark < this.last) {
        // Older than an announcement already applied (or a database put back): empty anyway.
        this.caches.raise('catalogue-changed');
        this.last = mark;
      }
      return mark;
    })();
    this.running = run;
    void run.then(
      () => this.settle(run),
      () => this.settle(run),
    );
    return run;
  }

  private settle(run: Promise<number>): void {
    if (this.running === run) this.running = undefined;
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref();
  }

  /**
   * Finishes dirty index.json files, then publishes that the catalogue's files changed (so
   * every process's file cache lets go of the old ones). The store being away is not the
   * database being away: the caches stay, the marks stay for the next sweep, and it is said
   * once per spell.
   */
  private async sweep(): Promise<void> {
    const { db, log } = this.opts;
    try {
      const finished = await this.opts.finishDirtyIndexes(SWEEP_AGE_MS);
      if (finished > 0) await publishCatalogue(db);
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

  private tick(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const ticking = this.look().finally(() => {
      if (this.ticking === ticking) this.ticking = undefined;
    });
    this.ticking = ticking;
    return ticking;
  }

  private async look(): Promise<void> {
    const { log } = this.opts;
    try {
      await this.refresh();
      await this.followRefreshes();
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
      this.caches.raise('watch-blind');
      // Stopped while looking: the database is closing under it, which is no news.
      if (!this.failing && !this.stopped) {
        this.failing = true;
        log.warn({ err }, 'catalogue watch: cannot read the catalogue version; cached answers are dropped until the database answers');
      }
    } finally {
      this.schedule(this.announced ? this.opts.announcedPollMs : this.opts.pollMs);
    }
  }
}

import type { Db } from '../db/schema.js';
import { isStoreUnavailable } from '../shared/errors.js';
import { listingRefreshesSince } from './listing-refresh.js';
import { publishCatalogue, readCatalogueMark } from './mark.js';
import type { Log } from './redis.js';

/**
 * Something a serving process keeps that must not outlive a catalogue change: the response
 * cache, the file cache. `clear()` is called synchronously, before the change is
 * acknowledged to the command that made it; after it returns, nothing from before the
 * change may be answered.
 */
export interface ChangeFollower {
  clear(): void;
  /**
   * Forgets what it keeps of one release's listings (a listing refreshed with new measures,
   * cluster/listing-refresh.ts); absent: `clear` is called instead.
   */
  forgetRelease?(gid: string): void;
}

export interface CatalogueWatchOptions {
  db: Db;
  /**
   * Finishes the index.json files a change left dirty more than `ageMs` ago and answers how
   * many (cover-art's finishPendingIndexes, given by the caller: src/cluster sits below the
   * cover-art module and does not import it; docs/decisions.md, "Layering").
   */
  finishDirtyIndexes(ageMs: number): Promise<number>;
  /** Emptied on every change (more can be added with `follow`). */
  followers: ChangeFollower[];
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
 * change. It follows the catalogue mark (cluster/mark.ts): the caches are emptied when the
 * mark in the database moves, found by a poll, at once when a command signals its change
 * (`refresh`, which also answers the mark the caches now follow, for the acknowledgement),
 * when a change is announced on Redis, and whenever the process may have missed
 * announcements. Every 10 s it also finishes index.json files that a crashed change left
 * dirty.
 */
export class CatalogueWatch {
  private readonly opts: CatalogueWatchOptions;
  private readonly followers: ChangeFollower[];
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
    this.followers = [...opts.followers];
    this.lastSweep = Date.now();
  }

  /** Empties `cache` on every change from now on (the hook for caches made after the watch). */
  follow(cache: ChangeFollower): void {
    this.followers.push(cache);
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
    this.clearAll();
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
    this.clearAll();
    if (!on) this.schedule(0);
    else this.schedule(this.opts.announcedPollMs);
  }

  /** Stops polling; resolves once a look under way has finished (the database may close then). */
  stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    return this.ticking ?? Promise.resolve();
  }

  /** Forgets one release's cached listings in every follower (those that cannot: emptied). */
  forgetRelease(gid: string): void {
    for (const f of this.followers) {
      if (f.forgetRelease !== undefined) f.forgetRelease(gid);
      else f.clear();
    }
  }

  /** Follows the listings refreshed since the last look (cluster/listing-refresh.ts). */
  async followRefreshes(): Promise<void> {
    const { seq, gids } = await listingRefreshesSince(this.opts.db, this.refreshed);
    if (gids === 'all') this.clearAll();
    else for (const gid of gids) this.forgetRelease(gid);
    this.refreshed = seq;
  }

  private clearAll(): void {
    for (const f of this.followers) f.clear();
  }

  private advance(mark: number): void {
    this.last = mark;
    for (const fn of this.advanced) fn(mark);
  }

  private check(): Promise<number> {
    const run = (async () => {
      const mark = await readCatalogueMark(this.opts.db);
      if (this.last === undefined || mark > this.last) {
        if (this.last !== undefined) this.clearAll();
        this.advance(mark);
      } else if (mark < this.last) {
        // Older than an announcement already applied (or a database put back): empty anyway.
        this.clearAll();
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
      this.clearAll();
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

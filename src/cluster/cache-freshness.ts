/*
 * The freshness model of a serving process's caches (docs/layout.md, "Caches and what empties
 * them"; docs/decisions.md, "One freshness model"). Each cache declares, once, beside its
 * code, the events that empty it (`emptiedBy`). The events are named here; those the catalogue
 * watch and the website raise reach the caches registered with a CacheFreshness, which alone
 * calls them. A cache that is not registered learns its events otherwise, as its declaration
 * says (the website's page cache reads the catalogue version on each request), or is emptied
 * by time alone (the upstream's 404s).
 */

/** What can make a cached answer stale. */
export type FreshnessEvent =
  /**
   * The catalogue mark moved (cluster/mark.ts): a change by any process, found by the watch's
   * poll, a command's signal, PostgreSQL NOTIFY or Redis.
   */
  | 'catalogue-changed'
  /**
   * The watch cannot vouch for what is kept: the database does not answer, or announcements
   * started or stopped arriving (some may have been missed meanwhile).
   */
  | 'watch-blind'
  /**
   * A release's listing was rewritten with new measures (cluster/listing-refresh.ts): by this
   * process's pull-through or listing on demand, or by another's. Forgets that release
   * (`forgetRelease`); too many at once to know which: emptied.
   */
  | 'listing-refreshed'
  /** This process's website made a change, before the change's mark is published (which every process then follows). */
  | 'website-changed';

/** A cache's declaration of what empties it. */
export interface Freshness {
  readonly emptiedBy: readonly FreshnessEvent[];
}

/** A cache the events reach through a CacheFreshness. */
export interface FollowingCache extends Freshness {
  /**
   * Empties it. Synchronous: once it returns, nothing kept before may be answered (a request
   * already under way must not store what it made before: the cache's generation).
   */
  clear(): void;
  /** Forgets what it keeps of one release's listings; absent: `clear` instead. */
  forgetRelease?(gid: string): void;
}

/** The caches of a serving process that follow the events, and the one place that empties them. */
export class CacheFreshness {
  private readonly caches: FollowingCache[] = [];

  /** From now on, the events `cache` declares empty it. */
  register(cache: FollowingCache): void {
    this.caches.push(cache);
  }

  /** Empties every cache that declares `event`. */
  raise(event: Exclude<FreshnessEvent, 'listing-refreshed'>): void {
    for (const c of this.caches) if (c.emptiedBy.includes(event)) c.clear();
  }

  /** The listing of release `gid` was refreshed ('all': more than can be told apart): forgotten by every cache that declares it. */
  listingRefreshed(gid: string | 'all'): void {
    for (const c of this.caches) {
      if (!c.emptiedBy.includes('listing-refreshed')) continue;
      if (gid !== 'all' && c.forgetRelease !== undefined) c.forgetRelease(gid);
      else c.clear();
    }
  }
}

/*
 * Listings rewritten for new measures, a few at a time (docs/decisions.md, "A listing refreshed is
 * forgotten per release"). A file stored by pull-through or made on demand records its measures
 * in its image's row at once and marks its release's index.json dirty in the same transaction
 * (cover-art/images/measure.ts); the listing itself is rewritten here, soon after: a burst of thumbnails
 * of one release (a gallery page asking for 20 sizes, a client walking a release) rewrites its
 * index.json and records its refresh once, not once per file. The dirty mark is what makes this
 * safe: a process stopped before its rewrite leaves the release dirty, and the next start or any
 * serving process's catalogue watch (its sweep of listings dirty for more than 10 s) rewrites it.
 */
import { recordListingRefresh } from '../../cluster/listing-refresh.js';
import { failpoint } from '../../shared/failpoint.js';
import type { IndexDeps } from '../deps.js';
import { writeIndex } from './indexer.js';

/** A release whose listing waits to be rewritten. */
export interface PendingRelease {
  id: number;
  gid: string;
}

/** Where a failed rewrite is said (the request's logger that asked last). */
export interface RewriteLog {
  warn(obj: object, msg: string): void;
}

export interface ListingRewriteOptions {
  /** Milliseconds from the first release waiting to the rewrite (default REWRITE_DELAY_MS). */
  delayMs?: number;
  /** Releases waiting at most; one more is rewritten at once by its caller (default MAX_PENDING). */
  maxPending?: number;
  /** Told of each release whose listing was rewritten (this process's caches forget it). */
  refreshed?: ((gid: string) => void) | undefined;
}

/** Milliseconds a listing waits for more measures of its release before it is rewritten. */
const REWRITE_DELAY_MS = 200;
/** Releases waiting per process: beyond, the listing is rewritten by the request that measured it. */
const MAX_PENDING = 256;

/** The releases of one process whose listings wait to be rewritten, and their rewriting. */
export class ListingRewrites {
  private readonly deps: IndexDeps;
  private readonly opts: ListingRewriteOptions;
  private pending = new Map<number, PendingRelease>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private log: RewriteLog | undefined;
  /** Listings rewritten, and rewrites that failed (left dirty for the sweep). */
  readonly counts = { rewritten: 0, failed: 0 };

  constructor(deps: IndexDeps, opts: ListingRewriteOptions = {}) {
    this.deps = deps;
    this.opts = opts;
  }

  /** Releases waiting now. */
  get size(): number {
    return this.pending.size;
  }

  /**
   * Has `release`'s listing rewritten soon (its index.json must already be marked dirty, so that
   * nothing is lost if this process stops first). When MAX_PENDING releases already wait, it is
   * rewritten now, before this returns.
   */
  async add(release: PendingRelease, log: RewriteLog): Promise<void> {
    this.log = log;
    if (this.pending.has(release.id)) return;
    if (this.pending.size >= (this.opts.maxPending ?? MAX_PENDING)) {
      await this.rewrite(release);
      return;
    }
    this.pending.set(release.id, release);
    this.schedule();
  }

  /** Rewrites every listing waiting now, and those a rewrite in progress leaves (tests, a stopping server). */
  async flush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    while (this.running !== undefined || this.pending.size > 0) {
      if (this.running !== undefined) await this.running;
      else await this.run();
    }
  }

  private schedule(): void {
    // One timer at a time; a rewrite in progress schedules the next when it ends.
    if (this.timer !== undefined || this.running !== undefined) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.run();
    }, this.opts.delayMs ?? REWRITE_DELAY_MS);
    this.timer.unref();
  }

  private run(): Promise<void> {
    const batch = [...this.pending.values()];
    this.pending = new Map();
    const running = (async () => {
      // Tests stop each batch here, to show what one batch holds.
      if (batch.length > 0) await failpoint('listing-rewrite', batch.map((r) => r.gid).join(','));
      for (const release of batch) await this.rewrite(release);
    })();
    this.running = running;
    return running.finally(() => {
      this.running = undefined;
      if (this.pending.size > 0) this.schedule();
    });
  }

  /**
   * Rewrites one listing and records its refresh for the other processes (after the new
   * index.json is stored, so no process keeps the old one again). A failure is logged: the
   * release stays dirty, and the catalogue watch's sweep finishes it.
   */
  private async rewrite(release: PendingRelease): Promise<void> {
    try {
      await writeIndex(this.deps, release.id);
      await recordListingRefresh(this.deps.db, release.gid);
      this.counts.rewritten++;
      this.opts.refreshed?.(release.gid);
    } catch (err) {
      this.counts.failed++;
      this.log?.warn({ release: release.gid, err: (err as Error).message }, 'a listing with new measures could not be rewritten yet; the sweep finishes it');
    }
  }
}

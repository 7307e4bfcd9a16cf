/** Characters of the layout around a body, about (header, stylesheet link). */
const LAYOUT_CHARS = 1000;

/** A page's title and the HTML of its body (inside the layout). */
export interface CachedPage {
  title: string;
  body: string;
  /** The whole page for a visitor (no viewer, no notice), ready to send: made once, on first use. */
  visitorPage?: Buffer;
}

import type { Freshness, FreshnessEvent } from '../cluster/cache-freshness.js';
import { listingRefreshesSince } from '../cluster/listing-refresh.js';
import { readCounter, type CoverArtDeps } from '../cover-art/index.js';

/**
 * Rendered page bodies (the part inside the layout, the same for every viewer of a kind) by
 * path, valid while the catalogue version they were made at is the current one. Each request
 * reads that version (one indexed row), so a change by any process (the CLI, another serve)
 * shows on the next request: read-your-writes without a watch. Bounded in entries and in
 * characters; the oldest entries go first. Never holds a viewer's name or CSRF token.
 */
export class PageCache implements Freshness {
  /**
   * What empties it (cluster/cache-freshness.ts), learned by its own reads on each request
   * (`current`), not from the catalogue watch, which a process without the cover art listener
   * has none of: a committed change (`catalogue_version`, the part of the mark a page depends
   * on), and refreshed listings (their releases' pages and every group's are forgotten).
   */
  readonly emptiedBy: readonly FreshnessEvent[] = ['catalogue-changed', 'listing-refreshed'];
  private readonly entries = new Map<string, CachedPage>();
  private held = 0;
  private version = -1;
  /** The `listing_refreshed` counter as last followed (cluster/listing-refresh.ts). */
  private refreshed: number | undefined;

  constructor(
    private readonly limits: { maxEntries: number; maxChars: number } = { maxEntries: 2000, maxChars: 16_000_000 },
  ) {}

  /** The catalogue version now; entries made at another one are dropped. */
  async current(db: CoverArtDeps['db']): Promise<number> {
    const version = await readCounter(db, 'catalogue_version');
    if (version !== this.version) {
      this.entries.clear();
      this.held = 0;
      this.version = version;
    }
    const { seq, gids } = await listingRefreshesSince(db, this.refreshed);
    if (gids === 'all') this.forget(() => true);
    // A release's listing refreshed with new measures: its pages, and the groups' (which show a release's images).
    else if (gids.length > 0) this.forget((key) => key.startsWith('group ') || gids.some((gid) => key.includes(gid)));
    this.refreshed = seq;
    return version;
  }

  private forget(which: (key: string) => boolean): void {
    for (const [k, v] of this.entries) {
      if (!which(k)) continue;
      this.entries.delete(k);
      this.held -= k.length + v.title.length + 2 * v.body.length + LAYOUT_CHARS;
    }
  }

  /** The body for `key`, made by `make` when missing (and kept if the catalogue did not change meanwhile). */
  async body(db: CoverArtDeps['db'], key: string, make: () => Promise<CachedPage>): Promise<CachedPage> {
    const version = await this.current(db);
    const hit = this.entries.get(key);
    if (hit !== undefined) return hit;
    const made = await make();
    if (this.version === version) this.put(key, made);
    return made;
  }

  private put(key: string, page: CachedPage): void {
    // The visitor's page is counted too (made later, it is at most the body plus the layout).
    const chars = key.length + page.title.length + 2 * page.body.length + LAYOUT_CHARS;
    if (chars > this.limits.maxChars) return;
    for (const [k, v] of this.entries) {
      if (this.held + chars <= this.limits.maxChars && this.entries.size < this.limits.maxEntries) break;
      this.entries.delete(k);
      this.held -= k.length + v.title.length + 2 * v.body.length + LAYOUT_CHARS;
    }
    this.entries.set(key, page);
    this.held += chars;
  }

  get size(): number {
    return this.entries.size;
  }
}

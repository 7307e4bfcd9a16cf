import type { Db } from '../../db/schema.js';
import { isStoreUnavailable } from '../../shared/errors.js';
import { singleFlight } from '../../shared/single-flight.js';
import type { ObjectStore } from '../../storage/index.js';
import { ensureEventListing, eventIndexFill } from '../catalogue/events.js';
import { writeIndex } from './indexer.js';
import type { ListingUrls } from './listing.js';
import { hasImages } from '../catalogue/repo.js';

interface ListingDeps {
  db: Db;
  store: ObjectStore;
  urls: ListingUrls;
  approval?: 'auto' | 'review';
}

const INDEX_KEY_RE = /^mbid-([0-9a-f-]{36})\/index\.json$/;

/**
 * Listings that were never written (an import writes none) are written from the database
 * when first asked for, through the indexer's own writeIndex (its row lock orders it with
 * every other writer, in this process or another), so a listing never depends on a file
 * nobody wrote (docs/decisions.md, "Listings on demand"). One write per release at a time
 * in this process; another process asking at once writes the same bytes after it.
 */
export class ListingsOnDemand {
  private readonly deps: ListingDeps;
  private readonly writing = new Map<number, Promise<void>>();
  private readonly writingEvents = new Map<number, Promise<void>>();
  private readonly fillingEvents = new Map<string, Promise<'stored' | undefined>>();

  constructor(deps: ListingDeps) {
    this.deps = deps;
  }

  /**
   * Before `/release/{mbid}/` redirects to the listing: writes it when sleeve never did
   * (`release.index_urls` is null). A store that is away leaves it to the file server's
   * miss (`fill`), which answers 503 then.
   */
  async ensure(releaseId: number): Promise<void> {
    const row = await this.deps.db.selectFrom('release').select('index_urls').where('id', '=', releaseId).executeTakeFirst();
    if (row === undefined || row.index_urls !== null) return;
    await this.write(releaseId).catch((err: unknown) => {
      if (!isStoreUnavailable(err)) throw err;
    });
  }

  /**
   * The file server's miss of `mbid-{m}/index.json`: written from the database when the
   * release has images ('stored', to be read again), else undefined (404).
   */
  async fill(key: string): Promise<'stored' | undefined> {
    const gid = INDEX_KEY_RE.exec(key)?.[1];
    if (gid === undefined) return undefined;
    const release = await this.deps.db.selectFrom('release').select('id').where('gid', '=', gid).executeTakeFirst();
    // Not a release's: an event's, perhaps (the Event Art Archive shares the layout).
    if (release === undefined) return this.fillEvent(gid);
    if (!(await hasImages(this.deps.db, release.id))) return undefined;
    await this.write(release.id);
    return 'stored';
  }

  /** As `ensure`, for an event (`/event/{mbid}/`). */
  async ensureEvent(eventId: number): Promise<void> {
    await singleFlight(this.writingEvents, eventId, () => ensureEventListing(this.deps, eventId));
  }

  private fillEvent(gid: string): Promise<'stored' | undefined> {
    return singleFlight(this.fillingEvents, gid, () => eventIndexFill(this.deps, gid));
  }

  private write(releaseId: number): Promise<void> {
    return singleFlight(this.writing, releaseId, () => writeIndex(this.deps, releaseId));
  }
}

import type { UpstreamConfig } from '../config/upstream.js';
import type { CoverArtDeps } from './deps.js';
import type { FileFill } from './file-server.js';
import { ListingsOnDemand } from './listing-on-demand.js';
import { recordStoredFile } from './measure.js';
import { Upstream, type UpstreamLog } from './upstream.js';

/**
 * A file fetched through: what it says of its image goes into the listings (cover-art/measure.ts).
 * A failure to measure it is logged, not answered: the file is stored and is served.
 */
async function recordFetched(deps: CoverArtDeps, key: string, log: UpstreamLog, refreshed: ((gid: string) => void) | undefined): Promise<void> {
  try {
    const gid = await recordStoredFile(deps, key);
    // This process forgets the release's cached listings now; the others at their next look.
    if (gid !== undefined) refreshed?.(gid);
  } catch (err) {
    log.warn({ key, err: (err as Error).message }, 'the fetched file could not be measured for the listings');
  }
}

/** What a serving process does about files its store lacks. */
export interface StoreMisses {
  /** Writes never-written listings before `/release/{mbid}/` redirects to them. */
  listings: ListingsOnDemand;
  /** The pull-through, when SLEEVE_UPSTREAM_URL is set. */
  upstream: Upstream | undefined;
  /** The file server's miss: index.json written from the database, images fetched through. */
  fill: FileFill;
}

/**
 * Listings on demand, and pull-through from `upstream` when it is configured (undefined: off).
 * `refreshed` is told of a release whose listing a stored file refreshed (the catalogue watch's forgetRelease).
 */
export function storeMisses(deps: CoverArtDeps, upstream: UpstreamConfig | undefined, refreshed?: (gid: string) => void): StoreMisses {
  const listings = new ListingsOnDemand(deps);
  const through = upstream === undefined ? undefined : new Upstream({ db: deps.db, store: deps.store, clock: deps.clock, config: upstream, maxPixels: deps.limits.maxPixels });
  return {
    listings,
    upstream: through,
    // index.json is never fetched: sleeve writes it from its database.
    fill: async (key, log) => {
      if (key.endsWith('/index.json')) return listings.fill(key);
      const filled = await through?.fill(key, log);
      if (filled === 'stored') await recordFetched(deps, key, log, refreshed);
      return filled;
    },
  };
}

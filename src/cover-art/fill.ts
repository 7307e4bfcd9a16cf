import type { UpstreamConfig } from '../config/upstream.js';
import type { CoverArtDeps } from './deps.js';
import type { FileFill } from './file-server.js';
import { ListingsOnDemand } from './listing-on-demand.js';
import { Upstream } from './upstream.js';

/** What a serving process does about files its store lacks. */
export interface StoreMisses {
  /** Writes never-written listings before `/release/{mbid}/` redirects to them. */
  listings: ListingsOnDemand;
  /** The pull-through, when SLEEVE_UPSTREAM_URL is set. */
  upstream: Upstream | undefined;
  /** The file server's miss: index.json written from the database, images fetched through. */
  fill: FileFill;
}

/** Listings on demand, and pull-through from `upstream` when it is configured (undefined: off). */
export function storeMisses(deps: CoverArtDeps, upstream: UpstreamConfig | undefined): StoreMisses {
  const listings = new ListingsOnDemand(deps);
  const through = upstream === undefined ? undefined : new Upstream({ db: deps.db, store: deps.store, clock: deps.clock, config: upstream, maxPixels: deps.limits.maxPixels });
  return {
    listings,
    upstream: through,
    // index.json is never fetched: sleeve writes it from its database.
    fill: async (key, log) => (key.endsWith('/index.json') ? listings.fill(key) : through?.fill(key, log)),
  };
}

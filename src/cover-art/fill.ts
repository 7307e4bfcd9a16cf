import type { UpstreamConfig } from '../config/upstream.js';
import type { CoverArtDeps } from './deps.js';
import { Derivatives } from './derivatives.js';
import type { FileFill, FileResponse } from './file-server.js';
import type { ThumbnailFormat } from './keys.js';
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
  /** Thumbnails made on demand, when sizes or formats beyond the interface's are on. */
  derivatives: Derivatives | undefined;
  /** The file server's miss: index.json written from the database, images fetched through. */
  fill: FileFill;
}

/** What storeMisses needs besides the deps. */
export interface StoreMissOptions {
  /** The pull-through (SLEEVE_UPSTREAM_URL); undefined: off. */
  upstream: UpstreamConfig | undefined;
  /** Thumbnail sizes and formats answered (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS); undefined: the interface's only. */
  thumbnails?: { sizes: readonly number[]; formats: readonly ThumbnailFormat[] } | undefined;
  /** Told of a release whose listing a stored file refreshed (the catalogue watch's forgetRelease). */
  refreshed?: ((gid: string) => void) | undefined;
}

/**
 * Listings on demand, thumbnails of the sizes and formats made on demand (derivatives.ts), and
 * pull-through from the upstream when it is configured.
 */
export function storeMisses(deps: CoverArtDeps, options: StoreMissOptions): StoreMisses {
  const { upstream, refreshed } = options;
  const listings = new ListingsOnDemand(deps);
  const through = upstream === undefined ? undefined : new Upstream({ db: deps.db, store: deps.store, clock: deps.clock, config: upstream, maxPixels: deps.limits.maxPixels });
  const fetched = async (key: string, log: UpstreamLog): Promise<'stored' | FileResponse | undefined> => {
    const filled = await through?.fill(key, log);
    if (filled === 'stored') await recordFetched(deps, key, log, refreshed);
    return filled;
  };
  const thumbs = options.thumbnails;
  const derivatives =
    thumbs === undefined
      ? undefined
      : new Derivatives(
          { db: deps.db, store: deps.store, original: fetched },
          { sizes: thumbs.sizes, formats: thumbs.formats, maxPixels: deps.limits.maxPixels, maxBytes: Math.max(deps.limits.maxBytes, upstream?.maxBytes ?? 0) },
        );
  return {
    listings,
    upstream: through,
    derivatives,
    fill: async (key, log) => {
      // index.json is never fetched: sleeve writes it from its database.
      if (key.endsWith('/index.json')) return listings.fill(key);
      const parts = derivatives?.madeHere(key);
      if (parts === undefined) return fetched(key, log);
      const made = await (derivatives as Derivatives).make(key, parts, log);
      // A JPEG's dimensions go into the listing (thumbnail_dimensions); the other formats' are the same.
      if (made === 'stored' && parts.format === 'jpeg') await recordFetched(deps, key, log, refreshed);
      return made;
    },
  };
}

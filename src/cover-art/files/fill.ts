import type { UpstreamConfig } from '../../config/upstream.js';
import type { CoverArtDeps } from '../deps.js';
import { Derivatives } from './derivatives.js';
import type { FileFill, FileResponse } from './file-server.js';
import type { ThumbnailFormat } from './keys.js';
import { ListingsOnDemand } from '../listings/listing-on-demand.js';
import { ListingRewrites } from '../listings/listing-rewrites.js';
import { recordStoredFile, recordThumbnailMade, type MeasuredRelease } from '../images/measure.js';
import { Upstream, type UpstreamLog } from '../upstream/upstream.js';

/**
 * A file fetched through or made here: what it says of its image goes into its row at once, and
 * its release's listing is rewritten soon after (cover-art/images/measure.ts, listing-rewrites.ts). A
 * failure to measure it is logged, not answered: the file is stored and is served.
 */
async function recordMeasured(rewrites: ListingRewrites, key: string, log: UpstreamLog, measure: () => Promise<MeasuredRelease | undefined>): Promise<void> {
  try {
    const release = await measure();
    if (release !== undefined) await rewrites.add(release, log);
  } catch (err) {
    log.warn({ key, err: (err as Error).message }, 'the stored file could not be measured for the listings');
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
  /** Listings waiting to be rewritten with the measures of files stored here. */
  rewrites: ListingRewrites;
  /** The file server's miss: index.json written from the database, images fetched through. */
  fill: FileFill;
}

/** What storeMisses needs besides the deps. */
export interface StoreMissOptions {
  /** The pull-through (SLEEVE_UPSTREAM_URL); undefined: off. */
  upstream: UpstreamConfig | undefined;
  /** Thumbnail sizes and formats answered (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS); undefined: the interface's only. */
  thumbnails?: { sizes: readonly number[]; formats: readonly ThumbnailFormat[] } | undefined;
  /** Told of a release whose listing was rewritten for files stored here (the catalogue watch's forgetRelease). */
  refreshed?: ((gid: string) => void) | undefined;
}

/**
 * Listings on demand, thumbnails of the sizes and formats made on demand (derivatives.ts), and
 * pull-through from the upstream when it is configured.
 */
export function storeMisses(deps: CoverArtDeps, options: StoreMissOptions): StoreMisses {
  const { upstream, refreshed } = options;
  const listings = new ListingsOnDemand(deps);
  // This process forgets a release's cached listings once its listing is rewritten; the others at their next look.
  const rewrites = new ListingRewrites(deps, { refreshed });
  const through = upstream === undefined ? undefined : new Upstream({ db: deps.db, store: deps.store, clock: deps.clock, config: upstream, maxPixels: deps.limits.maxPixels });
  const fetched = async (key: string, log: UpstreamLog): Promise<'stored' | FileResponse | undefined> => {
    const filled = await through?.fill(key, log);
    if (filled === 'stored') await recordMeasured(rewrites, key, log, () => recordStoredFile(deps, key, deps.clock.now()));
    return filled;
  };
  const thumbs = options.thumbnails;
  const derivatives =
    thumbs === undefined
      ? undefined
      : new Derivatives(
          {
            db: deps.db,
            store: deps.store,
            original: fetched,
            // A JPEG's dimensions go into the listing (thumbnail_dimensions); the other formats' are the same.
            made: async (key, parts, dims, log) => {
              if (parts.format !== 'jpeg') return;
              await recordMeasured(rewrites, key, log, () => recordThumbnailMade(deps.db, parts, parts.size as number, dims, deps.clock.now()));
            },
          },
          { sizes: thumbs.sizes, formats: thumbs.formats, maxPixels: deps.limits.maxPixels, maxBytes: Math.max(deps.limits.maxBytes, upstream?.maxBytes ?? 0) },
        );
  return {
    listings,
    upstream: through,
    derivatives,
    rewrites,
    fill: async (key, log) => {
      // index.json is never fetched: sleeve writes it from its database.
      if (key.endsWith('/index.json')) return listings.fill(key);
      const parts = derivatives?.madeHere(key);
      if (parts === undefined) return fetched(key, log);
      return (derivatives as Derivatives).make(key, parts, log);
    },
  };
}

import type { Db } from '../db/schema.js';
import type { Clock } from '../shared/clock.js';
import type { ObjectStore } from '../storage/index.js';
import type { FileServer } from './files/file-server.js';
import type { ListingUrls } from './listings/listing.js';
import type { Queryable } from './catalogue/repo.js';
import type { ResponseCache } from './api/response-cache.js';

/** What the operator added to the interface's thumbnails (ApiDeps.thumbnails). */
export interface ThumbnailOptions {
  /** Sizes answered besides 250, 500 and 1200 (SLEEVE_THUMBNAIL_SIZES), matched exactly. */
  added: ReadonlySet<number>;
  /** Formats besides JPEG (SLEEVE_THUMBNAIL_FORMATS): named in the path (`front-600.webp`), or chosen by Accept. */
  formats: readonly ('webp' | 'avif')[];
  /** Whether Accept chooses the format (off under SLEEVE_IMAGE_RESPONSE=bytes: docs/decisions.md, "Thumbnail formats negotiated at the redirect"). */
  negotiate: boolean;
}

/** What the cover art module needs from the outside world (runtime.ts makes it). */
export interface CoverArtDeps {
  db: Db;
  store: ObjectStore;
  clock: Clock;
  urls: ListingUrls;
  limits: { maxBytes: number; maxPixels: number };
  /**
   * The operator's approval policy (SLEEVE_APPROVAL): `review` leaves the changes of editors
   * without the approver role pending until an approver decides (cover-art/catalogue/approval.ts).
   * Absent: `auto`, every change applied at once.
   */
  approval?: 'auto' | 'review';
  /**
   * Told of work a committed change left for later because the store was away (an
   * index.json to rewrite, files to remove); the change itself stands. Absent: silence.
   */
  warn?: (message: string) => void;
}

/** What writing listings (index.json) needs. */
export type IndexDeps = Pick<CoverArtDeps, 'db' | 'store' | 'urls' | 'approval'>;

/** What the read API needs: a database and where its URLs point. */
export interface ApiDeps {
  db: Queryable;
  urls: ListingUrls;
  /** Prefix of redirect targets (`SLEEVE_IMAGE_BASE_URL`, docs/file-serving.md, "The built-in file server"). */
  imageBaseUrl: string;
  /** The approval policy (CoverArtDeps.approval): under `review` only approved images are covers (repo.ts, coversNeedApproval). Absent: `auto`. */
  approval?: 'auto' | 'review';
  /** Sizes and formats besides the interface's (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS). Absent: the interface's only. */
  thumbnails?: ThumbnailOptions;
  /** Writes a release's listing if sleeve never did, before redirecting to it (cover-art/listings/listing-on-demand.ts). */
  ensureListing?: (releaseId: number) => Promise<void>;
  /**
   * The Event Art Archive's host (SLEEVE_EVENT_BASE_URL's, lower case, with its port when not
   * the default): requests naming it answer /event/ paths only (api.ts, hostArchive).
   */
  eventHost?: string;
  /** The same for an event's listing (`/event/{mbid}/`). */
  ensureEventListing?: (eventId: number) => Promise<void>;
}

/** What the cover art listener's routes need. */
export interface CoverArtRouteDeps {
  api: ApiDeps;
  cache: ResponseCache;
  /**
   * The built-in file server for /download/*, or none. The listener's front door answers
   * GET and HEAD (app.ts); the route answers the other methods.
   */
  files: FileServer | undefined;
  /**
   * SLEEVE_IMAGE_RESPONSE=bytes: the image endpoints answer with the file (through `files`,
   * fetched through on a miss) instead of their 307. Absent or false: the 307.
   */
  imageBytes?: boolean;
}

import type { PageContext } from '../auth/pages.js';
import type { ApiDeps, CoverArtDeps } from '../cover-art/index.js';
import type { UploadSlots } from './upload-body.js';
import type { VisitorPages } from './visitor-pages.js';

/**
 * What the website needs: the authorization module's page context (its deps, the viewer, the
 * client's address) and the cover art module's deps (the catalogue, the store, the listing URLs).
 * The website composes the two modules; neither imports it, nor each other.
 */
export interface WebsiteDeps {
  pages: PageContext;
  coverArt: CoverArtDeps;
  /** The read API's deps: listings as the cover art API serves them. */
  api: ApiDeps;
  /** Where uploads stream to before they are checked (a folder of the data directory); the system's temporary folder when absent. */
  uploadDir?: string;
  /** The bounds on uploads at once, shared by the write API and the upload page (websiteRoutes makes them when absent). */
  uploadSlots?: UploadSlots;
  /**
   * Called after each change the website made (committed, index.json written): tells the serving
   * processes, and waits until they show it, as a CLI command does (read-your-writes). Never throws.
   */
  afterChange?: () => Promise<void>;
  /** The gallery pages kept for anonymous visitors, answered before routing (visitor-pages.ts); none when absent. */
  visitors?: VisitorPages;
}

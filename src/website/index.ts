import type { FastifyInstance } from 'fastify';
import { artApiRoutes } from './api/routes.js';
import type { WebsiteDeps } from './deps.js';
import { SITE_ENTITIES } from './entities.js';
import { assetRoutes } from './pages/assets.js';
import { curationPages } from './pages/curate.js';
import { editPages } from './pages/edits.js';
import { galleryPages } from './pages/gallery.js';
import { homePages } from './pages/home.js';
import { websiteErrors } from './respond.js';
import { makeSite } from './site.js';
import { openApiRoute } from './openapi.js';
import { uploadPageRoutes } from './upload-page.js';
import { makeUploadSlots } from './uploads.js';

export type { WebsiteDeps } from './deps.js';

/**
 * The website's cover art part, on the HTTPS listener beside the authorization pages: the
 * cover art pages (browse, upload, curate, edit history) and the write API for tools.
 * Registered by serve() through buildAuthApp's `extend`.
 */
export async function websiteRoutes(app: FastifyInstance, given: WebsiteDeps): Promise<void> {
  // One user's uploads are counted across the write API and the upload page.
  const deps: WebsiteDeps = { ...given, uploadSlots: given.uploadSlots ?? makeUploadSlots() };
  const site = makeSite(deps);
  app.setErrorHandler(websiteErrors(site.csp, site.viewerOf));
  assetRoutes(app);
  homePages(app, site);
  galleryPages(app, site);
  curationPages(app, site);
  editPages(app, site);
  for (const entity of SITE_ENTITIES) await app.register(artApiRoutes, { ...deps, entity, prefix: entity.apiPrefix });
  await app.register(openApiRoute, deps);
  await app.register(uploadPageRoutes, deps);
}

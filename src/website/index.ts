import type { FastifyInstance } from 'fastify';
import type { WebsiteDeps } from './deps.js';

export type { WebsiteDeps } from './deps.js';

/**
 * The website's cover art part, on the HTTPS listener beside the authorization pages: the
 * cover art pages (browse, upload, curate, edit history) and the write API for tools.
 * Registered by serve() through buildAuthApp's `extend`.
 */
export async function websiteRoutes(app: FastifyInstance, deps: WebsiteDeps): Promise<void> {
  void app;
  void deps;
}

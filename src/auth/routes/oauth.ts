import type { FastifyInstance } from 'fastify';
import { authorizeEndpoint } from './oauth/authorize.js';
import { deviceAuthorizationEndpoint } from './oauth/device.js';
import { introspectEndpoint } from './oauth/introspect.js';
import { endSessionEndpoint } from './oauth/logout.js';
import { metadataEndpoint } from './oauth/metadata.js';
import { oobEndpoint } from './oauth/oob.js';
import { oauthErrors } from './oauth/shared.js';
import { devicePages } from './pages/device.js';
import { revokeEndpoint } from './oauth/revoke.js';
import { tokenEndpoint } from './oauth/token.js';
import { userinfoEndpoint } from './oauth/userinfo.js';
import { pageErrors, type PageContext } from './pages/shared.js';

export { sendOAuthError } from './oauth/shared.js';

/**
 * The OAuth 2.0 endpoints, one file each under oauth/. Authorize and the out-of-band page
 * are website pages (their errors are pages); the others answer in JSON (their errors are
 * RFC 6749 JSON). Each group has its one error mapping.
 */
export async function oauthRoutes(app: FastifyInstance, ctx: PageContext): Promise<void> {
  await app.register(async function oauthPages(pages) {
    pages.setErrorHandler(pageErrors);
    authorizeEndpoint(pages, ctx);
    oobEndpoint(pages, ctx);
    endSessionEndpoint(pages, ctx);
    devicePages(pages, ctx);
  });
  await app.register(async function oauthJson(json) {
    json.setErrorHandler(oauthErrors);
    tokenEndpoint(json, ctx);
    deviceAuthorizationEndpoint(json, ctx);
    revokeEndpoint(json, ctx);
    introspectEndpoint(json, ctx);
    userinfoEndpoint(json, ctx);
    metadataEndpoint(json, ctx);
  });
}

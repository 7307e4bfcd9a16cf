/**
 * What the website layer (src/website) uses of the authorization module's pages: the signed-in
 * viewer, CSRF, the page layout and the error mappings, so that every page of the HTTPS listener
 * looks and behaves alike. Types and functions only: importing this loads no listener.
 */
export { findAccountByName } from './accounts.js';
export { csrfToken, csrfValid, cookies, formParams, queryParams, SECURITY_HEADERS, SESSION_COOKIE, setCookie } from './http-util.js';
export { currentViewer, requireViewer, sendPage, pageErrors, formAction, EXPIRED, type PageContext, type SignedIn } from './routes/pages/shared.js';
export { html, SafeHtml } from './views/html.js';
export { page, type PageOptions } from './views/layout.js';
export { errorPage } from './views/pages.js';
export { redirectWithFlash, takeFlash } from './routes/pages/flash.js';
export { STYLESHEET } from './views/style.js';
export { checkAccessToken, isRefusal, type ResourceScope, type TokenHolder, type TokenRefusal } from './resource.js';
export { SCOPES } from './scopes.js';
export { accountRoles, type Role } from './accounts.js';

import type { FastifyReply, FastifyRequest } from 'fastify';
import { html, page, SECURITY_HEADERS, type SafeHtml } from '../auth/pages.js';
import { isAppError } from '../shared/errors.js';
import { parseMbid } from '../shared/uuid.js';

/** Who is looking: the header's name and sign-out token, when signed in. */
export interface Looker {
  name: string;
  csrf: string;
}

/**
 * The page CSP of the account pages, plus the origins the cover art images come from
 * (SLEEVE_IMAGE_BASE_URL's, and SLEEVE_BASE_URL's for the listing's own links): only those;
 * no script, except on the page that has one (`script`: from this origin only) (docs/decisions.md, "Cover art pages").
 */
export function pageCsp(imageOrigins: string[], script = false): string {
  const img = ["'self'", ...imageOrigins].join(' ');
  return `default-src 'none'; style-src 'self';${script ? " script-src 'self';" : ''} img-src ${img}; frame-ancestors 'none'; base-uri 'none'; form-action 'self'`;
}

/** The origins of absolute URLs (a relative one is this origin: 'self' covers it). */
export function originsOf(urls: string[]): string[] {
  const out = new Set<string>();
  for (const u of urls) {
    try {
      out.add(new URL(u).origin);
    } catch {
      // Relative: served from this origin.
    }
  }
  return [...out].filter((o) => o !== 'null');
}

const HTML = 'text/html; charset=utf-8';

/** The headers every website page carries (besides the listener's own), with its CSP. */
function pageHeaders(csp: string): Record<string, string> {
  return { 'content-security-policy': csp, 'x-frame-options': 'DENY', 'cache-control': 'no-store' };
}

/** All the headers of a page answered before routing: the listener's, the page's, its type (as Fastify would send them). */
export function frontDoorHeaders(csp: string): Record<string, string> {
  return { ...SECURITY_HEADERS, ...pageHeaders(csp), 'content-type': HTML };
}

/** Sends a website page with the headers every page carries and the image origins allowed. */
export function sendWebsitePage(reply: FastifyReply, csp: string, status: number, body: string | Buffer): FastifyReply {
  return reply.code(status).headers(pageHeaders(csp)).type(HTML).send(body);
}

/** A whole page in the site's layout, for this viewer. */
export function layout(title: string, body: SafeHtml, viewer: Looker | undefined): string {
  return page({ title, body, user: viewer?.name, csrf: viewer?.csrf });
}

export function problemPage(title: string, message: string, viewer: Looker | undefined): string {
  return layout(title, html`<p class="error" role="alert">${message}</p><p><a href="/">Search for another release or event</a></p>`, viewer);
}

const TITLES: Record<number, string> = { 400: 'Bad request', 404: 'Not found', 409: 'Conflict' };

/**
 * The MBID of a path parameter, or undefined after answering 400 (malformed). A merged or
 * differently spelled MBID is for the caller: it redirects to the canonical page.
 */
export function mbidParam(req: FastifyRequest, reply: FastifyReply, csp: string, viewer: Looker | undefined): string | undefined {
  const text = (req.params as { mbid: string }).mbid;
  const mbid = parseMbid(text);
  if (mbid === undefined) {
    sendWebsitePage(reply, csp, 400, problemPage('Bad request', `${JSON.stringify(text)} is not an MBID (a UUID such as 76df3287-6cda-33eb-8e9a-044b5e15ffdd).`, viewer));
  }
  return mbid;
}

/** Domain errors meant for the user, as pages: 400, 404 or 409 with the message; anything else goes on. */
export function websiteErrors(csp: string, viewerOf: (req: FastifyRequest) => Looker | undefined) {
  return async function websiteError(err: Error, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    if (!isAppError(err) || !err.expose) throw err;
    const status = err.code === 'NOT_FOUND' ? 404 : err.code === 'CONFLICT' ? 409 : 400;
    return sendWebsitePage(reply, csp, status, problemPage(TITLES[status] ?? 'Error', err.message, viewerOf(req)));
  };
}

/** A byte count for people: 1,234,567 bytes → "1.2 MB". */
export function formatBytes(n: number): string {
  if (n < 1000) return `${n} bytes`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(1)} kB`;
  return `${(n / 1_000_000).toFixed(1)} MB`;
}

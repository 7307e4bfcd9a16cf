import type { FastifyReply, FastifyRequest } from 'fastify';
import { currentViewer, requireViewer } from '../auth/pages.js';
import type { WebsiteDeps } from './deps.js';
import { DimensionCache } from './dimensions.js';
import type { ImageUrls } from './images.js';
import { PageCache } from './page-cache.js';
import { frontDoorHeaders, originsOf, pageCsp, sendWebsitePage, type Looker } from './respond.js';

/** What every website route shares: the modules' deps, the page CSP, the caches. */
export interface Site {
  deps: WebsiteDeps;
  csp: string;
  /** The CSP of a page with a script (same-origin only). */
  scriptCsp: string;
  urls: ImageUrls;
  cache: PageCache;
  dimensions: DimensionCache;
  /** The viewer a request looked up (for its error page). */
  viewerOf(req: FastifyRequest): Looker | undefined;
  viewer(req: FastifyRequest, reply: FastifyReply): Promise<(Looker & { accountId: number }) | undefined>;
  /** The signed-in viewer, or undefined after redirecting to sign in (and back here). */
  editor(req: FastifyRequest, reply: FastifyReply): Promise<(Looker & { accountId: number }) | undefined>;
  send(reply: FastifyReply, status: number, body: string | Buffer, opts?: { script?: boolean }): FastifyReply;
  /** The visitor pages' generation now: taken before a page's reads, given back to `keepForVisitors`. */
  visitorGeneration(): number;
  /** Keeps a visitor's page (sent with the page CSP) to be answered before routing next time. */
  keepForVisitors(req: FastifyRequest, route: string, page: Buffer, generation: number): void;
}

export function makeSite(deps: WebsiteDeps): Site {
  const urls: ImageUrls = { imageBaseUrl: deps.api.imageBaseUrl, listing: deps.api.urls };
  const origins = originsOf([urls.imageBaseUrl, urls.listing.baseUrl]);
  const csp = pageCsp(origins);
  const scriptCsp = pageCsp(origins, true);
  const doorHeaders = frontDoorHeaders(csp);
  const seen = new WeakMap<FastifyRequest, Looker>();
  const remember = <T extends Looker | undefined>(req: FastifyRequest, v: T): T => {
    if (v !== undefined) seen.set(req, v);
    return v;
  };
  return {
    deps,
    csp,
    scriptCsp,
    urls,
    cache: new PageCache(),
    dimensions: new DimensionCache(deps.coverArt.store),
    viewerOf: (req) => seen.get(req),
    viewer: async (req, reply) => remember(req, await currentViewer(deps.pages, req, reply)),
    editor: async (req, reply) => remember(req, await requireViewer(deps.pages, req, reply)),
    send: (reply, status, body, opts) => sendWebsitePage(reply, opts?.script === true ? scriptCsp : csp, status, body),
    visitorGeneration: () => deps.visitors?.generation ?? 0,
    keepForVisitors: (req, route, page, generation) => deps.visitors?.keep(req.url, route, doorHeaders, page, generation),
  };
}

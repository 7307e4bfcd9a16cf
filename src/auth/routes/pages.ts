import type { FastifyInstance } from 'fastify';
import { applicationPages } from './pages/applications.js';
import { publicPages } from './pages/public.js';
import { pageErrors, type PageContext } from './pages/shared.js';
import { signInPages } from './pages/sign-in.js';

export { currentViewer, renderLoginInterstitial, sendPage, type PageContext, type SignedIn } from './pages/shared.js';

/** The website's pages (their errors answered as pages, by pageErrors). */
export async function pageRoutes(app: FastifyInstance, ctx: PageContext): Promise<void> {
  app.setErrorHandler(pageErrors);
  publicPages(app, ctx);
  signInPages(app, ctx);
  applicationPages(app, ctx);
}

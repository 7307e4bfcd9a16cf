import type { AuthDeps } from './deps.js';
import type { RequestView } from './http-util.js';

/**
 * What the module's request handlers (the grants, DPoP's checks, the pages) need of the
 * listener that received the request, the route's or the fast lane's: the module's
 * dependencies and the client's address, for audit lines and throttling. The pages' context
 * (routes/pages/shared.ts) adds what only pages use.
 */
export interface AuthContext {
  deps: AuthDeps;
  /** The client's address, for login throttling and audit lines. */
  clientAddress(req: Pick<RequestView, 'raw' | 'headers'>): string;
}

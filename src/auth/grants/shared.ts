/*
 * What the grant types share (one file each beside this one; index.ts dispatches by
 * grant_type): the token response (RFC 6749 §5.1), the form of the tokens a grant holds, ending
 * a grant, and the token request's client authentication (RFC 6749 §2.3 and §3.2.1).
 */
import type { Kysely } from 'kysely';
import { preparedQuery } from '../../db/prepared.js';
import { findAccount } from '../accounts.js';
import { findAppByClientId, type Application } from '../applications.js';
import { audit } from '../audit.js';
import { DocumentRefused } from '../client-metadata.js';
import { constantTimeEqual, randomToken, tokenHash } from '../crypto.js';
import type { AuthContext } from '../context.js';
import type { AuthDeps } from '../deps.js';
import { OAuthError } from '../errors.js';
import type { RequestView } from '../http-util.js';
import { clientCredentials, hasBasicAuth, requireClient } from '../routes/oauth/shared.js';

/** A successful token response (RFC 6749 §5.1), as every grant type answers. */
export interface TokenResponse {
  access_token: string;
  /** DPoP when the access token is bound to the key of the request's DPoP proof (RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  refresh_token?: string;
  /** Only when the client asked with MetaBrainz scope names: those names, as it wrote them. */
  scope?: string;
  /** OpenID Connect: only for a code whose request had the `openid` scope (not on refresh). */
  id_token?: string;
}

/*
 * A grant holds at most one access token (as at MusicBrainz) and, when offline, one
 * refresh token. Both are `{grant id in base 36}.{256 random bits}`: the prefix finds the
 * grant row by its primary key, and the SHA-256 hash of the whole token, kept on that
 * row, is compared in constant time. So the hashes need no index, and a refresh is one
 * UPDATE of one row.
 */

const GRANT_TOKEN_RE = /^([0-9a-z]{1,10})\.[A-Za-z0-9_-]{43}$/;

/** A new access or refresh token of grant `grantId` (256 bits from the CSPRNG), and its hash. */
export function grantToken(grantId: number): { token: string; hash: string } {
  const token = `${grantId.toString(36)}.${randomToken()}`;
  return { token, hash: tokenHash(token) };
}

/** The grant id a token names, or undefined when it is not a token of this form. */
export function grantIdOf(token: string): number | undefined {
  const m = GRANT_TOKEN_RE.exec(token);
  return m === null ? undefined : parseInt(m[1] as string, 36);
}

/** Whether `token` hashes to the stored hash (constant-time; a missing hash never matches). */
export function tokenMatches(token: string, stored: string | null): boolean {
  return stored !== null && constantTimeEqual(tokenHash(token), stored);
}

/** Ends a grant: its refresh token and its access token stop working. */
export async function revokeGrant(deps: AuthDeps, grantId: number, db = deps.db): Promise<void> {
  await db.updateTable('oauth_grant').set({ revoked_at: deps.clock.now(), refresh_hash: null, access_hash: null }).where('id', '=', grantId).execute();
}

/** A grant's row, by the id its tokens name. */
export const grantById = preparedQuery(['id'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant')
    .select(['id', 'account_id', 'application_id', 'offline', 'refresh_hash', 'access_hash', 'revoked_at', 'scope_text', 'refresh_jkt'])
    .where('id', '=', p.id),
);

export type GrantRow = Awaited<ReturnType<typeof grantById>>['rows'][number];

/**
 * A grant ended because something that created or continued it was presented again (a used
 * code, a used refresh token): answered `invalid_grant`, and said in the audit trail.
 */
export class GrantEndedByReuse extends OAuthError {
  readonly accountId: number;
  readonly clientId: string;
  constructor(description: string, accountId: number, clientId: string) {
    super('invalid_grant', description);
    this.accountId = accountId;
    this.clientId = clientId;
  }
}

/** A lookup made for the write that follows it: in the write batch where there is one (WriteBatcher.read), else on its own. */
export function lookupForWrite<T>(deps: AuthDeps, query: (db: Kysely<any>) => Promise<T>): Promise<T> {
  return deps.writes === undefined ? query(deps.db) : deps.writes.read(query);
}

/**
 * The token endpoint's parameters for the code and refresh grants, each checked for repetition
 * in every request of either (RFC 6749 §3.2: "Request and response parameters MUST NOT be
 * included more than once"), in this order; the device grant has its own (device-code.ts).
 */
export const TOKEN_PARAMETERS = ['client_id', 'client_secret', 'grant_type', 'code', 'refresh_token', 'redirect_uri', 'token_type', 'code_verifier'];

/** A token request's client, and whether it sent no secret at all (a public client, authenticated otherwise). */
export interface TokenClient {
  client: Application;
  secretless: boolean;
}

/** Whether a token request carries no client secret, neither by HTTP Basic nor in the body. */
export function sendsNoSecret(req: RequestView, params: Map<string, string>): boolean {
  return !hasBasicAuth(req) && params.get('client_secret') === undefined;
}

/**
 * The client of a token request (RFC 6749 §3.2.1): authenticated by its secret (HTTP Basic or
 * the body, §2.3.1), as the interface says; or a public (installed) application by its
 * client_id alone, sending no secret at all (`token_endpoint_auth_method=none`, RFC 8252 §8.4),
 * which the grant then authenticates otherwise (a code's PKCE). A confidential application
 * without its secret is refused (401 invalid_client).
 *
 * `together`: the grant's lookup of the client and what the request presents (its code, its
 * refresh token's grant) in one read, when they belong together (docs/decisions.md, "Token
 * endpoint CPU"); tried only with a client_id and a secret. When it finds nothing, the client
 * is authenticated alone, whose answers (invalid_client first) are the ones given.
 */
export async function tokenClient<Found extends TokenClient>(
  ctx: AuthContext,
  req: RequestView,
  params: Map<string, string>,
  together?: (id: string, secret: string) => Promise<Found | undefined>,
): Promise<Found | TokenClient> {
  const id = params.get('client_id');
  if (sendsNoSecret(req, params) && id !== undefined && id !== '') {
    const app = await findAppByClientId(ctx.deps, id);
    if (app?.kind === 'public') return { client: app, secretless: true };
  }
  const credentials = together === undefined ? undefined : clientCredentials(req, params);
  if (together !== undefined && credentials?.id !== undefined && credentials.secret !== undefined) {
    const found = await together(credentials.id, credentials.secret);
    if (found !== undefined) return found;
  }
  return { client: await requireClient(ctx.deps, req, params), secretless: false };
}

/** With the client metadata documents turned off, a client known by one gets no tokens. */
export function refuseWithoutDocuments(ctx: AuthContext): void {
  if (ctx.deps.clientDocuments?.enabled !== true) throw new OAuthError('invalid_client', 'Client not authentified');
}

/**
 * A client known by its metadata document (auth/client-metadata.ts), by its client_id alone:
 * the row a user's consent made for it (`found`: read already with the grant's own lookup).
 */
export async function documentClient(ctx: AuthContext, id: string, found?: Application): Promise<Application> {
  refuseWithoutDocuments(ctx);
  const app = found ?? (await findAppByClientId(ctx.deps, id));
  if (app === undefined || app.owner_id !== null) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

/** A document client's document, read again (from the cache, or fetched): its hash; a refusal is an audit line. */
export async function documentHashOf(ctx: AuthContext, req: RequestView, id: string): Promise<string> {
  try {
    return (await (ctx.deps.clientDocuments as NonNullable<AuthDeps['clientDocuments']>).resolve(id)).hash;
  } catch (err) {
    if (err instanceof DocumentRefused && err.reason !== 'busy') audit(req.log, 'client_document.refused', { clientId: id, address: ctx.clientAddress(req), reason: err.reason, via: 'oauth2/token' });
    throw err;
  }
}

/** sleeve's tokens are bearer (or DPoP-bound) tokens: a request for another `token_type` is refused (the interface's parameter). */
export function onlyBearer(params: Map<string, string>): void {
  if ((params.get('token_type') ?? 'bearer').toLowerCase() !== 'bearer') throw new OAuthError('invalid_request', 'Invalid requested token type, only bearer is allowed');
}

/** A rejection handler: an error of `kind` (a grant ended by a replay) is audited, then every error goes on. */
export function auditReuse(ctx: AuthContext, req: RequestView, kind: new (...args: any[]) => GrantEndedByReuse, reason: string) {
  return async (err: unknown): Promise<never> => {
    if (err instanceof kind) {
      const user = (await findAccount(ctx.deps, err.accountId))?.name;
      audit(req.log, 'grant.revoked', { user, clientId: err.clientId, address: ctx.clientAddress(req), via: 'oauth2/token', reason });
    }
    throw err;
  };
}

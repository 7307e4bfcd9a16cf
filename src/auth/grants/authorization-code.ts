/*
 * `grant_type=authorization_code`: the authorization code grant (RFC 6749 §4.1), with PKCE
 * (RFC 7636), the id_token of OpenID Connect Core §3.1.3.3, DPoP-bound tokens (RFC 9449 §5),
 * and clients known by their metadata document (docs/oauth.md, "Applications nobody
 * registered").
 *
 * - §4.1.2: the code the authorization endpoint issues (issueCode): short-lived, single use,
 *   bound to the client, the user, the scope and the redirect URI (and to a PKCE challenge,
 *   RFC 7636 §4.4). Only its SHA-256 hash is stored.
 * - §4.1.3: the access token request, checked in this order (handler, then exchangeCode): its
 *   parameters; the client authenticated (§3.2.1; a public client by PKCE alone, RFC 8252
 *   §8.4), and the code issued to it; the code valid: unused (a second use revokes what the
 *   first issued, §4.1.2 and §10.5), `redirect_uri` identical to the authorization request's,
 *   the `code_verifier` matching the challenge (RFC 7636 §4.6), not expired.
 * - §4.1.4 and §5.1: the answer: an access token, a refresh token when the user allowed
 *   offline access, and an id_token for the `openid` scope.
 */
import type { Kysely } from 'kysely';
import { preparedQuery } from '../../db/prepared.js';
import type { Account } from '../accounts.js';
import { audit } from '../audit.js';
import { APP_COLUMNS, redirectUriAllowed, type Application } from '../applications.js';
import { isDocumentClientId } from '../client-metadata.js';
import type { AuthContext } from '../context.js';
import { constantTimeEqual, randomToken, s256, tokenHash } from '../crypto.js';
import type { AuthDeps } from '../deps.js';
import { OAuthError } from '../errors.js';
import type { RequestView } from '../http-util.js';
import { signIdToken } from '../id-token.js';
import { tokenRequestProof, type TokenProof } from '../routes/oauth/dpop.js';
import { checkParams } from '../routes/oauth/shared.js';
import { OPENID } from '../scopes.js';
import {
  auditReuse,
  documentClient,
  documentHashOf,
  GrantEndedByReuse,
  grantToken,
  lookupForWrite,
  onlyBearer,
  refuseWithoutDocuments,
  revokeGrant,
  sendsNoSecret,
  TOKEN_PARAMETERS,
  tokenClient,
  type TokenClient,
  type TokenResponse,
} from './shared.js';

/** §4.1.3: `code` and `redirect_uri` are required (sleeve always asks for the redirect URI, as MusicBrainz does). */
const REQUIRED = new Set(['grant_type', 'code', 'redirect_uri']);

// §4.1.2: the code.

export interface CodeRequest {
  account: Account;
  app: Application;
  scope: number;
  offline: boolean;
  redirectUri: string;
  codeChallenge: string | undefined;
  codeChallengeMethod: 'plain' | 'S256' | undefined;
  /** The scope list as written, when it used MetaBrainz names (scopes.ts parseScope's `spelled`). */
  scopeText?: string | null;
  /** OpenID Connect: the request's nonce and when the user signed in (epoch ms), for the id_token. */
  nonce?: string | undefined;
  authTime?: number | undefined;
  /** A client known by its metadata document: the document's hash, checked again at the exchange. */
  documentHash?: string | undefined;
}

/** Issues a single-use authorization code bound to client, user, scope and redirect URI. */
export async function issueCode(deps: AuthDeps, req: CodeRequest): Promise<string> {
  const code = randomToken();
  const now = deps.clock.now();
  await deps.db
    .insertInto('oauth_code')
    .values({
      code_hash: tokenHash(code),
      account_id: req.account.id,
      application_id: req.app.id,
      scope: req.scope,
      offline: req.offline ? 1 : 0,
      redirect_uri: req.redirectUri,
      code_challenge: req.codeChallenge ?? null,
      code_challenge_method: req.codeChallenge === undefined ? null : (req.codeChallengeMethod ?? 'plain'),
      expires_at: now + deps.authCodeTtl * 1000,
      used_at: null,
      grant_id: null,
      scope_text: req.scopeText ?? null,
      nonce: req.nonce ?? null,
      auth_time: req.authTime ?? null,
      document_hash: req.documentHash ?? null,
    })
    .execute();
  // Codes are short-lived; old ones only matter for reuse detection within their life.
  await deps.db.deleteFrom('oauth_code').where('expires_at', '<', now - 24 * 3600 * 1000).execute();
  return code;
}

/**
 * The out-of-band page's code: shown only to the user who granted access, and only while
 * it can still be used. Says which application it is for, or why it is not shown.
 */
export async function codeToShow(deps: AuthDeps, accountId: number, code: string): Promise<{ appName: string } | { refused: string }> {
  const row = /^[A-Za-z0-9_-]{1,200}$/.test(code)
    ? await deps.db
        .selectFrom('oauth_code as c')
        .innerJoin('oauth_application as a', 'a.id', 'c.application_id')
        .select(['a.name', 'c.account_id', 'c.used_at', 'c.expires_at'])
        .where('c.code_hash', '=', tokenHash(code))
        .executeTakeFirst()
    : undefined;
  if (row === undefined || row.used_at !== null || row.account_id !== accountId) return { refused: 'Invalid authorization code' };
  if (row.expires_at <= deps.clock.now()) return { refused: 'Expired authorization code' };
  return { appName: row.name };
}

const CODE_RE = /^[A-Za-z0-9_-]+$/;

/** Whether `code` has the form of an authorization code (anything else is not looked up). */
function wellFormedCode(code: string): boolean {
  return code.length <= 200 && CODE_RE.test(code);
}

// §4.1.3: the access token request.

/** What a code exchange is asked with. */
export interface ExchangeParams {
  code: string;
  redirectUri: string;
  codeVerifier: string | undefined;
  withoutSecret?: boolean;
  dpopJkt?: string | undefined;
  /** The DPoP proof's jti remembered, once the code proved usable and before anything is issued (auth/dpop.ts rememberProof). */
  rememberProof?: (() => Promise<void>) | undefined;
  /** A client known by its metadata document: the hash of its document now (the code's must be the same). */
  documentHash?: string | undefined;
}

/** A code exchange whose writes were made with its lookup (clientWithCode): the answer without its id_token, and the time it was made at. */
export interface Redeemed {
  body: TokenResponse;
  now: number;
}

/** The token request's client, with the code when it was read in the same lookup. */
interface CodeClient extends TokenClient {
  code?: CodeRow;
  redeemed?: Redeemed;
  documentHash?: string;
}

/**
 * The token endpoint's answer to `grant_type=authorization_code`: the request's parameters, its
 * client, the token type asked for, its DPoP proof, then the code (exchangeCode). A replayed
 * code (which revoked its grant) and a metadata document that changed are audit lines.
 */
export async function handler(ctx: AuthContext, req: RequestView): Promise<TokenResponse> {
  const params = checkParams(req, TOKEN_PARAMETERS, REQUIRED);
  const { client, secretless, code, redeemed, documentHash } = await codeClient(ctx, req, params);
  onlyBearer(params);
  const proof = await tokenRequestProof(ctx, req, client);
  const request = exchangeParams(params, secretless, proof);
  request.documentHash = documentHash;
  return exchangeCode(ctx.deps, client, request, code, redeemed).catch((err: unknown) => {
    if (err instanceof DocumentChanged) audit(req.log, 'client_document.refused', { clientId: client.client_id, address: ctx.clientAddress(req), reason: 'changed', via: 'oauth2/token' });
    return auditReuse(ctx, req, CodeReplayed, 'code_replayed')(err);
  });
}

/**
 * The client of a code exchange (§3.2.1), with the code in the same lookup when the code is
 * that client's. A client known by its metadata document sends no secret: its row and its
 * document now (whose hash the code's must equal). A code exchange that nothing can refuse
 * between this lookup and its writes (no DPoP proof, bearer tokens asked for) may have its
 * writes made with the lookup (`redeemed`, clientWithCode).
 */
async function codeClient(ctx: AuthContext, req: RequestView, params: Map<string, string>): Promise<CodeClient> {
  const id = params.get('client_id');
  const code = params.get('code') as string;
  if (sendsNoSecret(req, params) && id !== undefined && isDocumentClientId(id)) {
    refuseWithoutDocuments(ctx);
    const found = await documentClientWithCode(ctx.deps, id, code);
    const client = await documentClient(ctx, id, found?.app);
    const documentHash = await documentHashOf(ctx, req, id);
    return { client, secretless: true, documentHash, ...(found === undefined ? {} : { code: found.code }) };
  }
  // What the handler checks after this lookup and before the exchange: the token type, and the DPoP proof (tokenRequestProof).
  const bearer = (params.get('token_type') ?? 'bearer').toLowerCase() === 'bearer' && req.headers.dpop === undefined;
  return tokenClient<CodeClient>(ctx, req, params, async (clientId, secret) => {
    const found = await clientWithCode(ctx.deps, clientId, secret, code, bearer ? exchangeParams(params, false, undefined) : undefined);
    return found === undefined ? undefined : { client: found.app, secretless: false, code: found.code, ...(found.redeemed === undefined ? {} : { redeemed: found.redeemed }) };
  });
}

/** A code exchange's parameters (checkParams made sure of `code` and `redirect_uri`). */
function exchangeParams(params: Map<string, string>, withoutSecret: boolean, proof: TokenProof | undefined): ExchangeParams {
  const request: ExchangeParams = { code: params.get('code') as string, redirectUri: params.get('redirect_uri') as string, codeVerifier: params.get('code_verifier'), withoutSecret };
  if (proof !== undefined) {
    request.dpopJkt = proof.jkt;
    request.rememberProof = proof.remember;
  }
  return request;
}

/** The answer to a replayed code (`invalid_grant`), which revoked the grant its first use created: for the audit trail. */
class CodeReplayed extends GrantEndedByReuse {
  constructor(accountId: number, clientId: string) {
    super('Invalid authorization code', accountId, clientId);
  }
}

/** A code of a client known by its metadata document, whose document changed (in what sleeve takes from it) since the code was issued: for the audit trail. */
class DocumentChanged extends OAuthError {
  constructor() {
    super('invalid_grant', "The client's metadata document changed since the authorization request: ask for a new authorization");
  }
}

/** A code's columns, and for the id_token's `sub` its user's name (an account's codes go with it). */
const CODE_COLUMNS = [
  'c.code_hash',
  'c.account_id',
  'c.application_id',
  'c.scope',
  'c.offline',
  'c.redirect_uri',
  'c.code_challenge',
  'c.code_challenge_method',
  'c.expires_at',
  'c.used_at',
  'c.grant_id',
  'c.scope_text',
  'c.nonce',
  'c.auth_time',
  'c.document_hash',
  'u.name as account_name',
] as const;

/** The code: one lookup by primary key. */
const codeByHash = preparedQuery(['hash'] as const, (db, p) =>
  db.selectFrom('oauth_code as c').innerJoin('account as u', 'u.id', 'c.account_id').select(CODE_COLUMNS).where('c.code_hash', '=', p.hash),
);

/** A code with its application (its redirect_uri as app_redirect_uri, and its secret hash), when the application is `clientId`: one lookup by primary key. */
const codeWithClient = preparedQuery(['hash', 'clientId'] as const, (db, p) =>
  db
    .selectFrom('oauth_code as c')
    .innerJoin('account as u', 'u.id', 'c.account_id')
    .innerJoin('oauth_application as a', 'a.id', 'c.application_id')
    .select([...CODE_COLUMNS, ...APP_COLUMNS.filter((c) => c !== 'redirect_uri').map((c) => `a.${c}` as const), 'a.redirect_uri as app_redirect_uri', 'a.secret_hash'])
    .where('c.code_hash', '=', p.hash)
    .where('a.client_id', '=', p.clientId),
);

/** A code as read for its exchange (by codeByHash or clientWithCode). */
type CodeRow = NonNullable<Awaited<ReturnType<typeof codeByHash>>['rows'][number]>;

/**
 * A code exchange's client and code in one lookup (docs/decisions.md, "Token endpoint CPU:
 * the code exchange"): when the code is one of the client `clientId`'s and `secret` is that
 * client's secret. Otherwise undefined, and the caller authenticates the client as usual
 * (whose answers, invalid_client first, are the ones given).
 *
 * With `exchange` (a request that sent no DPoP proof and asks for bearer tokens), where the
 * lookup runs in the write batch (SQLite), the exchange's writes follow in the same job when
 * every check of exchangeCode passes for this row: `redeemed` is then the answer without its
 * id_token, committed with the batch (docs/decisions.md, "Token endpoint CPU: the exchange's
 * lookup and writes in one batch job"). Anything else (a refusal to give, a used code, an
 * application that requires DPoP) leaves the writes to exchangeCode as before.
 */
async function clientWithCode(
  deps: AuthDeps,
  clientId: string,
  secret: string,
  code: string,
  exchange?: ExchangeParams,
): Promise<{ app: Application; code: CodeRow; redeemed?: Redeemed } | undefined> {
  if (!wellFormedCode(code) || clientId.length > 200 || secret.length > 200) return undefined;
  const params = { hash: tokenHash(code), clientId };
  const writes = exchange === undefined || deps.writes?.readsInBatches !== true ? undefined : deps.writes;
  if (writes === undefined) return codeOfClient((await lookupForWrite(deps, (db) => codeWithClient(db, params))).rows[0], secret);
  return writes.read(async (db) => {
    const found = codeOfClient((await codeWithClient(db, params)).rows[0], secret);
    const ask = exchange as ExchangeParams;
    if (found === undefined || found.app.require_dpop === 1 || found.code.used_at !== null || !redirectUriAllowed(found.app, ask.redirectUri)) return found;
    const now = deps.clock.now();
    if (exchangeRefusal(ask, found.code, now) !== undefined) return found;
    return { ...found, redeemed: { body: await redeemCode(db, deps, found.app, found.code, now, null), now } };
  });
}

/** A row of codeWithClient as the application and the code, when `secret` is that application's. */
function codeOfClient(row: Awaited<ReturnType<typeof codeWithClient>>['rows'][number] | undefined, secret: string): { app: Application; code: CodeRow } | undefined {
  if (row === undefined || !constantTimeEqual(tokenHash(secret), row.secret_hash)) return undefined;
  return splitCodeRow(row);
}

/**
 * A code exchange of a client known by its metadata document (which has no secret: PKCE and the
 * document's hash are checked by exchangeCode): its row and the code in one lookup, when the code
 * is that client's; otherwise undefined, and the caller looks the client up alone.
 */
async function documentClientWithCode(deps: AuthDeps, clientId: string, code: string): Promise<{ app: Application; code: CodeRow } | undefined> {
  if (!wellFormedCode(code) || clientId.length > 200) return undefined;
  const row = (await lookupForWrite(deps, (db) => codeWithClient(db, { hash: tokenHash(code), clientId }))).rows[0];
  return row === undefined || row.owner_id !== null ? undefined : splitCodeRow(row);
}

function splitCodeRow(row: Awaited<ReturnType<typeof codeWithClient>>['rows'][number]): { app: Application; code: CodeRow } {
  const { code_hash, account_id, application_id, scope, offline, redirect_uri, code_challenge, code_challenge_method, expires_at, used_at, grant_id, scope_text, nonce, auth_time, document_hash, account_name } = row;
  const read: CodeRow = { code_hash, account_id, application_id, scope, offline, redirect_uri, code_challenge, code_challenge_method, expires_at, used_at, grant_id, scope_text, nonce, auth_time, document_hash, account_name };
  const app: Application = { id: row.id, owner_id: row.owner_id, name: row.name, kind: row.kind, client_id: row.client_id, redirect_uri: row.app_redirect_uri, created_at: row.created_at, resource_server: row.resource_server, id_token_alg: row.id_token_alg, rotate_refresh: row.rotate_refresh, require_dpop: row.require_dpop };
  return { app, code: read };
}

/**
 * The code exchange of an authenticated client (§4.1.3), in the RFC's order: the redirect URI
 * one of the client's, the code well formed and issued to this client, unused (a second use
 * revokes what the first issued), then exchangeRefusal's checks. `redeemed`: its writes,
 * already made with `read` by clientWithCode; only the id_token is left.
 */
export async function exchangeCode(deps: AuthDeps, app: Application, params: ExchangeParams, read?: CodeRow, redeemed?: Redeemed): Promise<TokenResponse> {
  if (!redirectUriAllowed(app, params.redirectUri)) throw new OAuthError('invalid_request', 'Mismatched redirect URI');
  if (!wellFormedCode(params.code)) throw new OAuthError('invalid_request', 'Malformed authorization code');
  // `read`: this code as clientWithCode read it for this request (its claim below checks it is still unused).
  const row = read ?? (await codeByHash(deps.db, { hash: tokenHash(params.code) })).rows[0];
  if (row === undefined || row.application_id !== app.id) throw new OAuthError('invalid_grant', 'Invalid authorization code');
  let body: TokenResponse;
  let now: number;
  if (redeemed !== undefined && read !== undefined) {
    ({ body, now } = redeemed);
  } else {
    if (row.used_at !== null) {
      // A second use of a code: whoever holds it is not to be trusted, so what the first use issued is revoked (RFC 6749 §4.1.2).
      if (row.grant_id === null) throw new OAuthError('invalid_grant', 'Invalid authorization code');
      await revokeGrant(deps, row.grant_id);
      throw new CodeReplayed(row.account_id, app.client_id);
    }
    now = deps.clock.now();
    const refusal = exchangeRefusal(params, row, now);
    if (refusal !== undefined) throw refusal;
    await params.rememberProof?.();
    const jkt = params.dpopJkt ?? null;
    body =
      deps.writes === undefined
        ? await deps.db.transaction().execute((trx) => redeemCode(trx, deps, app, row, now, jkt))
        : await deps.writes.run((trx) => redeemCode(trx, deps, app, row, now, jkt));
  }
  if ((row.scope & OPENID) !== 0) body.id_token = await idTokenFor(deps, app, row, body.access_token, now);
  return body;
}

/**
 * Why an unused code `row` cannot be exchanged with `params` at `now`, or undefined when it
 * can: the checks of exchangeCode after its lookup, in their order. §4.1.3's redirect_uri
 * identical to the authorization request's; RFC 7636 §4.6's verifier (a public client without
 * a secret must have used PKCE); §4.1.2's short life; a document client's document unchanged.
 */
function exchangeRefusal(params: ExchangeParams, row: CodeRow, now: number): OAuthError | undefined {
  if (params.redirectUri !== row.redirect_uri) return new OAuthError('invalid_grant', 'redirect_uri does not match the one of the authorization request');
  // A public client that sent no secret (auth method `none`) is authenticated by PKCE alone.
  if (params.withoutSecret === true && row.code_challenge === null) return new OAuthError('invalid_client', 'Client not authentified: without a client_secret, the authorization request must use PKCE');
  if (row.code_challenge !== null) {
    if (params.codeVerifier === undefined) return new OAuthError('invalid_request', 'Required parameter is missing: code_verifier');
    const derived = row.code_challenge_method === 'S256' ? s256(params.codeVerifier) : params.codeVerifier;
    if (!constantTimeEqual(derived, row.code_challenge)) return new OAuthError('invalid_grant', 'Invalid PKCE verifier');
  } else if (params.codeVerifier !== undefined) {
    return new OAuthError('invalid_grant', 'A code_verifier was sent but the authorization request had no code_challenge');
  }
  if (row.expires_at <= now) return new OAuthError('invalid_grant', 'Expired authorization code');
  if (row.document_hash !== null && row.document_hash !== params.documentHash) return new DocumentChanged();
  return undefined;
}

// §4.1.4: the answer.

/** The grant a code creates; its tokens, which name its id, are set once the id is known. */
const insertGrant = preparedQuery(['accountId', 'appId', 'scope', 'offline', 'now', 'scopeText'] as const, (db, p) =>
  db
    .insertInto('oauth_grant')
    .values({
      account_id: p.accountId,
      application_id: p.appId,
      scope: p.scope,
      offline: p.offline,
      refresh_hash: null,
      access_hash: null,
      access_created_at: null,
      access_expires_at: null,
      created_at: p.now,
      revoked_at: null,
      scope_text: p.scopeText,
    })
    .returning('id'),
);

/** Uses a code for a grant: only while it is unused, so of concurrent uses one wins. */
const claimCode = preparedQuery(['hash', 'now', 'grantId'] as const, (db, p) =>
  db.updateTable('oauth_code').set({ used_at: p.now, grant_id: p.grantId }).where('code_hash', '=', p.hash).where('used_at', 'is', null),
);

const setGrantTokens = preparedQuery(['id', 'access', 'createdAt', 'expiresAt', 'refresh', 'accessJkt', 'refreshJkt'] as const, (db, p) =>
  db
    .updateTable('oauth_grant')
    .set({ access_hash: p.access, access_created_at: p.createdAt, access_expires_at: p.expiresAt, refresh_hash: p.refresh, access_jkt: p.accessJkt, refresh_jkt: p.refreshJkt })
    .where('id', '=', p.id),
);

/**
 * The writes of a code exchange, in one transaction (a batch's, with group commit): the grant,
 * the code claimed for it (a code already used meanwhile: the grant ends at once and the answer
 * is invalid_grant), then the grant's tokens, which name its id. Nothing is answered before
 * the commit.
 */
async function redeemCode(db: Kysely<any>, deps: AuthDeps, app: Application, row: CodeRow, now: number, jkt: string | null): Promise<TokenResponse> {
  const values = { accountId: row.account_id, appId: app.id, scope: row.scope, offline: row.offline, now, scopeText: row.scope_text };
  const grantId = ((await insertGrant(db, values)).rows[0] as { id: number }).id;
  const claimed = await claimCode(db, { hash: row.code_hash, now, grantId });
  if (claimed.numAffectedRows !== 1n) {
    // Ended at once, with no token (ending it costs less than deleting it: codes are not indexed by grant).
    await revokeGrant(deps, grantId, db);
    throw new OAuthError('invalid_grant', 'Invalid authorization code');
  }
  const access = grantToken(grantId);
  const refresh = row.offline === 1 ? grantToken(grantId) : undefined;
  await setGrantTokens(db, {
    id: grantId,
    access: access.hash,
    createdAt: now,
    expiresAt: now + deps.accessTokenTtl * 1000,
    refresh: refresh?.hash ?? null,
    accessJkt: jkt,
    // A confidential client's refresh token is bound to its authentication; a public one's to the key (RFC 9449 §5).
    refreshJkt: refresh !== undefined && app.kind === 'public' ? jkt : null,
  });
  const body: TokenResponse = { access_token: access.token, token_type: jkt === null ? 'Bearer' : 'DPoP', expires_in: deps.accessTokenTtl };
  if (refresh !== undefined) body.refresh_token = refresh.token;
  if (row.scope_text !== null) body.scope = row.scope_text;
  return body;
}

/**
 * The id_token of a code exchange (OpenID Connect Core §3.1.3.3): `sub` is the account name,
 * as userinfo's `sub` (the two must be equal, §5.3.2), signed with the application's algorithm.
 */
function idTokenFor(
  deps: AuthDeps,
  app: Application,
  code: { account_name: string; nonce: string | null; auth_time: number | null },
  accessToken: string,
  now: number,
): Promise<string> {
  return signIdToken(deps.signingKeys, {
    issuer: deps.authUrl,
    subject: code.account_name,
    audience: app.client_id,
    nonce: code.nonce ?? undefined,
    // Every code with `openid` records its sign-in; the column is nullable only for older codes.
    authTime: code.auth_time ?? now,
    accessToken,
    alg: app.id_token_alg,
    now,
  });
}

import { preparedQuery } from '../db/prepared.js';
import type { Account } from './accounts.js';
import type { Kysely } from 'kysely';
import type { AuthDeps } from './deps.js';
import { APP_COLUMNS, redirectUriAllowed, type Application } from './applications.js';
import { constantTimeEqual, randomToken, s256, tokenHash } from './crypto.js';
import { OAuthError } from './errors.js';
import { signIdToken } from './id-token.js';
import { OPENID, scopeNames } from './scopes.js';

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
 * Whether the user already granted this application exactly these scopes (and offline
 * access, when asked for) in a grant that is still active: then consent is not asked again.
 */
export async function hasActiveGrant(deps: AuthDeps, accountId: number, appId: number, scope: number, offline: boolean): Promise<boolean> {
  let q = deps.db
    .selectFrom('oauth_grant')
    .select('id')
    .where('account_id', '=', accountId)
    .where('application_id', '=', appId)
    .where('scope', '=', scope)
    .where('revoked_at', 'is', null);
  if (offline) q = q.where('refresh_hash', 'is not', null);
  return (await q.limit(1).executeTakeFirst()) !== undefined;
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

const CODE_RE = /^[A-Za-z0-9_-]+$/;

/** Whether `code` has the form of an authorization code (anything else is not looked up). */
function wellFormedCode(code: string): boolean {
  return code.length <= 200 && CODE_RE.test(code);
}

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

/** The answer to a replayed code (`invalid_grant`), which revoked the grant its first use created: for the audit trail. */
export class CodeReplayed extends GrantEndedByReuse {
  constructor(accountId: number, clientId: string) {
    super('Invalid authorization code', accountId, clientId);
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
export type CodeRow = NonNullable<Awaited<ReturnType<typeof codeByHash>>['rows'][number]>;

/** A lookup made for the write that follows it: in the write batch where there is one (WriteBatcher.read), else on its own. */
function lookupForWrite<T>(deps: AuthDeps, query: (db: Kysely<any>) => Promise<T>): Promise<T> {
  return deps.writes === undefined ? query(deps.db) : deps.writes.read(query);
}

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
export async function clientWithCode(
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
export async function documentClientWithCode(deps: AuthDeps, clientId: string, code: string): Promise<{ app: Application; code: CodeRow } | undefined> {
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

/**
 * Why an unused code `row` cannot be exchanged with `params` at `now`, or
 * undefined when it can: the checks of exchangeCode after its lookup, in their order.
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

/** A code of a client known by its metadata document, whose document changed (in what sleeve takes from it) since the code was issued: for the audit trail. */
export class DocumentChanged extends OAuthError {
  constructor() {
    super('invalid_grant', "The client's metadata document changed since the authorization request: ask for a new authorization");
  }
}

/**
 * The row of a client known by its metadata document, made or brought up to date (name, redirect
 * URIs, id_token algorithm) when a user allows it: its grants and codes need one. It has no
 * owner, and a secret nobody knows (such a client authenticates by PKCE alone). Its refresh
 * tokens rotate (docs/decisions.md, "Client ID Metadata Documents: a row without an owner").
 */
export async function storeDocumentClient(deps: AuthDeps, doc: { url: string; name: string; redirectUris: readonly string[]; idTokenAlg: Application['id_token_alg'] }): Promise<Application> {
  const fields = { name: doc.name, redirect_uri: doc.redirectUris.join('\n'), id_token_alg: doc.idTokenAlg };
  return deps.db
    .insertInto('oauth_application')
    .values({ ...fields, owner_id: null, kind: 'public', client_id: doc.url, secret_hash: tokenHash(randomToken()), created_at: deps.clock.now(), rotate_refresh: 1 })
    .onConflict((oc) => oc.column('client_id').doUpdateSet(fields))
    .returning(APP_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * `grant_type=authorization_code` for an authenticated client. `redeemed`: its writes, already
 * made with `read` by clientWithCode; only the id_token is left.
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

const grantById = preparedQuery(['id'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant')
    .select(['id', 'account_id', 'application_id', 'offline', 'refresh_hash', 'access_hash', 'revoked_at', 'scope_text', 'refresh_jkt'])
    .where('id', '=', p.id),
);

type GrantRow = Awaited<ReturnType<typeof grantById>>['rows'][number];

/** A refresh token's grant with its application (and the application's secret hash), when the application is `clientId`: one lookup by primary key. */
const grantWithClient = preparedQuery(['id', 'clientId'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select([
      'g.id as grant_id',
      'g.account_id as grant_account_id',
      'g.offline as grant_offline',
      'g.refresh_hash as grant_refresh_hash',
      'g.access_hash as grant_access_hash',
      'g.revoked_at as grant_revoked_at',
      'g.scope_text as grant_scope_text',
      'g.refresh_jkt as grant_refresh_jkt',
      ...APP_COLUMNS.map((c) => `a.${c}` as const),
      'a.secret_hash',
    ])
    .where('g.id', '=', p.id)
    .where('a.client_id', '=', p.clientId),
);

/**
 * A refresh request's client and grant in one lookup (docs/decisions.md, "Token endpoint CPU"):
 * when the refresh token names a grant of the client `clientId` and `secret` is that client's
 * secret. Otherwise undefined, and the caller authenticates the client as usual (whose
 * answers, invalid_client first, are the ones given).
 */
export async function clientWithGrant(deps: AuthDeps, clientId: string, secret: string, refreshToken: string): Promise<{ app: Application; grant: GrantRow } | undefined> {
  const id = grantIdOf(refreshToken);
  if (id === undefined || clientId.length > 200 || secret.length > 200) return undefined;
  const row = (await lookupForWrite(deps, (db) => grantWithClient(db, { id, clientId }))).rows[0];
  const candidate = tokenHash(secret);
  if (row === undefined || !constantTimeEqual(candidate, row.secret_hash)) return undefined;
  const { grant_id, grant_account_id, grant_offline, grant_refresh_hash, grant_access_hash, grant_revoked_at, grant_scope_text, grant_refresh_jkt, secret_hash: _omit, ...app } = row;
  const grant: GrantRow = {
    id: grant_id,
    account_id: grant_account_id,
    application_id: app.id,
    offline: grant_offline,
    refresh_hash: grant_refresh_hash,
    access_hash: grant_access_hash,
    revoked_at: grant_revoked_at,
    scope_text: grant_scope_text,
    refresh_jkt: grant_refresh_jkt,
  };
  return { app, grant };
}

/** Replaces a grant's access token, unless the grant ended or its refresh token changed meanwhile. */
const replaceAccessToken = preparedQuery(['id', 'hash', 'createdAt', 'expiresAt', 'refresh', 'jkt'] as const, (db, p) =>
  db
    .updateTable('oauth_grant')
    .set({ access_hash: p.hash, access_created_at: p.createdAt, access_expires_at: p.expiresAt, access_jkt: p.jkt })
    .where('id', '=', p.id)
    .where('refresh_hash', '=', p.refresh)
    .where('revoked_at', 'is', null),
);

/** A DPoP-bound refresh token presented without a proof, or with a proof of another key (RFC 9449 §5): for the audit trail. */
export class DpopKeyMismatch extends OAuthError {
  readonly reason: 'no_proof' | 'wrong_key';
  constructor(reason: 'no_proof' | 'wrong_key') {
    super('invalid_grant', reason === 'no_proof' ? 'The refresh token is DPoP-bound: send a DPoP proof of its key' : 'The refresh token is bound to another DPoP key');
    this.reason = reason;
  }
}

/**
 * `grant_type=refresh_token`: a new access token (the grant's previous one ends); the refresh
 * token stays. With `dpopJkt` (the request's DPoP proof) the new access token is bound to that
 * key; a DPoP-bound refresh token needs a proof of its own key. `rememberProof` runs once the
 * refresh token proved valid, before the new access token is stored.
 */
export async function refreshGrant(deps: AuthDeps, app: Application, refreshToken: string, dpopJkt?: string, read?: GrantRow, rememberProof?: () => Promise<void>): Promise<TokenResponse> {
  const invalid = () => new OAuthError('invalid_grant', 'Invalid refresh token');
  const id = grantIdOf(refreshToken);
  // `read`: the grant as clientWithGrant read it for this request (its update below checks it is still so).
  const grant = id === undefined ? undefined : read?.id === id ? read : (await grantById(deps.db, { id })).rows[0];
  if (grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null || !tokenMatches(refreshToken, grant.refresh_hash)) throw invalid();
  if (grant.refresh_jkt !== null && grant.refresh_jkt !== dpopJkt) throw new DpopKeyMismatch(dpopJkt === undefined ? 'no_proof' : 'wrong_key');
  await rememberProof?.();
  const access = grantToken(grant.id);
  const now = deps.clock.now();
  const values = { id: grant.id, hash: access.hash, createdAt: now, expiresAt: now + deps.accessTokenTtl * 1000, refresh: grant.refresh_hash, jkt: dpopJkt ?? null };
  const result = deps.writes === undefined ? await replaceAccessToken(deps.db, values) : await deps.writes.run((trx) => replaceAccessToken(trx, values));
  if (result.numAffectedRows !== 1n) throw invalid();
  const body: TokenResponse = { access_token: access.token, token_type: dpopJkt === undefined ? 'Bearer' : 'DPoP', expires_in: deps.accessTokenTtl, refresh_token: refreshToken };
  if (grant.scope_text !== null) body.scope = grant.scope_text;
  return body;
}

/**
 * RFC 7009 revocation with the interface's effects: a refresh token ends the whole grant;
 * an access token ends only itself when the grant is offline (its refresh token still
 * works), and the whole grant when it is online. Unknown tokens and other clients' tokens
 * change nothing. Says what ended (for the audit trail), or undefined when nothing did.
 */
export async function revokeToken(deps: AuthDeps, app: Application, token: string): Promise<{ ended: 'grant' | 'access_token'; accountId: number } | undefined> {
  const id = grantIdOf(token);
  const grant = id === undefined ? undefined : (await grantById(deps.db, { id })).rows[0];
  if (grant === undefined || grant.application_id !== app.id || grant.revoked_at !== null) return undefined;
  const ended = { accountId: grant.account_id };
  if (tokenMatches(token, grant.refresh_hash)) {
    await revokeGrant(deps, grant.id);
    return { ended: 'grant', ...ended };
  }
  if (!tokenMatches(token, grant.access_hash)) return undefined;
  if (grant.offline === 1) {
    await deps.db.updateTable('oauth_grant').set({ access_hash: null }).where('id', '=', grant.id).where('access_hash', '=', grant.access_hash).execute();
    return { ended: 'access_token', ...ended };
  }
  await revokeGrant(deps, grant.id);
  return { ended: 'grant', ...ended };
}

export interface ActiveToken {
  account: Account;
  grantId: number;
  scope: number;
  offline: boolean;
  clientId: string;
  issuedAt: number;
  expiresAt: number;
  /** Whether the grant was asked for with today's MetaBrainz scope names. */
  metabrainzNames: boolean;
  /** The thumbprint of the key the token is DPoP-bound to, or null for a bearer token. */
  dpopJkt: string | null;
}

const grantOwner = preparedQuery(['id'] as const, (db, p) =>
  db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .innerJoin('account as u', 'u.id', 'g.account_id')
    .select([
      'g.id as grant_id',
      'g.scope',
      'g.offline',
      'g.access_hash',
      'g.refresh_hash',
      'g.created_at as granted_at',
      'g.scope_text',
      'a.client_id',
      'g.access_created_at',
      'g.access_expires_at',
      'g.access_jkt',
      'g.refresh_jkt',
      'u.id',
      'u.name',
      'u.email',
      'u.email_verified',
      'u.website',
      'u.gender',
      'u.zoneinfo',
      'u.birth_date',
      'u.country',
    ])
    .where('g.id', '=', p.id)
    .where('g.revoked_at', 'is', null),
);

async function activeGrantOf(deps: AuthDeps, token: string) {
  const id = grantIdOf(token);
  return id === undefined ? undefined : (await grantOwner(deps.db, { id })).rows[0];
}

/** The grant (and user) behind a valid, unexpired access token, in one query. */
export async function findAccessToken(deps: AuthDeps, token: string): Promise<ActiveToken | undefined> {
  const row = await activeGrantOf(deps, token);
  if (row === undefined || !tokenMatches(token, row.access_hash) || row.access_expires_at === null || row.access_expires_at <= deps.clock.now()) return undefined;
  const { grant_id, scope, offline, client_id, access_created_at, access_expires_at, scope_text, access_jkt, refresh_jkt: _rj, access_hash: _a, refresh_hash: _r, granted_at: _g, ...account } = row;
  return {
    account,
    grantId: grant_id,
    scope,
    offline: offline === 1,
    clientId: client_id,
    issuedAt: access_created_at ?? 0,
    expiresAt: access_expires_at,
    metabrainzNames: scope_text !== null,
    dpopJkt: access_jkt,
  };
}

/**
 * RFC 7662 introspection of an access or refresh token. A client learns only about its
 * own tokens, unless the operator made it a resource server; any other token is, to it,
 * `{"active": false}` (RFC 7662 §2.2), so it cannot tell whether the token exists.
 */
export async function introspect(deps: AuthDeps, caller: Pick<Application, 'client_id' | 'resource_server'>, token: string): Promise<Record<string, unknown>> {
  const row = await activeGrantOf(deps, token);
  if (row === undefined || (caller.resource_server !== 1 && row.client_id !== caller.client_id)) return { active: false };
  const common = { active: true, scope: scopeNames(row.scope).join(' '), client_id: row.client_id, username: row.name, sub: row.name, iss: deps.authUrl };
  // A DPoP-bound token says its key (RFC 9449 §6.2), so a resource server can check the proof.
  const cnf = (jkt: string | null) => (jkt === null ? {} : { cnf: { jkt } });
  if (tokenMatches(token, row.refresh_hash)) return { ...common, token_type: 'refresh_token', iat: Math.floor(row.granted_at / 1000), ...cnf(row.refresh_jkt) };
  if (tokenMatches(token, row.access_hash) && row.access_expires_at !== null && row.access_expires_at > deps.clock.now()) {
    const tokenType = row.access_jkt === null ? 'Bearer' : 'DPoP';
    return { ...common, token_type: tokenType, exp: Math.floor(row.access_expires_at / 1000), iat: Math.floor((row.access_created_at ?? 0) / 1000), ...cnf(row.access_jkt) };
  }
  return { active: false };
}

export interface UserGrant {
  id: number;
  appName: string;
  /** A client known by its metadata document: the document's host (its name is only what the document says). */
  documentHost?: string | undefined;
  scope: number;
  offline: boolean;
  createdAt: number;
}

/**
 * The user's authorizations, for the authorized-applications page: one entry per
 * application and scope set (a user who approved an application twice sees it once),
 * named by its newest grant, offline when any of those grants is.
 */
export async function listUserGrants(deps: AuthDeps, accountId: number): Promise<UserGrant[]> {
  const rows = await deps.db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select(['g.id', 'g.application_id', 'a.name', 'a.owner_id', 'a.client_id', 'g.scope', 'g.offline', 'g.created_at'])
    .where('g.account_id', '=', accountId)
    .where('g.revoked_at', 'is', null)
    .orderBy('a.name')
    .orderBy('g.created_at', 'desc')
    .orderBy('g.id', 'desc')
    .execute();
  const groups = new Map<string, UserGrant>();
  for (const r of rows) {
    const key = `${r.application_id}/${r.scope}`;
    const seen = groups.get(key);
    if (seen === undefined) groups.set(key, { id: r.id, appName: r.name, documentHost: r.owner_id === null ? hostOf(r.client_id) : undefined, scope: r.scope, offline: r.offline === 1, createdAt: r.created_at });
    else if (r.offline === 1) seen.offline = true;
  }
  return [...groups.values()];
}

/** The host of a client_id that is a document's URL. */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** One of the user's active authorizations (for the confirmation page before revoking), or undefined. */
export async function findUserGrant(deps: AuthDeps, accountId: number, grantId: number): Promise<(UserGrant & { applicationId: number; clientId: string }) | undefined> {
  const r = await deps.db
    .selectFrom('oauth_grant as g')
    .innerJoin('oauth_application as a', 'a.id', 'g.application_id')
    .select(['g.id', 'g.application_id', 'a.name', 'a.client_id', 'g.scope', 'g.offline', 'g.created_at'])
    .where('g.id', '=', grantId)
    .where('g.account_id', '=', accountId)
    .where('g.revoked_at', 'is', null)
    .executeTakeFirst();
  return r === undefined ? undefined : { id: r.id, appName: r.name, scope: r.scope, offline: r.offline === 1, createdAt: r.created_at, applicationId: r.application_id, clientId: r.client_id };
}

/**
 * The user ends an authorization: the named grant and every other active grant of the
 * same application with the same scopes. Returns what ended, or undefined when it is not
 * theirs or already ended.
 */
export async function revokeUserGrant(deps: AuthDeps, accountId: number, grantId: number): Promise<{ appName: string; clientId: string; scope: number } | undefined> {
  const grant = await findUserGrant(deps, accountId, grantId);
  if (grant === undefined) return undefined;
  await deps.db.transaction().execute(async (trx) => {
    const all = await trx
      .selectFrom('oauth_grant')
      .select('id')
      .where('account_id', '=', accountId)
      .where('application_id', '=', grant.applicationId)
      .where('scope', '=', grant.scope)
      .where('revoked_at', 'is', null)
      .execute();
    for (const g of all) await revokeGrant(deps, g.id, trx);
  });
  return { appName: grant.appName, clientId: grant.clientId, scope: grant.scope };
}

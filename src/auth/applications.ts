import { preparedQuery } from '../db/prepared.js';
import { AppError, invalidInput, notFound } from '../shared/errors.js';
import type { AuthDeps } from './deps.js';
import { constantTimeEqual, randomToken, tokenHash } from './crypto.js';
import { MAX_REDIRECT_URIS, OOB_URI, redirectUriProblem } from './redirect-uris.js';
import { SIGNING_ALGS, type SigningAlg } from './signing-keys.js';

export type AppKind = 'confidential' | 'public';

export interface Application {
  id: number;
  /** Null for a client known by its metadata document (nobody here registered it). */
  owner_id: number | null;
  name: string;
  kind: AppKind;
  client_id: string;
  /** The registered redirect URIs, one per line (registeredRedirectUris), or null for none. */
  redirect_uri: string | null;
  created_at: number;
  /** 1 when the operator lets it introspect every application's tokens (`sleeve app edit --resource-server`). */
  resource_server: number;
  /** The algorithm its id_tokens are signed with (`sleeve app add|edit --id-token-alg`). */
  id_token_alg: SigningAlg;
  /** 1 when each refresh gives a new refresh token (`sleeve app add|edit --rotate-refresh-tokens`; auth/grants/refresh-token.ts). */
  rotate_refresh: number;
  /** 1 when every token request must carry a DPoP proof (`sleeve app add|edit --require-dpop`). */
  require_dpop: number;
}

export const APP_COLUMNS = ['id', 'owner_id', 'name', 'kind', 'client_id', 'redirect_uri', 'created_at', 'resource_server', 'id_token_alg', 'rotate_refresh', 'require_dpop'] as const;

/** An id_token algorithm as given by the operator, checked. */
function checkIdTokenAlg(alg: string): SigningAlg {
  if (!(SIGNING_ALGS as readonly string[]).includes(alg)) throw invalidInput(`the id_token algorithm must be one of ${SIGNING_ALGS.join(', ')}`);
  return alg as SigningAlg;
}

const LOOPBACK_RE = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?(\/[^#]*)?$/;
/** A loopback redirect URI split around its port: host, then everything after the port. */
const LOOPBACK_PARTS_RE = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(?::\d{1,5})?([/?][^#]*)?$/;
const REVERSE_DNS_RE = /^(?![_-])[\w-]+(?:\.(?![_-])[\w-]+)+:/;

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
}

/** The application's registered redirect URIs (the column holds them one per line). */
export function registeredRedirectUris(app: Pick<Application, 'redirect_uri'>): string[] {
  return app.redirect_uri === null || app.redirect_uri === '' ? [] : app.redirect_uri.split('\n');
}

/**
 * Checks one redirect URI for registration: confidential (web) applications need an https
 * URL (http only on loopback); public (installed) ones a reverse-DNS custom scheme such as
 * org.example.app://auth. Either may register out-of-band and loopback URIs (a public
 * application may also use those unregistered). Returns it trimmed.
 */
function checkOneRedirectUri(kind: AppKind, raw: string): string {
  const uri = raw.trim();
  if (uri === OOB_URI) return uri;
  const problem = redirectUriProblem(uri);
  if (problem !== undefined) throw invalidInput(problem);
  const parsed = new URL(uri);
  if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) return uri;
  if (kind === 'confidential') {
    if (parsed.protocol === 'https:') return uri;
    throw invalidInput('the redirect URL of a confidential (web) application must use https (http is allowed only for localhost, 127.0.0.1 and [::1])');
  }
  if (REVERSE_DNS_RE.test(uri)) return uri;
  throw invalidInput('the redirect URL of a public (installed) application must use a reverse-DNS custom scheme, as in org.example.app://auth, or be out-of-band or loopback');
}

/**
 * Checks the redirect URIs to register (given as a list, or as one text of URIs separated by
 * white space, as the application form sends them; repeats are dropped) and returns the
 * column's value: one per line, or null for none. Confidential applications need at least one.
 */
function checkRedirectUris(kind: AppKind, raw: string | readonly string[] | undefined): string | null {
  const given = (typeof raw === 'string' ? raw.split(/\s+/) : (raw ?? [])).filter((u) => u.trim() !== '');
  if (given.length > MAX_REDIRECT_URIS) throw invalidInput(`at most ${MAX_REDIRECT_URIS} redirect URLs may be registered`);
  const uris = [...new Set(given.map((u) => checkOneRedirectUri(kind, u)))];
  if (uris.length === 0) {
    if (kind === 'confidential') throw invalidInput('a redirect URL must be entered for confidential (web) applications');
    return null;
  }
  return uris.join('\n');
}

/** Whether `requested` is the loopback URI `registered` on some port (RFC 8252 §7.3): the same host, path and query. */
function sameLoopbackUri(registered: string, requested: string): boolean {
  const a = LOOPBACK_PARTS_RE.exec(registered);
  if (a === null) return false;
  const b = LOOPBACK_PARTS_RE.exec(requested);
  return b !== null && a[1] === b[1] && (a[2] ?? '') === (b[2] ?? '');
}

/**
 * Why `requested` may not be used with this application, or undefined when it may: one of
 * the registered URIs exactly, or a registered loopback URI (http://127.0.0.1, http://[::1],
 * http://localhost) on any port; plus, for public applications, out-of-band and loopback
 * URLs that were not registered (each a valid redirect target).
 */
export function redirectUriRefusal(app: Pick<Application, 'kind' | 'redirect_uri'>, requested: string): string | undefined {
  if (requested === OOB_URI && app.kind === 'public') return undefined;
  const registered = registeredRedirectUris(app);
  const allowed = registered.includes(requested) || registered.some((r) => sameLoopbackUri(r, requested)) || (app.kind === 'public' && LOOPBACK_RE.test(requested));
  if (!allowed) return 'Mismatched redirect URI';
  if (requested === OOB_URI) return undefined;
  const problem = redirectUriProblem(requested);
  return problem === undefined ? undefined : `Invalid redirect URI: ${problem}`;
}

/** Whether `requested` may be used with this application. */
export function redirectUriAllowed(app: Pick<Application, 'kind' | 'redirect_uri'>, requested: string): boolean {
  return redirectUriRefusal(app, requested) === undefined;
}

function checkName(raw: string | undefined): string {
  const name = (raw ?? '').normalize('NFC').trim();
  if (name === '') throw invalidInput('the application needs a name');
  if (name.length > 100) throw invalidInput('the application name must be at most 100 characters');
  return name;
}

/** The longest client_id an operator may choose (findAppByClientId looks up nothing longer). */
const MAX_CLIENT_ID_LENGTH = 200;

/**
 * Checks a client_id the operator chose (`sleeve app add --client-id`), for a client that
 * carries its own, such as Picard's: RFC 3986's unreserved characters only (letters, digits,
 * `-` `.` `_` `~`), so that it travels in a URL, a form and HTTP Basic unchanged, and it cannot
 * be a URL (those are Client ID Metadata Documents); not starting with `-`, so that it can be
 * given to other commands without being read as an option.
 */
export function checkClientId(raw: string): string {
  if (raw === '') throw invalidInput('the client_id must not be empty');
  if (raw.length > MAX_CLIENT_ID_LENGTH) throw invalidInput(`the client_id must be at most ${MAX_CLIENT_ID_LENGTH} characters, not ${raw.length}`);
  if (raw.startsWith('-')) throw invalidInput('the client_id must not start with "-"');
  const bad = /[^A-Za-z0-9._~-]/u.exec(raw)?.[0];
  if (bad !== undefined) {
    const shown = bad === ' ' ? 'a space' : /^[\x21-\x7e]$/.test(bad) ? JSON.stringify(bad) : `U+${(bad.codePointAt(0) ?? 0).toString(16).toUpperCase().padStart(4, '0')}`;
    throw invalidInput(`the client_id may contain only letters A-Z and a-z, digits and - . _ ~ (not ${shown})`);
  }
  return raw;
}

/** The longest client secret an operator may give (authenticateClient checks nothing longer). */
const MAX_SECRET_LENGTH = 200;

/**
 * Checks a client secret the operator gave (`--client-secret-stdin`, for a client with a
 * built-in one): printable ASCII without spaces, at most 200 characters; a confidential
 * application's at least 16 characters (it is what guards its tokens).
 */
function checkClientSecret(kind: AppKind, secret: string): string {
  if (secret === '') throw invalidInput('the client secret must not be empty');
  if (secret.length > MAX_SECRET_LENGTH) throw invalidInput(`the client secret must be at most ${MAX_SECRET_LENGTH} characters`);
  if (/[^\x21-\x7e]/.test(secret)) throw invalidInput('the client secret may contain only printable ASCII characters, without spaces');
  if (kind === 'confidential' && secret.length < 16) throw invalidInput('the client secret of a confidential application must have at least 16 characters');
  return secret;
}

export interface Registered {
  app: Application;
  clientSecret: string;
}

/** Registers an application; the secret is returned once and stored hashed. */
export async function registerApp(
  deps: AuthDeps,
  input: {
    ownerId: number;
    name: string | undefined;
    kind: string | undefined;
    /** One URI, one per line, or a list. */
    redirectUri?: string | readonly string[] | undefined;
    /** The operator's client_id and secret (`--client-id`, `--client-secret-stdin`); generated when not given. */
    clientId?: string | undefined;
    clientSecret?: string | undefined;
    resourceServer?: boolean;
    idTokenAlg?: string | undefined;
    rotateRefresh?: boolean;
    requireDpop?: boolean | undefined;
  },
): Promise<Registered> {
  const kind = input.kind;
  if (kind !== 'confidential' && kind !== 'public') throw invalidInput('the application type must be confidential or public');
  const name = checkName(input.name);
  const redirect_uri = checkRedirectUris(kind, input.redirectUri);
  const chosenId = input.clientId === undefined ? undefined : checkClientId(input.clientId);
  const clientSecret = input.clientSecret === undefined ? randomToken() : checkClientSecret(kind, input.clientSecret);
  const clash = async () => chosenId !== undefined && (await findAppByClientId(deps, chosenId)) !== undefined;
  if (await clash()) throw new AppError('CONFLICT', `an application with client_id ${chosenId} already exists`);
  const insert = deps.db
    .insertInto('oauth_application')
    .values({
      owner_id: input.ownerId,
      name,
      kind,
      client_id: chosenId ?? newClientId(),
      secret_hash: tokenHash(clientSecret),
      redirect_uri,
      created_at: deps.clock.now(),
      resource_server: input.resourceServer === true ? 1 : 0,
      rotate_refresh: input.rotateRefresh === true ? 1 : 0,
      require_dpop: input.requireDpop === true ? 1 : 0,
      ...(input.idTokenAlg === undefined ? {} : { id_token_alg: checkIdTokenAlg(input.idTokenAlg) }),
    })
    .returning(APP_COLUMNS)
    .executeTakeFirstOrThrow();
  const app = await insert.catch(async (err: unknown) => {
    // Two registrations of the same id at once: the unique index decides, the loser hears why.
    if (await clash()) throw new AppError('CONFLICT', `an application with client_id ${chosenId} already exists`);
    throw err;
  });
  return { app, clientSecret };
}

export async function findAppByClientId(deps: AuthDeps, clientId: string): Promise<Application | undefined> {
  if (clientId.length > 200) return undefined;
  return deps.db.selectFrom('oauth_application').select(APP_COLUMNS).where('client_id', '=', clientId).executeTakeFirst();
}

/** The application if the secret is its secret (compared in constant time, as hashes). */
const appWithSecret = preparedQuery(['clientId'] as const, (db, p) => db.selectFrom('oauth_application').select([...APP_COLUMNS, 'secret_hash']).where('client_id', '=', p.clientId));

export async function authenticateClient(deps: AuthDeps, clientId: string, secret: string): Promise<Application | undefined> {
  if (clientId.length > 200 || secret.length > 200) return undefined;
  const row = (await appWithSecret(deps.db, { clientId })).rows[0];
  const candidate = tokenHash(secret);
  if (row === undefined) {
    constantTimeEqual(candidate, candidate);
    return undefined;
  }
  if (!constantTimeEqual(candidate, row.secret_hash)) return undefined;
  const { secret_hash: _omit, ...app } = row;
  return app;
}

export async function listOwnApps(deps: AuthDeps, ownerId: number): Promise<Application[]> {
  return deps.db.selectFrom('oauth_application').select(APP_COLUMNS).where('owner_id', '=', ownerId).orderBy('name').orderBy('id').execute();
}

/** One of the owner's applications; anyone else's is "not found". */
async function ownApp(deps: AuthDeps, ownerId: number, id: number): Promise<Application> {
  const app = await findOwnApp(deps, ownerId, id);
  if (app === undefined) throw notFound('no such application');
  return app;
}

/** The owner's application with this id, or undefined. */
export async function findOwnApp(deps: AuthDeps, ownerId: number, id: number): Promise<Application | undefined> {
  return deps.db.selectFrom('oauth_application').select(APP_COLUMNS).where('id', '=', id).where('owner_id', '=', ownerId).executeTakeFirst();
}

/** Changes name, redirect URI and id_token algorithm (kept when not given); the type stays what it was registered as. */
export async function editApp(
  deps: AuthDeps,
  ownerId: number,
  id: number,
  input: { name: string | undefined; redirectUri: string | undefined; idTokenAlg?: string | undefined; rotateRefresh?: boolean | undefined },
): Promise<Application> {
  const app = await ownApp(deps, ownerId, id);
  const name = checkName(input.name);
  const redirect_uri = checkRedirectUris(app.kind, input.redirectUri);
  const id_token_alg = input.idTokenAlg === undefined ? app.id_token_alg : checkIdTokenAlg(input.idTokenAlg);
  const rotate_refresh = input.rotateRefresh === undefined ? app.rotate_refresh : input.rotateRefresh ? 1 : 0;
  return deps.db
    .updateTable('oauth_application')
    .set({ name, redirect_uri, id_token_alg, rotate_refresh })
    .where('id', '=', app.id)
    .returning(APP_COLUMNS)
    .executeTakeFirstOrThrow();
}

/**
 * A client_id: 192 random bits, base64url, never starting with '-' (redrawn until it does not),
 * so that it can be given to `sleeve app edit` and to other command lines without being read as
 * an option.
 */
function newClientId(): string {
  for (;;) {
    const id = randomToken(24);
    if (!id.startsWith('-')) return id;
  }
}

/**
 * The operator's change of any application, named by its client_id (`sleeve app edit`):
 * name, redirect URIs (the list replaced), whether it is a resource server, its id_token algorithm and whether
 * it must use DPoP; what is not given stays.
 */
export async function operatorEditApp(
  deps: AuthDeps,
  clientId: string,
  input: {
    name?: string | undefined;
    /** Replaces the registered list. */
    redirectUri?: string | readonly string[] | undefined;
    resourceServer?: boolean | undefined;
    idTokenAlg?: string | undefined;
    rotateRefresh?: boolean | undefined;
    requireDpop?: boolean | undefined;
  },
): Promise<Application> {
  const app = await findAppByClientId(deps, clientId);
  if (app === undefined) throw notFound(`no application with client_id ${clientId}`);
  return deps.db
    .updateTable('oauth_application')
    .set({
      name: input.name === undefined ? app.name : checkName(input.name),
      redirect_uri: input.redirectUri === undefined ? app.redirect_uri : checkRedirectUris(app.kind, input.redirectUri),
      resource_server: input.resourceServer === undefined ? app.resource_server : input.resourceServer ? 1 : 0,
      id_token_alg: input.idTokenAlg === undefined ? app.id_token_alg : checkIdTokenAlg(input.idTokenAlg),
      rotate_refresh: input.rotateRefresh === undefined ? app.rotate_refresh : input.rotateRefresh ? 1 : 0,
      require_dpop: input.requireDpop === undefined ? app.require_dpop : input.requireDpop ? 1 : 0,
    })
    .where('id', '=', app.id)
    .returning(APP_COLUMNS)
    .executeTakeFirstOrThrow();
}

/** Removes the application and, with it, every grant and token it holds. */
export async function removeApp(deps: AuthDeps, ownerId: number, id: number): Promise<void> {
  const app = await ownApp(deps, ownerId, id);
  await deps.db.deleteFrom('oauth_application').where('id', '=', app.id).execute();
}

/** Issues a new secret; the old one stops working at once. */
export async function resetSecret(deps: AuthDeps, ownerId: number, id: number): Promise<Registered> {
  const app = await ownApp(deps, ownerId, id);
  const clientSecret = randomToken();
  await deps.db.updateTable('oauth_application').set({ secret_hash: tokenHash(clientSecret) }).where('id', '=', app.id).execute();
  return { app, clientSecret };
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

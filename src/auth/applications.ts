import { preparedQuery } from '../db/prepared.js';
import { invalidInput, notFound } from '../shared/errors.js';
import type { AuthDeps } from './deps.js';
import { constantTimeEqual, randomToken, tokenHash } from './crypto.js';
import { SIGNING_ALGS, type SigningAlg } from './signing-keys.js';

export type AppKind = 'confidential' | 'public';

export interface Application {
  id: number;
  owner_id: number;
  name: string;
  kind: AppKind;
  client_id: string;
  redirect_uri: string | null;
  created_at: number;
  /** 1 when the operator lets it introspect every application's tokens (`sleeve app edit --resource-server`). */
  resource_server: number;
  /** The algorithm its id_tokens are signed with (`sleeve app add|edit --id-token-alg`). */
  id_token_alg: SigningAlg;
  /** 1 when each refresh gives a new refresh token (`sleeve app add|edit --rotate-refresh-tokens`; auth/rotation.ts). */
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

export const OOB_URI = 'urn:ietf:wg:oauth:2.0:oob';
const LOOPBACK_RE = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?(\/[^#]*)?$/;
const REVERSE_DNS_RE = /^(?![_-])[\w-]+(?:\.(?![_-])[\w-]+)+:/;

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
}

/**
 * Why `uri` cannot be a redirect target, or undefined when it can: a browser is sent to it
 * with parameters added, so it must parse as a URL (a port of 1–65535), and it must not
 * carry a fragment (which would swallow those parameters), a user name or password (which
 * make a URL say one host and go to another), spaces or control characters (which URL
 * parsers drop silently, so the target would not be the string compared).
 */
export function redirectUriProblem(uri: string): string | undefined {
  if (uri.length > 2000) return 'the redirect URL is too long';
  if (!/^[A-Za-z][A-Za-z0-9+.-]*:[^\s]/.test(uri)) return `redirect URL ${JSON.stringify(uri)} is not an absolute URL`;
  if (/[\u0000-\u0020\u007f]/.test(uri)) return 'a redirect URL must not contain spaces or control characters (percent-encode them)';
  if (uri.includes('#')) return 'a redirect URL must not contain a fragment (#…)';
  const port = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/(?:[^/?@]*@)?(?:\[[^\]/?]*\]|[^:/?]*):(\d*)(?:[/?]|$)/.exec(uri)?.[1];
  if (port !== undefined && port !== '' && !(Number(port) >= 1 && Number(port) <= 65535)) return `the port of a redirect URL must be between 1 and 65535, not ${port}`;
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    return `redirect URL ${JSON.stringify(uri)} is not an absolute URL`;
  }
  if (parsed.username !== '' || parsed.password !== '') return 'a redirect URL must not contain a user name or password (…@)';
  return undefined;
}

/**
 * Checks a redirect URI for registration: confidential (web) applications need an
 * https URL (http only on loopback); public (installed) ones may leave it empty or use
 * a reverse-DNS custom scheme such as org.example.app://auth. Returns it trimmed.
 */
export function checkRedirectUri(kind: AppKind, raw: string | undefined): string | null {
  const uri = raw?.trim() ?? '';
  if (uri === '') {
    if (kind === 'confidential') throw invalidInput('a redirect URL must be entered for confidential (web) applications');
    return null;
  }
  const problem = redirectUriProblem(uri);
  if (problem !== undefined) throw invalidInput(problem);
  const parsed = new URL(uri);
  if (kind === 'confidential') {
    if (parsed.protocol === 'https:') return uri;
    if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname)) return uri;
    throw invalidInput('the redirect URL of a confidential (web) application must use https (http is allowed only for localhost, 127.0.0.1 and [::1])');
  }
  if (REVERSE_DNS_RE.test(uri)) return uri;
  throw invalidInput('the redirect URL of a public (installed) application must use a reverse-DNS custom scheme, as in org.example.app://auth; out-of-band and loopback URLs need no registration');
}

/**
 * Why `requested` may not be used with this application, or undefined when it may: the
 * registered URI exactly, plus, for public applications, out-of-band and loopback URLs
 * on any port (each a valid redirect target).
 */
export function redirectUriRefusal(app: Pick<Application, 'kind' | 'redirect_uri'>, requested: string): string | undefined {
  if (requested === OOB_URI && app.kind === 'public') return undefined;
  const allowed = (app.redirect_uri !== null && requested === app.redirect_uri) || (app.kind === 'public' && LOOPBACK_RE.test(requested));
  if (!allowed) return 'Mismatched redirect URI';
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
    redirectUri?: string | undefined;
    resourceServer?: boolean;
    idTokenAlg?: string | undefined;
    rotateRefresh?: boolean;
    requireDpop?: boolean | undefined;
  },
): Promise<Registered> {
  const kind = input.kind;
  if (kind !== 'confidential' && kind !== 'public') throw invalidInput('the application type must be confidential or public');
  const name = checkName(input.name);
  const redirect_uri = checkRedirectUri(kind, input.redirectUri);
  const clientSecret = randomToken();
  const app = await deps.db
    .insertInto('oauth_application')
    .values({
      owner_id: input.ownerId,
      name,
      kind,
      client_id: newClientId(),
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
export async function ownApp(deps: AuthDeps, ownerId: number, id: number): Promise<Application> {
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
  const redirect_uri = checkRedirectUri(app.kind, input.redirectUri);
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
 * name, redirect URI, whether it is a resource server, its id_token algorithm and whether
 * it must use DPoP; what is not given stays.
 */
export async function operatorEditApp(
  deps: AuthDeps,
  clientId: string,
  input: {
    name?: string | undefined;
    redirectUri?: string | undefined;
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
      redirect_uri: input.redirectUri === undefined ? app.redirect_uri : checkRedirectUri(app.kind, input.redirectUri),
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

import { preparedQuery } from '../db/prepared.js';
import { invalidInput, notFound } from '../shared/errors.js';
import type { AuthDeps } from './accounts.js';
import { constantTimeEqual, randomToken, tokenHash } from './crypto.js';

export type AppKind = 'confidential' | 'public';

export interface Application {
  id: number;
  owner_id: number;
  name: string;
  kind: AppKind;
  client_id: string;
  redirect_uri: string | null;
  created_at: number;
}

const APP_COLUMNS = ['id', 'owner_id', 'name', 'kind', 'client_id', 'redirect_uri', 'created_at'] as const;

export const OOB_URI = 'urn:ietf:wg:oauth:2.0:oob';
const LOOPBACK_RE = /^http:\/\/(localhost|127\.0\.0\.1|\[::1\])(:\d{1,5})?(\/[^#]*)?$/;
const REVERSE_DNS_RE = /^(?![_-])[\w-]+(?:\.(?![_-])[\w-]+)+:/;

function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
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
  if (uri.length > 2000) throw invalidInput('the redirect URL is too long');
  let parsed: URL;
  try {
    parsed = new URL(uri);
  } catch {
    throw invalidInput(`redirect URL ${JSON.stringify(uri)} is not an absolute URL`);
  }
  if (parsed.hash !== '' || uri.includes('#')) throw invalidInput('a redirect URL must not contain a fragment (#…)');
  if (kind === 'confidential') {
    if (parsed.protocol === 'https:') return uri;
    if (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname.startsWith('[') ? parsed.hostname : parsed.hostname)) return uri;
    throw invalidInput('the redirect URL of a confidential (web) application must use https (http is allowed only for localhost, 127.0.0.1 and [::1])');
  }
  if (REVERSE_DNS_RE.test(uri)) return uri;
  throw invalidInput('the redirect URL of a public (installed) application must use a reverse-DNS custom scheme, as in org.example.app://auth; out-of-band and loopback URLs need no registration');
}

/** Whether `requested` may be used with this application (exact match, plus the installed-app allowances). */
export function redirectUriAllowed(app: Pick<Application, 'kind' | 'redirect_uri'>, requested: string): boolean {
  if (app.redirect_uri !== null && requested === app.redirect_uri) return true;
  if (app.kind !== 'public') return false;
  return requested === OOB_URI || LOOPBACK_RE.test(requested);
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
  input: { ownerId: number; name: string | undefined; kind: string | undefined; redirectUri?: string },
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
      client_id: randomToken(24),
      secret_hash: tokenHash(clientSecret),
      redirect_uri,
      created_at: deps.clock.now(),
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
  const app = await deps.db.selectFrom('oauth_application').select(APP_COLUMNS).where('id', '=', id).where('owner_id', '=', ownerId).executeTakeFirst();
  if (app === undefined) throw notFound('no such application');
  return app;
}

/** Changes name and redirect URI; the type stays what it was registered as. */
export async function editApp(deps: AuthDeps, ownerId: number, id: number, input: { name: string | undefined; redirectUri: string | undefined }): Promise<Application> {
  const app = await ownApp(deps, ownerId, id);
  const name = checkName(input.name);
  const redirect_uri = checkRedirectUri(app.kind, input.redirectUri);
  return deps.db
    .updateTable('oauth_application')
    .set({ name, redirect_uri })
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

import type { AuthDeps } from './deps.js';
import { findAppByClientId, redirectUriRefusal, type Application } from './applications.js';
import { isDocumentClientId, type ClientDocument } from './client-metadata.js';
import { OAuthError, type OAuthErrorCode } from './errors.js';
import { MAX_ID_TOKEN_HINT_LENGTH } from './id-token.js';
import { parseScope } from './scopes.js';

/*
 * The checks of an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3), in MusicBrainz's
 * order. Until the client and its redirect URI are known to be good, an error can only be
 * shown to the user (authorizeTarget throws it); after that, it goes back to the client
 * (authorizeRequest returns it).
 */

const PARAMS = [
  'client_id',
  'scope',
  'response_type',
  'redirect_uri',
  'access_type',
  'approval_prompt',
  'state',
  'code_challenge',
  'code_challenge_method',
  'response_mode',
  'nonce',
  // OpenID Connect Core §3.1.2.1 (display, ui_locales, claims_locales, acr_values and claims are read by nothing, so may repeat).
  'prompt',
  'max_age',
  'id_token_hint',
  'login_hint',
  'request',
  'request_uri',
  'registration',
];
const REQUIRED = new Set(['client_id', 'scope', 'response_type', 'redirect_uri']);

/** Where the answer to an authorization request may go: a known client and a redirect URI it may use. */
export interface AuthorizeTarget {
  client: Application;
  redirectUri: string;
  state: string | undefined;
  /** The request's parameters, each sent at most once. */
  params: Map<string, string>;
  /** The client's metadata document, when its client_id is the document's URL (auth/client-metadata.ts). */
  document?: ClientDocument | undefined;
}

/**
 * Each parameter at most once, the required ones present, a known client, and a redirect
 * URI it may use; otherwise an OAuthError for an error page (nothing is sent to the client).
 */
export async function authorizeTarget(deps: AuthDeps, query: URLSearchParams): Promise<AuthorizeTarget> {
  const params = new Map<string, string>();
  for (const name of PARAMS) {
    const v = query.getAll(name);
    if (v.length > 1) throw new OAuthError('invalid_request', `Parameter is included more than once in the request: ${name}`);
    if (REQUIRED.has(name) && v[0] === undefined) throw new OAuthError('invalid_request', `Required parameter is missing: ${name}`);
    if (v[0] !== undefined) params.set(name, v[0]);
  }
  const clientId = params.get('client_id') as string;
  const redirectUri = params.get('redirect_uri') as string;
  if (isDocumentClientId(clientId) && deps.clientDocuments !== undefined) {
    const document = await deps.clientDocuments.resolve(clientId);
    const client = documentClient(document, await findAppByClientId(deps, clientId), deps.clock.now());
    // Only the URIs the document lists (a loopback one on any port): not every loopback and out-of-band URI as for a registered public application.
    const refusal = redirectUriRefusal({ kind: 'confidential', redirect_uri: client.redirect_uri }, redirectUri);
    if (refusal !== undefined) throw new OAuthError('invalid_request', refusal);
    return { client, redirectUri, state: params.get('state'), params, document };
  }
  const client = await findAppByClientId(deps, clientId);
  if (client === undefined) throw new OAuthError('invalid_client', 'Unknown client', 400);
  const refusal = redirectUriRefusal(client, redirectUri);
  if (refusal !== undefined) throw new OAuthError('invalid_request', refusal);
  return { client, redirectUri, state: params.get('state'), params };
}

/**
 * The application a metadata document describes, as the authorization request sees it: a public
 * one (PKCE, no secret) whose refresh tokens rotate, with the row a user's consent made before
 * (its id), or none yet (id 0: the consent that issues a code makes it; applications.ts storeDocumentClient).
 */
function documentClient(doc: ClientDocument, row: Application | undefined, now: number): Application {
  return {
    id: row?.owner_id === null ? row.id : 0,
    owner_id: null,
    name: doc.name,
    kind: 'public',
    client_id: doc.url,
    redirect_uri: doc.redirectUris.join('\n'),
    created_at: row?.created_at ?? now,
    resource_server: 0,
    id_token_alg: doc.idTokenAlg,
    rotate_refresh: 1,
    require_dpop: 0,
  };
}

/** A well-formed authorization request, ready for consent. */
export interface AuthorizeRequest extends AuthorizeTarget {
  scope: number;
  /** The scope list as written, when it used MetaBrainz names (scopes.ts parseScope's `spelled`). */
  scopeText: string | null;
  responseMode: 'query' | 'form_post';
  codeChallenge: string | undefined;
  codeChallengeMethod: 'plain' | 'S256' | undefined;
  /** A public (installed) application: its grants are always offline, and consent is always asked. */
  installed: boolean;
  /** Whether a refresh token is asked for. */
  offline: boolean;
  /** approval_prompt=force: ask for consent even when an equal grant exists. */
  forcePrompt: boolean;
  /** OpenID Connect's nonce, for the id_token (optional, as in OpenID Connect Core's code flow). */
  nonce: string | undefined;
  /** OpenID Connect's prompt values (Core §3.1.2.1): `consent` is also in forcePrompt. */
  prompt: ReadonlySet<Prompt>;
  /** max_age (seconds): a sign-in older than this is done again. */
  maxAge: number | undefined;
  /** id_token_hint as sent (checked by the endpoint, which has the keys). */
  idTokenHint: string | undefined;
  /** login_hint: the user name the sign-in form starts with. */
  loginHint: string | undefined;
}

export type Prompt = 'none' | 'login' | 'consent' | 'select_account';
const PROMPTS: ReadonlySet<string> = new Set<Prompt>(['none', 'login', 'consent', 'select_account']);

/** The prompt values, or why they cannot be taken. */
function parsePrompt(text: string | undefined): Set<Prompt> | string {
  const values = new Set<Prompt>();
  for (const v of (text ?? '').split(' ')) {
    if (v === '') continue;
    if (!PROMPTS.has(v)) return `Unsupported prompt value: ${v.slice(0, 40)}`;
    values.add(v as Prompt);
  }
  if (values.has('none') && values.size > 1) return 'The prompt value none cannot be combined with other values';
  return values;
}

/** Request objects (Core §6) and dynamic registration are not supported: each is refused with its own error. */
const UNSUPPORTED: readonly (readonly [string, OAuthErrorCode])[] = [
  ['request', 'request_not_supported'],
  ['request_uri', 'request_uri_not_supported'],
  ['registration', 'registration_not_supported'],
];

/** The longest nonce kept: far above any client's (openid-client's are 43 characters), far below a row's worth. */
const MAX_NONCE_LENGTH = 512;

/** The rest of the request's checks; a refusal is to be sent back to the redirect URI (RFC 6749 §4.1.2.1). */
export function authorizeRequest(target: AuthorizeTarget, pkce: AuthDeps['pkce'] = 'optional'): AuthorizeRequest | { refused: OAuthError } {
  const { params, client } = target;
  const refuse = (error: OAuthErrorCode, description: string) => ({ refused: new OAuthError(error, description) });
  if (params.get('response_type') !== 'code') return refuse('unsupported_response_type', 'Unsupported response type');
  for (const [name, error] of UNSUPPORTED) if (params.has(name)) return refuse(error, `The ${name} parameter is not supported`);
  const responseMode = params.get('response_mode');
  if (responseMode !== undefined && responseMode !== 'form_post' && responseMode !== 'query') return refuse('invalid_request', 'Unsupported response mode');
  const scope = parseScope(params.get('scope') as string);
  if ('unknown' in scope) return refuse('invalid_scope', `Unsupported scope: ${scope.unknown}`);
  const method = params.get('code_challenge_method');
  const challenge = params.get('code_challenge');
  if (method !== undefined && method !== 'plain' && method !== 'S256') return refuse('invalid_request', "The code_challenge_method must be 'S256' or 'plain'");
  if (method !== undefined && challenge === undefined) return refuse('invalid_request', 'A code_challenge_method was supplied without an accompanying code_challenge');
  if (challenge !== undefined && !(method === 'S256' ? /^[A-Za-z0-9_-]{43}$/ : /^[A-Za-z0-9.~_-]{43,128}$/).test(challenge)) {
    return refuse('invalid_request', 'Invalid code_challenge; see https://tools.ietf.org/html/rfc7636#section-4.1');
  }
  // SLEEVE_PKCE=s256-for-public: a public application's code needs an S256 challenge (RFC 9700 §2.1.1).
  if (pkce === 's256-for-public' && client.kind === 'public' && method !== 'S256') {
    return refuse('invalid_request', 'A public client must use PKCE with code_challenge_method=S256');
  }
  // A client known by its document has no secret: PKCE with S256 is what protects its codes.
  if (target.document !== undefined && method !== 'S256') return refuse('invalid_request', 'A client known by its metadata document must use PKCE with code_challenge_method=S256');
  const nonce = params.get('nonce');
  if (nonce !== undefined && (nonce.length > MAX_NONCE_LENGTH || /[^\x20-\x7e]/.test(nonce))) return refuse('invalid_request', `Invalid nonce: at most ${MAX_NONCE_LENGTH} printable ASCII characters`);
  const prompt = parsePrompt(params.get('prompt'));
  if (typeof prompt === 'string') return refuse('invalid_request', prompt);
  const maxAgeText = params.get('max_age');
  if (maxAgeText !== undefined && !/^\d{1,10}$/.test(maxAgeText)) return refuse('invalid_request', 'Invalid max_age: a number of seconds (0 or more)');
  const idTokenHint = params.get('id_token_hint');
  if (idTokenHint !== undefined && idTokenHint.length > MAX_ID_TOKEN_HINT_LENGTH) return refuse('invalid_request', 'Invalid id_token_hint');
  const loginHint = params.get('login_hint');
  const installed = client.kind === 'public';
  return {
    ...target,
    scope: scope.mask,
    scopeText: scope.spelled,
    responseMode: responseMode === 'form_post' ? 'form_post' : 'query',
    codeChallenge: challenge,
    codeChallengeMethod: method,
    installed,
    offline: installed || params.get('access_type') === 'offline' || scope.offline,
    forcePrompt: params.get('approval_prompt') === 'force' || prompt.has('consent'),
    nonce,
    prompt,
    maxAge: maxAgeText === undefined ? undefined : Number(maxAgeText),
    idTokenHint,
    // A hint only prefills a field: one longer than any user name is not one.
    loginHint: loginHint !== undefined && loginHint.length <= 255 ? loginHint : undefined,
  };
}

import type { AuthDeps } from './deps.js';
import { findAppByClientId, redirectUriRefusal, type Application } from './applications.js';
import { OAuthError } from './errors.js';
import { parseScope } from './scopes.js';

/*
 * The checks of an authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3), in MusicBrainz's
 * order. Until the client and its redirect URI are known to be good, an error can only be
 * shown to the user (authorizeTarget throws it); after that, it goes back to the client
 * (authorizeRequest returns it).
 */

const PARAMS = ['client_id', 'scope', 'response_type', 'redirect_uri', 'access_type', 'approval_prompt', 'state', 'code_challenge', 'code_challenge_method', 'response_mode', 'nonce'];
const REQUIRED = new Set(['client_id', 'scope', 'response_type', 'redirect_uri']);

/** Where the answer to an authorization request may go: a known client and a redirect URI it may use. */
export interface AuthorizeTarget {
  client: Application;
  redirectUri: string;
  state: string | undefined;
  /** The request's parameters, each sent at most once. */
  params: Map<string, string>;
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
  const client = await findAppByClientId(deps, params.get('client_id') as string);
  if (client === undefined) throw new OAuthError('invalid_client', 'Unknown client', 400);
  const redirectUri = params.get('redirect_uri') as string;
  const refusal = redirectUriRefusal(client, redirectUri);
  if (refusal !== undefined) throw new OAuthError('invalid_request', refusal);
  return { client, redirectUri, state: params.get('state'), params };
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
}

/** The longest nonce kept: far above any client's (openid-client's are 43 characters), far below a row's worth. */
const MAX_NONCE_LENGTH = 512;

/** The rest of the request's checks; a refusal is to be sent back to the redirect URI (RFC 6749 §4.1.2.1). */
export function authorizeRequest(target: AuthorizeTarget, pkce: AuthDeps['pkce'] = 'optional'): AuthorizeRequest | { refused: OAuthError } {
  const { params, client } = target;
  const refuse = (error: 'invalid_request' | 'unsupported_response_type' | 'invalid_scope', description: string) => ({ refused: new OAuthError(error, description) });
  if (params.get('response_type') !== 'code') return refuse('unsupported_response_type', 'Unsupported response type');
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
  const nonce = params.get('nonce');
  if (nonce !== undefined && (nonce.length > MAX_NONCE_LENGTH || /[^\x20-\x7e]/.test(nonce))) return refuse('invalid_request', `Invalid nonce: at most ${MAX_NONCE_LENGTH} printable ASCII characters`);
  const installed = client.kind === 'public';
  return {
    ...target,
    scope: scope.mask,
    scopeText: scope.spelled,
    responseMode: responseMode === 'form_post' ? 'form_post' : 'query',
    codeChallenge: challenge,
    codeChallengeMethod: method,
    installed,
    offline: installed || params.get('access_type') === 'offline',
    forcePrompt: params.get('approval_prompt') === 'force',
    nonce,
  };
}

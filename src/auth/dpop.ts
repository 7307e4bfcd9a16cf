/*
 * DPoP, RFC 9449 (docs/decisions.md, "DPoP"): checking the proof JWTs clients send in the
 * `DPoP` header at the token endpoint and with DPoP-bound access tokens, and, once the request
 * authenticated, remembering their jti so that none is accepted twice (in this process, and
 * across processes through Redis when it is configured; auth/replay-store.ts). Every check is
 * jose's or node:crypto's; nothing hand-made.
 */
import { createHash } from 'node:crypto';
import { calculateJwkThumbprint, decodeProtectedHeader, importJWK, jwtVerify, type CryptoKey, type JWK } from 'jose';
import type { AuthDeps } from './deps.js';
import { OAuthError } from './errors.js';
import { ReplayStore } from './replay-store.js';

/** The proof algorithms accepted (advertised as dpop_signing_alg_values_supported): asymmetric only. */
export const DPOP_ALGS = ['ES256', 'ES384', 'RS256', 'PS256', 'EdDSA'] as const;

/** How far a proof's `iat` may lie from the server's clock, either way (seconds). */
const DPOP_IAT_WINDOW_SECONDS = 60;

/** The longest proof (header value) read; a P-256 proof is about 600 bytes, an RSA-4096 one under 2 KB. */
const MAX_PROOF_LENGTH = 8192;
const MAX_JTI_LENGTH = 256;
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

/** A refused proof: `invalid_dpop_proof` (RFC 9449 §5, §7.1) with the word the audit line gives as reason. */
export class DpopRefused extends OAuthError {
  readonly reason: string;
  constructor(reason: string, description: string, status = 400) {
    super('invalid_dpop_proof', description, status);
    this.reason = reason;
  }
}

/** What a proof must match: the request's method and the endpoint's path; with an access token, its `ath`. */
export interface ProofTarget {
  method: string;
  /** The endpoint's path under the public URL (deps.authUrl), e.g. /oauth2/token. */
  path: string;
  accessToken?: string | undefined;
}

/** The DPoP header of a request: undefined when absent; refused when repeated (RFC 9449 §4.3: exactly one). */
export function proofHeader(headers: Record<string, string | string[] | undefined>, status = 400): string | undefined {
  const value = headers.dpop;
  if (value === undefined) return undefined;
  // Node joins repeated unknown headers with ", ", which no compact JWS contains.
  if (Array.isArray(value) || value.includes(',')) throw new DpopRefused('repeated', 'Exactly one DPoP header is allowed', status);
  return value;
}

/** The URL a proof's `htu` is compared as (RFC 9449 §4.3: without query and fragment, normalized as RFC 3986 §6 says). */
function comparableUrl(raw: string): string | undefined {
  try {
    const u = new URL(raw);
    if (u.username !== '' || u.password !== '') return undefined;
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return undefined;
  }
}

/** base64url(SHA-256(access token)): a proof's `ath` (RFC 9449 §4.2). */
function accessTokenHash(token: string): string {
  return createHash('sha256').update(token, 'ascii').digest('base64url');
}

const KEY_CACHE_MAX = 1000;
/** Imported public keys by alg and thumbprint: a client signs every proof with the same key. */
const keyCache = new Map<string, CryptoKey | Uint8Array>();

async function publicKey(jwk: JWK, alg: string, jkt: string): Promise<CryptoKey | Uint8Array> {
  const id = `${alg}.${jkt}`;
  const known = keyCache.get(id);
  if (known !== undefined) return known;
  const key = await importJWK(jwk, alg);
  if (keyCache.size >= KEY_CACHE_MAX) keyCache.delete(keyCache.keys().next().value as string);
  keyCache.set(id, key);
  return key;
}

/** A proof that passed every check of verifyProof: the thumbprint of its key, and what rememberProof keeps. */
export interface CheckedProof {
  jkt: string;
  jti: string;
  /** Until when it could pass the iat check (epoch ms): how long its jti is remembered. */
  until: number;
}

/**
 * Checks a DPoP proof for this request (RFC 9449 §4.3). Refuses, with `status`, a proof that is
 * malformed, not `dpop+jwt`, of another algorithm, carrying a private key, wrongly signed, for
 * another method or URL, outside the iat window, or without the right `ath` when an access
 * token comes with it. Whether it was seen before is rememberProof's, once the request
 * authenticated: an anonymous request must not take room in the replay store.
 */
export async function verifyProof(deps: AuthDeps, proof: string, target: ProofTarget, status = 400): Promise<CheckedProof> {
  const refuse = (reason: string, description: string) => new DpopRefused(reason, description, status);
  if (proof.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(proof)) throw refuse('malformed', 'The DPoP proof is not a compact JWS');
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    throw refuse('malformed', 'The DPoP proof header cannot be read');
  }
  if (header.typ !== 'dpop+jwt') throw refuse('typ', 'The DPoP proof must have typ dpop+jwt');
  const alg = header.alg;
  if (typeof alg !== 'string' || !(DPOP_ALGS as readonly string[]).includes(alg)) throw refuse('alg', `The DPoP proof must be signed with one of ${DPOP_ALGS.join(', ')}`);
  const jwk = header.jwk;
  if (jwk === undefined || typeof jwk !== 'object' || Array.isArray(jwk)) throw refuse('jwk', 'The DPoP proof header must carry the public key (jwk)');
  if (PRIVATE_MEMBERS.some((m) => m in jwk)) throw refuse('private_key', 'The DPoP proof header must not carry a private key');

  let jkt: string;
  let payload: Record<string, unknown>;
  try {
    jkt = await calculateJwkThumbprint(jwk, 'sha256');
    const key = await publicKey(jwk, alg, jkt);
    // exp and nbf, when present, are checked against the deps' clock; iat is checked below.
    ({ payload } = await jwtVerify(proof, key, { typ: 'dpop+jwt', algorithms: [alg], currentDate: new Date(deps.clock.now()) }));
  } catch {
    throw refuse('signature', 'The DPoP proof signature or key is invalid');
  }

  const { jti, htm, htu, iat, ath } = payload;
  if (typeof jti !== 'string' || jti === '' || jti.length > MAX_JTI_LENGTH) throw refuse('jti', 'The DPoP proof must have a jti (at most 256 characters)');
  if (htm !== target.method) throw refuse('htm', 'The DPoP proof is for another HTTP method (htm)');
  const expected = comparableUrl(`${deps.authUrl.replace(/\/+$/, '')}${target.path}`);
  if (typeof htu !== 'string' || comparableUrl(htu) !== expected) throw refuse('htu', 'The DPoP proof is for another URL (htu)');
  const now = deps.clock.now() / 1000;
  if (typeof iat !== 'number' || !Number.isFinite(iat) || Math.abs(now - iat) > DPOP_IAT_WINDOW_SECONDS) {
    throw refuse('iat', `The DPoP proof's iat must be within ${DPOP_IAT_WINDOW_SECONDS} seconds of the server's time`);
  }
  if (target.accessToken !== undefined) {
    if (typeof ath !== 'string') throw refuse('ath', 'The DPoP proof must carry the access token hash (ath)');
    if (ath !== accessTokenHash(target.accessToken)) throw refuse('ath', 'The DPoP proof is for another access token (ath)');
  }
  return { jkt, jti, until: (iat + DPOP_IAT_WINDOW_SECONDS) * 1000 + 1000 };
}

/** A proof that cannot be remembered because the replay store is full: 503, as a busy database is (never a 400, which some clients take as "forget the refresh token"). */
export class ReplayStoreFull extends OAuthError {
  override readonly retryAfterSeconds = 5;
  constructor() {
    super('temporarily_unavailable', 'Too many DPoP proofs are in use; try again shortly', 503);
  }
}

/**
 * Remembers a checked proof of an authenticated request of `clientId` (its client, or the
 * access token's), until it could no longer pass the iat check. Refuses a proof seen before
 * (`invalid_dpop_proof`, with `status`), and one there is no room for (ReplayStoreFull):
 * nothing remembered is ever forgotten early.
 */
export async function rememberProof(deps: AuthDeps, proof: CheckedProof, clientId: string, status = 400): Promise<void> {
  const key = createHash('sha256').update(`${clientId}\n${proof.jkt}\n${proof.jti}`).digest('base64url');
  const answer = await replayStore(deps).claim(clientId, key, proof.until, deps.clock.now());
  if (answer === 'replayed') throw new DpopRefused('replayed', 'The DPoP proof was used before (jti)', status);
  if (answer === 'full') throw new ReplayStoreFull();
}

const defaultStores = new WeakMap<AuthDeps['clock'], ReplayStore>();

/** The deps' replay store (serve() gives one that shares through Redis when configured); else one per clock, in this process. */
function replayStore(deps: AuthDeps): ReplayStore {
  if (deps.dpopReplay !== undefined) return deps.dpopReplay;
  let store = defaultStores.get(deps.clock);
  if (store === undefined) {
    store = new ReplayStore();
    defaultStores.set(deps.clock, store);
  }
  return store;
}

/** The `WWW-Authenticate` challenge of a resource refusing a DPoP request (RFC 9449 §7.1). */
export function dpopChallenge(err?: OAuthError): string {
  let v = `DPoP algs="${DPOP_ALGS.join(' ')}"`;
  if (err !== undefined) v += `, error="${err.error}", error_description="${err.message.replace(/"/g, "'")}"`;
  return v;
}

/** The token of `Authorization: DPoP <token>` (RFC 9449 §7.1), or undefined when the header uses another scheme. */
export function dpopAuthorization(header: string | undefined): string | undefined {
  const m = header === undefined ? null : /^dpop\s+([A-Za-z0-9\-._~+/]+=*)\s*$/i.exec(header);
  return m === null ? undefined : (m[1] as string);
}

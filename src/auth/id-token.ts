/*
 * OpenID Connect id_tokens (OpenID Connect Core 1.0 §2, §3.1.3.6), signed with jose by the
 * active key of the client's algorithm (auth/signing-keys.ts). See docs/decisions.md,
 * "Signing keys".
 */
import { hash } from 'node:crypto';
import { CompactSign, compactVerify, createLocalJWKSet, type CompactJWSHeaderParameters } from 'jose';
import { MAX_SIGNED_LIFETIME_SECONDS, SIGNING_ALGS, type SigningAlg, type SigningKey, type SigningKeys } from './signing-keys.js';

/** How long an id_token is valid (seconds): it proves a sign-in to the client once, at the code exchange. */
const ID_TOKEN_LIFETIME_SECONDS = MAX_SIGNED_LIFETIME_SECONDS;

export interface IdTokenClaims {
  /** `iss`: the authorization service's public URL. */
  issuer: string;
  /** `sub`: who signed in. */
  subject: string;
  /** `aud`: the client_id. */
  audience: string;
  /** The authorization request's nonce, when it had one. */
  nonce?: string | undefined;
  /** When the user signed in (epoch ms); `auth_time` is in seconds. */
  authTime: number;
  /** The access token issued with it, for `at_hash`. */
  accessToken?: string | undefined;
  /** Seconds until `exp` (at most ID_TOKEN_LIFETIME_SECONDS). */
  lifetimeSeconds?: number;
  alg: SigningAlg;
  /** Issued at (epoch ms): the deps' clock. */
  now: number;
}

/**
 * `at_hash` (OpenID Connect Core §3.1.3.6): the left half of the SHA-256 hash of the ASCII
 * access token, base64url-encoded. SHA-256 serves both ES256 and RS256.
 */
function atHash(accessToken: string): string {
  // The token is ASCII, whose UTF-8 is itself.
  const digest = hash('sha256', accessToken, 'buffer');
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** The protected header of each key's id_tokens, made once per key. */
const headers = new WeakMap<SigningKey, CompactJWSHeaderParameters>();

const utf8 = new TextEncoder();

/**
 * A signed id_token (compact JWS) with `kid` in its header. The claims are the JSON of the
 * payload as jose's SignJWT would write it, signed by jose's CompactSign, which skips SignJWT's
 * copy of the claims and its per-claim checks (every claim here is a string or an integer made
 * above). See docs/decisions.md, "Token endpoint CPU: the code exchange".
 */
export async function signIdToken(keys: SigningKeys, claims: IdTokenClaims): Promise<string> {
  const lifetime = claims.lifetimeSeconds ?? ID_TOKEN_LIFETIME_SECONDS;
  // A longer one could outlive its key's stay in the JWKS.
  if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_SIGNED_LIFETIME_SECONDS) {
    throw new RangeError(`an id_token lifetime must be 1–${MAX_SIGNED_LIFETIME_SECONDS} seconds`);
  }
  const key = await keys.activeKey(claims.alg);
  let header = headers.get(key);
  if (header === undefined) {
    header = { alg: key.alg, kid: key.kid, typ: 'JWT' };
    headers.set(key, header);
  }
  const iat = Math.floor(claims.now / 1000);
  const payload: Record<string, string | number> = {
    iss: claims.issuer,
    sub: claims.subject,
    aud: claims.audience,
    iat,
    exp: iat + lifetime,
    auth_time: Math.floor(claims.authTime / 1000),
  };
  if (claims.nonce !== undefined) payload.nonce = claims.nonce;
  if (claims.accessToken !== undefined) payload.at_hash = atHash(claims.accessToken);
  return new CompactSign(utf8.encode(JSON.stringify(payload))).setProtectedHeader(header).sign(key.key);
}

/** What an id_token_hint says: who signed in, and to which client(s). */
export interface IdTokenHint {
  sub: string;
  aud: string[];
}

/** The longest id_token_hint looked at: far above any id_token sleeve signs (under 1 KiB). */
export const MAX_ID_TOKEN_HINT_LENGTH = 4096;

/**
 * An id_token_hint (OpenID Connect Core §3.1.2.1, RP-Initiated Logout §2): an id_token this
 * service signed, with a key still in its JWKS, for its issuer; undefined for anything else.
 * Its `exp` is not checked: a hint names a user of a past sign-in, and RP-Initiated Logout asks
 * OPs to take expired ones (docs/decisions.md, "OpenID Connect conformance").
 */
export async function verifyIdTokenHint(keys: SigningKeys, issuer: string, hint: string): Promise<IdTokenHint | undefined> {
  if (hint.length > MAX_ID_TOKEN_HINT_LENGTH || !/^[\w-]+\.[\w-]+\.[\w-]+$/.test(hint)) return undefined;
  const jwks = createLocalJWKSet(await keys.publicJwks());
  let payload: unknown;
  try {
    const verified = await compactVerify(hint, jwks, { algorithms: [...SIGNING_ALGS] });
    payload = JSON.parse(new TextDecoder().decode(verified.payload));
  } catch {
    return undefined;
  }
  if (typeof payload !== 'object' || payload === null) return undefined;
  const { iss, sub, aud } = payload as Record<string, unknown>;
  const audiences = typeof aud === 'string' ? [aud] : Array.isArray(aud) && aud.every((a) => typeof a === 'string') ? (aud as string[]) : undefined;
  if (iss !== issuer || typeof sub !== 'string' || audiences === undefined) return undefined;
  return { sub, aud: audiences };
}

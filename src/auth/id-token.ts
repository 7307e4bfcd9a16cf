/*
 * OpenID Connect id_tokens (OpenID Connect Core 1.0 §2, §3.1.3.6), signed with jose by the
 * active key of the client's algorithm (auth/signing-keys.ts). See docs/decisions.md,
 * "Signing keys".
 */
import { hash } from 'node:crypto';
import { CompactSign, type CompactJWSHeaderParameters } from 'jose';
import { MAX_SIGNED_LIFETIME_SECONDS, type SigningAlg, type SigningKey, type SigningKeys } from './signing-keys.js';

/** How long an id_token is valid (seconds): it proves a sign-in to the client once, at the code exchange. */
export const ID_TOKEN_LIFETIME_SECONDS = MAX_SIGNED_LIFETIME_SECONDS;

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
export function atHash(accessToken: string): string {
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

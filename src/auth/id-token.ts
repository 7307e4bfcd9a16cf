/*
 * OpenID Connect id_tokens (OpenID Connect Core 1.0 §2, §3.1.3.6), signed with jose by the
 * active key of the client's algorithm (auth/signing-keys.ts). See docs/decisions.md,
 * "Signing keys".
 */
import { createHash } from 'node:crypto';
import { SignJWT } from 'jose';
import { MAX_SIGNED_LIFETIME_SECONDS, type SigningAlg, type SigningKeys } from './signing-keys.js';

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
  const digest = createHash('sha256').update(accessToken, 'ascii').digest();
  return digest.subarray(0, digest.length / 2).toString('base64url');
}

/** A signed id_token (compact JWS) with `kid` in its header. */
export async function signIdToken(keys: SigningKeys, claims: IdTokenClaims): Promise<string> {
  const lifetime = claims.lifetimeSeconds ?? ID_TOKEN_LIFETIME_SECONDS;
  // A longer one could outlive its key's stay in the JWKS.
  if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_SIGNED_LIFETIME_SECONDS) {
    throw new RangeError(`an id_token lifetime must be 1–${MAX_SIGNED_LIFETIME_SECONDS} seconds`);
  }
  const key = await keys.activeKey(claims.alg);
  const iat = Math.floor(claims.now / 1000);
  const payload: Record<string, unknown> = { auth_time: Math.floor(claims.authTime / 1000) };
  if (claims.nonce !== undefined) payload.nonce = claims.nonce;
  if (claims.accessToken !== undefined) payload.at_hash = atHash(claims.accessToken);
  return new SignJWT(payload)
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: 'JWT' })
    .setIssuer(claims.issuer)
    .setSubject(claims.subject)
    .setAudience(claims.audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + lifetime)
    .sign(key.key);
}

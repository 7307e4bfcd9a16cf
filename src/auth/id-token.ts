/*
 * OpenID Connect id_tokens (OpenID Connect Core 1.0 §2, §3.1.3.6): compact JWS (RFC 7515 §7.1)
 * signed by node:crypto with the active key of the client's algorithm (auth/signing-keys.ts).
 * See docs/decisions.md, "Signing keys" and "Token endpoint CPU: id_tokens signed by
 * node:crypto, the batch's statements run directly".
 */
import { hash, sign, type KeyObject, type SignKeyObjectInput } from 'node:crypto';
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

/** What signs with a key: its protected header, base64url-encoded with the '.' that follows it, and node:crypto's key input. */
interface Signer {
  encodedHeader: string;
  key: KeyObject | SignKeyObjectInput;
}

/** Each key's signer, made once per key (a rotated key gets its own). */
const signers = new WeakMap<SigningKey, Signer>();

function signerOf(key: SigningKey): Signer {
  let signer = signers.get(key);
  if (signer === undefined) {
    // The header's members in the order jose wrote them: the same bytes as before.
    const header = JSON.stringify({ alg: key.alg, kid: key.kid, typ: 'JWT' });
    // JWS's ECDSA signature is r ‖ s (RFC 7518 §3.4), not DER; RSASSA-PKCS1-v1_5 is node's default for an RSA key.
    signer = { encodedHeader: `${Buffer.from(header).toString('base64url')}.`, key: key.alg === 'ES256' ? { key: key.key, dsaEncoding: 'ieee-p1363' } : key.key };
    signers.set(key, signer);
  }
  return signer;
}

/** The signature (SHA-256 with the key's algorithm) of `input`, made on libuv's thread pool as WebCrypto's was. */
function signAsync(input: Buffer, key: KeyObject | SignKeyObjectInput): Promise<Buffer> {
  return new Promise((resolve, reject) => sign('sha256', input, key, (err, signature) => (err === null ? resolve(signature) : reject(err))));
}

/**
 * A signed id_token (compact JWS) with `kid` in its header. The claims are the JSON of the
 * payload as jose's SignJWT would write it; the JWS is what jose's CompactSign made, byte for
 * byte for RS256 (whose signature is deterministic), signed with node:crypto's `sign` on the
 * thread pool without WebCrypto's and jose's wrapping. See docs/decisions.md, "Token endpoint
 * CPU: id_tokens signed by node:crypto, the batch's statements run directly".
 */
export async function signIdToken(keys: SigningKeys, claims: IdTokenClaims): Promise<string> {
  const lifetime = claims.lifetimeSeconds ?? ID_TOKEN_LIFETIME_SECONDS;
  // A longer one could outlive its key's stay in the JWKS.
  if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > MAX_SIGNED_LIFETIME_SECONDS) {
    throw new RangeError(`an id_token lifetime must be 1–${MAX_SIGNED_LIFETIME_SECONDS} seconds`);
  }
  const signer = signerOf(await keys.activeKey(claims.alg));
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
  // The signing input (RFC 7515 §5.1) is ASCII: base64url text and a '.'.
  const signingInput = `${signer.encodedHeader}${Buffer.from(JSON.stringify(payload)).toString('base64url')}`;
  const signature = await signAsync(Buffer.from(signingInput, 'latin1'), signer.key);
  return `${signingInput}.${signature.toString('base64url')}`;
}

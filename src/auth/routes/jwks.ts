/*
 * The JWK Set of the id_token signing keys (RFC 7517 §5), at /.well-known/jwks.json: the
 * active ES256 and RS256 keys and the retired ones whose tokens may still be valid
 * (auth/signing-keys.ts; docs/decisions.md, "Signing keys"). Public keys only.
 */
import type { FastifyInstance } from 'fastify';
import type { SigningKeys } from '../signing-keys.js';

export const JWKS_PATH = '/.well-known/jwks.json';

/**
 * Cached briefly: a new key signs at once after a rotation, and a verifier that meets its
 * kid refetches (jose and openid-client do), but one that does not waits out this max-age.
 */
const JWKS_CACHE = 'public, max-age=300';

export async function jwksRoutes(app: FastifyInstance, opts: { keys: SigningKeys }): Promise<void> {
  app.get(JWKS_PATH, async function jwks(_req, reply) {
    const body = await opts.keys.publicJwks();
    return reply
      .headers({ 'access-control-allow-origin': '*', 'cache-control': JWKS_CACHE })
      .type('application/json; charset=utf-8')
      .send(JSON.stringify(body));
  });
}

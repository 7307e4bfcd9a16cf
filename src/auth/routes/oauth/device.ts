import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findAppByClientId, type Application } from '../../applications.js';
import type { AuthDeps } from '../../deps.js';
import { pollDevice, startDeviceAuthorization } from '../../device.js';
import { OAuthError } from '../../errors.js';
import { tokenRequestProof } from './dpop.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, CORS, hasBasicAuth, onlyPost, optionsReply, requireClient, sendJson } from './shared.js';

/**
 * The client of a device grant request (RFC 8628 §3.1, §3.4): authenticated as at the token
 * endpoint (HTTP Basic, or client_id and client_secret in the body), or, for a public
 * (installed) application, its client_id alone: its secret ships inside it and proves nothing,
 * and the device code (256 random bits) is what the exchange rests on.
 */
async function deviceClient(deps: AuthDeps, req: FastifyRequest, params: Map<string, string>): Promise<Application> {
  if (hasBasicAuth(req) || params.has('client_secret')) return requireClient(deps, req, params);
  const clientId = params.get('client_id');
  const app = clientId === undefined ? undefined : await findAppByClientId(deps, clientId);
  // A client known by its metadata document is for the code flow only (its document lists redirect URIs, nothing about devices).
  if (app === undefined || app.kind !== 'public' || app.owner_id === null) throw new OAuthError('invalid_client', 'Client not authentified');
  return app;
}

/** The device authorization endpoint (RFC 8628 §3.1–3.2). */
export function deviceAuthorizationEndpoint(app: FastifyInstance, ctx: PageContext): void {
  app.route({
    method: [...ANY_METHOD],
    url: '/oauth2/device_authorization',
    handler: async function deviceAuthorization(req, reply) {
      if (req.method === 'OPTIONS') return optionsReply(reply, 'POST, OPTIONS', 'authorization');
      onlyPost(req);
      const params = checkParams(req, ['client_id', 'client_secret', 'scope'], new Set(), 'body');
      const client = await deviceClient(ctx.deps, req, params);
      return sendJson(reply, await startDeviceAuthorization(ctx.deps, client, params.get('scope')), CORS);
    },
  });
}

/** `grant_type=urn:ietf:params:oauth:grant-type:device_code` at the token endpoint (RFC 8628 §3.4). */
export async function deviceTokenRequest(ctx: PageContext, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const params = checkParams(req, ['client_id', 'client_secret', 'grant_type', 'device_code'], new Set(['grant_type', 'device_code']));
  const client = await deviceClient(ctx.deps, req, params);
  // With a DPoP proof, the tokens are bound to its key, as in the code flow.
  const proof = await tokenRequestProof(ctx, req, client);
  return sendJson(reply, await pollDevice(ctx.deps, client, params.get('device_code') as string, proof?.jkt, proof?.remember), CORS);
}

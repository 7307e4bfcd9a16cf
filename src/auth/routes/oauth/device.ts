import type { FastifyInstance } from 'fastify';
import { startDeviceAuthorization } from '../../device.js';
import { deviceClient } from '../../grants/device-code.js';
import type { PageContext } from '../pages/shared.js';
import { ANY_METHOD, checkParams, CORS, onlyPost, optionsReply, sendJson } from './shared.js';

/** The device authorization endpoint (RFC 8628 §3.1–3.2); the device's token requests are the token endpoint's (auth/grants/device-code.ts). */
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

import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { TlsMaterial } from './tls.js';

/**
 * The authorization service's listener (DESIGN §2). HTTPS only; the OAuth endpoints
 * and website pages arrive with the authorization issue, until then every path is 404.
 */
export function buildAuthApp(opts: { tls: TlsMaterial; logger: FastifyServerOptions['logger'] }): FastifyInstance {
  const app = Fastify({
    https: { cert: opts.tls.cert, key: opts.tls.key },
    logger: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: 'idle',
    return503OnClosing: true,
  }) as unknown as FastifyInstance;
  app.addHook('onSend', async function securityHeaders(_req, reply) {
    reply.header('strict-transport-security', 'max-age=31536000');
    reply.header('x-content-type-options', 'nosniff');
    reply.header('cache-control', 'no-store');
  });
  app.setNotFoundHandler(function notYet(_req, reply) {
    return reply.code(404).send({ error: 'not_found', error_description: 'The authorization service is not available in this version of sleeve yet.' });
  });
  return app;
}

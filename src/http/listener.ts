import type http from 'node:http';
import type https from 'node:https';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { ConnectionLimits } from '../config/load.js';
import { limitConnections, serverTimeouts } from './connections.js';
import { OneWriteResponse } from '../edge/one-write.js';

/** A node:http request handler (Fastify's own, or a listener's in front of it). */
export type RequestHandler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

/** What makes one listener differ from the others; the rest is `buildListener`'s. */
export interface ListenerOptions {
  /** Who answers, for the log line of a request that failed ("cover art request failed"). */
  name: string;
  logger: FastifyServerOptions['logger'];
  /** Header, request and keep-alive timeouts and the connection cap. */
  connections: ConnectionLimits;
  /**
   * Makes the listener's server (called once, while Fastify is made): from `options` (the
   * timeouts and the one-write responses every listener has) and a request handler of its own,
   * which hands the requests Fastify answers to `fastify`.
   */
  server(options: http.ServerOptions, fastify: RequestHandler): http.Server | https.Server;
  /** Fastify options of this listener alone. */
  fastify?: Pick<FastifyServerOptions, 'routerOptions' | 'frameworkErrors' | 'clientErrorHandler'> & { https?: { cert: string; key: string } };
  /** Answers a request Fastify or a route refused with a 4xx status (a body it cannot parse or too large, and the like). */
  refused(req: FastifyRequest, reply: FastifyReply, status: number, err: Error): FastifyReply;
  /** Answers a request that failed (500, logged already). */
  failed(req: FastifyRequest, reply: FastifyReply): FastifyReply;
}

/**
 * The skeleton of a listener: Fastify with the options every listener has (no request logging
 * of its own, request ids from X-Request-Id, 503 while closing, a 64 KiB body limit), its
 * server made with the configured timeouts and connection cap, and one error handler that
 * tells a refused request (4xx) from a failure (logged, 500) and lets the listener word both.
 */
export function buildListener(opts: ListenerOptions): FastifyInstance {
  const app = Fastify({
    ...opts.fastify,
    logger: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
    // Set by the listener's observer for every request (from a trusted proxy, or new).
    requestIdHeader: 'x-request-id',
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    bodyLimit: 64 * 1024,
    serverFactory: (handler) => {
      // Fastify's own timeout options apply only to servers it makes: this one has them here.
      const server = opts.server({ ...serverTimeouts(opts.connections), ServerResponse: OneWriteResponse }, handler);
      limitConnections(server, opts.connections);
      return server as http.Server;
    },
  }) as unknown as FastifyInstance;

  app.setErrorHandler(function failed(err, req, reply) {
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) return opts.refused(req, reply, status, err as Error);
    req.log.error({ err }, `${opts.name} request failed`);
    return opts.failed(req, reply);
  });
  return app;
}

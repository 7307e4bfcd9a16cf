import type http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify';
import type { ConnectionLimits } from '../config/load.js';
import { forwardedProto } from '../http/client-address.js';
import type { ListenerHealth } from '../http/health.js';
import { answerClientError } from '../http/client-error.js';
import { installFastLane, type LaneReply, type LaneRequest } from '../edge/fast-lane.js';
import type { PlainAnswer, PlainReply, PlainRequest } from '../shared/plain-http.js';
import { buildListener, type RequestHandler } from '../http/listener.js';
import { answeredStatus, CLIENT_CLOSED, type RequestObserver } from '../http/observe.js';
import type { AuthDeps } from './deps.js';
import { failedRequest, HTTPS_ONLY, OAuthError, refusedRequest } from './errors.js';
import { holdsNul, SECURITY_HEADERS } from './http-util.js';
import { jwksRoutes } from './routes/jwks.js';
import { oauthRoutes, sendOAuthError } from './routes/oauth.js';
import { pageRoutes, renderLoginInterstitial, sendPage, type PageContext } from './routes/pages.js';
import type { TlsMaterial } from './tls.js';
import { TOKEN_LANE_POSTS, tokenAnswer } from './token-lane.js';
import { errorPage } from './views/pages.js';

/** The listener serves with this TLS material (serve() loads it first). */
export { loadTlsMaterial, type TlsMaterial } from './tls.js';

export interface AuthAppOptions {
  deps: AuthDeps;
  tls: TlsMaterial;
  logger: FastifyServerOptions['logger'];
  /** Whether a peer's X-Forwarded-* headers are believed (SLEEVE_TRUST_PROXY). */
  trustsProxy(address: string): boolean;
  /** The client's address behind trusted proxies. */
  clientAddress(peer: string | undefined, forwardedFor: string | string[] | undefined): string;
  /** /healthz and /readyz, answered before anything else, over plain HTTP too (probes carry no secrets). */
  health?: ListenerHealth | undefined;
  /** Request ids and metrics, for every request. */
  observer: RequestObserver;
  /** Log every request (at debug level), without query strings. */
  accessLog?: boolean;
  /** Header, request, TLS handshake and keep-alive timeouts and the connection cap. */
  connections: ConnectionLimits;
  /**
   * More routes on this listener (the website layer, src/website), registered after the
   * authorization pages with the same page context: they share the sign-in, CSRF and headers.
   */
  extend?: (app: FastifyInstance, ctx: PageContext) => void;
  /**
   * Answers a GET that came over HTTPS before routing (the website's cached visitor pages),
   * with the request's id; returns the route label of what it answered, or undefined to let
   * the router answer. Its answers carry SECURITY_HEADERS like every other.
   */
  frontDoor?: (req: PlainRequest, res: PlainReply, requestId: string) => string | undefined;
  /** The front door's pages and the token endpoint's form POSTs answered in the fast lane, before node:http, over TLS (SLEEVE_FAST_LANE; edge/fast-lane.ts, auth/token-lane.ts). */
  fastLane?: boolean;
}

const JSON_ENDPOINTS = /^\/(oauth2\/(token|revoke|userinfo|introspect|device_authorization)|\.well-known\/)/;

/**
 * The authorization service (docs/oauth.md): HTTPS only. A request that reached it over
 * plain HTTP (a trusted proxy saying X-Forwarded-Proto: http) is refused with 400
 * invalid_request before anything else, so bearer tokens in it are never looked at.
 */
export function buildAuthApp(opts: AuthAppOptions): FastifyInstance {
  // The route template of each request that reached routing (a bounded set, never the URL).
  const routeOf = new WeakMap<http.IncomingMessage, string>();
  const requestDone = (req: http.IncomingMessage, res: http.ServerResponse, start: number, client: string | undefined, status = answeredStatus(res)): void => {
    const route = routeOf.get(req) ?? 'other';
    const ms = opts.observer.finished(route, req.method, status, start);
    if (opts.accessLog === true) {
      // The path only: query strings here carry authorization codes and states.
      const url = req.url ?? '';
      const q = url.indexOf('?');
      app.log.debug({ reqId: req.headers['x-request-id'], client, method: req.method, route, path: q === -1 ? url : url.slice(0, q), status, ms }, 'request');
    }
  };
  // Health probes, answered before anything else.
  const probed = (handler: RequestHandler): RequestHandler => {
    const { health } = opts;
    if (health === undefined) return handler;
    return (req, res) => {
      if (health.answer(req, res, app.log)) routeOf.set(req, req.url?.startsWith('/healthz') === true ? '/healthz' : '/readyz');
      else handler(req, res);
    };
  };
  const ctx: PageContext = {
    deps: opts.deps,
    clientAddress: (req) => opts.clientAddress(req.raw.socket.remoteAddress, req.headers['x-forwarded-for']),
    loginInterstitial: renderLoginInterstitial,
  };
  const answer = authAnswer(opts, tokenAnswer({ ctx, log: () => app.log }));
  // Every request gets its id, and is counted once answered, whoever answered (the listener's
  // answer, a probe, a route, or Fastify itself for a malformed request).
  const observed = (handler: RequestHandler): RequestHandler => {
    const { observer } = opts;
    return (req, res) => {
      const start = observer.begin(req);
      // Taken now, while the connection is surely open.
      const client = opts.accessLog === true ? opts.clientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for']) : undefined;
      const taken = answer(req, res);
      if (taken !== false) {
        routeOf.set(req, typeof taken === 'string' ? taken : 'other');
        // Answered and all of it handed to the system: counted now (no listener on the hot path).
        if (res.writableEnded && res.writableLength === 0) return requestDone(req, res, start, client, res.statusCode);
      } else {
        observer.echo(req, res);
        handler(req, res);
      }
      res.once('close', () => requestDone(req, res, start, client));
    };
  };
  /**
   * The fast lane's part (TLS connections only): the same answer, counted as `observed` counts
   * it; a token answer once written. Not with the debug access log.
   */
  const lane =
    opts.fastLane !== true || opts.accessLog === true
      ? undefined
      : (req: LaneRequest, reply: LaneReply): boolean | Promise<void> => {
          const { observer } = opts;
          const start = observer.begin(req);
          const taken = answer(req, reply);
          if (taken === false) return false;
          if (typeof taken === 'object') {
            // Only the token endpoint answers later. A connection closed or ended (the client's FIN) before the answer: counted as node:http counts it.
            return taken.then(() => observer.laneFinished('/oauth2/token', req.method, req.socket.destroyed || req.socket.writableEnded ? CLIENT_CLOSED : reply.statusCode, start));
          }
          observer.laneFinished(typeof taken === 'string' ? taken : 'other', req.method, reply.statusCode, start);
          return true;
        };
  const app = buildListener({
    name: 'auth',
    logger: opts.logger,
    connections: opts.connections,
    fastify: {
      // Not used to make the server (`server` below does); it makes Fastify log https:// addresses.
      https: { cert: opts.tls.cert, key: opts.tls.key },
      // A malformed request gets its 400 (or 431, 408) over TLS too.
      clientErrorHandler: answerClientError,
    },
    // One port for both: a TLS ClientHello goes to HTTPS, anything else straight to the same
    // HTTP server, whose httpsOnly hook below refuses every request that did not come over TLS.
    server: (options, handler) => {
      const secure = https.createServer({ cert: opts.tls.cert, key: opts.tls.key, ...options, handshakeTimeout: opts.connections.headersTimeoutMs }, observed(probed(handler)));
      sniffProtocol(secure, opts.connections.headersTimeoutMs);
      // After the sniffer, which keeps node:http's own listener for plain HTTP: only TLS connections take the lane.
      if (lane !== undefined) installFastLane(secure, { answer: lane, posts: TOKEN_LANE_POSTS, connections: opts.connections, event: 'secureConnection' });
      return secure;
    },
    refused: (req, reply, status) => answerError(req, reply, status, refusedRequest(status)),
    failed: (req, reply) => answerError(req, reply, 500, failedRequest()),
  });
  readForms(app);
  guardRequests(app, opts, routeOf);

  void app.register(pageRoutes, ctx);
  void app.register(oauthRoutes, ctx);
  void app.register(jwksRoutes, { keys: opts.deps.signingKeys });
  opts.extend?.(app, ctx);

  app.setNotFoundHandler(function notFound(req: FastifyRequest, reply: FastifyReply) {
    if (JSON_ENDPOINTS.test(req.url) || req.url.startsWith('/oauth2/')) {
      return reply.code(404).headers({ 'cache-control': 'no-store' }).type('application/json; charset=utf-8').send('{"error":"not_found","error_description":"No such endpoint"}');
    }
    return sendPage(reply, 404, errorPage({ error: 'not_found', description: 'There is no such page.' }));
  });
  return app;
}

/** Form bodies are parsed into `req.form`; other bodies are read and ignored. */
function readForms(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, function parseForm(req, body, done) {
    req.form = new URLSearchParams(body as string);
    done(null, undefined);
  });
  // Other bodies (JSON, multipart…) carry no parameters here: read (within bodyLimit) and ignored.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, function ignoreBody(_req, _body, done) {
    done(null, undefined);
  });
}

/**
 * What runs before any route: the route label (for metrics and the access log), the security
 * headers and the HTTPS-only refusal, and the NUL check.
 */
function guardRequests(app: FastifyInstance, opts: AuthAppOptions, routeOf: WeakMap<http.IncomingMessage, string>): void {
  // One hook for both (each hook is a step of every request).
  app.addHook('onRequest', async function labelAndRefuseHttp(req, reply) {
    routeOf.set(req.raw, req.routeOptions.url ?? 'other');
    reply.headers(SECURITY_HEADERS);
    if (isSecure(req.raw, opts)) return;
    const err = new OAuthError('invalid_request', HTTPS_ONLY);
    return answerError(req, reply, 400, err);
  });

  // NUL never reaches a query: PostgreSQL refuses it in text (which was a 500), and no name, id,
  // secret or token holds one. Checked once the form body is parsed, before any route runs.
  app.addHook('preHandler', async function noNul(req, reply) {
    if (!holdsNul(req)) return;
    const err = new OAuthError('invalid_request', 'The request holds a NUL character');
    return answerError(req, reply, 400, err);
  });
}

/** Whether the request came over TLS (to this listener, or to a trusted proxy that says so). */
function isSecure(req: PlainRequest, opts: Pick<AuthAppOptions, 'trustsProxy'>): boolean {
  const encrypted = req.socket.encrypted === true;
  const forwarded = req.headers['x-forwarded-proto'];
  // Nothing said: the connection's own (whoever the peer is).
  if (forwarded === undefined || !opts.trustsProxy(req.socket.remoteAddress ?? '')) return encrypted;
  const proto = forwardedProto(forwarded);
  return proto === undefined ? encrypted : proto === 'https';
}

/**
 * The listener's one answer to a plain request before routing (shared/plain-http.ts): over
 * HTTPS (isSecure), a GET the front door answers (the visitor pages: the label of the route it
 * is counted under), or a token request whose body came with it (auth/token-lane.ts: later);
 * anything else declined, for the probes and the router. The lane and node:http both call it.
 */
function authAnswer(opts: AuthAppOptions, tokens: (req: PlainRequest, reply: PlainReply) => false | Promise<void>): PlainAnswer {
  const { frontDoor, observer } = opts;
  return (req, reply) => {
    if (req.method === 'GET') return frontDoor !== undefined && isSecure(req, opts) ? (frontDoor(req, reply, observer.id(req)) ?? false) : false;
    return req.body !== undefined && isSecure(req, opts) && tokens(req, reply);
  };
}

/** An error as the endpoint's clients read it: OAuth JSON from the JSON endpoints, else a page. */
function answerError(req: FastifyRequest, reply: FastifyReply, status: number, err: OAuthError): FastifyReply {
  if (JSON_ENDPOINTS.test(req.url)) return sendOAuthError(reply, err);
  return sendPage(reply, status, errorPage({ error: err.error, description: err.message }));
}

/**
 * Routes each new connection of `secure` by its first byte: 0x16 (a TLS handshake) to the
 * TLS server's own handling, anything else straight to its HTTP handling (what it does
 * with a connection once the handshake is done), so plain HTTP has the same header, request
 * and keep-alive timeouts, and counts against the same cap. A connection that sends nothing
 * within `silenceMs` is closed; after its first byte the TLS handshake timeout, then the
 * HTTP timeouts take over.
 */
function sniffProtocol(secure: https.Server, silenceMs: number): void {
  type Listener = (socket: Socket) => void;
  const tlsListeners = secure.listeners('connection') as Listener[];
  const httpListeners = secure.listeners('secureConnection') as Listener[];
  secure.removeAllListeners('connection');
  secure.on('connection', function sniff(socket: Socket) {
    const silent = (): void => {
      socket.destroy();
    };
    // A connection reset before its first byte: nothing to do (unheard, the error would end the process).
    const reset = (): void => {};
    socket.setTimeout(silenceMs);
    socket.once('timeout', silent);
    socket.on('error', reset);
    socket.once('data', (chunk: Buffer) => {
      socket.setTimeout(0);
      socket.off('timeout', silent);
      socket.off('error', reset);
      socket.pause();
      socket.unshift(chunk);
      for (const listener of chunk[0] === 0x16 ? tlsListeners : httpListeners) listener.call(secure, socket);
      process.nextTick(() => socket.resume());
    });
  });
}

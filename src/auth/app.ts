import type http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import Fastify, { LogController, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import type { ConnectionLimits } from '../config/load.js';
import { forwardedProto } from '../http/client-address.js';
import { limitConnections, serverTimeouts } from '../http/connections.js';
import type { ListenerHealth } from '../http/health.js';
import { answerClientError } from '../http/client-error.js';
import { answeredStatus } from '../http/observe.js';
import { OneWriteResponse } from '../http/one-write.js';
import type { AuthDeps } from './accounts.js';
import { HTTPS_ONLY, OAuthError } from './errors.js';
import { jwksRoutes } from './routes/jwks.js';
import { oauthRoutes, sendOAuthError } from './routes/oauth.js';
import { pageRoutes, renderLoginInterstitial, sendPage, type PageContext } from './routes/pages.js';
import type { TlsMaterial } from './tls.js';
import { errorPage } from './views/pages.js';

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
  /** Request ids and metrics; none when absent. */
  observer?: AuthRequestObserver;
  /** Log every request (at debug level), without query strings. */
  accessLog?: boolean;
  /** Header, request, TLS handshake and keep-alive timeouts and the connection cap. */
  connections: ConnectionLimits;
}

/** What the auth listener needs of sleeve's request observer (http/observe.ts). */
export interface AuthRequestObserver {
  /** Gives the request its id (into its x-request-id header) before anything else; returns a start mark. */
  begin(req: http.IncomingMessage): number;
  /** Puts the request's id on its response (X-Request-Id). */
  echo(req: http.IncomingMessage, res: http.ServerResponse): void;
  /** Counts a request answered; returns its duration in ms. */
  finished(route: string, method: string | undefined, status: number, start: number): number;
}

const JSON_ENDPOINTS = /^\/(oauth2\/(token|revoke|userinfo|introspect)|\.well-known\/)/;

/**
 * The authorization service (README, "The authorization service"): HTTPS only. A request that reached it over
 * plain HTTP (a trusted proxy saying X-Forwarded-Proto: http) is refused with 400
 * invalid_request before anything else, so bearer tokens in it are never looked at.
 */
export function buildAuthApp(opts: AuthAppOptions): FastifyInstance {
  // The route template of each request that reached routing (a bounded set, never the URL).
  const routeOf = new WeakMap<http.IncomingMessage, string>();
  const requestDone = (req: http.IncomingMessage, res: http.ServerResponse, start: number, client: string | undefined): void => {
    const route = routeOf.get(req) ?? 'other';
    const status = answeredStatus(res);
    const ms = opts.observer?.finished(route, req.method, status, start);
    if (opts.accessLog === true) {
      // The path only: query strings here carry authorization codes and states.
      const url = req.url ?? '';
      const q = url.indexOf('?');
      app.log.debug({ reqId: req.headers['x-request-id'], client, method: req.method, route, path: q === -1 ? url : url.slice(0, q), status, ms }, 'request');
    }
  };
  const app = Fastify({
    // One port for both: a TLS ClientHello goes to HTTPS, anything else straight to the same
    // HTTP server, whose httpsOnly hook below refuses every request that did not come over TLS.
    serverFactory: (handler) => {
      const { health, observer } = opts;
      const probed: typeof handler =
        health === undefined
          ? handler
          : (req, res) => {
              if (health.answer(req, res, app.log)) routeOf.set(req, req.url?.startsWith('/healthz') === true ? '/healthz' : '/readyz');
              else handler(req, res);
            };
      const observed: typeof handler =
        observer === undefined
          ? probed
          : (req, res) => {
              const start = observer.begin(req);
              // Taken now, while the connection is surely open.
              const client = opts.accessLog === true ? opts.clientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for']) : undefined;
              observer.echo(req, res);
              probed(req, res);
              // Once answered, whoever answered (a probe, a route, or Fastify itself for a malformed request).
              res.once('close', () => requestDone(req, res, start, client));
            };
      // Fastify's own timeout options apply only to servers it makes: this one has them here.
      const secure = https.createServer(
        {
          cert: opts.tls.cert,
          key: opts.tls.key,
          ServerResponse: OneWriteResponse,
          ...serverTimeouts(opts.connections),
          handshakeTimeout: opts.connections.headersTimeoutMs,
        },
        observed,
      );
      limitConnections(secure, opts.connections);
      sniffProtocol(secure, opts.connections.headersTimeoutMs);
      return secure;
    },
    // Not used to make the server (serverFactory does); it makes Fastify log https:// addresses.
    https: { cert: opts.tls.cert, key: opts.tls.key },
    logger: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
    // Set by the observer for every request (from a trusted proxy, or new).
    requestIdHeader: 'x-request-id',
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    bodyLimit: 64 * 1024,
    // A malformed request gets its 400 (or 431, 408) over TLS too.
    clientErrorHandler: answerClientError,
  }) as unknown as FastifyInstance;

  const isSecure = (req: FastifyRequest): boolean => {
    const encrypted = (req.raw.socket as TLSSocket).encrypted === true;
    const peer = req.raw.socket.remoteAddress ?? '';
    if (!opts.trustsProxy(peer)) return encrypted;
    const proto = forwardedProto(req.headers['x-forwarded-proto']);
    return proto === undefined ? encrypted : proto === 'https';
  };

  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'string' }, function parseForm(req, body, done) {
    req.form = new URLSearchParams(body as string);
    done(null, undefined);
  });
  // Other bodies (JSON, multipart…) carry no parameters here: read (within bodyLimit) and ignored.
  app.addContentTypeParser('*', { parseAs: 'buffer' }, function ignoreBody(_req, _body, done) {
    done(null, undefined);
  });

  app.addHook('onRequest', async function routeLabel(req) {
    routeOf.set(req.raw, req.routeOptions.url ?? 'other');
  });

  app.addHook('onRequest', async function httpsOnly(req, reply) {
    reply.headers({ 'strict-transport-security': 'max-age=31536000', 'x-content-type-options': 'nosniff', 'referrer-policy': 'strict-origin-when-cross-origin' });
    if (isSecure(req)) return;
    const err = new OAuthError('invalid_request', HTTPS_ONLY);
    if (JSON_ENDPOINTS.test(req.url)) return sendOAuthError(reply, err);
    return sendPage(reply, 400, errorPage({ error: err.error, description: err.message }));
  });

  // NUL never reaches a query: PostgreSQL refuses it in text (which was a 500), and no name, id,
  // secret or token holds one. Checked once the form body is parsed, before any route runs.
  app.addHook('preHandler', async function noNul(req, reply) {
    if (!holdsNul(req)) return;
    const err = new OAuthError('invalid_request', 'The request holds a NUL character');
    if (JSON_ENDPOINTS.test(req.url)) return sendOAuthError(reply, err);
    return sendPage(reply, 400, errorPage({ error: err.error, description: err.message }));
  });

  const ctx: PageContext = {
    deps: opts.deps,
    clientAddress: (req) => opts.clientAddress(req.raw.socket.remoteAddress, req.headers['x-forwarded-for']),
    loginInterstitial: renderLoginInterstitial,
  };
  void app.register(pageRoutes, ctx);
  void app.register(oauthRoutes, ctx);
  void app.register(jwksRoutes, { keys: opts.deps.signingKeys });

  app.setNotFoundHandler(function notFound(req: FastifyRequest, reply: FastifyReply) {
    if (JSON_ENDPOINTS.test(req.url) || req.url.startsWith('/oauth2/')) {
      return reply.code(404).headers({ 'cache-control': 'no-store' }).type('application/json; charset=utf-8').send('{"error":"not_found","error_description":"No such endpoint"}');
    }
    return sendPage(reply, 404, errorPage({ error: 'not_found', description: 'There is no such page.' }));
  });
  app.setErrorHandler(function failed(err, req, reply) {
    const status = (err as { statusCode?: number }).statusCode;
    if (status !== undefined && status >= 400 && status < 500) {
      const e = new OAuthError('invalid_request', status === 413 ? 'The request body is too large' : 'The request could not be understood', status);
      if (JSON_ENDPOINTS.test(req.url)) return sendOAuthError(reply, e);
      return sendPage(reply, status, errorPage({ error: e.error, description: e.message }));
    }
    req.log.error({ err }, 'auth request failed');
    const e = new OAuthError('server_error', 'Something went wrong; try again later');
    if (JSON_ENDPOINTS.test(req.url)) return sendOAuthError(reply, e);
    return sendPage(reply, 500, errorPage({ error: e.error, description: e.message }));
  });
  return app;
}

/** Form fields only ever checked by pattern or hashed, never put in a query as they are; their own errors (e.g. "Malformed authorization code") stay. */
const HASHED_FIELDS = new Set(['code', 'refresh_token', 'token', 'code_verifier', 'password']);

/** Whether the URL (path or query), a form field or Basic credentials carry a NUL (raw NUL cannot pass Node's parser). */
function holdsNul(req: FastifyRequest): boolean {
  if (/%00/i.test(req.url)) return true;
  for (const [k, v] of req.form ?? []) if (k.includes('\0') || (v.includes('\0') && !HASHED_FIELDS.has(k))) return true;
  const basic = /^basic\s+(\S+)/i.exec(req.headers.authorization ?? '');
  if (basic === null) return false;
  const decoded = Buffer.from(basic[1] as string, 'base64').toString('utf8');
  return decoded.includes('\0') || /%00/i.test(decoded);
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

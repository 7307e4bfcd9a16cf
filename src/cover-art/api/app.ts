import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import type { ConnectionLimits } from '../../config/load.js';
import { clientAddress, throttleAddress, type TrustedProxies } from '../../http/client-address.js';
import { answerClientErrorAsFastify } from '../../http/client-error.js';
import { installFastLane, type LaneReply, type LaneRequest } from '../../edge/fast-lane.js';
import type { ListenerHealth } from '../../http/health.js';
import { buildListener } from '../../http/listener.js';
import { answeredStatus, type RequestObserver } from '../../http/observe.js';
import type { RateDecision, RequestLimiter } from '../../http/rate-limit.js';
import type { Clock } from '../../shared/clock.js';
import type { PlainAnswer } from '../../shared/plain-http.js';
import { answerKey, handleApiRequest, hostArchive } from './api.js';
import type { CoverArtRouteDeps } from '../deps.js';
import { acceptsJson, chooseVariant, errorPage, etagMatches, notModified, type ApiResponse } from './responses.js';
import { coverArtRoute } from './route-label.js';
import { coverArtRoutes, sendApiResponse } from './routes.js';
import { writeResponse } from './wire.js';

export interface CoverArtAppOptions {
  routes: CoverArtRouteDeps;
  logger: FastifyServerOptions['logger'];
  rateLimiter: RequestLimiter | undefined;
  trustedProxies: TrustedProxies;
  clock: Clock;
  /** Log every request (at debug level), cached answers included. */
  accessLog: boolean;
  /** /healthz and /readyz, answered before the rate limit and the response cache. */
  health?: ListenerHealth | undefined;
  /** Request ids and metrics, for every request (those answered before Fastify too). */
  observer: RequestObserver;
  /** Header, request and keep-alive timeouts and the connection cap. */
  connections: ConnectionLimits;
  /** Plain GETs and HEADs of files and cached answers answered before node:http (SLEEVE_FAST_LANE; edge/fast-lane.ts). */
  fastLane?: boolean;
  /**
   * While the catalogue is not there yet (the mirror's database not read once: docs/mirror-database.md),
   * the seconds after which to ask again; undefined once it is. Release, release-group and
   * event requests answer 503 with Retry-After meanwhile.
   */
  catalogueGate?: () => number | undefined;
}

/** Requests whose answer needs the catalogue (OPTIONS does not). */
function needsCatalogue(req: IncomingMessage): boolean {
  const url = req.url ?? '';
  return req.method !== 'OPTIONS' && (url.startsWith('/release/') || url.startsWith('/release-group/') || url.startsWith('/event/'));
}

const WHOOPS = 'Whoops. Our bad.\n';
const CORS = { 'access-control-allow-origin': '*' };
const TEXT = 'text/plain; charset=utf-8';

function write(req: IncomingMessage, res: ServerResponse, response: ApiResponse, observer: RequestObserver): void {
  writeResponse(req, res, response, observer.id(req));
}

/** The door's answers before Fastify, and the fast lane's part of them (see buildCoverArtApp). */
interface Door {
  clientOf(req: IncomingMessage): string;
  frontDoor(req: IncomingMessage, res: ServerResponse, next: (req: IncomingMessage, res: ServerResponse) => void): boolean;
  lane(req: LaneRequest, reply: LaneReply): boolean;
}

/**
 * The listener's one answer to a plain request before routing (shared/plain-http.ts): a
 * `/download/` file (the file server), an answer the response cache holds (or, with
 * SLEEVE_IMAGE_RESPONSE=bytes, the image file it redirects to), and `OPTIONS *`; anything else
 * declined, for the router. The lane and node:http's front door both call it.
 */
function coverArtAnswer(opts: CoverArtAppOptions, log: () => FastifyBaseLogger): PlainAnswer {
  const { cache, files } = opts.routes;
  // SLEEVE_IMAGE_RESPONSE=bytes: a kept redirect to an image is answered with the file instead.
  const imageFiles = opts.routes.imageBytes === true ? files : undefined;
  const { observer } = opts;
  const eventHost = opts.routes.api.eventHost;
  return (req, reply) => {
    const url = req.url ?? '/';
    if (url === '*') {
      // Asterisk-form (OPTIONS *) never reaches a router; the lane never reads one.
      if (reply.nowOnly === true) return false;
      const request = { method: req.method ?? 'GET', url, httpVersion: req.httpVersion ?? '1.1', accept: undefined, host: req.headers.host };
      return handleApiRequest(opts.routes.api, request).then((r) => writeResponse(req, reply, req.method === 'OPTIONS' ? r : errorPage(400), observer.id(req)));
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') return false;
    // The file server answers from its own cache or the store (file-server.ts).
    if (files !== undefined && url.startsWith('/download/')) return files.answer(req, reply, observer.id(req), log());
    // The cache holds the Cover Art Archive's answers: another archive's host is answered afresh (api.ts, hostArchive).
    if (hostArchive(req.headers.host, eventHost) !== 'cover') return false;
    const key = answerKey(url);
    // Files are never in this cache (their lookups would only dilute the hit ratio).
    if (key.startsWith('/download/')) return false;
    const kept = cache.get(key);
    if (kept === undefined || (kept.needsJsonAccept === true && !acceptsJson(req.headers.accept))) {
      // Counted where the router is asked next: a reply given now or not at all declines, and node:http asks again.
      if (reply.nowOnly !== true) observer.cacheLookup(false);
      return false;
    }
    // A thumbnail redirect kept with its other formats: the one this Accept prefers (responses.ts).
    const hit = chooseVariant(kept, req.headers.accept);
    if (imageFiles !== undefined && hit.imageKey !== undefined) {
      const taken = imageFiles.answerImage(req, reply, hit.imageKey, hit.headers['cache-control'], observer.id(req), log());
      if (taken !== false) observer.cacheLookup(true);
      return taken;
    }
    observer.cacheLookup(true);
    const inm = req.headers['if-none-match'];
    writeResponse(req, reply, inm !== undefined && etagMatches(inm, hit.headers.etag) ? notModified(hit) : hit, observer.id(req));
    return true;
  };
}

/**
 * The small door in front of Fastify: health probes, the catalogue gate and the rate limit,
 * then the listener's answer (coverArtAnswer); `lane`, the same answer as the fast lane gives
 * it, counted. `log` is the listener's logger (made after the door).
 */
function coverArtDoor(opts: CoverArtAppOptions, log: () => FastifyBaseLogger): Door {
  const { observer } = opts;
  const answer = coverArtAnswer(opts, log);
  const clientOf = (req: IncomingMessage): string => clientAddress(req.socket.remoteAddress, req.headers['x-forwarded-for'], opts.trustedProxies);
  const refused = (req: IncomingMessage, res: ServerResponse, decision: RateDecision): boolean => {
    if (decision.allowed) return false;
    observer.rateLimited();
    if (opts.accessLog) log().debug({ reqId: req.headers['x-request-id'], client: clientOf(req), method: req.method, url: req.url, status: 503 }, 'rate limited');
    write(req, res, errorPage(503, `Rate limit exceeded; retry after ${decision.retryAfter} seconds.`, { 'retry-after': String(decision.retryAfter) }), observer);
    return true;
  };
  /**
   * With the access log on (node:http's only: the lane stands aside then), the answer with a
   * line once it is written: a file's, or a kept answer's, with its client taken now.
   */
  const logged = (req: IncomingMessage, res: ServerResponse): boolean => {
    const client = clientOf(req);
    const url = req.url ?? '/';
    const what = url.startsWith('/download/') ? { file: true } : url === '*' ? {} : { cached: true };
    const line = (): void => log().debug({ reqId: req.headers['x-request-id'], client, method: req.method, url, status: res.statusCode, ...what }, 'request');
    res.once('finish', line);
    if (answer(req, res) !== false) return true;
    res.removeListener('finish', line);
    return false;
  };
  const answered = (req: IncomingMessage, res: ServerResponse): boolean => (opts.accessLog ? logged(req, res) : answer(req, res) !== false);
  const frontDoor = (req: IncomingMessage, res: ServerResponse, next: (req: IncomingMessage, res: ServerResponse) => void): boolean => {
    if (opts.health !== undefined && opts.health.answer(req, res, log())) return true;
    // Closed only until the catalogue is first read, while the response cache can hold no
    // answer under /release/ (the router gives them): the lane, which does not ask, has none to give.
    if (opts.catalogueGate !== undefined && needsCatalogue(req)) {
      const retryAfter = opts.catalogueGate();
      if (retryAfter !== undefined) {
        write(req, res, errorPage(503, `The catalogue is not ready yet; retry after ${retryAfter} seconds.`, { 'retry-after': String(retryAfter) }), observer);
        return true;
      }
    }
    if (opts.rateLimiter !== undefined) {
      const decision = opts.rateLimiter.hit(throttleAddress(clientOf(req)), opts.clock.now());
      if (decision instanceof Promise) {
        // A shared limit (Redis) answers later; the rest of the door waits for it.
        decision.then(
          (d) => {
            if (!refused(req, res, d) && !answered(req, res)) next(req, res);
          },
          (err: unknown) => {
            log().error({ err, reqId: req.headers['x-request-id'] }, 'rate limit check failed; request let through');
            if (!answered(req, res)) next(req, res);
          },
        );
        return true;
      }
      if (refused(req, res, decision)) return true;
    }
    return answered(req, res);
  };

  /**
   * The fast lane's part: the same answer, on a reply that is given now or not at all
   * (installFastLane's nowOnly), so that whatever would wait (a miss to route or to await, a
   * health probe, …) is declined and reaches the door through node:http. Only without a rate
   * limit or an access log, which want node:http's request (the client's address through
   * proxies, a log line per request).
   */
  const lane = (req: LaneRequest, reply: LaneReply): boolean => {
    const start = observer.begin(req);
    // Never later: the reply is given now or not at all.
    if (answer(req, reply) === false) return false;
    if (observer.counting) observer.laneFinished(coverArtRoute(req.url), req.method, reply.statusCode, start);
    return true;
  };
  return { clientOf, frontDoor, lane };
}

/**
 * The cover art listener. In front of Fastify sits a small door that, before any
 * routing, answers health probes, applies the rate limit and replays cached answers to
 * GET and HEAD; every other request (and every miss) goes through the Fastify routes,
 * which fill the cache.
 */
export function buildCoverArtApp(opts: CoverArtAppOptions): FastifyInstance {
  const { observer } = opts;
  const { clientOf, frontDoor, lane } = coverArtDoor(opts, () => app.log);
  const laneOn = opts.fastLane !== false && opts.rateLimiter === undefined && !opts.accessLog;

  const app = buildListener({
    name: 'cover art',
    logger: opts.logger,
    connections: opts.connections,
    fastify: {
      routerOptions: { maxParamLength: 2048 },
      // A malformed head: Fastify's own answer, after the answers to the requests before it (client-error.ts).
      clientErrorHandler: answerClientErrorAsFastify,
      // Malformed percent-escapes and the like: the API's own 400 page, with its CORS header.
      frameworkErrors: function badRequest(_err, _req, reply) {
        return sendApiResponse(reply, errorPage(400), undefined);
      },
    },
    server: (options, handler) => {
      // Requests the front door passes on (at once, or after a shared rate limit answered).
      const toFastify = (req: IncomingMessage, res: ServerResponse): void => {
        observer.echo(req, res);
        if (opts.accessLog) routed.set(req, clientOf(req));
        handler(req, res);
      };
      const server = http.createServer(options, (req, res) => {
        const start = observer.begin(req);
        if (!frontDoor(req, res, toFastify)) toFastify(req, res);
        // Counted here, once answered, whoever answered: the front door, a route, or Fastify
        // itself (a malformed URL, 503 while closing), which runs no hooks for those.
        if (!observer.counting && !opts.accessLog) return;
        // Answered already and all of it handed to the system: counted now (no listener on the hot
        // path). A body still queued (a large file) counts only once it is out, or as 499.
        if (res.writableEnded && res.writableLength === 0) requestDone(req, res, start, res.statusCode);
        else res.once('close', () => requestDone(req, res, start));
      });
      if (laneOn) installFastLane(server, { answer: lane, nowOnly: true, connections: opts.connections });
      return server;
    },
    refused: (_req, reply, status, err) => reply.code(status).headers(CORS).type(TEXT).send(`${err.message}\n`),
    failed: (_req, reply) => reply.code(500).headers(CORS).type(TEXT).send(WHOOPS),
  });

  // With the access log on: requests Fastify answered (the front door logs its own answers), with
  // their client's address, taken while the connection is surely open.
  const routed = new WeakMap<IncomingMessage, string>();
  const requestDone = (req: IncomingMessage, res: ServerResponse, start: number, status = answeredStatus(res)): void => {
    const ms = observer.finished(coverArtRoute(req.url ?? '/'), req.method, status, start);
    const client = routed.get(req);
    if (client !== undefined) app.log.debug({ reqId: req.headers['x-request-id'], client, method: req.method, url: req.url, status, ms }, 'request');
  };
  void app.register(coverArtRoutes, opts.routes);
  return app;
}

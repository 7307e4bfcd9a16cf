import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { LanePosts, LaneReply, LaneRequest } from '../edge/fast-lane.js';
import { CLIENT_CLOSED, type RequestObserver } from '../http/observe.js';
import { DEVICE_CODE_GRANT } from './device.js';
import { OAuthError } from './errors.js';
import { holdsNul, SECURITY_HEADERS, type RequestView } from './http-util.js';
import { busyAnswer, CORS, NO_STORE, oauthErrorBody, oauthErrorHeaders } from './routes/oauth/shared.js';
import { tokenGrant } from './routes/oauth/token.js';
import type { PageContext } from './routes/pages/shared.js';

/*
 * The token endpoint in the fast lane (docs/decisions.md, "The token endpoint in the fast
 * lane"): a plain form POST to /oauth2/token over TLS, answered from the socket by the same
 * function as the route (tokenGrant), without node:http's request and response objects and
 * Fastify's routing, hooks and reply. Every other request to the endpoint (another content
 * type, a DPoP proof, the device grant, a proxy's X-Forwarded-Proto, a body not all there) is
 * node:http's and Fastify's as before; the answers of both are the same bytes.
 */

/** The POSTs the auth listener's lane reads: the token endpoint's, with a body of at most 4 KiB (a token request's is ~300 bytes). */
export const TOKEN_LANE_POSTS: LanePosts = { paths: new Set(['/oauth2/token']), maxBody: 4 * 1024 };

const FORM = 'application/x-www-form-urlencoded';
const JSON_TYPE = 'application/json; charset=utf-8';


export interface TokenLaneOptions {
  ctx: PageContext;
  observer: RequestObserver;
  /** The listener's logger (Fastify's), of which each request's is a child naming its id, as Fastify's own are. */
  log(): FastifyBaseLogger;
}

/**
 * The lane's answer for token requests: false (node:http's) for any request it does not take,
 * else the promise of its answer, written through `reply` with the status, headers and body
 * the route and its error handlers would give, then counted as the route's.
 */
export function tokenLane(opts: TokenLaneOptions): (req: LaneRequest, reply: LaneReply) => false | Promise<void> {
  const { ctx, observer } = opts;
  return (req, reply) => {
    const h = req.headers;
    if (req.body === undefined || h['content-type'] !== FORM || h.dpop !== undefined || h['x-forwarded-proto'] !== undefined) return false;
    // As Fastify's string parser reads it: UTF-8 (a malformed sequence becomes U+FFFD in both).
    const form = new URLSearchParams(req.body.toString('utf8'));
    const grantType = form.get('grant_type') ?? undefined;
    if (grantType === DEVICE_CODE_GRANT) return false;
    const start = observer.begin(req);
    const view = new LaneView(req, form, opts.log);
    return answer(ctx, view, grantType).then((a) => {
      // A connection closed or ended (the client's FIN) before the answer: counted as node:http counts it.
      const gone = req.socket.destroyed || req.socket.writableEnded;
      reply.writeHeadLines(a.status, `x-request-id: ${h['x-request-id'] as string}\r\n${a.lines}content-length: ${Buffer.byteLength(a.body)}\r\n`);
      reply.end(a.body);
      observer.laneFinished('/oauth2/token', 'POST', gone ? CLIENT_CLOSED : a.status, start);
    });
  };
}

/** A token request the lane read, as the endpoint's code reads a Fastify request. */
class LaneView implements RequestView {
  readonly method = 'POST';
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly form: URLSearchParams;
  readonly raw: { readonly socket: { readonly remoteAddress?: string | undefined } };
  private logger: FastifyBaseLogger | undefined;
  private readonly parent: () => FastifyBaseLogger;

  constructor(req: LaneRequest, form: URLSearchParams, parent: () => FastifyBaseLogger) {
    this.url = req.url;
    this.headers = req.headers;
    this.form = form;
    this.raw = { socket: req.socket };
    this.parent = parent;
  }

  /** Made when first used (an audit line, an error): most answers log nothing. */
  get log(): FastifyBaseLogger {
    this.logger ??= this.parent().child({ reqId: this.headers['x-request-id'] });
    return this.logger;
  }
}

interface Answer {
  status: number;
  /** The header lines (`name: value\r\n` each) between the request id and Content-Length. */
  lines: string;
  body: string;
}

/** Header lines as LaneReply.writeHead makes them from a header object, in its order. */
function linesOf(headers: Record<string, string>): string {
  let lines = '';
  for (const name in headers) lines += `${name}: ${headers[name] as string}\r\n`;
  return lines;
}

/** A 200's lines (the same for every answer: made once): the onRequest hook's security headers, then the JSON endpoints' no-store and CORS headers. */
const OK_LINES = linesOf({ ...SECURITY_HEADERS, ...NO_STORE, ...CORS, 'content-type': JSON_TYPE });

/** The answer the route gives `req`: its body, or its error as the endpoint's error handlers word it (oauth/shared.ts oauthErrors, then the listener's). */
async function answer(ctx: PageContext, req: LaneView, grantType: string | undefined): Promise<Answer> {
  try {
    // The listener's preHandler hook (auth/app.ts): NUL is refused before any route runs.
    if (holdsNul(req)) throw new OAuthError('invalid_request', 'The request holds a NUL character');
    const body = await tokenGrant(ctx, req, grantType);
    return { status: 200, lines: OK_LINES, body: JSON.stringify(body) };
  } catch (err) {
    return errorAnswer(req, err);
  }
}

function errorAnswer(req: LaneView, err: unknown): Answer {
  if (err instanceof OAuthError) return oauthError(err);
  const busy = busyAnswer(err, req.log);
  if (busy !== undefined) return oauthError(busy.err, busy.extra);
  const status = (err as { statusCode?: number } | undefined)?.statusCode;
  if (status !== undefined && status >= 400 && status < 500) {
    return oauthError(new OAuthError('invalid_request', status === 413 ? 'The request body is too large' : 'The request could not be understood', status));
  }
  req.log.error({ err }, 'auth request failed');
  return oauthError(new OAuthError('server_error', 'Something went wrong; try again later'));
}

/** sendOAuthError's answer (oauth/shared.ts), after the listener's security headers. */
function oauthError(err: OAuthError, extra: Record<string, string> = {}): Answer {
  return { status: err.status, lines: linesOf({ ...SECURITY_HEADERS, ...oauthErrorHeaders(err, extra), 'content-type': JSON_TYPE }), body: oauthErrorBody(err) };
}

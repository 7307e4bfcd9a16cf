import type { IncomingHttpHeaders } from 'node:http';
import type { FastifyBaseLogger } from 'fastify';
import type { LanePosts } from '../edge/fast-lane.js';
import type { PlainReply, PlainRequest } from '../shared/plain-http.js';
import { DEVICE_CODE_GRANT, tokenGrant } from './grants/index.js';
import type { AuthContext } from './context.js';
import { OAuthError } from './errors.js';
import { holdsNul, SECURITY_HEADERS, type RequestView } from './http-util.js';
import { JSON_TYPE, oauthErrorBody, oauthErrorHeaders, oauthErrorOf } from './routes/oauth/shared.js';
import { TOKEN_HEADERS } from './routes/oauth/token.js';

/*
 * The token endpoint's answer to a request whose body came with it (docs/decisions.md, "The
 * token endpoint in the fast lane"): a plain form POST to /oauth2/token, answered by the same
 * function as the route (tokenGrant), its errors mapped by the same function as the route's
 * error handler (oauthErrorOf), without node:http's request and response objects and Fastify's
 * routing, hooks and reply. Only the fast lane reads a body with its head (PlainRequest.body);
 * every other request to the endpoint (another content type, a DPoP proof, the device grant, a
 * body still to be read) is node:http's and Fastify's; the answers of both are the same bytes.
 */

/** The POSTs the auth listener's lane reads: the token endpoint's, with a body of at most 4 KiB (a token request's is ~300 bytes). */
export const TOKEN_LANE_POSTS: LanePosts = { paths: new Set(['/oauth2/token']), maxBody: 4 * 1024 };

const FORM = 'application/x-www-form-urlencoded';

export interface TokenAnswerOptions {
  ctx: AuthContext;
  /** The listener's logger (Fastify's), of which each request's is a child naming its id, as Fastify's own are. */
  log(): FastifyBaseLogger;
}

/**
 * The answer to a token request whose body was read with it: false (declined, for node:http
 * and Fastify) for any request it does not take, else the promise of its answer, written
 * through `reply` with the status, headers and body the route and its error handler would give.
 * The request is the listener's to check first: over TLS, its id given.
 */
export function tokenAnswer(opts: TokenAnswerOptions): (req: PlainRequest, reply: PlainReply) => false | Promise<void> {
  const { ctx } = opts;
  return (req, reply) => {
    const h = req.headers;
    if (req.body === undefined || req.method !== 'POST' || req.url !== '/oauth2/token' || reply.writeHeadLines === undefined) return false;
    if (h['content-type'] !== FORM || h.dpop !== undefined) return false;
    // As Fastify's string parser reads it: UTF-8 (a malformed sequence becomes U+FFFD in both).
    const form = new URLSearchParams(req.body.toString('utf8'));
    const grantType = form.get('grant_type') ?? undefined;
    if (grantType === DEVICE_CODE_GRANT) return false;
    return answer(ctx, new TokenView(req, form, opts.log), grantType, reply);
  };
}

/** A token request read with its body, as the endpoint's code reads a Fastify request. */
class TokenView implements RequestView {
  readonly method = 'POST';
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  readonly form: URLSearchParams;
  readonly raw: { readonly socket: { readonly remoteAddress?: string | undefined } };
  private logger: FastifyBaseLogger | undefined;
  private readonly parent: () => FastifyBaseLogger;

  constructor(req: PlainRequest, form: URLSearchParams, parent: () => FastifyBaseLogger) {
    this.url = req.url as string;
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

/** Header lines as LaneReply.writeHead makes them from a header object, in its order. */
function linesOf(headers: Readonly<Record<string, string>>): string {
  let lines = '';
  for (const name in headers) lines += `${name}: ${headers[name] as string}\r\n`;
  return lines;
}

/** A 200's lines (the same for every answer: made once): the listener's security headers (its onRequest hook's), then the route's. */
const OK_LINES = linesOf({ ...SECURITY_HEADERS, ...TOKEN_HEADERS, 'content-type': JSON_TYPE });

/**
 * Writes the route's answer to `req`: its body, or its error as the endpoint's error handler
 * words it (sendOAuthError's headers), after the listener's security headers; the request id
 * first and Content-Length last, where node:http puts them.
 */
async function answer(ctx: AuthContext, req: TokenView, grantType: string | undefined, reply: PlainReply): Promise<void> {
  let status = 200;
  let lines = OK_LINES;
  let body: string;
  try {
    // The listener's preHandler hook (auth/app.ts): NUL is refused before any route runs.
    if (holdsNul(req)) throw new OAuthError('invalid_request', 'The request holds a NUL character');
    body = JSON.stringify(await tokenGrant(ctx, req, grantType));
  } catch (err) {
    const e = oauthErrorOf(err, req.log);
    status = e.err.status;
    lines = linesOf({ ...SECURITY_HEADERS, ...oauthErrorHeaders(e.err, e.extra), 'content-type': JSON_TYPE });
    body = oauthErrorBody(e.err);
  }
  reply.writeHeadLines?.(status, `x-request-id: ${req.headers['x-request-id'] as string}\r\n${lines}content-length: ${Buffer.byteLength(body)}\r\n`);
  reply.end(body);
}

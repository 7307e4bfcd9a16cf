import { randomBytes } from 'node:crypto';

/** A request as ids are given: node:http's, or the fast lane's (fast-lane.ts). */
export interface IdentifiedRequest {
  headers: Record<string, string | string[] | undefined>;
  socket: { remoteAddress?: string | undefined };
}

/** Longest request id taken from a proxy; longer ones are replaced by a new id. */
const MAX_REQUEST_ID_LENGTH = 128;

/**
 * Whether `value` may serve as a request id: 1–128 characters from A–Z, a–z, 0–9 and
 * `- _ . : / + = @` (enough for UUIDs, hex, base64 and most tracing formats; nothing that
 * could break a log line or a header).
 */
function validRequestId(value: string): boolean {
  if (value.length === 0 || value.length > MAX_REQUEST_ID_LENGTH) return false;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    const ok =
      (c >= 48 && c <= 57) || // 0-9
      (c >= 65 && c <= 90) || // A-Z
      (c >= 97 && c <= 122) || // a-z
      c === 45 || c === 95 || c === 46 || c === 58 || c === 47 || c === 43 || c === 61 || c === 64; // - _ . : / + = @
    if (!ok) return false;
  }
  return true;
}

/**
 * Request ids for one process: a valid `X-Request-Id` from a trusted proxy is kept (so a
 * request can be followed through the proxy's logs and sleeve's), anything else gets a new
 * id: a random prefix per process and a counter, e.g. `5f0c9-2bq` (no randomness per request).
 * A client that is not a trusted proxy cannot choose the id its request is logged under.
 * Ids stay under 13 characters (until the counter passes 2 billion), so V8 makes each one
 * a flat string at once rather than a rope it must flatten when Node checks the header.
 */
export class RequestIds {
  private readonly prefix = `${randomBytes(3).toString('hex').slice(0, 5)}-`;
  private count = 0;
  private readonly trustsProxy: (address: string) => boolean;

  constructor(trustsProxy: (address: string) => boolean) {
    this.trustsProxy = trustsProxy;
  }

  next(): string {
    return this.prefix + (++this.count).toString(36);
  }

  /**
   * Gives the request its id, written into the request's own `x-request-id` header, where
   * Fastify (`requestIdHeader`) and the answers take it from.
   */
  assign(req: IdentifiedRequest): string {
    const given = req.headers['x-request-id'];
    const id = typeof given === 'string' && this.trustsProxy(req.socket.remoteAddress ?? '') && validRequestId(given) ? given : this.next();
    req.headers['x-request-id'] = id;
    return id;
  }
}

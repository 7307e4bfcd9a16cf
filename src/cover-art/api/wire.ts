import type { PlainReply } from '../../shared/plain-http.js';
import type { ApiResponse } from './responses.js';

/** A response as the front door writes it, prepared once per response object. */
interface Wire {
  /** Flat header list for writeHead, its last value the request's id (replaced per request). */
  headers: string[];
  /** The body: as text when its bytes are the UTF-8 of a text, else the bytes. */
  body: string | Buffer;
}

const wires = new WeakMap<ApiResponse, Wire>();

/*
 * A flat header list spares Node the merge-and-validate path a header set before writeHead
 * takes; a text body goes out with the head as one string (a Buffer would be a second chunk),
 * in one write() on the listener's OneWriteResponse (one-write.ts).
 */
function wireOf(response: ApiResponse): Wire {
  let wire = wires.get(response);
  if (wire === undefined) {
    const text = response.body.toString('utf8');
    wire = {
      headers: [...Object.entries(response.headers).flat(), 'x-request-id', ''],
      body: Buffer.from(text, 'utf8').equals(response.body) ? text : response.body,
    };
    wires.set(response, wire);
  }
  return wire;
}

/** Writes `response` with the request's id in X-Request-Id (no body to HEAD). */
export function writeResponse(req: { readonly method?: string | undefined }, res: PlainReply, response: ApiResponse, requestId: string): void {
  const wire = wireOf(response);
  // writeHead copies the list into the head at once, so one list serves every request.
  wire.headers[wire.headers.length - 1] = requestId;
  res.writeHead(response.status, wire.headers);
  res.end(req.method === 'HEAD' ? undefined : wire.body);
}

/**
 * A request and an answer as the code that answers reads and writes them, whichever way the
 * request came in: node:http's request and response, or the fast lane's own (src/edge). The
 * modules answer through these, so they never import the lane.
 *
 * Each listener has one function that answers a plain request before routing (a `PlainAnswer`:
 * the cover art listener's files and kept answers, the HTTPS listener's kept pages and token
 * requests). The lane calls it first, and node:http's front door calls it for whatever the lane
 * did not take, so what an answer is, is written once; the lane only carries it
 * (docs/decisions.md, "One answer per listener").
 */
import type { IncomingHttpHeaders } from 'node:http';

/** A request as an answer reads it: node:http's, or the lane's own. */
export interface PlainRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  /** node:http's ('1.1', '1.0'); absent on the lane's, which reads HTTP/1.1 only. */
  readonly httpVersion?: string;
  readonly headers: IncomingHttpHeaders;
  /** The connection it came on: the peer's address, and whether it is TLS (a TLSSocket's `encrypted`). */
  readonly socket: { readonly remoteAddress?: string | undefined; readonly encrypted?: boolean };
  /**
   * Its body, all of it, where the transport read it with the head (the lane's POSTs); absent
   * on node:http's request, whose body is still to be read (by the router).
   */
  readonly body?: Buffer | undefined;
}

/** An answer as it is written: node:http's response, or the lane's LaneReply. */
export interface PlainReply {
  writeHead(status: number, headers: string[] | Record<string, string>): unknown;
  end(body?: string | Uint8Array): unknown;
  /**
   * writeHead with the header lines already made (`name: value\r\n` each), where the answer
   * has them (the file server's, file-cache.ts okLines): the lane's own (LaneReply); node:http's
   * response has none, and is given the list.
   */
  writeHeadLines?(status: number, lines: string): unknown;
  readonly writableLength: number;
  readonly headersSent: boolean;
  once(event: 'close', listener: () => void): unknown;
  destroy(): unknown;
  /**
   * True where an answer is given now or not at all (the cover art listener's lane): one that
   * would wait (a question to await, a read through the thread pool, a fetch) or stream its body
   * is declined instead, and node:http, asked next, gives it. What a declined request would
   * count (a cache miss) is then counted there, once. Absent on node:http's response.
   */
  readonly nowOnly?: boolean;
}

/**
 * What a listener's answering function did with a request: answered it (true, or the label of
 * the route its answer is counted under), declined it (false: nothing written; the next in line
 * answers, node:http after the lane, the router after node:http's front door), or answers it
 * later (a promise settled once the answer is written; never rejected).
 */
export type Outcome = boolean | string | Promise<void>;

/** A listener's one function answering a plain request (see the top of this file). */
export type PlainAnswer = (req: PlainRequest, reply: PlainReply) => Outcome;

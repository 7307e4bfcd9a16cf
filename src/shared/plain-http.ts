/**
 * A request and an answer as the code that answers reads and writes them, whichever way the
 * request came in: node:http's request and response, or the fast lane's own (src/edge). The
 * modules answer through these, so they never import the lane.
 */
import type { IncomingHttpHeaders } from 'node:http';

/** A request as an answer reads it: node:http's, or the lane's own. */
export interface PlainRequest {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: IncomingHttpHeaders;
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
}

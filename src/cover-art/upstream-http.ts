import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { finished } from 'node:stream/promises';

/*
 * The pull-through's and the bulk mirror's GETs to the upstream, on node:http(s) with
 * keep-alive agents rather than the global fetch: measured on this project's benchmark
 * machine, fetch spent about 2.9 ms of CPU per 25 KB image against 0.95 ms for node:http
 * (docs/decisions.md, "Bulk mirror speed"), and the bulk mirror runs on one core.
 */

/** Redirects followed per request (archive.org answers /download/… with one, to the node that holds the item). */
const MAX_REDIRECTS = 5;
const REDIRECT = new Set([301, 302, 303, 307, 308]);

// Idle sockets are unref'd by the agents, so they never keep a command's process alive.
const AGENTS = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };

/** A response whose body is still to be read (or discarded with `discard`). */
export interface UpstreamResponse {
  status: number;
  /** A header's value, lower-case name; undefined when absent. */
  header(name: string): string | undefined;
  body: IncomingMessage;
}

/** A GET that fails in the network (refused, reset, bad TLS, too many redirects), with the system's code where there is one. */
export class UpstreamNetworkError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
  ) {
    super(message);
  }
}

/**
 * Abandons a GET in flight: stop() destroys its request and its response with an AbortError.
 * Cheaper per request than an AbortSignal given to http.get, which hangs a listener and an
 * end-of-stream watcher on every request (docs/decisions.md, "Bulk mirror: one cancel handle per request").
 */
export class UpstreamCall {
  /** The error the GET fails with once stopped. */
  stopped: Error | undefined;
  private req: ClientRequest | undefined;
  private res: IncomingMessage | undefined;

  stop(): void {
    if (this.stopped !== undefined) return;
    const err = new Error('The operation was aborted');
    err.name = 'AbortError';
    this.stopped = err;
    this.req?.destroy(err);
    this.res?.destroy(err);
  }

  /** The request of the current hop (its response, when it comes, through `answered`). */
  started(req: ClientRequest): void {
    this.req = req;
    this.res = undefined;
  }

  answered(res: IncomingMessage): void {
    this.res = res;
  }
}

function once(url: URL, headers: Record<string, string>, call: UpstreamCall): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    if (call.stopped !== undefined) {
      reject(call.stopped);
      return;
    }
    const get = url.protocol === 'https:' ? https.get : http.get;
    const agent = url.protocol === 'https:' ? AGENTS['https:'] : AGENTS['http:'];
    const req = get(url, { agent, headers }, (res) => {
      call.answered(res);
      resolve(res);
    });
    call.started(req);
    req.on('error', reject);
  });
}

/**
 * GETs `url`, following redirects (http and https only), until the answer that is not one;
 * `stop` (a signal or an UpstreamCall) abandons it (the promise rejects with an AbortError, as
 * does a body being read). Network failures reject with UpstreamNetworkError or the system's error.
 */
export async function upstreamGet(url: string, headers: Record<string, string>, stop: AbortSignal | UpstreamCall): Promise<UpstreamResponse> {
  let call: UpstreamCall;
  if (stop instanceof UpstreamCall) call = stop;
  else {
    call = new UpstreamCall();
    if (stop.aborted) call.stop();
    else stop.addEventListener('abort', () => call.stop(), { once: true });
  }
  let target = new URL(url);
  for (let hop = 0; ; hop++) {
    const res = await once(target, headers, call);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (!REDIRECT.has(status) || location === undefined) {
      return { status, header: (name) => headerValue(res.headers[name]), body: res };
    }
    // The redirect's own body, read to its end before the next request when it is small, so that
    // request goes on the same connection (archive.org redirects every file to its node).
    const response: UpstreamResponse = { status, header: (name) => headerValue(res.headers[name]), body: res };
    if (discard(response)) await finished(res);
    if (hop === MAX_REDIRECTS) throw new UpstreamNetworkError(`more than ${MAX_REDIRECTS} redirects`, undefined);
    const next = new URL(location, target);
    if (next.protocol !== 'http:' && next.protocol !== 'https:') throw new UpstreamNetworkError(`a redirect to ${next.protocol} (only http and https are followed)`, undefined);
    target = next;
  }
}

/**
 * Reads a response's body whole, at most `maxBytes` (more: the response is destroyed and the
 * answer is 'too_large'). Rejects when the body is cut (the connection reset, the call stopped).
 * Plain 'data' listeners, not an async iterator: the bulk mirror reads one body per file.
 */
export function readBody(res: IncomingMessage, maxBytes: number): Promise<Buffer | 'too_large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let length = 0;
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      fn();
    };
    res.on('data', (chunk: Buffer) => {
      if (settled) return;
      length += chunk.length;
      if (length > maxBytes) {
        settle(() => resolve('too_large'));
        res.destroy();
        return;
      }
      chunks.push(chunk);
    });
    res.on('end', () => settle(() => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, length))));
    res.on('error', (err) => settle(() => reject(err)));
    // Closed before its end without an error (a cut body the parser did not report).
    res.on('close', () => settle(() => reject(Object.assign(new Error('the body was cut short'), { code: 'ECONNRESET' }))));
  });
}

function headerValue(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * Drops a response's body: read to its end when it says it is small (the connection is kept;
 * true), else the connection is closed (false).
 */
export function discard(res: UpstreamResponse): boolean {
  const length = Number(res.header('content-length') ?? Number.NaN);
  if (length <= 64 * 1024) {
    res.body.resume();
    return true;
  }
  res.body.destroy();
  return false;
}

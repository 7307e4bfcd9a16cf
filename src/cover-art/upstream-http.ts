import http, { type IncomingMessage } from 'node:http';
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

function once(url: URL, headers: Record<string, string>, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const get = url.protocol === 'https:' ? https.get : http.get;
    const agent = url.protocol === 'https:' ? AGENTS['https:'] : AGENTS['http:'];
    const req = get(url, { agent, headers, signal }, resolve);
    req.on('error', reject);
  });
}

/**
 * GETs `url`, following redirects (http and https only), until the answer that is not one;
 * `signal` abandons it (the promise rejects, as does a body being read). Network failures
 * reject with UpstreamNetworkError or the system's error.
 */
export async function upstreamGet(url: string, headers: Record<string, string>, signal: AbortSignal): Promise<UpstreamResponse> {
  let target = new URL(url);
  for (let hop = 0; ; hop++) {
    const res = await once(target, headers, signal);
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

import dns, { type LookupAddress } from 'node:dns';
import http, { type ClientRequest, type IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import { isPublicAddress } from '../../http/public-address.js';
import { finished } from 'node:stream/promises';

/*
 * The pull-through's and the bulk mirror's GETs to the upstream, on node:http(s) with
 * keep-alive agents rather than the global fetch: measured on this project's benchmark
 * machine, fetch spent about 2.9 ms of CPU per 25 KB image against 0.95 ms for node:http
 * (docs/decisions.md, "Bulk mirror speed"), and the bulk mirror runs on one core.
 */

/** Redirects followed per request (archive.org answers /download/… with one, to the node that holds the item). */
const MAX_REDIRECTS = 3;
const REDIRECT = new Set([301, 302, 303, 307, 308]);

/*
 * Where a redirect may lead (issue 32; docs/decisions.md, "The upstream's redirects"). The
 * configured upstream (the first URL's origin) is trusted as configured, wherever it is. A
 * redirect to any other origin is followed only over https (or the configured upstream's own
 * scheme) and only to a host whose every address is public: checked when the connection is made
 * (a `lookup` on the request, so a name cannot resolve to one address when checked and to
 * another when connected), and for an address written in the URL (never looked up) before.
 * SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE=on (`allowPrivate`) drops the address checks, not the
 * scheme rule or the bound on hops.
 */

/** A redirect sleeve does not follow: not an error of the network, not to be tried again. */
export class RedirectRefused extends Error {}

/**
 * `dns.lookup` for a redirect's host off the configured upstream: every address it resolves to
 * must be public, else the connection fails with RedirectRefused.
 */
const publicLookup: LookupFunction = (hostname, options, callback) => {
  dns.lookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err !== null) return callback(err, '', 0);
    const refused = addresses.length === 0 ? { address: 'no address' } : addresses.find((a) => !isPublicAddress(a.address));
    if (refused !== undefined) return callback(new RedirectRefused(`a redirect to ${hostname}: it resolves to ${refused.address}, not a public address`), '', 0);
    if (options.all === true) callback(null, addresses);
    else callback(null, (addresses[0] as LookupAddress).address, (addresses[0] as LookupAddress).family);
  });
};

// Idle sockets are unref'd by the agents, so they never keep a command's process alive.
const AGENTS = { 'http:': new http.Agent({ keepAlive: true }), 'https:': new https.Agent({ keepAlive: true }) };

/** A response whose body is still to be read (or discarded with `discard`). */
export interface UpstreamResponse {
  status: number;
  /** A header's value, lower-case name; undefined when absent. */
  header(name: string): string | undefined;
  body: IncomingMessage;
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

/** `url`'s request: to the configured upstream as configured, to any other origin with its addresses checked (when `checked`). */
function once(url: URL, headers: Record<string, string>, call: UpstreamCall, checked: boolean): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    if (call.stopped !== undefined) {
      reject(call.stopped);
      return;
    }
    const get = url.protocol === 'https:' ? https.get : http.get;
    const agent = url.protocol === 'https:' ? AGENTS['https:'] : AGENTS['http:'];
    const req = get(url, { agent, headers, lookup: checked ? publicLookup : undefined }, (res) => {
      call.answered(res);
      resolve(res);
    });
    call.started(req);
    req.on('error', reject);
  });
}

/**
 * GETs `url`, following at most 3 redirects (to `url`'s origin as it is; to others over https
 * or `url`'s scheme, public addresses only unless `allowPrivate`), until the answer that is not
 * one; `stop` (a signal or an UpstreamCall) abandons it (the promise rejects with an AbortError,
 * as does a body being read). A redirect not followed rejects with RedirectRefused; network
 * failures with the system's error.
 */
export async function upstreamGet(url: string, headers: Record<string, string>, stop: AbortSignal | UpstreamCall, allowPrivate = false): Promise<UpstreamResponse> {
  let call: UpstreamCall;
  if (stop instanceof UpstreamCall) call = stop;
  else {
    call = new UpstreamCall();
    if (stop.aborted) call.stop();
    else stop.addEventListener('abort', () => call.stop(), { once: true });
  }
  const trusted = new URL(url);
  let target = trusted;
  for (let hop = 0; ; hop++) {
    const res = await once(target, headers, call, !allowPrivate && target.origin !== trusted.origin);
    const status = res.statusCode ?? 0;
    const location = res.headers.location;
    if (!REDIRECT.has(status) || location === undefined) {
      return { status, header: (name) => headerValue(res.headers[name]), body: res };
    }
    // The redirect's own body, read to its end before the next request when it is small, so that
    // request goes on the same connection (archive.org redirects every file to its node).
    const response: UpstreamResponse = { status, header: (name) => headerValue(res.headers[name]), body: res };
    if (discard(response)) await finished(res);
    if (hop === MAX_REDIRECTS) throw new RedirectRefused(`more than ${MAX_REDIRECTS} redirects`);
    target = redirectTarget(location, target, trusted, allowPrivate);
  }
}

/** Where a redirect from `from` to `location` leads, when sleeve follows it there (see above); else RedirectRefused. */
function redirectTarget(location: string, from: URL, trusted: URL, allowPrivate: boolean): URL {
  let next: URL;
  try {
    next = new URL(location, from);
  } catch {
    throw new RedirectRefused(`a redirect to ${JSON.stringify(location.slice(0, 100))}, not a URL`);
  }
  if (next.origin === trusted.origin) return next;
  if (next.protocol !== 'https:' && next.protocol !== trusted.protocol) {
    const schemes = trusted.protocol === 'https:' ? 'https' : `https and ${trusted.protocol.slice(0, -1)}`;
    throw new RedirectRefused(`a redirect to ${next.protocol} (only ${schemes} are followed off the configured upstream)`);
  }
  // An address in the URL is never looked up: checked here.
  const host = next.hostname.startsWith('[') ? next.hostname.slice(1, -1) : next.hostname;
  if (!allowPrivate && isIP(host) !== 0 && !isPublicAddress(host)) throw new RedirectRefused(`a redirect to ${host}: not a public address`);
  return next;
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

import { createHash } from 'node:crypto';
import dns from 'node:dns';
import type { IncomingMessage } from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import type { ClientMetadataConfig } from '../config/load.js';
import { isPublicAddress } from '../http/public-address.js';
import type { Clock } from '../shared/clock.js';
import { OAuthError } from './errors.js';
import { MAX_REDIRECT_URIS, OOB_URI, redirectUriProblem } from './redirect-uris.js';
import { SIGNING_ALGS, type SigningAlg } from './signing-keys.js';

/*
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; docs/oauth.md,
 * "Applications nobody registered"): a client_id that is an https URL names the JSON document
 * that registers the client. Every fetch is bounded: its time (connection and whole), its size
 * (5 KiB), how many run at once, and where it may go (no redirect; no loopback, private or
 * link-local address unless the operator allows it, checked on the address connected to). What
 * was fetched is kept for as long as its Cache-Control says, within the operator's bounds, in a
 * cache of a bounded number of documents.
 */

/** The draft's suggested size cap. */
const MAX_DOCUMENT_BYTES = 5 * 1024;
/** The longest client_id looked up anywhere (applications.ts findAppByClientId). */
const MAX_URL_LENGTH = 200;
/** Fetches in flight at once; one more is refused (503) rather than queued. */
const MAX_CONCURRENT_FETCHES = 8;
/** Documents kept; the least recently used goes first. */
const MAX_CACHED_DOCUMENTS = 1000;
const CONNECT_TIMEOUT_MS = 3000;

/** A client as its document describes it, checked. */
export interface ClientDocument {
  /** The client_id: the document's URL. */
  url: string;
  /** Its host (with port when not 443), shown on the consent page. */
  host: string;
  name: string;
  redirectUris: string[];
  clientUri: string | undefined;
  logoUri: string | undefined;
  idTokenAlg: SigningAlg;
  /** SHA-256 of what sleeve takes from it (client_id, name, redirect URIs, auth method, alg): a code remembers it. */
  hash: string;
}

/**
 * A document that cannot be used: `reason` is a short fixed word for the audit trail, the
 * message says why in words. `busy` (too many fetches at once) is a 503 for the client to retry.
 */
export class DocumentRefused extends OAuthError {
  readonly reason: string;
  override readonly retryAfterSeconds: number | undefined;
  constructor(reason: string, message: string) {
    super(reason === 'busy' ? 'temporarily_unavailable' : 'invalid_client', message, reason === 'busy' ? 503 : 400);
    this.reason = reason;
    this.retryAfterSeconds = reason === 'busy' ? 1 : undefined;
  }
}

/** Whether a client_id is meant as a document's URL (a registered client_id can hold no `:` or `/`: applications.ts checkClientId). */
export function isDocumentClientId(clientId: string): boolean {
  return /^https?:\/\//i.test(clientId);
}

interface Cached {
  doc: ClientDocument;
  expiresAt: number;
}

export class ClientDocuments {
  readonly #cache = new Map<string, Cached>();
  readonly #inFlight = new Map<string, Promise<{ doc: ClientDocument; ttlSeconds: number }>>();

  constructor(
    readonly settings: ClientMetadataConfig,
    private readonly clock: Clock,
  ) {}

  get enabled(): boolean {
    return this.settings.enabled;
  }

  /** The document of `url` (a client_id), from the cache or fetched; DocumentRefused when it cannot be used. */
  async resolve(url: string): Promise<ClientDocument> {
    const target = this.#check(url);
    const now = this.clock.now();
    const hit = this.#cache.get(url);
    if (hit !== undefined) {
      this.#cache.delete(url);
      if (hit.expiresAt > now) {
        this.#cache.set(url, hit);
        return hit.doc;
      }
    }
    let pending = this.#inFlight.get(url);
    if (pending === undefined) {
      if (this.#inFlight.size >= MAX_CONCURRENT_FETCHES) throw new DocumentRefused('busy', 'Too many client metadata documents are being fetched at once; try again shortly');
      pending = this.#fetch(url, target).finally(() => this.#inFlight.delete(url));
      this.#inFlight.set(url, pending);
    }
    const { doc, ttlSeconds } = await pending;
    if (ttlSeconds > 0) {
      this.#cache.delete(url);
      this.#cache.set(url, { doc, expiresAt: this.clock.now() + ttlSeconds * 1000 });
      for (const oldest of this.#cache.keys()) {
        if (this.#cache.size <= MAX_CACHED_DOCUMENTS) break;
        this.#cache.delete(oldest);
      }
    }
    return doc;
  }

  /** The URL's checks before any fetch: the feature on, https with a path, no credentials or fragment, an allowed host. */
  #check(url: string): URL {
    if (!this.settings.enabled) throw new DocumentRefused('off', 'Client ID Metadata Documents are not accepted here: register the application');
    if (url.length > MAX_URL_LENGTH) throw new DocumentRefused('bad_url', `A client_id URL must be at most ${MAX_URL_LENGTH} characters`);
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new DocumentRefused('bad_url', 'The client_id is not a valid URL');
    }
    if (parsed.protocol !== 'https:') throw new DocumentRefused('bad_url', 'A client_id URL must use https');
    if (parsed.href !== url) throw new DocumentRefused('bad_url', 'A client_id URL must be written in its normal form (lower-case host, no default port, no dot segments)');
    if (parsed.username !== '' || parsed.password !== '' || parsed.hash !== '' || url.includes('#')) throw new DocumentRefused('bad_url', 'A client_id URL must not contain a user name, password or fragment');
    if (parsed.pathname === '/') throw new DocumentRefused('bad_url', 'A client_id URL must have a path');
    const { hosts } = this.settings;
    if (hosts !== undefined && !hosts.includes(parsed.hostname)) throw new DocumentRefused('host_not_allowed', `Client metadata documents from ${parsed.hostname} are not accepted here`);
    if (!this.settings.allowPrivate && isIP(bare(parsed.hostname)) !== 0 && !isPublicAddress(bare(parsed.hostname))) {
      throw new DocumentRefused('private_address', `${parsed.hostname} is not a public address`);
    }
    return parsed;
  }

  async #fetch(url: string, target: URL): Promise<{ doc: ClientDocument; ttlSeconds: number }> {
    const { body, cacheControl } = await getDocument(target, this.settings);
    const doc = checkDocument(url, target, body);
    return { doc, ttlSeconds: this.#lifetime(cacheControl) };
  }

  /** Seconds to keep a document: its max-age (no-store and no-cache: 0), within the operator's bounds. */
  #lifetime(cacheControl: string | undefined): number {
    const { cacheMinSeconds: min, cacheMaxSeconds: max } = this.settings;
    const cc = (cacheControl ?? '').toLowerCase();
    let seconds = min;
    const maxAge = /(?:^|[,\s])max-age\s*=\s*"?(\d{1,10})"?/.exec(cc);
    if (maxAge !== null) seconds = Number(maxAge[1]);
    if (/(?:^|[,\s])(no-store|no-cache)(?:$|[,\s=])/.test(cc)) seconds = 0;
    return Math.min(max, Math.max(min, seconds));
  }
}

/** A host name without IPv6's brackets. */
function bare(hostname: string): string {
  return hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
}

/** dns.lookup, failing the connection when any address found is not a public one (so the address checked is the one connected to). */
function publicOnlyLookup(hostname: string): LookupFunction {
  return (name, options, callback) => {
    dns.lookup(name, { ...options, all: true }, (err, addresses) => {
      if (err !== null) return callback(err, '', 0);
      const refused = addresses.length === 0 ? { address: 'no address' } : addresses.find((a) => !isPublicAddress(a.address));
      if (refused !== undefined) return callback(new DocumentRefused('private_address', `${hostname} resolves to ${refused.address}, not a public address`), '', 0);
      if (options.all === true) return callback(null, addresses);
      const first = addresses[0] as dns.LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

/** GETs the document: 200 only (a redirect is not followed), within the size cap and the time limits. */
function getDocument(target: URL, settings: ClientMetadataConfig): Promise<{ body: Buffer; cacheControl: string | undefined }> {
  const where = `the client metadata document at ${target.host}`;
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (err: DocumentRefused) => {
      if (settled) return;
      settled = true;
      clearTimeout(total);
      clearTimeout(connect);
      req.destroy();
      reject(err);
    };
    const req = https.get(target, {
      agent: false,
      headers: { accept: 'application/json', 'user-agent': 'sleeve (Client ID Metadata Document fetch)' },
      ...(settings.allowPrivate ? {} : { lookup: publicOnlyLookup(target.hostname) }),
    });
    const total = setTimeout(() => fail(new DocumentRefused('timeout', `${where} did not arrive within ${settings.timeoutMs} ms`)), settings.timeoutMs);
    const connect = setTimeout(() => fail(new DocumentRefused('timeout', `could not connect to ${target.host} within ${Math.min(CONNECT_TIMEOUT_MS, settings.timeoutMs)} ms`)), Math.min(CONNECT_TIMEOUT_MS, settings.timeoutMs));
    req.once('socket', (socket) => socket.once('secureConnect', () => clearTimeout(connect)));
    req.on('error', (err) => fail(err instanceof DocumentRefused ? err : new DocumentRefused('unreachable', `${where} could not be fetched: ${err.message}`)));
    req.on('response', (res: IncomingMessage) => {
      const status = res.statusCode ?? 0;
      if (status >= 300 && status < 400) return fail(new DocumentRefused('redirect', `${where} answered with a redirect (${status}), which is not followed`));
      if (status !== 200) return fail(new DocumentRefused('http_status', `${where} answered ${status}`));
      const length = Number(res.headers['content-length'] ?? 0);
      if (length > MAX_DOCUMENT_BYTES) return fail(new DocumentRefused('too_large', `${where} is larger than ${MAX_DOCUMENT_BYTES} bytes`));
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_DOCUMENT_BYTES) return fail(new DocumentRefused('too_large', `${where} is larger than ${MAX_DOCUMENT_BYTES} bytes`));
        chunks.push(chunk);
      });
      res.on('error', (err) => fail(new DocumentRefused('unreachable', `${where} could not be read: ${err.message}`)));
      res.on('end', () => {
        if (settled) return;
        settled = true;
        clearTimeout(total);
        clearTimeout(connect);
        const cc = res.headers['cache-control'];
        resolve({ body: Buffer.concat(chunks), cacheControl: Array.isArray(cc) ? cc.join(',') : cc });
      });
    });
  });
}

/** A redirect URI a document may list: https, http on loopback, or an app's reverse-DNS scheme; never out-of-band. */
function documentRedirectProblem(uri: unknown): string | undefined {
  if (typeof uri !== 'string') return 'redirect_uris must be strings';
  if (uri === OOB_URI) return 'redirect_uris must not be out-of-band';
  const problem = redirectUriProblem(uri);
  if (problem !== undefined) return problem;
  const u = new URL(uri);
  if (u.protocol === 'https:') return undefined;
  if (u.protocol === 'http:') return ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname) ? undefined : `redirect URI ${uri} uses http on a host that is not loopback`;
  return /^(?![_-])[\w-]+(?:\.(?![_-])[\w-]+)+:/.test(uri) ? undefined : `redirect URI ${uri} must use https, http on loopback, or a reverse-DNS scheme`;
}

/** An optional https URL field of the document (client_uri, logo_uri). */
function optionalHttpsUrl(doc: Record<string, unknown>, field: string): string | undefined {
  const v = doc[field];
  if (v === undefined) return undefined;
  if (typeof v !== 'string' || v.length > 2000 || !/^https:\/\/[^\s]+$/.test(v)) throw new DocumentRefused('bad_document', `${field} must be an https URL`);
  return v;
}

/** The document's JSON, checked as the draft and sleeve require. */
export function checkDocument(url: string, target: URL, body: Buffer): ClientDocument {
  const bad = (message: string) => new DocumentRefused('bad_document', `The client metadata document at ${target.host}: ${message}`);
  let doc: unknown;
  try {
    doc = JSON.parse(body.toString('utf8'));
  } catch {
    throw new DocumentRefused('not_json', `The client metadata document at ${target.host} is not JSON`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) throw bad('it is not a JSON object');
  const d = doc as Record<string, unknown>;
  if (d.client_id !== url) throw new DocumentRefused('client_id_mismatch', `The client metadata document at ${target.host} names another client_id than its URL`);
  const name = typeof d.client_name === 'string' ? d.client_name.normalize('NFC').trim() : '';
  if (name === '' || name.length > 100) throw bad('client_name must be a name of 1 to 100 characters');
  const uris = d.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0) throw bad('redirect_uris must list at least one redirect URI');
  if (uris.length > MAX_REDIRECT_URIS) throw bad(`redirect_uris may list at most ${MAX_REDIRECT_URIS}`);
  for (const uri of uris) {
    const problem = documentRedirectProblem(uri);
    if (problem !== undefined) throw bad(problem);
  }
  const method = d.token_endpoint_auth_method ?? 'none';
  if (method === 'private_key_jwt') throw bad('token_endpoint_auth_method private_key_jwt is not supported here; use none (a public client with PKCE)');
  if (method !== 'none') throw bad('token_endpoint_auth_method must be none (a client known by its document has no secret)');
  const alg = d.id_token_signed_response_alg ?? 'RS256';
  if (!(SIGNING_ALGS as readonly unknown[]).includes(alg)) throw bad(`id_token_signed_response_alg must be one of ${SIGNING_ALGS.join(', ')}`);
  const redirectUris = [...new Set(uris as string[])];
  const hash = createHash('sha256')
    .update(JSON.stringify([url, name, redirectUris, method, alg]))
    .digest('base64url');
  return { url, host: target.host, name, redirectUris, clientUri: optionalHttpsUrl(d, 'client_uri'), logoUri: optionalHttpsUrl(d, 'logo_uri'), idTokenAlg: alg as SigningAlg, hash };
}

import { readFileSync } from 'node:fs';
import path from 'node:path';
import { isIP } from 'node:net';
import { DEFAULT_HASH_COST, DEFAULT_HASH_QUEUE, defaultHashThreads, HASH_COST_RANGE } from '../shared/password-hashing.js';
import { MUSICBRAINZ_DATABASE_VARIABLES, musicBrainzDatabaseConfig, type MusicBrainzDatabaseConfig } from './musicbrainz-db.js';
import { UPSTREAM_VARIABLES, upstreamConfig, type UpstreamConfig } from './upstream.js';

/** One listener address. */
export interface ListenAddress {
  host: string;
  port: number;
}

export type DatabaseConfig =
  | { kind: 'sqlite'; file: string }
  | { kind: 'postgres'; url: string };

/** `reads`: how the file store reads (FsReads in storage/fs-store.ts: auto, inline or pool). */
export type StorageConfig = { kind: 'file'; root: string; reads: 'auto' | 'inline' | 'pool' } | S3StorageConfig;

/** `s3://BUCKET[/PREFIX]?endpoint=…&region=…&forcePathStyle=true&publicUrl=…` (docs/storage.md, "Storing the images in S3"). */
export interface S3StorageConfig {
  kind: 's3';
  bucket: string;
  /** Key prefix inside the bucket, without leading or trailing slash ('' for none). */
  prefix: string;
  /** S3-compatible endpoint (origin only), or undefined for AWS itself. */
  endpoint: string | undefined;
  region: string;
  forcePathStyle: boolean;
  /** Public URL of the bucket with the prefix: where redirects point unless SLEEVE_IMAGE_BASE_URL says otherwise. */
  publicUrl: string;
}

export interface RateLimitConfig {
  requests: number;
  windowMs: number;
}

/**
 * How long a client may take, and how many connections it may hold, on each listener
 * (docs/decisions.md, "Connections").
 */
/** Client ID Metadata Documents (auth/client-metadata.ts; docs/oauth.md, "Applications nobody registered"). */
export interface ClientMetadataConfig {
  /** SLEEVE_CLIENT_METADATA: off, on (any host), or on for the listed hosts only. */
  enabled: boolean;
  /** The hosts (lower case) whose documents may be fetched, or undefined for any. */
  hosts: readonly string[] | undefined;
  /** SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE: whether documents may be fetched from loopback, private and link-local addresses. */
  allowPrivate: boolean;
  /** How long a fetch may take in all, ms (its connection within the same or 3 s, whichever is less). */
  timeoutMs: number;
  /** The bounds within which a document's Cache-Control decides how long it is kept, seconds. */
  cacheMinSeconds: number;
  cacheMaxSeconds: number;
}

export interface ConnectionLimits {
  /** A request's head (request line and headers) must arrive within this, ms; so must a new connection's first byte, and its TLS handshake. */
  headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this, ms (counted from its first byte); nor may nothing move for this long while a request is open. */
  requestTimeoutMs: number;
  /** An idle connection between requests is closed after this, ms. */
  keepAliveTimeoutMs: number;
  /** Most connections open at once on one listener; more are closed as they arrive. */
  maxConnections: number;
}

/** sleeve's whole configuration, validated and frozen (docs/configuration.md). */
export interface Config {
  dataDir: string;
  database: DatabaseConfig;
  storage: StorageConfig;
  redisUrl: string | undefined;
  coverArtListen: ListenAddress;
  authListen: ListenAddress;
  /** Where GET /metrics is served (Prometheus); undefined when `off`. */
  metricsListen: ListenAddress | undefined;
  baseUrl: string;
  /** Whether SLEEVE_BASE_URL or SLEEVE_MUSICBRAINZ_URL was given (not defaulted): a command warns when they differ from the servers'. */
  listingUrlsGiven: boolean;
  authUrl: string;
  imageBaseUrl: string;
  musicBrainzUrl: string;
  /** Public URL of the Event Art Archive: its Host answers event paths only; event listings name it. */
  eventBaseUrl: string;
  tlsCert: string | undefined;
  tlsKey: string | undefined;
  trustProxy: string[];
  rateLimit: RateLimitConfig | undefined;
  /** Timeouts and the connection cap of every listener. */
  connections: ConnectionLimits;
  accessTokenTtl: number;
  authCodeTtl: number;
  /** Seconds in which a rotated refresh token, used again, gets the same answer (SLEEVE_REFRESH_GRACE_SECONDS). */
  refreshGraceSeconds: number;
  /** Whether public applications must use PKCE with S256 (SLEEVE_PKCE). */
  pkce: 'optional' | 's256-for-public';
  /** Client ID Metadata Documents: whether, from where, and how they are fetched and kept. */
  clientMetadata: ClientMetadataConfig;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  uploadMaxBytes: number;
  uploadMaxPixels: number;
  /** Load the demo catalogue on `serve` when the database holds no release. */
  demo: boolean;
  /** Whether ordinary editors' cover art changes wait for an approver (`review`) or apply at once (`auto`). */
  approval: 'auto' | 'review';
  /** SLEEVE_LISTING_FIELDS: listings with sleeve's measured fields (`full`) or exactly the real indexer's (`caa`). */
  listingFields: 'full' | 'caa';
  /** SLEEVE_THUMBNAIL_SIZES: the thumbnail sizes answered, ascending (250, 500 and 1200 always among them). */
  thumbnailSizes: readonly number[];
  /** SLEEVE_THUMBNAIL_FORMATS: the thumbnail formats made (jpeg always first). */
  thumbnailFormats: readonly ('jpeg' | 'webp' | 'avif')[];
  /** How often a serving process looks for catalogue changes made elsewhere, in ms. */
  changePollMs: number;
  /** The same while Redis notifies it of changes (the poll is then only the safety net), in ms. */
  changePollRedisMs: number;
  /** On SIGTERM, how long to keep serving with /readyz answering 503 before closing the listeners, in ms. */
  shutdownDelayMs: number;
  /** Threads that hash passwords, and hashes that may wait for one (more: 503). */
  passwordHashing: { threads: number; queue: number; cost: number };
  /** How often a serving process removes or finishes what interrupted uploads left, in ms. */
  uploadSweepMs: number;
  /** Most bytes of answers kept in the cover art response cache (0 turns it off). */
  responseCacheBytes: number;
  /** Most answers kept in it, when SLEEVE_RESPONSE_CACHE (deprecated) is set; 0 turns it off. */
  responseCacheEntries: number | undefined;
  /** How long a catalogue command waits for serving processes to acknowledge its change, in ms. */
  changeWaitMs: number;
  /** Bytes of files the built-in file server keeps in memory (0 turns the file cache off). */
  fileCacheBytes: number;
  /** Pull-through of /download/ misses (config/upstream.ts); undefined when SLEEVE_UPSTREAM_URL is unset. */
  upstream: UpstreamConfig | undefined;
  /** The mirror's live database as the catalogue (config/musicbrainz-db.ts); undefined when SLEEVE_MUSICBRAINZ_DATABASE_URL is unset. */
  musicBrainzDatabase: MusicBrainzDatabaseConfig | undefined;
  /** What the image endpoints answer: their 307 (`redirect`, the interface's) or the file itself (`bytes`). */
  imageResponse: 'redirect' | 'bytes';
  /** Whether the listeners answer their plainest requests before node:http (edge/fast-lane.ts). */
  fastLane: boolean;
}

/** Every environment variable sleeve reads, with its documentation. */
export const VARIABLES = {
  SLEEVE_DATA_DIR: 'embedded database, stored files, generated TLS material (default ./data)',
  SLEEVE_DATABASE_URL: 'sqlite:PATH or postgres://… (default sqlite:$SLEEVE_DATA_DIR/sleeve.db)',
  SLEEVE_STORAGE_URL: 'file:PATH or s3://BUCKET[/PREFIX]?endpoint=…&region=…&forcePathStyle=true&publicUrl=… (default file:$SLEEVE_DATA_DIR/files)',
  SLEEVE_STORAGE_READS: 'auto|inline|pool: file storage reads small files with calls on the serving thread (inline) or through the thread pool (pool); auto: inline unless the folder is on a network file system (default auto)',
  SLEEVE_REDIS_URL: 'redis://[:PASSWORD@]HOST[:PORT][/DB] or rediss://… for the shared rate limit and change notifications (unset: in-process)',
  SLEEVE_COVERART_LISTEN: 'host:port of the cover art listener (default 127.0.0.1:8080)',
  SLEEVE_AUTH_LISTEN: 'host:port of the auth listener (default 127.0.0.1:8443)',
  SLEEVE_METRICS_LISTEN: 'host:port of the Prometheus metrics listener, or off (default 127.0.0.1:9464)',
  SLEEVE_BASE_URL: 'public URL of the cover art service (default http://localhost:8080)',
  SLEEVE_AUTH_URL: 'public URL of the authorization service (default https://localhost:8443)',
  SLEEVE_IMAGE_BASE_URL: "where redirects point (default $SLEEVE_BASE_URL/download, or the bucket's public URL with s3:// storage)",
  SLEEVE_FAST_LANE: 'on (default: plain GET and HEAD requests for files and cached answers, and cached gallery pages over HTTPS, are answered straight from the socket) or off (node:http reads every request)',
  SLEEVE_IMAGE_RESPONSE: 'redirect (default: the image endpoints answer 307) or bytes (they answer 200 with the file, fetched through SLEEVE_UPSTREAM_URL if the store lacks it)',
  SLEEVE_MUSICBRAINZ_URL: 'prefix of the release links in listings (default https://musicbrainz.org)',
  SLEEVE_EVENT_BASE_URL: "public URL of the Event Art Archive (default https://eventartarchive.org): requests to its host answer /event/ paths only, and events' listings name it",
  SLEEVE_TLS_CERT: 'PEM certificate for the auth listener (default: generated self-signed)',
  SLEEVE_TLS_KEY: 'PEM private key for the auth listener (default: generated)',
  SLEEVE_TRUST_PROXY: 'comma-separated addresses/CIDRs whose X-Forwarded-* headers are believed',
  SLEEVE_RATE_LIMIT: 'requests per window per client address, e.g. 300/10s (unset: off)',
  SLEEVE_HEADERS_TIMEOUT_MS: "time for a request's headers, a new connection's first byte and its TLS handshake, ms (default 30000)",
  SLEEVE_REQUEST_TIMEOUT_MS: 'time for a whole request, body included, and most time with nothing moving during one, ms (default 60000)',
  SLEEVE_KEEPALIVE_TIMEOUT_MS: 'an idle connection between requests is closed after this, ms (default 65000)',
  SLEEVE_MAX_CONNECTIONS: 'most connections open at once per listener (default 1024)',
  SLEEVE_ACCESS_TOKEN_TTL: 'access token life time in seconds (default 3600)',
  SLEEVE_AUTH_CODE_TTL: 'authorization code life time in seconds (default 600)',
  SLEEVE_REFRESH_GRACE_SECONDS: 'applications with refresh token rotation: a used refresh token presented again this soon gets the same answer instead of ending the grant, seconds (default 30, 0 = none)',
  SLEEVE_PKCE: 'optional|s256-for-public: whether public (installed) applications must use PKCE with S256 (default optional)',
  SLEEVE_CLIENT_METADATA: 'on (default: a client_id that is an https URL is fetched as its Client ID Metadata Document), off, or a comma-separated list of the hosts whose documents may be fetched',
  SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE: 'on|off: whether client metadata documents may be fetched from loopback, private and link-local addresses (default off)',
  SLEEVE_CLIENT_METADATA_TIMEOUT_MS: 'most time a client metadata document fetch may take, connection included, ms (default 5000)',
  SLEEVE_CLIENT_METADATA_CACHE_MIN_SECONDS: "a client metadata document is kept at least this long, whatever its Cache-Control says, seconds (default 60)",
  SLEEVE_CLIENT_METADATA_CACHE_MAX_SECONDS: "and at most this long (default 86400)",
  SLEEVE_LOG_LEVEL: 'fatal|error|warn|info|debug|trace|silent (default info)',
  SLEEVE_UPLOAD_MAX_BYTES: 'largest accepted image file in bytes (default 52428800)',
  SLEEVE_UPLOAD_MAX_PIXELS: 'largest accepted image in pixels, width×height (default 100000000)',
  SLEEVE_DEMO: 'load the demo catalogue when the database is empty: on|off (default on)',
  SLEEVE_APPROVAL: "cover art changes by editors without the approver role: auto (applied at once) or review (pending until an approver decides) (default auto)",
  SLEEVE_LISTING_FIELDS: "listing entries: full (with width, height, size, mime_type and thumbnail_dimensions when known) or caa (exactly the real indexer's) (default full)",
  SLEEVE_THUMBNAIL_SIZES: 'thumbnail sizes answered, comma-separated pixels from 16 to 10000; 250, 500 and 1200 are always answered; the others are made on first request (default 250,500,1200)',
  SLEEVE_THUMBNAIL_FORMATS: 'thumbnail formats, comma-separated: jpeg, webp, avif; WebP and AVIF are made on demand and chosen by Accept (default jpeg)',
  SLEEVE_CHANGE_POLL_MS: 'how often a server checks for catalogue changes, ms (default 250)',
  SLEEVE_CHANGE_POLL_REDIS_MS: 'the same while Redis notifies it of changes, ms (default 1000)',
  SLEEVE_SHUTDOWN_DELAY_MS: 'on SIGTERM, keep serving with /readyz answering 503 this long before closing, ms (default 0)',
  SLEEVE_PASSWORD_HASH_THREADS: 'threads that hash passwords at sign-in (default: one per two cores, 1 to 4)',
  SLEEVE_PASSWORD_HASH_QUEUE: 'sign-ins that may wait for a hashing thread; more are answered 503 (default 64)',
  SLEEVE_PASSWORD_HASH_COST: "scrypt's cost for new password hashes, as log2 of N, 10 to 20 (default 15: 32 MiB, about 0.1 s a hash); older hashes are made again at their next sign-in",
  SLEEVE_UPLOAD_SWEEP_MS: 'how often a server cleans up after interrupted uploads, ms (default 10000, at most 30000)',
  SLEEVE_RESPONSE_CACHE_BYTES: 'memory for the cover art response cache, bytes (default 67108864 = 64 MiB, 0 = off)',
  SLEEVE_RESPONSE_CACHE: 'deprecated: also cap the response cache at this many answers (default: no count cap; 0 = off)',
  SLEEVE_CHANGE_WAIT_MS: 'how long a catalogue command waits for every serving process to show its change, ms (default 2000, 0 = do not wait)',
  SLEEVE_FILE_CACHE_BYTES: 'bytes of /download/ files kept in memory (default 134217728 = 128 MiB, 0 = off)',
  ...UPSTREAM_VARIABLES,
  ...MUSICBRAINZ_DATABASE_VARIABLES,
} as const;

export type VariableName = keyof typeof VARIABLES;
export type ConfigSource = Partial<Record<string, string | undefined>>;

/** Raised when configuration is invalid; lists every bad variable. */
export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/**
 * Reads a `--config FILE`: a JSON object whose keys are the variable names.
 * Returns the values as strings, ready to merge under the environment.
 */
export function readConfigFile(file: string): Record<string, string> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    // A syntax error's message may quote the text around it (on Node 22 and later), which may be a password.
    if (err instanceof SyntaxError) {
      const at = /position (\d+)/.exec(err.message);
      throw new ConfigError([`--config ${file}: is not valid JSON${at === null ? '' : ` (at character ${Number(at[1]) + 1})`}`]);
    }
    throw new ConfigError([`--config ${file}: ${(err as Error).message}`]);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new ConfigError([`--config ${file}: must hold a JSON object of SLEEVE_* keys`]);
  }
  const out: Record<string, string> = {};
  const problems: string[] = [];
  for (const [key, value] of Object.entries(parsed)) {
    if (!(key in VARIABLES)) problems.push(`--config ${file}: unknown key ${key}`);
    else if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
      out[key] = String(value);
    } else problems.push(`--config ${file}: ${key} must be a string, number or boolean`);
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return out;
}

/**
 * Builds the configuration from `env` (the environment merged over a config file),
 * resolving relative paths against `cwd`. Throws ConfigError naming every bad variable, in
 * the order the steps below read them.
 */
export function loadConfig(env: ConfigSource, cwd: string = process.cwd()): Readonly<Config> {
  const r = new SettingsReader(env);
  const stores = readStores(r, cwd);
  const listeners = readListeners(r);
  const urls = readPublicUrls(r, stores.storage);
  const tls = readTls(r, cwd);
  const clients = readClients(r);
  const lifetimes = readTokenLifetimes(r);
  const connections = readConnections(r);
  const serving = readServing(r);
  const upstream = upstreamConfig((n) => r.get(n), (n, fallback, schemes) => r.url(n, fallback, schemes), (n, fallback, min, max) => r.int(n, fallback, min, max), (n, fallback) => r.onOff(n, fallback));
  const musicBrainzDatabase = musicBrainzDatabaseConfig((n) => r.get(n), (n, why) => r.bad(n, why), (n, fallback, min, max) => r.int(n, fallback, min, max));
  const logLevel = readLogLevel(r);
  const demo = readDemo(r);
  const approval = readApproval(r);
  const listingFields = readListingFields(r);
  const thumbnailSizes = readThumbnailSizes(r);
  const thumbnailFormats = readThumbnailFormats(r);
  const imageResponse = readImageResponse(r);
  const fastLane = r.onOff('SLEEVE_FAST_LANE', true);
  const clientMetadata = readClientMetadata(r);
  r.checkUnknown();
  r.throwIfAny();
  return Object.freeze({
    dataDir: stores.dataDir,
    database: stores.database as DatabaseConfig,
    storage: stores.storage as StorageConfig,
    redisUrl: stores.redisUrl,
    ...listeners,
    baseUrl: urls.baseUrl,
    listingUrlsGiven: urls.listingUrlsGiven,
    authUrl: urls.authUrl,
    imageBaseUrl: urls.imageBaseUrl,
    musicBrainzUrl: urls.musicBrainzUrl,
    eventBaseUrl: urls.eventBaseUrl,
    ...tls,
    ...clients,
    connections: Object.freeze(connections),
    ...lifetimes,
    clientMetadata: Object.freeze(clientMetadata),
    logLevel,
    uploadMaxBytes: serving.uploadMaxBytes,
    uploadMaxPixels: serving.uploadMaxPixels,
    demo,
    approval,
    listingFields,
    thumbnailSizes,
    thumbnailFormats,
    changePollMs: serving.changePollMs,
    changePollRedisMs: serving.changePollRedisMs,
    shutdownDelayMs: serving.shutdownDelayMs,
    responseCacheBytes: serving.responseCacheBytes,
    responseCacheEntries: serving.responseCacheEntries,
    passwordHashing: serving.passwordHashing,
    uploadSweepMs: serving.uploadSweepMs,
    changeWaitMs: serving.changeWaitMs,
    fileCacheBytes: serving.fileCacheBytes,
    upstream: upstream === undefined ? undefined : Object.freeze(upstream),
    musicBrainzDatabase: musicBrainzDatabase === undefined ? undefined : Object.freeze(musicBrainzDatabase),
    imageResponse,
    fastLane,
  });
}

/** Reads variables out of one source, collecting a problem for each bad one rather than stopping at the first. */
class SettingsReader {
  private readonly problems: string[] = [];

  constructor(private readonly env: ConfigSource) {}

  /** The value, or undefined when unset or empty. */
  get(name: VariableName): string | undefined {
    const v = this.env[name];
    return v === undefined || v === '' ? undefined : v;
  }

  /** Records that `name` is bad; the value is quoted without its credentials (a message may end up in a log or a ticket). */
  bad(name: VariableName, why: string): void {
    this.problems.push(`${name}=${JSON.stringify(redactSecrets(this.env[name] ?? ''))}: ${why}`);
  }

  /** Records a problem in words of its own (one not about a single value). */
  problem(text: string): void {
    this.problems.push(text);
  }

  /** A whole number from min to max, or the fallback (when unset, or bad: then recorded). */
  int(name: VariableName, fallback: number, min: number, max: number): number {
    const raw = this.get(name);
    if (raw === undefined) return fallback;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      this.bad(name, `must be a whole number from ${min} to ${max}`);
      return fallback;
    }
    return Number(raw);
  }

  /** on/true/1/yes or off/false/0/no, or the fallback (when unset, or bad: then recorded). */
  onOff(name: VariableName, fallback: boolean): boolean {
    const raw = this.get(name)?.toLowerCase();
    if (raw === undefined) return fallback;
    if (['on', 'true', '1', 'yes'].includes(raw)) return true;
    if (['off', 'false', '0', 'no'].includes(raw)) return false;
    this.bad(name, 'must be on or off');
    return fallback;
  }

  /** An absolute URL of one of the schemes, without query or fragment (and without a trailing slash). */
  url(name: VariableName, fallback: string, schemes: string[]): string {
    const parsed = parseBaseUrl(this.get(name) ?? fallback, schemes);
    if (parsed === undefined) {
      this.bad(name, `must be an absolute ${schemes.join(' or ')} URL without query or fragment`);
      return fallback;
    }
    return parsed;
  }

  listen(name: VariableName, fallback: string): ListenAddress {
    const parsed = parseListen(this.get(name) ?? fallback);
    if (typeof parsed === 'string') {
      this.bad(name, parsed);
      return { host: '127.0.0.1', port: 0 };
    }
    return parsed;
  }

  /** A SLEEVE_* variable sleeve does not know is a typo to report, not to ignore. */
  checkUnknown(): void {
    for (const key of Object.keys(this.env)) {
      if (key.startsWith('SLEEVE_') && !(key in VARIABLES) && !key.startsWith('SLEEVE_TEST_') && !key.startsWith('SLEEVE_BENCH_')) {
        this.problems.push(`${key}: unknown variable (known: ${Object.keys(VARIABLES).join(', ')})`);
      }
    }
  }

  throwIfAny(): void {
    // A safety net under the redaction of each value: no message carries URL credentials.
    if (this.problems.length > 0) throw new ConfigError(this.problems.map(redactSecrets));
  }
}

/** Where data lives: the data folder, the database, the image store and Redis. Bad values come back as their problem's text. */
function readStores(r: SettingsReader, cwd: string) {
  const dataDir = path.resolve(cwd, r.get('SLEEVE_DATA_DIR') ?? './data');
  const database = parseDatabase(r.get('SLEEVE_DATABASE_URL') ?? `sqlite:${path.join(dataDir, 'sleeve.db')}`, cwd);
  if (typeof database === 'string') r.bad('SLEEVE_DATABASE_URL', database);
  const storage = parseStorage(r.get('SLEEVE_STORAGE_URL') ?? `file:${path.join(dataDir, 'files')}`, cwd);
  if (typeof storage === 'string') r.bad('SLEEVE_STORAGE_URL', storage);
  const reads = (r.get('SLEEVE_STORAGE_READS') ?? 'auto').toLowerCase();
  if (reads !== 'auto' && reads !== 'inline' && reads !== 'pool') r.bad('SLEEVE_STORAGE_READS', 'must be auto, inline or pool');
  else if (typeof storage !== 'string' && storage.kind === 'file') storage.reads = reads;
  const redisUrl = r.get('SLEEVE_REDIS_URL');
  if (redisUrl !== undefined) {
    const why = checkRedisUrl(redisUrl);
    if (why !== undefined) r.bad('SLEEVE_REDIS_URL', why);
  }
  return { dataDir, database, storage, redisUrl };
}

/** The three listen addresses; the metrics listener may be off, and may not share another's address. */
function readListeners(r: SettingsReader): Pick<Config, 'coverArtListen' | 'authListen' | 'metricsListen'> {
  const coverArtListen = r.listen('SLEEVE_COVERART_LISTEN', '127.0.0.1:8080');
  const authListen = r.listen('SLEEVE_AUTH_LISTEN', '127.0.0.1:8443');
  // Loopback by default: metrics name routes and volumes, which are not for the public.
  const metricsListen = r.get('SLEEVE_METRICS_LISTEN')?.toLowerCase() === 'off' ? undefined : r.listen('SLEEVE_METRICS_LISTEN', '127.0.0.1:9464');
  if (metricsListen !== undefined && metricsListen.port !== 0) {
    for (const [name, other] of [['SLEEVE_COVERART_LISTEN', coverArtListen], ['SLEEVE_AUTH_LISTEN', authListen]] as const) {
      if (other.host === metricsListen.host && other.port === metricsListen.port) r.bad('SLEEVE_METRICS_LISTEN', `is the same address as ${name}`);
    }
  }
  return { coverArtListen, authListen, metricsListen };
}

/** The public URLs: of each service, of the images (redirect targets) and of MusicBrainz (listings' release links). */
function readPublicUrls(
  r: SettingsReader,
  storage: StorageConfig | string,
): Pick<Config, 'baseUrl' | 'listingUrlsGiven' | 'authUrl' | 'imageBaseUrl' | 'musicBrainzUrl' | 'eventBaseUrl'> {
  const baseUrl = r.url('SLEEVE_BASE_URL', 'http://localhost:8080', ['http', 'https']);
  const authUrl = r.url('SLEEVE_AUTH_URL', 'https://localhost:8443', ['https']);
  // With a bucket, redirects go straight to it unless an image base (a CDN, or /download for a private bucket) is given.
  const imageBaseUrl = r.url('SLEEVE_IMAGE_BASE_URL', typeof storage !== 'string' && storage.kind === 's3' ? storage.publicUrl : `${baseUrl}/download`, ['http', 'https']);
  const musicBrainzUrl = r.url('SLEEVE_MUSICBRAINZ_URL', 'https://musicbrainz.org', ['http', 'https']);
  const listingUrlsGiven = r.get('SLEEVE_BASE_URL') !== undefined || r.get('SLEEVE_MUSICBRAINZ_URL') !== undefined;
  const eventBaseUrl = r.url('SLEEVE_EVENT_BASE_URL', 'https://eventartarchive.org', ['http', 'https']);
  return { baseUrl, listingUrlsGiven, authUrl, imageBaseUrl, musicBrainzUrl, eventBaseUrl };
}

/** The auth listener's certificate and key: both or neither (then generated). */
function readTls(r: SettingsReader, cwd: string): Pick<Config, 'tlsCert' | 'tlsKey'> {
  const tlsCert = r.get('SLEEVE_TLS_CERT');
  const tlsKey = r.get('SLEEVE_TLS_KEY');
  if ((tlsCert === undefined) !== (tlsKey === undefined)) {
    r.problem(`${tlsCert === undefined ? 'SLEEVE_TLS_CERT' : 'SLEEVE_TLS_KEY'}: missing; SLEEVE_TLS_CERT and SLEEVE_TLS_KEY go together`);
  }
  return {
    tlsCert: tlsCert === undefined ? undefined : path.resolve(cwd, tlsCert),
    tlsKey: tlsKey === undefined ? undefined : path.resolve(cwd, tlsKey),
  };
}

/** Who the clients are (proxies whose forwarding headers are believed) and how often each may ask. */
function readClients(r: SettingsReader): Pick<Config, 'trustProxy' | 'rateLimit'> {
  const trustProxy = (r.get('SLEEVE_TRUST_PROXY') ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  for (const entry of trustProxy) {
    if (!isAddressOrCidr(entry)) r.bad('SLEEVE_TRUST_PROXY', `${JSON.stringify(entry)} is not an IP address or CIDR`);
  }
  let rateLimit: RateLimitConfig | undefined;
  const rl = r.get('SLEEVE_RATE_LIMIT');
  if (rl !== undefined) {
    const parsed = parseRateLimit(rl);
    if (parsed === undefined) r.bad('SLEEVE_RATE_LIMIT', 'must look like 300/10s (requests/window, window in ms, s, m or h)');
    else rateLimit = parsed;
  }
  return { trustProxy, rateLimit };
}

/** The authorization service's token and code lifetimes, in seconds. */
function readTokenLifetimes(r: SettingsReader): Pick<Config, 'accessTokenTtl' | 'authCodeTtl' | 'refreshGraceSeconds' | 'pkce'> {
  const pkce = (r.get('SLEEVE_PKCE') ?? 'optional').toLowerCase();
  if (pkce !== 'optional' && pkce !== 's256-for-public') r.bad('SLEEVE_PKCE', 'must be optional or s256-for-public');
  return {
    accessTokenTtl: r.int('SLEEVE_ACCESS_TOKEN_TTL', 3600, 1, 31_536_000),
    authCodeTtl: r.int('SLEEVE_AUTH_CODE_TTL', 600, 1, 600),
    refreshGraceSeconds: r.int('SLEEVE_REFRESH_GRACE_SECONDS', 30, 0, 300),
    pkce: pkce === 's256-for-public' ? 's256-for-public' : 'optional',
  };
}

/** SLEEVE_CLIENT_METADATA and its bounds: on, off, or the hosts allowed (names as in a URL, without port). */
function readClientMetadata(r: SettingsReader): ClientMetadataConfig {
  const raw = (r.get('SLEEVE_CLIENT_METADATA') ?? 'on').trim().toLowerCase();
  let hosts: string[] | undefined;
  if (raw !== 'on' && raw !== 'off') {
    hosts = raw.split(',').map((h) => h.trim()).filter((h) => h !== '');
    const bad = hosts.find((h) => !/^(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*)$/.test(h));
    if (bad !== undefined || hosts.length === 0) r.bad('SLEEVE_CLIENT_METADATA', `must be on, off or a comma-separated list of host names${bad === undefined ? '' : ` (${JSON.stringify(bad)} is not one)`}`);
  }
  const cacheMinSeconds = r.int('SLEEVE_CLIENT_METADATA_CACHE_MIN_SECONDS', 60, 0, 86_400);
  const cacheMaxSeconds = r.int('SLEEVE_CLIENT_METADATA_CACHE_MAX_SECONDS', 86_400, 0, 604_800);
  if (cacheMaxSeconds < cacheMinSeconds) r.bad('SLEEVE_CLIENT_METADATA_CACHE_MAX_SECONDS', `must not be less than SLEEVE_CLIENT_METADATA_CACHE_MIN_SECONDS (${cacheMinSeconds})`);
  return {
    enabled: raw !== 'off',
    hosts,
    allowPrivate: r.onOff('SLEEVE_CLIENT_METADATA_ALLOW_PRIVATE', false),
    timeoutMs: r.int('SLEEVE_CLIENT_METADATA_TIMEOUT_MS', 5000, 10, 60_000),
    cacheMinSeconds,
    cacheMaxSeconds,
  };
}

/** Every listener's timeouts and connection cap. */
function readConnections(r: SettingsReader): ConnectionLimits {
  const connections: ConnectionLimits = {
    headersTimeoutMs: r.int('SLEEVE_HEADERS_TIMEOUT_MS', 30_000, 10, 3_600_000),
    requestTimeoutMs: r.int('SLEEVE_REQUEST_TIMEOUT_MS', 60_000, 10, 3_600_000),
    keepAliveTimeoutMs: r.int('SLEEVE_KEEPALIVE_TIMEOUT_MS', 65_000, 10, 3_600_000),
    maxConnections: r.int('SLEEVE_MAX_CONNECTIONS', 1024, 1, 1_000_000),
  };
  // Node refuses a server whose headers may take longer than the whole request.
  if (connections.headersTimeoutMs > connections.requestTimeoutMs) {
    r.bad('SLEEVE_HEADERS_TIMEOUT_MS', `must not be more than SLEEVE_REQUEST_TIMEOUT_MS (${connections.requestTimeoutMs})`);
  }
  return connections;
}

/** What a serving process (and a catalogue command) may spend and how often it works: uploads, polling, hashing, sweeps, caches. */
function readServing(r: SettingsReader) {
  return {
    uploadMaxBytes: r.int('SLEEVE_UPLOAD_MAX_BYTES', 50 * 1024 * 1024, 1, 2 ** 31 - 1),
    uploadMaxPixels: r.int('SLEEVE_UPLOAD_MAX_PIXELS', 100_000_000, 1, 1_000_000_000),
    changePollMs: r.int('SLEEVE_CHANGE_POLL_MS', 250, 10, 60_000),
    changePollRedisMs: r.int('SLEEVE_CHANGE_POLL_REDIS_MS', 1000, 10, 600_000),
    shutdownDelayMs: r.int('SLEEVE_SHUTDOWN_DELAY_MS', 0, 0, 300_000),
    passwordHashing: { threads: r.int('SLEEVE_PASSWORD_HASH_THREADS', defaultHashThreads(), 1, 64), queue: r.int('SLEEVE_PASSWORD_HASH_QUEUE', DEFAULT_HASH_QUEUE, 0, 100_000), cost: r.int('SLEEVE_PASSWORD_HASH_COST', DEFAULT_HASH_COST, ...HASH_COST_RANGE) },
    // At most 30 s: with the 30 s a lease of another machine stays live, a killed upload's leftovers go within a minute.
    uploadSweepMs: r.int('SLEEVE_UPLOAD_SWEEP_MS', 10_000, 10, 30_000),
    responseCacheBytes: r.int('SLEEVE_RESPONSE_CACHE_BYTES', 64 * 1024 * 1024, 0, 2 ** 40),
    responseCacheEntries: r.get('SLEEVE_RESPONSE_CACHE') === undefined ? undefined : r.int('SLEEVE_RESPONSE_CACHE', 0, 0, 10_000_000),
    changeWaitMs: r.int('SLEEVE_CHANGE_WAIT_MS', 2000, 0, 60_000),
    fileCacheBytes: r.int('SLEEVE_FILE_CACHE_BYTES', 128 * 1024 * 1024, 0, 2 ** 40),
  };
}

function readLogLevel(r: SettingsReader): Config['logLevel'] {
  const logLevel = (r.get('SLEEVE_LOG_LEVEL') ?? 'info') as Config['logLevel'];
  if (!LOG_LEVELS.includes(logLevel)) r.bad('SLEEVE_LOG_LEVEL', `must be one of ${LOG_LEVELS.join(', ')}`);
  return logLevel;
}

function readApproval(r: SettingsReader): Config['approval'] {
  const raw = (r.get('SLEEVE_APPROVAL') ?? 'auto').toLowerCase();
  if (raw !== 'auto' && raw !== 'review') r.bad('SLEEVE_APPROVAL', 'must be auto or review');
  return raw === 'review' ? 'review' : 'auto';
}

function readListingFields(r: SettingsReader): Config['listingFields'] {
  const raw = (r.get('SLEEVE_LISTING_FIELDS') ?? 'full').toLowerCase();
  if (raw === 'full' || raw === 'caa') return raw;
  r.bad('SLEEVE_LISTING_FIELDS', 'must be full or caa');
  return 'full';
}

/** The interface's three sizes, always answered (docs/interface.md). */
const INTERFACE_SIZES = [250, 500, 1200];

function readThumbnailSizes(r: SettingsReader): readonly number[] {
  const raw = r.get('SLEEVE_THUMBNAIL_SIZES');
  if (raw === undefined) return Object.freeze([...INTERFACE_SIZES]);
  const sizes = new Set(INTERFACE_SIZES);
  for (const part of raw.split(',')) {
    const text = part.trim();
    if (text === '') continue;
    if (!/^[1-9][0-9]{0,4}$/.test(text) || Number(text) < 16 || Number(text) > 10_000) {
      r.bad('SLEEVE_THUMBNAIL_SIZES', 'must be sizes in pixels from 16 to 10000, separated by commas (e.g. 250,500,600,1200)');
      break;
    }
    sizes.add(Number(text));
  }
  if (sizes.size > 32) r.bad('SLEEVE_THUMBNAIL_SIZES', 'may name at most 32 sizes');
  return Object.freeze([...sizes].sort((a, b) => a - b));
}

function readThumbnailFormats(r: SettingsReader): Config['thumbnailFormats'] {
  const raw = r.get('SLEEVE_THUMBNAIL_FORMATS') ?? 'jpeg';
  const formats = new Set<'jpeg' | 'webp' | 'avif'>(['jpeg']);
  for (const part of raw.split(',')) {
    const name = part.trim().toLowerCase();
    if (name === '') continue;
    if (name !== 'jpeg' && name !== 'webp' && name !== 'avif') {
      r.bad('SLEEVE_THUMBNAIL_FORMATS', 'must be formats among jpeg, webp and avif, separated by commas (JPEG is always made)');
      break;
    }
    formats.add(name);
  }
  return Object.freeze(['jpeg', 'webp', 'avif'].filter((f) => formats.has(f as 'jpeg')) as ('jpeg' | 'webp' | 'avif')[]);
}

function readImageResponse(r: SettingsReader): Config['imageResponse'] {
  const raw = (r.get('SLEEVE_IMAGE_RESPONSE') ?? 'redirect').toLowerCase();
  if (raw === 'redirect' || raw === 'bytes') return raw;
  r.bad('SLEEVE_IMAGE_RESPONSE', 'must be redirect or bytes');
  return 'redirect';
}

function readDemo(r: SettingsReader): boolean {
  return r.onOff('SLEEVE_DEMO', true);
}

/** Query parameters whose values are secrets (a password, key, token or signature). */
const SECRET_PARAM_RE = /([?&;][^=&#\s"]*(?:pass|pwd|secret|token|key|sig|cred|auth)[^=&#\s"]*=)[^&#\s"]*/gi;
/** `scheme://userinfo@`: everything up to the last `@` of the authority. */
const USERINFO_RE = /([a-z][a-z0-9+.-]*:\/\/)[^\s"/?#[\]]*@/gi;
/** `user:password@host` without a scheme (a URL missing its `postgres://`, say). */
const BARE_USERINFO_RE = /^[^\s"/?#:@]*:[^\s"/?#]*@/;

/**
 * Hides the credentials a URL may carry (user and password, and query parameters such as
 * `password=`, `secret=` or `X-Amz-Signature=`), so a configuration error can quote the value.
 */
export function redactSecrets(text: string): string {
  return text.replace(USERINFO_RE, '$1***@').replace(BARE_USERINFO_RE, '***@').replace(SECRET_PARAM_RE, '$1***');
}

function parseDatabase(raw: string, cwd: string): DatabaseConfig | string {
  if (raw.startsWith('sqlite:')) {
    const file = raw.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') return 'sqlite: needs a file path, e.g. sqlite:./data/sleeve.db';
    return { kind: 'sqlite', file: file === ':memory:' ? file : path.resolve(cwd, file) };
  }
  if (/^postgres(ql)?:\/\//.test(raw)) {
    try {
      new URL(raw);
    } catch {
      return 'not a valid postgres:// URL';
    }
    return { kind: 'postgres', url: raw };
  }
  return 'must start with sqlite: or postgres://';
}

function parseStorage(raw: string, cwd: string): StorageConfig | string {
  if (raw.startsWith('file:')) {
    let p = raw.slice('file:'.length);
    if (p.startsWith('//')) p = p.slice(2);
    if (p === '') return 'file: needs a directory, e.g. file:./data/files';
    return { kind: 'file', root: path.resolve(cwd, decodeURIComponent(p)), reads: 'auto' };
  }
  if (raw.startsWith('s3://')) return parseS3Storage(raw);
  return 'must start with file: or s3://';
}

const S3_PARAMS = ['endpoint', 'region', 'forcePathStyle', 'publicUrl'];
const PREFIX_SEGMENT_RE = /^[A-Za-z0-9_][A-Za-z0-9._-]*$/;

/** Parses `s3://BUCKET[/PREFIX][?params]`; a string names everything wrong with it. */
function parseS3Storage(raw: string): S3StorageConfig | string {
  const errors: string[] = [];
  const rest = raw.slice('s3://'.length);
  const q = rest.indexOf('?');
  const location = q === -1 ? rest : rest.slice(0, q);
  const params = new URLSearchParams(q === -1 ? '' : rest.slice(q + 1));
  if (raw.includes('#')) errors.push('a fragment (#) has no meaning here');
  const [bucket = '', ...segments] = location.replace(/#.*$/, '').replace(/\/+$/, '').split('/');
  const bucketProblem = checkBucketName(bucket);
  if (bucketProblem !== undefined) errors.push(bucketProblem);
  if (segments.some((s) => !PREFIX_SEGMENT_RE.test(s)) || segments.join('/').length > 512) {
    errors.push(`key prefix ${JSON.stringify(redactSecrets(segments.join('/')))} must be /-separated names of letters, digits, '.', '_' and '-' (not starting with '.' or '-')`);
  }

  const seen = new Set<string>();
  for (const name of params.keys()) {
    if (!S3_PARAMS.includes(name)) errors.push(`unknown parameter ${JSON.stringify(redactSecrets(name))} (known: ${S3_PARAMS.join(', ')})`);
    else if (seen.has(name)) errors.push(`parameter ${name} is given more than once`);
    seen.add(name);
  }
  let endpoint: string | undefined;
  const endpointRaw = params.get('endpoint');
  if (endpointRaw !== null) {
    endpoint = parseOrigin(endpointRaw);
    if (endpoint === undefined) errors.push(`endpoint ${JSON.stringify(redactSecrets(endpointRaw))} must be an http:// or https:// URL with a host and no path, query or credentials`);
  }
  const region = params.get('region') ?? 'us-east-1';
  if (!/^[a-z0-9]+(-[a-z0-9]+)*$/.test(region) || region.length > 64) errors.push(`region ${JSON.stringify(region)} must look like us-east-1`);
  const pathStyleRaw = params.get('forcePathStyle') ?? 'false';
  const forcePathStyle = pathStyleRaw === 'true';
  if (!forcePathStyle && pathStyleRaw !== 'false') errors.push('forcePathStyle must be true or false');
  let publicBase: string | undefined;
  const publicRaw = params.get('publicUrl');
  if (publicRaw !== null) {
    publicBase = parseBaseUrl(publicRaw, ['http', 'https']);
    if (publicBase === undefined) errors.push(`publicUrl ${JSON.stringify(redactSecrets(publicRaw))} must be an absolute http or https URL without query or fragment`);
  }
  if (errors.length > 0) return errors.join('; ');

  const prefix = segments.join('/');
  return {
    kind: 's3',
    bucket,
    prefix,
    endpoint,
    region,
    forcePathStyle,
    publicUrl: `${publicBase ?? bucketUrl(bucket, endpoint, region, forcePathStyle)}${prefix === '' ? '' : `/${prefix}`}`,
  };
}

/** S3's bucket naming rules (the general purpose bucket rules, which S3-compatible stores share). */
function checkBucketName(bucket: string): string | undefined {
  // `s3://KEY:SECRET@bucket`: credentials never go in the URL, and are not echoed back.
  if (bucket.includes('@')) return 'the bucket name must not hold credentials (USER:PASSWORD@); they come from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE';
  const why =
    bucket === ''
      ? 'is missing (s3://BUCKET)'
      : bucket.length < 3 || bucket.length > 63
        ? 'must be 3 to 63 characters long'
        : !/^[a-z0-9][a-z0-9.-]*[a-z0-9]$/.test(bucket)
          ? "may hold only lower-case letters, digits, '.' and '-', and must start and end with a letter or digit"
          : bucket.includes('..') || bucket.includes('.-') || bucket.includes('-.')
            ? "must not have '..', '.-' or '-.'"
            : /^\d+\.\d+\.\d+\.\d+$/.test(bucket)
              ? 'must not look like an IP address'
              : undefined;
  return why === undefined ? undefined : `bucket name ${JSON.stringify(bucket)} ${why}`;
}

/** `scheme://host[:port]` of an http(s) URL that has nothing else, or undefined. */
function parseOrigin(raw: string): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.pathname !== '/' || u.search !== '' || u.hash !== '' || u.username !== '' || u.password !== '') return undefined;
  return u.origin;
}

/** Where a bucket's objects are read over plain HTTP(S), as the SDK addresses it. */
function bucketUrl(bucket: string, endpoint: string | undefined, region: string, forcePathStyle: boolean): string {
  // A dotted name does not match the wildcard certificate of a virtual host: the SDK uses the path then too.
  const pathStyle = forcePathStyle || (bucket.includes('.') && (endpoint === undefined || endpoint.startsWith('https:')));
  const origin = endpoint ?? `https://s3.${region}.amazonaws.com`;
  if (pathStyle) return `${origin}/${bucket}`;
  const u = new URL(origin);
  return `${u.protocol}//${bucket}.${u.host}`;
}

function checkRedisUrl(raw: string): string | undefined {
  const format = 'must be redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://… (TLS)';
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return format;
  }
  if (u.protocol !== 'redis:' && u.protocol !== 'rediss:') return format;
  if (u.hostname === '') return `${format}: the host is missing`;
  if (!/^\/?(\d{1,2})?$/.test(u.pathname)) return `${format}: the path may only be a database number`;
  if (u.search !== '' || u.hash !== '') return `${format}: no query or fragment`;
  return undefined;
}

function parseListen(raw: string): ListenAddress | string {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:\s]+)):(\d{1,5})$/.exec(raw);
  if (m === null) return 'must be host:port (IPv6 as [addr]:port)';
  const port = Number(m[3]);
  if (port > 65535) return 'port must be 0–65535';
  return { host: (m[1] ?? m[2]) as string, port };
}

function parseBaseUrl(raw: string, schemes: string[]): string | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined;
  }
  if (!schemes.includes(u.protocol.slice(0, -1)) || u.search !== '' || u.hash !== '' || u.username !== '') return undefined;
  return u.href.replace(/\/+$/, '');
}

function parseRateLimit(raw: string): RateLimitConfig | undefined {
  const m = /^(\d+)\s*\/\s*(\d*)\s*(ms|s|m|h)$/.exec(raw.trim());
  if (m === null) return undefined;
  const requests = Number(m[1]);
  const amount = m[2] === '' ? 1 : Number(m[2]);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[3] as 'ms' | 's' | 'm' | 'h'];
  if (requests < 1 || amount < 1) return undefined;
  return { requests, windowMs: amount * unit };
}

function isAddressOrCidr(entry: string): boolean {
  const [addr, bits, extra] = entry.split('/');
  if (extra !== undefined || addr === undefined) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (bits === undefined) return true;
  if (!/^\d+$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

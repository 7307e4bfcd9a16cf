import path from 'node:path';
import { publishChange, publishConfiguredChange } from './cluster/freshness.js';
import type { Server as HttpServer } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, FastifyServerOptions } from 'fastify';
import { sql } from 'kysely';
import { redactSecrets, type Config } from './config/load.js';
import { PasswordHasher } from './auth/crypto.js';
import { CacheFreshness, CatalogueNotifications, CatalogueWatch, RedisConnection, ServingRegistration, SharedClaims, SharedRateLimiter } from './cluster/index.js';
import { publishCatalogue } from './cluster/mark.js';
import { catalogueKeeps, catalogueKeepsNow, type ApiDeps, type ThumbnailOptions, FileCache, FileServer, finishPendingIndexes, loadDemo, publishUrls, ResponseCache, storeMisses } from './cover-art/index.js';
import { buildCoverArtApp } from './cover-art/api/app.js';
import { clientAddress, TrustedProxies } from './http/client-address.js';
import { Health, type HealthCheck } from './http/health.js';
import { RateLimiter } from './http/rate-limit.js';
import { RequestObserver } from './http/observe.js';
import { RequestIds } from './http/request-id.js';
import { listenMetrics, Metrics } from './metrics/index.js';
import { openRuntime, type Runtime } from './runtime.js';
import { WriteBatcher } from './db/write-batch.js';
import { importLockHeld, type ImportLockPlace } from './import/lock.js';
import { LiveCatalogue } from './import/live/index.js';
import { isStoreUnavailable } from './shared/errors.js';
import { keepTickShape } from './edge/tick-shape.js';
import { FsObjectStore } from './storage/index.js';
import type { Clock } from './shared/clock.js';
import type { ReplayLimits } from './auth/replay-store.js';
import { startUploadSweeper } from './cover-art/catalogue/uploads.js';

export interface Server {
  runtime: Runtime;
  /** Where each listener is reachable (actual ports, when 0 was asked for). */
  coverArtAddress: string | undefined;
  authAddress: string | undefined;
  /** http://host:port of the metrics listener (GET /metrics), when on. */
  metricsAddress: string | undefined;
  demoLoaded: string[];
  /**
   * Brings this process's caches (responses, files, visitor pages) up to the catalogue now, as a
   * command's change signal does: for changes made through the modules in this process (tests, embedders).
   */
  refreshCaches(): Promise<void>;
  close(): Promise<void>;
  /** The step `close` is waiting on (`done` once it finished), for the message of a stop that takes too long. */
  closing(): string;
}

export interface ServeOptions {
  only?: 'coverart' | 'auth';
  /** Log destination; defaults to stdout. */
  logStream?: NodeJS.WritableStream;
  /** The time source (tests fix it); the system clock by default. */
  clock?: Clock;
  /** The DPoP replay store's bounds (auth/replay-store.ts; tests make them small). */
  dpopReplayLimits?: ReplayLimits;
}

function addressOf(server: HttpServer, scheme: string): string {
  const addr = server.address();
  if (addr === null || typeof addr === 'string') return String(addr);
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${scheme}://${host}:${addr.port}`;
}

/** The parts of the cover art listener that follow other processes; stopped at close. */
interface ClusterParts {
  watch?: CatalogueWatch;
  uploadSweeper?: { stop(): void };
  registration?: ServingRegistration;
  redis: { close(): Promise<void> }[];
  /** The mirror's live database followed into the catalogue (SLEEVE_MUSICBRAINZ_DATABASE_URL). */
  live?: LiveCatalogue;
}

/** What the steps of `serve` share, and what `close` stops. */
interface Serving {
  config: Readonly<Config>;
  runtime: Runtime;
  passwords: PasswordHasher;
  logger: FastifyServerOptions['logger'];
  accessLog: boolean;
  requestIds: RequestIds;
  health: Health;
  /** The database probe, which both listeners' readiness requires. */
  database: HealthCheck;
  metrics: Metrics | undefined;
  metricsServer: HttpServer | undefined;
  apps: FastifyInstance[];
  cluster: ClusterParts;
  /** The caches the catalogue watch and the website's changes empty, each as it declares (cluster/cache-freshness.ts). */
  caches: CacheFreshness;
  /** Listings waiting to be rewritten with new measures (cover-art/listings/listing-rewrites.ts): finished at close. */
  rewrites?: { flush(): Promise<void> };
  /** The step `close` is on (`serving` before it starts). */
  closing: string;
}

/** What the catalogue needs done before the cover art listener listens (`prepareCatalogue`). */
interface Prepared {
  urlsChange: Awaited<ReturnType<typeof publishUrls>> | undefined;
  /** Why index.json files are left to rewrite (the store is away), if they are. */
  pendingIndexes: unknown;
  demoLoaded: string[];
}

/** Starts the listeners (cover art over HTTP, auth over HTTPS, metrics) on one runtime. */
export async function serve(config: Readonly<Config>, options: ServeOptions = {}): Promise<Server> {
  // Done first thing by the CLI; here too for servers started in-process (the earlier, the surer).
  keepTickShape();
  // The authorization listener's modules, loaded before anything starts, so that one failing to
  // load stops `serve` before a listener answers.
  const authModules = options.only === 'coverart' ? undefined : await loadAuthModules();
  const runtime = await openRuntime(config, { durability: 'normal', clock: options.clock });
  const s = openServing(config, runtime, options);
  try {
    await openMetrics(s);
    const prepared = await prepareCatalogue(s, options);
    const coverArtAddress = options.only === 'auth' ? undefined : await startCoverArt(s, prepared);
    const authAddress = authModules === undefined ? undefined : await startAuth(s, authModules, options.dpopReplayLimits);
    const metricsAddress = reportMetrics(s);
    const refreshCaches = async (): Promise<void> => {
      await s.cluster.watch?.refresh();
    };
    return { runtime, coverArtAddress, authAddress, metricsAddress, demoLoaded: prepared.demoLoaded, refreshCaches, close: () => close(s), closing: () => s.closing };
  } catch (err) {
    await Promise.all([...s.apps.map((a) => a.close().catch(() => {})), closeServer(s.metricsServer).catch(() => {})]);
    await stopCluster(s.cluster).catch(() => {});
    await s.passwords.close();
    await runtime.close().catch(() => {});
    throw err;
  }
}

/** What every step shares: request ids, health, metrics (not listening yet), the hashing threads. */
function openServing(config: Readonly<Config>, runtime: Runtime, options: ServeOptions): Serving {
  // Request ids (X-Request-Id) on every listener; metrics when their listener is on.
  const trustedForIds = new TrustedProxies(config.trustProxy);
  const importLock: ImportLockPlace =
    config.database.kind === 'postgres' ? { dialect: 'postgres', db: runtime.database.db } : { dialect: 'sqlite', file: config.database.file };
  return {
    config,
    runtime,
    // Passwords are hashed on threads of their own, never on libuv's pool (docs/decisions.md).
    passwords: new PasswordHasher(config.passwordHashing),
    logger: { level: config.logLevel, ...(options.logStream ? { stream: options.logStream } : {}) },
    accessLog: config.logLevel === 'debug' || config.logLevel === 'trace',
    requestIds: new RequestIds((address) => trustedForIds.trusts(address)),
    health: new Health(),
    database: {
      required: true,
      run: async () => {
        await sql`select 1`.execute(runtime.database.db);
      },
    },
    metrics: config.metricsListen === undefined ? undefined : new Metrics(runtime.database.db, { importLockHeld: () => importLockHeld(importLock), now: () => runtime.coverArt.clock.now() }),
    metricsServer: undefined,
    apps: [],
    closing: 'serving',
    cluster: { redis: [] },
    caches: new CacheFreshness(),
  };
}

/**
 * The metrics listener first, so the listeners know whether to count: when its address is
 * taken (another sleeve on this machine, on the default port), this process serves without
 * metrics rather than not at all, and says so once it can log (docs/decisions.md).
 */
async function openMetrics(s: Serving): Promise<void> {
  const { metrics, config } = s;
  if (metrics === undefined || config.metricsListen === undefined) return;
  try {
    s.metricsServer = await listenMetrics(metrics, config.metricsListen, config.connections, (err) => s.apps[0]?.log.error({ err }, 'metrics collection failed'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
    s.metrics = undefined;
  }
}

/** Publishes this server's public URLs, finishes the index.json files left pending, loads the demo. */
async function prepareCatalogue(s: Serving, options: ServeOptions): Promise<Prepared> {
  const { runtime, config } = s;
  // The public URLs every index.json names, whoever writes it: this server's. Listings written
  // with others are marked here and rewritten just below, before listening.
  const urlsChange = options.only === 'auth' ? undefined : await publishUrls(runtime.database.db, runtime.coverArt.urls, runtime.coverArt.clock.now());
  // With the store away, serving from the database still works: the sweep below finishes these later.
  let pendingIndexes: unknown;
  const finished = await finishPendingIndexes(runtime.coverArt).catch((err: unknown) => {
    if (!isStoreUnavailable(err)) throw err;
    pendingIndexes = err;
    return 0;
  });
  // Other serving processes let go of the index.json files they hold.
  if (finished > 0) await publishCatalogue(runtime.database.db);
  let demoLoaded: string[] = [];
  // The mirror's database is the catalogue: no demo beside it.
  if (config.demo && options.only !== 'auth' && config.musicBrainzDatabase === undefined) {
    const any = await runtime.database.db.selectFrom('release').select('id').limit(1).executeTakeFirst();
    if (any === undefined) demoLoaded = (await loadDemo(runtime.coverArt)).added;
  }
  return { urlsChange, pendingIndexes, demoLoaded };
}

/** What the API answers besides the interface's thumbnails (undefined: nothing: the interface's answers exactly). */
function thumbnailOptions(config: Readonly<Config>): ThumbnailOptions | undefined {
  const added = config.thumbnailSizes.filter((n) => n !== 250 && n !== 500 && n !== 1200);
  const formats = config.thumbnailFormats.filter((f): f is 'webp' | 'avif' => f !== 'jpeg');
  if (added.length === 0 && formats.length === 0) return undefined;
  // SLEEVE_IMAGE_RESPONSE=bytes answers with the file, which carries no Vary: the path names the format there.
  return { added: new Set(added), formats, negotiate: config.imageResponse !== 'bytes' };
}

/** The cover art listener, its caches and the parts that follow other processes; returns its address. */
async function startCoverArt(s: Serving, prepared: Prepared): Promise<string> {
  const { config, runtime, metrics } = s;
  const cache = new ResponseCache({ maxBytes: config.responseCacheBytes, maxEntries: config.responseCacheEntries });
  const fileCache = new FileCache(config.fileCacheBytes);
  const { commands, notifications } = openRedis(s);
  // Files the store lacks: listings written from the database, images fetched through (SLEEVE_UPSTREAM_URL).
  const misses = storeMisses(runtime.coverArt, {
    upstream: config.upstream,
    thumbnails: { sizes: config.thumbnailSizes, formats: config.thumbnailFormats },
    refreshed: (gid) => s.caches.listingRefreshed(gid),
  });
  s.rewrites = misses.rewrites;
  const { db, readsNow } = runtime.database;
  const files = new FileServer({
    store: runtime.store,
    cache: fileCache,
    keeps: catalogueKeeps(db),
    // SQLite: the question on this thread, through a read-only connection (a fill's one promise less).
    keepsNow: readsNow === undefined ? undefined : catalogueKeepsNow(db, readsNow),
    fill: misses.fill,
  });
  const app = buildCoverArtApp({
    routes: {
      api: { db: runtime.database.db, urls: runtime.coverArt.urls, imageBaseUrl: config.imageBaseUrl, approval: config.approval, ensureListing: (id) => misses.listings.ensure(id), thumbnails: thumbnailOptions(config), ensureEventListing: (id) => misses.listings.ensureEvent(id), eventHost: new URL(config.eventBaseUrl).host },
      cache,
      // From a bucket too: with SLEEVE_IMAGE_BASE_URL=$SLEEVE_BASE_URL/download a private bucket is served through sleeve.
      files,
      imageBytes: config.imageResponse === 'bytes',
    },
    logger: s.logger,
    rateLimiter:
      config.rateLimit === undefined ? undefined : commands !== undefined ? new SharedRateLimiter(config.rateLimit, commands) : new RateLimiter(config.rateLimit),
    trustedProxies: new TrustedProxies(config.trustProxy),
    clock: runtime.coverArt.clock,
    accessLog: s.accessLog,
    health: s.health.forListener(coverArtChecks(s, commands, notifications)),
    observer: new RequestObserver('coverart', s.requestIds, metrics?.http),
    connections: config.connections,
    fastLane: config.fastLane,
    catalogueGate: config.musicBrainzDatabase === undefined ? undefined : () => (s.cluster.live?.ready === true ? undefined : Math.max(1, Math.ceil((config.musicBrainzDatabase?.pollMs ?? 1000) / 1000))),
  });
  if (metrics !== undefined) {
    metrics.http.cacheEntries = () => cache.size;
    metrics.http.cacheBytes = () => cache.bytes;
    metrics.http.fileCache = fileCache;
    metrics.http.storeReads = files.storeReads;
    metrics.http.pullThrough = misses.upstream?.counts;
    metrics.http.thumbnailsMade = misses.derivatives?.counts;
  }
  s.apps.push(app);
  s.caches.register(cache);
  s.caches.register(fileCache);
  const registration = await startClusterParts(s, app.log);
  commands?.start(app.log);
  notifications?.start(app.log);
  if (prepared.urlsChange !== undefined && prepared.urlsChange.previous !== undefined) {
    app.log.warn(
      { previous: prepared.urlsChange.previous, now: runtime.coverArt.urls, listings: prepared.urlsChange.marked },
      'public URLs changed (SLEEVE_BASE_URL, SLEEVE_MUSICBRAINZ_URL): listings written with the previous ones were rewritten',
    );
  }
  if (prepared.pendingIndexes !== undefined) app.log.warn({ err: prepared.pendingIndexes }, 'index.json files left to rewrite; retrying while serving');
  if (runtime.store instanceof FsObjectStore && runtime.store.remoteFileSystem !== undefined) {
    app.log.info({ fileSystem: runtime.store.remoteFileSystem }, 'file storage is on a network file system: files are read through the thread pool (SLEEVE_STORAGE_READS=inline to change)');
  }
  await app.listen({ host: config.coverArtListen.host, port: config.coverArtListen.port });
  const address = addressOf(app.server, 'http');
  await registration.setAddress(address);
  // Not awaited: sleeve answers (503 for the catalogue) while the mirror's database is away or read for the first time.
  startLiveCatalogue(s, app.log);
  return address;
}

/** Follows the mirror's database into the catalogue (docs/mirror-database.md), when SLEEVE_MUSICBRAINZ_DATABASE_URL is set. */
function startLiveCatalogue(s: Serving, log: FastifyBaseLogger): void {
  const { config, runtime, cluster } = s;
  const mirror = config.musicBrainzDatabase;
  if (mirror === undefined) return;
  const live = new LiveCatalogue({
    db: runtime.database.db,
    database: config.database,
    url: mirror.url,
    name: redactSecrets(mirror.url),
    pollMs: mirror.pollMs,
    statementTimeoutMs: mirror.statementTimeoutMs,
    clock: runtime.coverArt.clock,
    log,
    changed: async () => {
      // The listings written before and changed now; with the store away, the watch's sweep finishes them later.
      await finishPendingIndexes(runtime.coverArt).catch((err: unknown) => {
        if (!isStoreUnavailable(err)) throw err;
        log.warn({ err }, 'index.json files left to rewrite; retrying while serving');
      });
      await publishChange({
        db: runtime.database.db,
        database: config.database,
        announcer: undefined,
        waitMs: 0,
        pollMs: config.changePollMs,
        pollRedisMs: config.changePollRedisMs,
        warn: (message) => log.warn(message),
      });
      await cluster.watch?.refresh();
    },
  });
  cluster.live = live;
  live.start();
}

/** With Redis: the rate limit counted there (one connection), change announcements (another); not started yet. */
function openRedis(s: Serving): { commands: RedisConnection | undefined; notifications: CatalogueNotifications | undefined } {
  const { config, cluster } = s;
  const commands =
    config.redisUrl !== undefined && config.rateLimit !== undefined
      ? new RedisConnection(config.redisUrl, 'commands', 'the rate limit is counted by each process alone until it returns', {
          // The rate-limit scripts of requests that arrive together go out in one write.
          enableAutoPipelining: true,
        })
      : undefined;
  const notifications =
    config.redisUrl === undefined
      ? undefined
      : new CatalogueNotifications(config.redisUrl, {
          changed: (version) => cluster.watch?.changed(version),
          subscribed: (active) => cluster.watch?.setAnnounced(active),
        });
  for (const r of [commands, notifications]) if (r !== undefined) cluster.redis.push(r);
  return { commands, notifications };
}

/**
 * The cover art listener's readiness. A bucket is shared by every process: taking them all out
 * of the load balancer while it is away would stop listings and redirects too, which answer from
 * the database. A local folder is this machine's alone, so a process whose folder fails is not ready.
 */
function coverArtChecks(s: Serving, commands: RedisConnection | undefined, notifications: CatalogueNotifications | undefined): Record<string, HealthCheck> {
  const storage: HealthCheck = { required: s.config.storage.kind === 'file', run: () => s.runtime.store.ready() };
  const checks: Record<string, HealthCheck> = { database: s.database, storage };
  if (s.config.musicBrainzDatabase !== undefined) {
    // Not ready until the catalogue has been read once; after that, the mirror away only degrades (answers are its last state).
    checks.catalogue = {
      required: true,
      run: async () => {
        if (s.cluster.live?.ready !== true) throw new Error("the mirror's database has not been read yet");
      },
    };
    checks.musicbrainz_database = {
      required: false,
      run: async () => {
        const live = s.cluster.live;
        if (live === undefined) throw new Error('not started');
        await live.source.ping();
      },
    };
  }
  if (notifications !== undefined) {
    checks.redis = {
      required: false,
      run: async () => {
        if (!notifications.subscribed || (commands !== undefined && !commands.usable)) throw new Error('Redis is unavailable');
      },
    };
  }
  return checks;
}

/** The catalogue watch (for the caches), the upload sweeper and this process's registration; returns the registration. */
async function startClusterParts(s: Serving, log: FastifyBaseLogger): Promise<ServingRegistration> {
  const { config, runtime, cluster } = s;
  const watch = new CatalogueWatch({
    db: runtime.coverArt.db,
    finishDirtyIndexes: (ageMs) => finishPendingIndexes(runtime.coverArt, runtime.coverArt.clock.now() - ageMs),
    caches: s.caches,
    pollMs: config.changePollMs,
    announcedPollMs: config.changePollRedisMs,
    log,
  });
  cluster.watch = watch;
  watch.start();
  // Leftovers of uploads killed in any process on this storage (cover-art/catalogue/uploads.ts).
  cluster.uploadSweeper = startUploadSweeper(runtime.coverArt, config.uploadSweepMs, log);
  // Before listening: a command that changes the catalogue from now on waits for this process.
  const registration = new ServingRegistration({
    db: runtime.database.db,
    database: config.database,
    watch,
    address: `http://${config.coverArtListen.host}:${config.coverArtListen.port}`,
    log,
  });
  cluster.registration = registration;
  await registration.start();
  return registration;
}

/**
 * The authorization listener's modules. Loaded by serve, not at the top: a process with the cover
 * art listener only (`--only coverart`) never holds the authorization server's or the website's
 * code (docs/decisions.md, "Server memory: one copy of each module").
 */
function loadAuthModules() {
  return Promise.all([import('./auth/app.js'), import('./auth/replay-store.js'), import('./website/index.js'), import('./website/visitor-pages.js')]);
}

/** The authorization listener (HTTPS); returns its address. */
async function startAuth(s: Serving, modules: Awaited<ReturnType<typeof loadAuthModules>>, dpopReplayLimits?: ReplayLimits): Promise<string> {
  const { config, runtime } = s;
  const [{ buildAuthApp, loadTlsMaterial }, { ReplayStore }, { websiteRoutes }, { VisitorPages }] = modules;
  const tls = await loadTlsMaterial({
    certFile: config.tlsCert,
    keyFile: config.tlsKey,
    dataDir: config.dataDir,
    hostnames: [new URL(config.authUrl).hostname, config.authListen.host],
  });
  const trusted = new TrustedProxies(config.trustProxy);
  // The id_token signing keys exist before the first request (made on a fresh database).
  await runtime.auth.signingKeys.ensure();
  // DPoP proofs' jti, shared with every process through Redis when configured (auth/replay-store.ts).
  const dpopRedis = config.redisUrl === undefined ? undefined : new RedisConnection(config.redisUrl, 'dpop', 'DPoP proofs are checked for replay by each process alone until it returns');
  if (dpopRedis !== undefined) s.cluster.redis.push(dpopRedis);
  // The gallery pages kept for anonymous visitors, emptied with the cover art caches (none kept without a cover art listener, whose watch follows the catalogue).
  const visitors = new VisitorPages(runtime.coverArt.clock);
  s.caches.register(visitors);
  if (s.cluster.watch !== undefined) visitors.follow();
  const app = buildAuthApp({
    tls,
    logger: s.logger,
    deps: { ...runtime.auth, writes: new WriteBatcher(runtime.database.db), passwords: s.passwords, dpopReplay: new ReplayStore(dpopRedis === undefined ? undefined : new SharedClaims(dpopRedis, 'sleeve:dpop:'), dpopReplayLimits) },
    trustsProxy: (address) => trusted.trusts(address),
    clientAddress: (peer, forwardedFor) => clientAddress(peer, forwardedFor, trusted),
    health: s.health.forListener({ database: s.database }),
    observer: new RequestObserver('auth', s.requestIds, s.metrics?.http),
    accessLog: s.accessLog,
    connections: config.connections,
    frontDoor: (req, res, requestId) => visitors.answer(req, res, requestId),
    fastLane: config.fastLane,
    extend: (app, pages) =>
      void app.register(websiteRoutes, {
        pages,
        coverArt: runtime.coverArt,
        api: websiteApi(s),
        uploadDir: path.join(config.dataDir, 'uploads'),
        visitors,
        afterChange: () => {
          // This process's own pages at once; every process's (this one's too) through the catalogue mark.
          s.caches.raise('website-changed');
          return publishWebsiteChange(s);
        },
      }),
  });
  s.apps.push(app);
  dpopRedis?.start(app.log);
  await app.listen({ host: config.authListen.host, port: config.authListen.port });
  return addressOf(app.server, 'https');
}

/** After a change made on the website: read-your-writes as for a CLI command (cluster/freshness.ts); a failure only warns. */
async function publishWebsiteChange(s: Serving): Promise<void> {
  const warn = (message: string) => s.apps[0]?.log.warn(message);
  try {
    await publishConfiguredChange(s.config, s.runtime.database.db, warn);
  } catch (err) {
    warn(`a change from the website is saved, but serving processes could not be told of it (${(err as Error).message}); they see it at their next look at the database`);
  }
}

/** What the website reads listings with: the cover art API's view of the catalogue. */
function websiteApi(s: Serving): ApiDeps {
  return { db: s.runtime.database.db, urls: s.runtime.coverArt.urls, imageBaseUrl: s.config.imageBaseUrl, approval: s.config.approval };
}

/** Logs where the metrics are, or why they are off; returns their address. */
function reportMetrics(s: Serving): string | undefined {
  const log = s.apps[0]?.log;
  if (s.metricsServer !== undefined) {
    const address = addressOf(s.metricsServer, 'http');
    log?.info(`Metrics listening at ${address}/metrics`);
    return address;
  }
  if (s.config.metricsListen !== undefined) {
    // Its address was taken (any other failure to listen stopped the start).
    const { host, port } = s.config.metricsListen;
    log?.warn(
      `metrics are off in this process: ${host.includes(':') ? `[${host}]` : host}:${port} is in use (another sleeve serve on this machine?); set SLEEVE_METRICS_LISTEN to a free host:port, or to off`,
    );
  }
  return undefined;
}

/**
 * Readiness fails from now on; a load balancer that probes it stops sending requests during
 * the delay, then the listeners close and the requests in flight finish.
 */
async function close(s: Serving): Promise<void> {
  s.health.stop();
  s.closing = 'the shutdown delay';
  if (s.config.shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, s.config.shutdownDelayMs));
  // A keep-alive connection whose response was still being written when closing began
  // turns idle only afterwards, and would then hold the server open until its keep-alive
  // timeout: keep closing idle connections until every listener has closed.
  const servers = [...s.apps.map((a) => a.server), ...(s.metricsServer === undefined ? [] : [s.metricsServer])];
  const sweep = setInterval(() => {
    for (const server of servers) server.closeIdleConnections();
  }, 100);
  s.closing = 'requests in flight';
  try {
    await Promise.all([...s.apps.map((a) => a.close()), closeServer(s.metricsServer)]);
  } finally {
    clearInterval(sweep);
  }
  s.closing = 'index.json files left to rewrite';
  // Left dirty if this fails: the next start, or another process's sweep, rewrites them.
  await s.rewrites?.flush().catch(() => {});
  await stopCluster(s.cluster, (step) => {
    s.closing = step;
  });
  s.closing = 'the password hashing threads';
  await s.passwords.close();
  s.closing = 'the database and the store';
  await s.runtime.close();
  s.closing = 'done';
}

async function stopCluster(cluster: ClusterParts, on: (step: string) => void = () => {}): Promise<void> {
  on('the live catalogue');
  await cluster.live?.stop();
  on('the serving registration');
  await cluster.registration?.stop();
  on('the catalogue watch');
  await cluster.watch?.stop();
  cluster.uploadSweeper?.stop();
  on('Redis');
  await Promise.all(cluster.redis.map((r) => r.close()));
}

/** Closes a plain node:http server: no new connections; idle ones closed now, busy ones once answered. */
function closeServer(server: HttpServer | undefined): Promise<void> {
  if (server === undefined || !server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    server.close((err) => (err === undefined ? resolve() : reject(err)));
    server.closeIdleConnections();
  });
}

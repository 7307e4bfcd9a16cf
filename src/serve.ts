import type { Server as HttpServer } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import type { Config } from './config/load.js';
import { buildAuthApp } from './auth/app.js';
import { PasswordHasher } from './auth/crypto.js';
import { loadTlsMaterial } from './auth/tls.js';
import { CatalogueNotifications, CatalogueWatch, RedisConnection, ServingRegistration, SharedRateLimiter } from './cluster/index.js';
import { publishCatalogue } from './cluster/mark.js';
import { catalogueKeeps, FileCache, FileServer, finishPendingIndexes, loadDemo, publishUrls, ResponseCache, storeMisses } from './cover-art/index.js';
import { buildCoverArtApp } from './http/coverart-app.js';
import { clientAddress, TrustedProxies } from './http/client-address.js';
import { Health, type HealthCheck } from './http/health.js';
import { RateLimiter } from './http/rate-limit.js';
import { RequestObserver } from './http/observe.js';
import { RequestIds } from './http/request-id.js';
import { listenMetrics, Metrics } from './metrics/index.js';
import { openRuntime, type Runtime } from './runtime.js';
import { WriteBatcher } from './db/write-batch.js';
import { importLockHeld, type ImportLockPlace } from './import/lock.js';
import { isStoreUnavailable } from './shared/errors.js';
import { keepTickShape } from './shared/tick-shape.js';
import type { Clock } from './shared/clock.js';
import { startUploadSweeper } from './cover-art/uploads.js';

export interface Server {
  runtime: Runtime;
  /** Where each listener is reachable (actual ports, when 0 was asked for). */
  coverArtAddress: string | undefined;
  authAddress: string | undefined;
  /** http://host:port of the metrics listener (GET /metrics), when on. */
  metricsAddress: string | undefined;
  demoLoaded: string[];
  close(): Promise<void>;
}

export interface ServeOptions {
  only?: 'coverart' | 'auth';
  /** Log destination; defaults to stdout. */
  logStream?: NodeJS.WritableStream;
  /** The time source (tests fix it); the system clock by default. */
  clock?: Clock;
}

function addressOf(server: HttpServer, scheme: string): string {
  const addr = server.address();
  if (addr === null || typeof addr === 'string') return String(addr);
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${scheme}://${host}:${addr.port}`;
}

/** Starts the listeners (cover art over HTTP, auth over HTTPS, metrics) on one runtime. */
export async function serve(config: Readonly<Config>, options: ServeOptions = {}): Promise<Server> {
  // Done first thing by the CLI; here too for servers started in-process (the earlier, the surer).
  keepTickShape();
  const runtime = await openRuntime(config, { migrate: 'apply', durability: 'normal', clock: options.clock });
  // Passwords are hashed on threads of their own, never on libuv's pool (docs/decisions.md).
  const passwords = new PasswordHasher(config.passwordHashing);
  const logger = { level: config.logLevel, ...(options.logStream ? { stream: options.logStream } : {}) };
  const apps: FastifyInstance[] = [];
  let metricsServer: HttpServer | undefined;
  // Request ids (X-Request-Id) on every listener; metrics when their listener is on.
  const trustedForIds = new TrustedProxies(config.trustProxy);
  const requestIds = new RequestIds((address) => trustedForIds.trusts(address));
  const importLock: ImportLockPlace =
    config.database.kind === 'postgres' ? { dialect: 'postgres', db: runtime.database.db } : { dialect: 'sqlite', file: config.database.file };
  let metrics =
    config.metricsListen === undefined ? undefined : new Metrics(runtime.database.db, { importLockHeld: () => importLockHeld(importLock) });
  const accessLog = config.logLevel === 'debug' || config.logLevel === 'trace';
  const health = new Health();
  const database: HealthCheck = {
    required: true,
    run: async () => {
      await sql`select 1`.execute(runtime.database.db);
    },
  };
  let watch: CatalogueWatch | undefined;
  let uploadSweeper: { stop(): void } | undefined;
  let registration: ServingRegistration | undefined;
  const redis: { close(): Promise<void> }[] = [];
  const stopCluster = async () => {
    await registration?.stop();
    watch?.stop();
    uploadSweeper?.stop();
    await Promise.all(redis.map((r) => r.close()));
  };
  try {
    // The metrics listener first, so the listeners know whether to count: when its address is
    // taken (another sleeve on this machine, on the default port), this process serves without
    // metrics rather than not at all, and says so once it can log (docs/decisions.md).
    if (metrics !== undefined && config.metricsListen !== undefined) {
      try {
        metricsServer = await listenMetrics(metrics, config.metricsListen, config.connections, (err) => apps[0]?.log.error({ err }, 'metrics collection failed'));
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
        metrics = undefined;
      }
    }

    // The public URLs every index.json names, whoever writes it: this server's. Listings written
    // with others are marked here and rewritten just below, before listening.
    const urlsChange =
      options.only === 'auth' ? undefined : await publishUrls(runtime.database.db, runtime.coverArt.urls, runtime.coverArt.clock.now());
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
    if (config.demo && options.only !== 'auth') {
      const any = await runtime.database.db.selectFrom('release').select('id').limit(1).executeTakeFirst();
      if (any === undefined) demoLoaded = (await loadDemo(runtime.coverArt)).added;
    }

    let coverArtAddress: string | undefined;
    if (options.only !== 'auth') {
      const cache = new ResponseCache({ maxBytes: config.responseCacheBytes, maxEntries: config.responseCacheEntries });
      const fileCache = new FileCache(config.fileCacheBytes);
      // With Redis: the rate limit counted there (one connection), change announcements (another).
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
              changed: (version) => watch?.changed(version),
              subscribed: (active) => watch?.setAnnounced(active),
            });
      for (const r of [commands, notifications]) if (r !== undefined) redis.push(r);
      // A bucket is shared by every process: taking them all out of the load balancer while it is
      // away would stop listings and redirects too, which answer from the database. A local
      // folder is this machine's alone, so a process whose folder fails is not ready.
      const storage: HealthCheck = { required: config.storage.kind === 'file', run: () => runtime.store.ready() };
      const checks: Record<string, HealthCheck> = { database, storage };
      if (notifications !== undefined) {
        checks.redis = {
          required: false,
          run: async () => {
            if (!notifications.subscribed || (commands !== undefined && !commands.usable)) throw new Error('Redis is unavailable');
          },
        };
      }
      // Files the store lacks: listings written from the database, images fetched through (SLEEVE_UPSTREAM_URL).
      const misses = storeMisses(runtime.coverArt, config.upstream);
      const app = buildCoverArtApp({
        routes: {
          api: { db: runtime.database.db, urls: runtime.coverArt.urls, imageBaseUrl: config.imageBaseUrl, ensureListing: (id) => misses.listings.ensure(id) },
          cache,
          // From a bucket too: with SLEEVE_IMAGE_BASE_URL=$SLEEVE_BASE_URL/download a private bucket is served through sleeve.
          files: new FileServer({ store: runtime.store, cache: fileCache, keeps: catalogueKeeps(runtime.database.db), fill: misses.fill }),
        },
        logger,
        rateLimiter:
          config.rateLimit === undefined ? undefined : commands !== undefined ? new SharedRateLimiter(config.rateLimit, commands) : new RateLimiter(config.rateLimit),
        trustedProxies: new TrustedProxies(config.trustProxy),
        clock: runtime.coverArt.clock,
        accessLog,
        health: health.forListener(checks),
        observer: new RequestObserver('coverart', requestIds, metrics?.http),
        connections: config.connections,
      });
      if (metrics !== undefined) {
        metrics.http.cacheEntries = () => cache.size;
        metrics.http.cacheBytes = () => cache.bytes;
        metrics.http.fileCache = fileCache;
      }
      apps.push(app);
      watch = new CatalogueWatch({
        coverArt: runtime.coverArt,
        followers: [cache, fileCache],
        pollMs: config.changePollMs,
        announcedPollMs: config.changePollRedisMs,
        log: app.log,
      });
      watch.start();
      // Leftovers of uploads killed in any process on this storage (cover-art/uploads.ts).
      uploadSweeper = startUploadSweeper(runtime.coverArt, config.uploadSweepMs, app.log);
      // Before listening: a command that changes the catalogue from now on waits for this process.
      registration = new ServingRegistration({
        db: runtime.database.db,
        database: config.database,
        watch,
        address: `http://${config.coverArtListen.host}:${config.coverArtListen.port}`,
        log: app.log,
      });
      await registration.start();
      commands?.start(app.log);
      notifications?.start(app.log);
      if (urlsChange !== undefined && urlsChange.previous !== undefined) {
        app.log.warn(
          { previous: urlsChange.previous, now: runtime.coverArt.urls, listings: urlsChange.marked },
          'public URLs changed (SLEEVE_BASE_URL, SLEEVE_MUSICBRAINZ_URL): listings written with the previous ones were rewritten',
        );
      }
      if (pendingIndexes !== undefined) app.log.warn({ err: pendingIndexes }, 'index.json files left to rewrite; retrying while serving');
      await app.listen({ host: config.coverArtListen.host, port: config.coverArtListen.port });
      coverArtAddress = addressOf(app.server, 'http');
      await registration.setAddress(coverArtAddress);
    }

    let authAddress: string | undefined;
    if (options.only !== 'coverart') {
      const tls = await loadTlsMaterial({
        certFile: config.tlsCert,
        keyFile: config.tlsKey,
        dataDir: config.dataDir,
        hostnames: [new URL(config.authUrl).hostname, config.authListen.host],
      });
      const trusted = new TrustedProxies(config.trustProxy);
      const app = buildAuthApp({
        tls,
        logger,
        deps: { ...runtime.auth, writes: new WriteBatcher(runtime.database.db), passwords },
        trustsProxy: (address) => trusted.trusts(address),
        clientAddress: (peer, forwardedFor) => clientAddress(peer, forwardedFor, trusted),
        health: health.forListener({ database }),
        observer: new RequestObserver('auth', requestIds, metrics?.http),
        accessLog,
        connections: config.connections,
      });
      apps.push(app);
      await app.listen({ host: config.authListen.host, port: config.authListen.port });
      authAddress = addressOf(app.server, 'https');
    }

    let metricsAddress: string | undefined;
    if (metricsServer !== undefined) {
      metricsAddress = addressOf(metricsServer, 'http');
      apps[0]?.log.info(`Metrics listening at ${metricsAddress}/metrics`);
    } else if (config.metricsListen !== undefined) {
      // Its address was taken (any other failure to listen stopped the start).
      const { host, port } = config.metricsListen;
      apps[0]?.log.warn(
        `metrics are off in this process: ${host.includes(':') ? `[${host}]` : host}:${port} is in use (another sleeve serve on this machine?); set SLEEVE_METRICS_LISTEN to a free host:port, or to off`,
      );
    }

    return {
      runtime,
      coverArtAddress,
      authAddress,
      metricsAddress,
      demoLoaded,
      async close() {
        // Readiness fails from now on; a load balancer that probes it stops sending requests
        // during the delay, then the listeners close and the requests in flight finish.
        health.stop();
        if (config.shutdownDelayMs > 0) await new Promise((r) => setTimeout(r, config.shutdownDelayMs));
        // A keep-alive connection whose response was still being written when closing began
        // turns idle only afterwards, and would then hold the server open until its keep-alive
        // timeout: keep closing idle connections until every listener has closed.
        const servers = [...apps.map((a) => a.server), ...(metricsServer === undefined ? [] : [metricsServer])];
        const sweep = setInterval(() => {
          for (const s of servers) s.closeIdleConnections();
        }, 100);
        try {
          await Promise.all([...apps.map((a) => a.close()), closeServer(metricsServer)]);
        } finally {
          clearInterval(sweep);
        }
        await stopCluster();
        await passwords.close();
        await runtime.close();
      },
    };
  } catch (err) {
    await Promise.all([...apps.map((a) => a.close().catch(() => {})), closeServer(metricsServer).catch(() => {})]);
    await stopCluster().catch(() => {});
    await passwords.close();
    await runtime.close().catch(() => {});
    throw err;
  }
}

/** Closes a plain node:http server: no new connections; idle ones closed now, busy ones once answered. */
function closeServer(server: HttpServer | undefined): Promise<void> {
  if (server === undefined || !server.listening) return Promise.resolve();
  return new Promise((resolve, reject) => {
    server.close((err) => (err === undefined ? resolve() : reject(err)));
    server.closeIdleConnections();
  });
}

import type { FastifyInstance } from 'fastify';
import type { Config } from './config/load.js';
import { buildAuthApp } from './auth/app.js';
import { loadTlsMaterial } from './auth/tls.js';
import { finishPendingIndexes, loadDemo, readCounter, ResponseCache } from './cover-art/index.js';
import { buildCoverArtApp } from './http/coverart-app.js';
import { clientAddress, TrustedProxies } from './http/client-address.js';
import { RateLimiter } from './http/rate-limit.js';
import { openRuntime, type Runtime } from './runtime.js';
import { WriteBatcher } from './db/write-batch.js';
import { isStoreUnavailable } from './shared/errors.js';

export interface Server {
  runtime: Runtime;
  /** Where each listener is reachable (actual ports, when 0 was asked for). */
  coverArtAddress: string | undefined;
  authAddress: string | undefined;
  demoLoaded: string[];
  close(): Promise<void>;
}

export interface ServeOptions {
  only?: 'coverart' | 'auth';
  /** Log destination; defaults to stdout. */
  logStream?: NodeJS.WritableStream;
}

/**
 * Watches the catalogue version another process bumps on every change and empties the
 * response cache when it moves; now and then finishes index.json files that a crashed
 * change left dirty.
 */
function watchCatalogue(runtime: Runtime, cache: ResponseCache, intervalMs: number, onError: (err: unknown) => void): () => void {
  let last: number | undefined;
  let busy = false;
  let ticks = 0;
  const sweepEvery = Math.max(1, Math.round(10_000 / intervalMs));
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const version = await readCounter(runtime.database.db, 'catalogue_version');
      if (last !== undefined && version !== last) cache.clear();
      last = version;
      if (++ticks % sweepEvery === 0) {
        // Only changes dirty for over 10 s: younger ones are still being finished by their own process.
        await finishPendingIndexes(runtime.coverArt, runtime.coverArt.clock.now() - 10_000);
      }
    } catch (err) {
      // The database may be briefly away; answers are not cached meanwhile.
      cache.clear();
      onError(err);
    } finally {
      busy = false;
    }
  };
  void tick();
  const timer = setInterval(() => void tick(), intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

function addressOf(app: FastifyInstance, scheme: string): string {
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') return String(addr);
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return `${scheme}://${host}:${addr.port}`;
}

/** Starts the listeners of DESIGN §2 on one runtime. */
export async function serve(config: Readonly<Config>, options: ServeOptions = {}): Promise<Server> {
  const runtime = await openRuntime(config, { migrate: 'apply', durability: 'normal' });
  const logger = { level: config.logLevel, ...(options.logStream ? { stream: options.logStream } : {}) };
  const apps: FastifyInstance[] = [];
  let stopWatching = () => {};
  try {
    // With the store away, serving from the database still works: the sweep below finishes these later.
    let pendingIndexes: unknown;
    await finishPendingIndexes(runtime.coverArt).catch((err: unknown) => {
      if (!isStoreUnavailable(err)) throw err;
      pendingIndexes = err;
    });
    let demoLoaded: string[] = [];
    if (config.demo && options.only !== 'auth') {
      const any = await runtime.database.db.selectFrom('release').select('id').limit(1).executeTakeFirst();
      if (any === undefined) demoLoaded = (await loadDemo(runtime.coverArt)).added;
    }

    let coverArtAddress: string | undefined;
    if (options.only !== 'auth') {
      const cache = new ResponseCache(config.responseCacheEntries);
      const app = buildCoverArtApp({
        routes: {
          api: { db: runtime.database.db, urls: runtime.coverArt.urls, imageBaseUrl: config.imageBaseUrl },
          cache,
          // From a bucket too: with SLEEVE_IMAGE_BASE_URL=$SLEEVE_BASE_URL/download a private bucket is served through sleeve.
          files: runtime.store,
        },
        logger,
        rateLimiter: config.rateLimit === undefined ? undefined : new RateLimiter(config.rateLimit),
        trustedProxies: new TrustedProxies(config.trustProxy),
        clock: runtime.coverArt.clock,
        accessLog: config.logLevel === 'debug' || config.logLevel === 'trace',
      });
      apps.push(app);
      stopWatching = watchCatalogue(runtime, cache, config.changePollMs, (err) => app.log.warn({ err }, 'catalogue watch failed'));
      if (pendingIndexes !== undefined) app.log.warn({ err: pendingIndexes }, 'index.json files left to rewrite; retrying while serving');
      await app.listen({ host: config.coverArtListen.host, port: config.coverArtListen.port });
      coverArtAddress = addressOf(app, 'http');
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
        deps: { ...runtime.auth, writes: new WriteBatcher(runtime.database.db) },
        trustsProxy: (address) => trusted.trusts(address),
        clientAddress: (peer, forwardedFor) => clientAddress(peer, forwardedFor, trusted),
      });
      apps.push(app);
      await app.listen({ host: config.authListen.host, port: config.authListen.port });
      authAddress = addressOf(app, 'https');
    }

    return {
      runtime,
      coverArtAddress,
      authAddress,
      demoLoaded,
      async close() {
        stopWatching();
        // A keep-alive connection whose response was still being written when closing began
        // turns idle only afterwards, and would then hold the server open until its keep-alive
        // timeout: keep closing idle connections until every listener has closed.
        const sweep = setInterval(() => {
          for (const a of apps) a.server.closeIdleConnections();
        }, 100);
        try {
          await Promise.all(apps.map((a) => a.close()));
        } finally {
          clearInterval(sweep);
        }
        await runtime.close();
      },
    };
  } catch (err) {
    stopWatching();
    await Promise.all(apps.map((a) => a.close().catch(() => {})));
    await runtime.close().catch(() => {});
    throw err;
  }
}

import type { AuthDeps } from './auth/deps.js';
import { SigningKeys } from './auth/signing-keys.js';
import { ClientDocuments } from './auth/client-metadata.js';
import { PasswordHasher } from './auth/crypto.js';
import type { Config } from './config/load.js';
import { readPublishedUrls, type CoverArtDeps, type ListingUrls } from './cover-art/index.js';
import { openDatabase, type DatabaseHandle } from './db/connect.js';
import { databaseFailure, describeDatabase } from './db/failure.js';
import { allMigrations, migrateToLatest, pendingMigrations } from './db/migrator.js';
import { OperatorError } from './shared/errors.js';
import type { Clock } from './shared/clock.js';
import { systemClock } from './shared/clock.js';
import { createObjectStore, type ObjectStore } from './storage/index.js';

/** The resources every command shares: database, store and the deps of both modules built on them. */
export interface Runtime {
  config: Readonly<Config>;
  database: DatabaseHandle;
  store: ObjectStore;
  coverArt: CoverArtDeps;
  auth: AuthDeps;
  close(): Promise<void>;
}

/**
 * Opens the database and store the configuration names and applies pending migrations.
 * Both modules read the time from `clock`: the system clock unless a test gives one.
 */
export async function openRuntime(
  config: Readonly<Config>,
  options: {
    clock?: Clock;
    durability?: 'full' | 'normal';
    /**
     * Which public URLs listings name: this process's configuration (`sleeve serve`, which
     * publishes them), or those the servers published (commands), when there are any.
     */
    urls?: 'config' | 'published';
    /**
     * false: the database must exist and have sleeve's tables (NO_DATABASE, NOT_MIGRATED
     * otherwise); pending migrations of a newer sleeve are still applied. true (the default):
     * a missing SQLite file is made, and an empty database migrated.
     */
    create?: boolean;
  } = {},
): Promise<Runtime> {
  const database = await openDatabase(config.database, { durability: options.durability, create: options.create }).catch((err: unknown) => {
    throw databaseFailure(err, config.database);
  });
  const thumbnailFormats = config.thumbnailFormats.length > 1 ? config.thumbnailFormats : undefined;
  let urls: ListingUrls = { baseUrl: config.baseUrl, musicBrainzUrl: config.musicBrainzUrl, fields: config.listingFields, thumbnailFormats, eventBaseUrl: config.eventBaseUrl };
  try {
    // Looking costs a read; migrating (even with nothing to do) costs a write transaction.
    const pending = await pendingMigrations(database);
    if (options.create === false && pending.length === allMigrations().length) {
      throw new OperatorError('NOT_MIGRATED', `${describeDatabase(config.database)} has no sleeve tables yet: run sleeve migrate first`);
    }
    if (pending.length > 0) await migrateToLatest(database);
    if (options.urls === 'published') urls = { ...((await readPublishedUrls(database.db))?.urls ?? urls), fields: config.listingFields, thumbnailFormats, eventBaseUrl: config.eventBaseUrl };
  } catch (err) {
    await database.close().catch(() => {});
    throw databaseFailure(err, config.database);
  }
  const store = createObjectStore(config.storage);
  const clock = options.clock ?? systemClock;
  // Commands hash (user add) at the configured cost; `serve` gives its sign-ins a hasher of its own.
  const passwords = new PasswordHasher(config.passwordHashing);
  return {
    config,
    database,
    store,
    auth: { db: database.db, clock, authUrl: config.authUrl, accessTokenTtl: config.accessTokenTtl, authCodeTtl: config.authCodeTtl, refreshGraceSeconds: config.refreshGraceSeconds, pkce: config.pkce, signingKeys: new SigningKeys(database.db, clock), clientDocuments: new ClientDocuments(config.clientMetadata, clock), passwords },
    coverArt: {
      db: database.db,
      store,
      clock,
      urls,
      limits: { maxBytes: config.uploadMaxBytes, maxPixels: config.uploadMaxPixels },
      approval: config.approval,
    },
    async close() {
      await passwords.close();
      await store.close();
      await database.close();
    },
  };
}

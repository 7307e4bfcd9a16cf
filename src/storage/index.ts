import type { StorageConfig } from '../config/load.js';
import { FsObjectStore } from './fs-store.js';
import type { ObjectStore } from './object-store.js';
import { S3ObjectStore } from './s3-store.js';

export type { ObjectStore, ObjectInfo, ObjectBody, ObjectRead, ByteRange, BatchWrites, FastReads, ReadMemory } from './object-store.js';
export { isValidKey, layoutCacheControl, layoutContentType, unchangingKey } from './object-store.js';
export { FsObjectStore, type FsReads } from './fs-store.js';
export { S3ObjectStore, type S3StoreOptions } from './s3-store.js';

/** Builds the store the configuration names. */
export function createObjectStore(cfg: StorageConfig): ObjectStore {
  if (cfg.kind === 's3') {
    return new S3ObjectStore({
      bucket: cfg.bucket,
      prefix: cfg.prefix,
      endpoint: cfg.endpoint,
      region: cfg.region,
      forcePathStyle: cfg.forcePathStyle,
    });
  }
  return new FsObjectStore(cfg.root, { reads: cfg.reads });
}

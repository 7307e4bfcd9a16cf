import type { StorageConfig } from '../config/load.js';
import { FsObjectStore } from './fs-store.js';
import type { ObjectStore } from './object-store.js';

export type { ObjectStore, ObjectInfo, ObjectBody, ByteRange } from './object-store.js';
export { isValidKey } from './object-store.js';
export { FsObjectStore } from './fs-store.js';

/** Builds the store the configuration names. */
export function createObjectStore(cfg: StorageConfig): ObjectStore {
  return new FsObjectStore(cfg.root);
}

// s3rver 3 ships no types; these cover what test/helpers/s3rver-process.ts uses.
declare module 's3rver' {
  import type { AddressInfo } from 'node:net';
  import type { Server } from 'node:http';

  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    configureBuckets?: { name: string; configs?: Buffer[] }[];
  }

  class S3rver {
    constructor(options: S3rverOptions);
    /** The store the request handlers use (s3rver keeps it in two places). */
    store: unknown;
    context: { store: unknown };
    httpServer: Server | undefined;
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
  export default S3rver;
}

declare module 's3rver/lib/stores/filesystem.js' {
  import type { Readable } from 'node:stream';

  export interface S3rverObject {
    bucket: string;
    key: string;
    content: Buffer | Readable;
    metadata: Record<string, string>;
  }

  export interface S3rverListing {
    objects: { key: string }[];
    commonPrefixes: string[];
    isTruncated: boolean;
  }

  export interface S3rverStoredObject {
    key: string;
    /** A file stream, already open; null when the range asked for cannot be satisfied. */
    content: (Readable & { fd?: number | null }) | null;
    metadata: Record<string, string>;
    readonly size: number;
  }

  class FilesystemStore {
    constructor(rootDirectory: string);
    getResourcePath(bucket: string, key: string | undefined, resource: string): string;
    putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5?: string): Promise<void>;
    getObject(bucket: string, key: string, options?: { start?: number; end?: number }): Promise<S3rverStoredObject | null>;
    putObject(object: S3rverObject): Promise<{ size: number; md5: string }>;
    listObjects(bucket: string, options: { delimiter?: string; startAfter?: string; prefix?: string; maxKeys?: number }): Promise<S3rverListing>;
  }
  export default FilesystemStore;
}

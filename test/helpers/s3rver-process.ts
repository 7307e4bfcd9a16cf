/*
 * s3rver, a real S3-compatible HTTP server backed by a directory, in a process of its own
 * (test/helpers/s3.ts starts and kills it):
 *
 *   node --openssl-legacy-provider s3rver-process.js DIRECTORY PORT [BUCKET...]
 *
 * prints `{"port":N}` when it listens and exits when its standard input closes (so it
 * never outlives the test that started it). --openssl-legacy-provider: s3rver encrypts
 * its ListObjectsV2 continuation tokens with DES, which OpenSSL 3 keeps in that provider.
 *
 * Where s3rver 3.7 differs from S3 in a way that would fail sleeve's store contract for
 * s3rver's sake, it is put right here; nothing else is changed (its range answers, for
 * one, are left as they are: `bytes=0-0` gets the whole object, which S3ObjectStore
 * copes with):
 * - S3 answers a PUT once the whole object is stored, and replaces an object atomically
 *   (a reader gets the old or the new one). s3rver answers before the bytes are written
 *   and rewrites the file in place, its description files (ETag, type) too, so a reader
 *   meanwhile may get a part, or a 500 for a half-written description. Here the bytes and
 *   the description go to temporary files that replace the old ones by rename.
 *   s3rver also describes an object (size, date) before it opens its file by name; a
 *   read that races a rewrite then sends the new bytes under the old length, and the
 *   answer breaks off. Here a read whose open file is not the one described looks again.
 * - S3 lists keys in UTF-8 binary order, which its pagination relies on. s3rver lists in
 *   directory order, so pages skip and repeat keys. Here each page is cut from the
 *   sorted listing.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, fstat } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { promisify } from 'node:util';
import S3rver from 's3rver';
import FilesystemStore, { type S3rverListing, type S3rverObject, type S3rverStoredObject } from 's3rver/lib/stores/filesystem.js';

/** A folder in each bucket for description files being written; it holds no object, so no listing shows it. */
const SCRATCH = '.s3rver-scratch';

class FaithfulStore extends FilesystemStore {
  private readonly tmpDir: string;

  constructor(root: string, tmpDir: string) {
    super(root);
    this.tmpDir = tmpDir;
  }

  override async putObject(object: S3rverObject): Promise<{ size: number; md5: string }> {
    const target = this.getResourcePath(object.bucket, object.key, 'object');
    await mkdir(path.dirname(target), { recursive: true });
    const tmp = path.join(this.tmpDir, randomBytes(8).toString('hex'));
    const hash = createHash('md5');
    let size = 0;
    const content = Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content;
    try {
      await pipeline(
        content,
        new Transform({
          transform(chunk: Buffer, _enc, done) {
            hash.update(chunk);
            size += chunk.length;
            done(null, chunk);
          },
        }),
        createWriteStream(tmp),
      );
      const md5 = hash.digest('hex');
      // The description first: a new object then appears whole, with its type and ETag.
      await this.putMetadata(object.bucket, object.key, object.metadata, md5);
      await rename(tmp, target);
      return { size, md5 };
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /** s3rver's own description files, written under a scratch key and renamed over the object's. */
  override async putMetadata(bucket: string, key: string, metadata: Record<string, string>, md5?: string): Promise<void> {
    const scratch = `${SCRATCH}/${randomBytes(8).toString('hex')}`;
    await mkdir(path.dirname(this.getResourcePath(bucket, scratch, 'metadata.json')), { recursive: true });
    await super.putMetadata(bucket, scratch, metadata, md5);
    const files = md5 === undefined ? ['metadata.json'] : ['object.md5', 'metadata.json'];
    try {
      for (const resource of files) await rename(this.getResourcePath(bucket, scratch, resource), this.getResourcePath(bucket, key, resource));
    } finally {
      for (const resource of files) await rm(this.getResourcePath(bucket, scratch, resource), { force: true });
    }
  }

  override async getObject(bucket: string, key: string, options?: { start?: number; end?: number }): Promise<S3rverStoredObject | null> {
    for (;;) {
      const object = await super.getObject(bucket, key, options);
      const fd = object?.content?.fd;
      if (object === null || object.content === null || typeof fd !== 'number') return object;
      const st = await promisify(fstat)(fd);
      if (st.size === object.size && st.mtime.toUTCString() === object.metadata['last-modified']) return object;
      // Replaced between s3rver's look and its open: look again.
      object.content.destroy();
    }
  }

  override async listObjects(bucket: string, options: { delimiter?: string; startAfter?: string; prefix?: string; maxKeys?: number }): Promise<S3rverListing> {
    const all = await super.listObjects(bucket, { ...options, maxKeys: Infinity });
    const objects = all.objects.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const max = options.maxKeys ?? Infinity;
    return { objects: objects.slice(0, max), commonPrefixes: all.commonPrefixes, isTruncated: objects.length > max };
  }
}

const [directory, portText = '0', ...buckets] = process.argv.slice(2);
if (directory === undefined) {
  process.stderr.write('usage: s3rver-process.js DIRECTORY PORT [BUCKET...]\n');
  process.exit(2);
}
const tmpDir = `${directory}-tmp`;
await mkdir(directory, { recursive: true });
await mkdir(tmpDir, { recursive: true });

const server = new S3rver({
  address: '127.0.0.1',
  port: Number(portText),
  silent: true,
  directory,
  configureBuckets: buckets.map((name) => ({ name })),
});
const store = new FaithfulStore(directory, tmpDir);
server.store = store;
server.context.store = store;
const address = await server.run();
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);

process.stdin.resume();
process.stdin.on('close', () => process.exit(0));

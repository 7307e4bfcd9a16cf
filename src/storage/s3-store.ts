import { createHash } from 'node:crypto';
import { pipeline, Readable, Transform } from 'node:stream';
import type { S3Client, S3ClientConfig } from '@aws-sdk/client-s3';
import { storeUnavailable, type AppError } from '../shared/errors.js';
import { isValidKey, layoutCacheControl, layoutContentType, type ByteRange, type ObjectBody, type ObjectInfo, type ObjectRead, type ObjectStore } from './object-store.js';

type Sdk = typeof import('@aws-sdk/client-s3');

export interface S3StoreOptions {
  bucket: string;
  /** Key prefix inside the bucket, without leading or trailing slash ('' or absent for none). */
  prefix?: string;
  /** An S3-compatible endpoint (`http(s)://host[:port]`); absent for AWS. */
  endpoint?: string;
  region: string;
  forcePathStyle?: boolean;
  /** Fixed credentials; by default the AWS SDK's provider chain (AWS_ACCESS_KEY_ID…, AWS_PROFILE, roles). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Keys asked for per ListObjectsV2 page: S3's maximum, 1000, unless a test wants more pages. */
  listPageSize?: number;
  /** Until an answer's headers arrive, ms (ANSWER_TIMEOUT_MS unless a test wants a store given up sooner). */
  answerTimeoutMs?: number;
}

/** Attempts per operation (the SDK retries network errors, throttling and 5xx with backoff). */
const MAX_ATTEMPTS = 3;
/** A store that does not accept the connection within this is treated as away. */
const CONNECT_TIMEOUT_MS = 2_000;
/** Until the answer's headers arrive (an upload gets more, by its size). Three attempts stay within the 30 s a /download request may take. */
const ANSWER_TIMEOUT_MS = 5_000;
/** A socket that moves no byte for this long is given up (also while a body streams to a slow client). */
const IDLE_TIMEOUT_MS = 30_000;

/** The headers an object of `key` is stored with: what the file server would send for it (else `fallback`). */
function objectHeaders(key: string, fallback: string): { ContentType: string; CacheControl?: string } {
  const cacheControl = layoutCacheControl(key);
  return { ContentType: layoutContentType(key) ?? fallback, ...(cacheControl === undefined ? {} : { CacheControl: cacheControl }) };
}

interface SdkError {
  name?: string;
  code?: string;
  message?: string;
  $metadata?: { httpStatusCode?: number; attempts?: number };
}

function statusOf(err: unknown): number | undefined {
  return (err as SdkError).$metadata?.httpStatusCode;
}

function isMissing(err: unknown): boolean {
  const name = (err as SdkError).name;
  return name === 'NotFound' || name === 'NoSuchKey' || (statusOf(err) === 404 && name !== 'NoSuchBucket');
}

/** `bytes a-b/total` → [a, b, total]. */
function parseContentRange(value: string | undefined): [number, number, number] | undefined {
  const m = value === undefined ? null : /^bytes (\d+)-(\d+)\/(\d+)$/.exec(value.trim());
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3])];
}

/** The `length` (> 0) bytes after the first `skip` of a stream; destroying the result destroys the source. */
function slice(source: Readable, skip: number, length: number): Readable {
  let toSkip = skip;
  let left = length;
  const cut = new Transform({
    transform(chunk: Buffer, _enc, done) {
      let part = chunk;
      if (toSkip > 0) {
        const n = Math.min(toSkip, part.length);
        toSkip -= n;
        part = part.subarray(n);
      }
      if (left > 0 && part.length > 0) {
        const out = part.subarray(0, left);
        left -= out.length;
        this.push(out);
        // Everything wanted has passed: the reader is done; the rest of the source drains unseen.
        if (left === 0) this.push(null);
      }
      done();
    },
  });
  pipeline(source, cut, () => {});
  return cut;
}

/**
 * Objects in an S3 bucket (AWS or an S3-compatible store such as MinIO), under an optional
 * key prefix, through the AWS SDK v3. The SDK is loaded on first use, so processes that
 * never touch the bucket (file storage, or a CLI command without storage) do not pay for it.
 * Failures of the store (unreachable, timing out, refusing access, no such bucket) are
 * STORE_UNAVAILABLE errors that name the store; a key that is not there is not a failure.
 */
export class S3ObjectStore implements ObjectStore {
  readonly bucket: string;
  readonly prefix: string;
  private readonly options: S3StoreOptions;
  private loaded: Promise<{ sdk: Sdk; client: S3Client }> | undefined;
  private closed = false;
  private readonly answerTimeoutMs: number;

  constructor(options: S3StoreOptions) {
    this.options = options;
    this.bucket = options.bucket;
    this.prefix = options.prefix ?? '';
    this.answerTimeoutMs = options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS;
  }

  /** `s3://bucket/prefix (endpoint …)`, for messages. */
  describe(): string {
    const where = `s3://${this.bucket}${this.prefix === '' ? '' : `/${this.prefix}`}`;
    return this.options.endpoint === undefined ? `${where} (region ${this.options.region})` : `${where} at ${this.options.endpoint}`;
  }

  private load(): Promise<{ sdk: Sdk; client: S3Client }> {
    if (this.closed) return Promise.reject(new Error(`object store ${this.describe()} is closed`));
    this.loaded ??= (async () => {
      // The SDK warns on every Node below 22 that its releases after January 2027 will need
      // Node 22; sleeve pins its SDK version, so the warning says nothing to an operator.
      process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
      const sdk = await import('@aws-sdk/client-s3');
      const config: S3ClientConfig = {
        region: this.options.region,
        forcePathStyle: this.options.forcePathStyle === true,
        maxAttempts: MAX_ATTEMPTS,
        // Checksums only where S3 requires them: many S3-compatible stores refuse the newer
        // default (CRC32 trailers); bodies are protected by Content-MD5 instead.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        requestHandler: {
          connectionTimeout: CONNECT_TIMEOUT_MS,
          requestTimeout: this.answerTimeoutMs,
          throwOnRequestTimeout: true,
          socketTimeout: IDLE_TIMEOUT_MS,
        },
      };
      if (this.options.endpoint !== undefined) config.endpoint = this.options.endpoint;
      if (this.options.credentials !== undefined) config.credentials = this.options.credentials;
      return { sdk, client: new sdk.S3Client(config) };
    })();
    return this.loaded;
  }

  private fullKey(key: string): string {
    if (!isValidKey(key)) throw new Error(`invalid storage key ${JSON.stringify(key)}`);
    return this.prefix === '' ? key : `${this.prefix}/${key}`;
  }

  /** The store-level error for a failed operation. */
  private failure(what: string, err: unknown): AppError {
    const e = err as SdkError;
    const status = statusOf(err);
    let why: string;
    if (e.name === 'NoSuchBucket' || (what === 'look up the bucket' && status === 404)) {
      why = `the bucket ${this.bucket} does not exist`;
    } else if (status === 403 || e.name === 'AccessDenied' || e.name === 'InvalidAccessKeyId' || e.name === 'SignatureDoesNotMatch' || e.name === 'ExpiredToken') {
      why = `access denied (${e.name ?? `HTTP ${status}`}); check the credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE) and the bucket's policy`;
    } else if (e.name === 'CredentialsProviderError') {
      why = 'no credentials found; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)';
    } else if (status === 301 || e.name === 'PermanentRedirect') {
      why = `the bucket is in another region than ${this.options.region} (set region=… in SLEEVE_STORAGE_URL)`;
    } else if (status !== undefined) {
      why = `the store answered HTTP ${status}${e.name !== undefined && e.name !== 'Unknown' ? ` ${e.name}` : ''}`;
    } else if (e.name === 'TimeoutError') {
      why = `no answer in time (${(e.message ?? '').replace(/^@smithy\/node-http-handler - (\[ERROR\] )?/, '')})`;
    } else {
      why = e.message ?? String(err);
    }
    const attempts = e.$metadata?.attempts;
    const tries = attempts !== undefined && attempts > 1 ? ` (after ${attempts} attempts)` : '';
    return storeUnavailable(`object store ${this.describe()} is unavailable: could not ${what}: ${why}${tries}`, err);
  }

  async put(key: string, body: Buffer, contentType: string): Promise<void> {
    const Key = this.fullKey(key);
    const { sdk, client } = await this.load();
    try {
      await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.bucket,
          Key,
          Body: body,
          ContentLength: body.length,
          ContentMD5: createHash('md5').update(body).digest('base64'),
          ...objectHeaders(key, contentType),
        }),
        // Time to send the body as well: at least 1 MB/s.
        { requestTimeout: this.answerTimeoutMs + Math.ceil(body.length / 1000) },
      );
    } catch (err) {
      throw this.failure(`store ${key}`, err);
    }
  }

  /**
   * Moves an object within the bucket (a server-side copy, with the target's content type
   * and caching, then the delete); false when `from` is not there.
   */
  async move(from: string, to: string): Promise<boolean> {
    const source = this.fullKey(from);
    const Key = this.fullKey(to);
    const { sdk, client } = await this.load();
    try {
      await client.send(
        new sdk.CopyObjectCommand({
          Bucket: this.bucket,
          Key,
          CopySource: `${this.bucket}/${source}`,
          MetadataDirective: 'REPLACE',
          ...objectHeaders(to, 'application/octet-stream'),
        }),
      );
    } catch (err) {
      if (isMissing(err)) return false;
      throw this.failure(`copy ${from} to ${to}`, err);
    }
    await this.delete(from);
    return true;
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    const Key = this.fullKey(key);
    const { sdk, client } = await this.load();
    let out;
    try {
      out = await client.send(new sdk.HeadObjectCommand({ Bucket: this.bucket, Key }));
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw this.failure(`look up ${key}`, err);
    }
    return this.info(key, out.ContentLength, out.ETag, out.LastModified);
  }

  private info(key: string, size: number | undefined, rawEtag: string | undefined, lastModified: Date | undefined): ObjectInfo {
    // Some S3-compatible stores send the tag unquoted; S3 quotes it.
    const etag = rawEtag !== undefined && /^[\x21\x23-\x7e]+$/.test(rawEtag) && !rawEtag.startsWith('W/') ? `"${rawEtag}"` : rawEtag;
    if (size === undefined || etag === undefined || lastModified === undefined || !/^"[\x21\x23-\x7e]+"$/.test(etag)) {
      throw storeUnavailable(`object store ${this.describe()} described ${key} without a size, a strong ETag or a modification date`);
    }
    return { size, etag, lastModified };
  }

  async get(key: string, range?: ByteRange): Promise<ObjectBody | undefined> {
    const Key = this.fullKey(key);
    const { sdk, client } = await this.load();
    let out;
    try {
      out = await client.send(
        new sdk.GetObjectCommand({ Bucket: this.bucket, Key, ...(range === undefined ? {} : { Range: `bytes=${range.start}-${range.end}` }) }),
      );
    } catch (err) {
      if (isMissing(err)) return undefined;
      if (range !== undefined && (err as SdkError).name === 'InvalidRange') {
        // A range that starts past the end: no bytes, as a file read from past its end gives.
        const info = await this.head(key);
        return info === undefined ? undefined : { info, body: Readable.from([]) };
      }
      throw this.failure(`read ${key}`, err);
    }
    const source = out.Body as Readable | undefined;
    if (source === undefined) throw storeUnavailable(`object store ${this.describe()} sent no body for ${key}`);
    const sent = parseContentRange(out.ContentRange);
    let info: ObjectInfo;
    try {
      info = this.info(key, sent?.[2] ?? out.ContentLength, out.ETag, out.LastModified);
    } catch (err) {
      source.destroy();
      throw err;
    }
    if (range === undefined) return { info, body: source };
    // A server may ignore the range (200, everything) or send more than asked: cut out exactly the bytes asked for.
    const [from, to] = sent ?? [0, info.size - 1];
    const end = Math.min(range.end, info.size - 1);
    if (from === range.start && to === end) return { info, body: source };
    if (end < range.start) {
      source.destroy();
      return { info, body: Readable.from([]) };
    }
    if (from > range.start || to < end) {
      source.destroy();
      throw storeUnavailable(`object store ${this.describe()} sent bytes ${from}-${to} of ${key} when ${range.start}-${end} were asked for`);
    }
    return { info, body: slice(source, range.start - from, end - range.start + 1) };
  }

  async read(key: string, maxBytes: number): Promise<ObjectRead | undefined> {
    // One GET: the answer's headers say whether the body is small enough to take.
    const got = await this.get(key);
    if (got === undefined) return undefined;
    if (got.info.size > maxBytes) {
      got.body.destroy();
      return { info: got.info, bytes: undefined };
    }
    const chunks: Buffer[] = [];
    try {
      for await (const chunk of got.body) chunks.push(chunk as Buffer);
    } catch (err) {
      throw this.failure(`read ${key}`, err);
    }
    const bytes = Buffer.concat(chunks);
    if (bytes.length !== got.info.size) throw storeUnavailable(`object store ${this.describe()} sent ${bytes.length} of the ${got.info.size} bytes of ${key}`);
    return { info: got.info, bytes };
  }

  async delete(key: string): Promise<void> {
    const Key = this.fullKey(key);
    const { sdk, client } = await this.load();
    try {
      await client.send(new sdk.DeleteObjectCommand({ Bucket: this.bucket, Key }));
    } catch (err) {
      // S3 answers 204 for a missing key; a store that says 404 means the same.
      if (isMissing(err)) return;
      throw this.failure(`remove ${key}`, err);
    }
  }

  async list(prefix: string): Promise<string[]> {
    const { sdk, client } = await this.load();
    const base = this.prefix === '' ? '' : `${this.prefix}/`;
    const keys: string[] = [];
    let token: string | undefined;
    do {
      let out;
      try {
        out = await client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.bucket,
            Prefix: base + prefix,
            MaxKeys: this.options.listPageSize ?? 1000,
            ...(token === undefined ? {} : { ContinuationToken: token }),
          }),
        );
      } catch (err) {
        throw this.failure(`list ${prefix === '' ? 'the objects' : `the objects under ${prefix}`}`, err);
      }
      for (const o of out.Contents ?? []) {
        const key = o.Key?.slice(base.length);
        // Objects other tools put there under names the layout never uses are not ours to list.
        if (key !== undefined && isValidKey(key)) keys.push(key);
      }
      token = out.IsTruncated === true ? out.NextContinuationToken : undefined;
    } while (token !== undefined);
    return keys.sort();
  }

  /** Every object under `folder/`, one delete each (a bucket has no folders to remove). */
  async removeFolder(folder: string): Promise<void> {
    for (const key of await this.list(`${folder}/`)) await this.delete(key);
  }

  /** None: a put is one request, which leaves the whole object or nothing. */
  async sweepTemporary(): Promise<number> {
    return 0;
  }

  /** None (see sweepTemporary). */
  async removeStrayTemporary(): Promise<number> {
    return 0;
  }

  async ready(): Promise<void> {
    try {
      const { sdk, client } = await this.load();
      await client.send(new sdk.HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw this.failure('look up the bucket', err);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const loaded = this.loaded;
    this.loaded = undefined;
    if (loaded !== undefined) (await loaded.catch(() => undefined))?.client.destroy();
  }
}

/*
 * A real S3-compatible server for tests: s3rver in a child process on 127.0.0.1, on an
 * ephemeral port, over a temporary directory. stop() kills it the way a crashed store
 * goes away; start() brings it back on the same port with the same objects.
 *
 * s3rver does not check signatures (it serves even a presigned URL whose signature is
 * forged): credentials, presigned URLs and expiry cannot be tested against it alone, only
 * what the store does with the objects (sigv4-proxy.ts puts a signature check in front of
 * it; docs/decisions.md, "Object storage").
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const RUNNER = path.join(path.dirname(fileURLToPath(import.meta.url)), 's3rver-process.js');

/** s3rver's default credentials; it accepts any. */
export const S3RVER_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface S3TestServer {
  /** `http://127.0.0.1:PORT`. */
  endpoint: string;
  port: number;
  /** The bucket made at start. */
  bucket: string;
  region: string;
  /** `SLEEVE_STORAGE_URL` for the bucket: `s3://BUCKET?endpoint=…&region=…&forcePathStyle=true`. */
  storageUrl: string;
  /** Environment for a sleeve process using the bucket: SLEEVE_STORAGE_URL and the AWS credential variables. */
  env: Record<string, string>;
  /** Credentials for a store made in the test process. */
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** The bucket's public (path-style) URL: `{endpoint}/{bucket}`. */
  publicUrl: string;
  /** `SLEEVE_STORAGE_URL` for another bucket or a key prefix, with extra query parameters. */
  urlFor(options?: { bucket?: string; prefix?: string; params?: Record<string, string> }): string;
  /** Makes another, empty bucket. */
  createBucket(name: string): Promise<void>;
  /** Every key in a bucket (default: the start bucket) under a prefix, read over plain HTTP, sorted. */
  listKeys(prefix?: string, bucket?: string): Promise<string[]>;
  /** An object read over plain HTTP, unsigned (as a browser following a redirect would). */
  fetchObject(key: string, bucket?: string): Promise<Response>;
  running(): boolean;
  /** Kills the server (SIGKILL: open connections are cut). */
  stop(): Promise<void>;
  /** Starts it again on the same port, with the objects it had. */
  start(): Promise<void>;
  /** Stops it and removes its directory. */
  close(): Promise<void>;
}

interface Running {
  child: ChildProcess;
  port: number;
  exited: Promise<void>;
}

function launch(directory: string, port: number, buckets: string[]): Promise<Running> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--openssl-legacy-provider', RUNNER, directory, String(port), ...buckets], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    let out = '';
    let err = '';
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`s3rver did not start within 20 s\n${err}`));
    }, 20_000);
    child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
    child.stdout?.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n')[0];
      if (out.includes('\n') && line !== undefined) {
        clearTimeout(timer);
        try {
          resolve({ child, port: (JSON.parse(line) as { port: number }).port, exited });
        } catch {
          reject(new Error(`s3rver said ${JSON.stringify(line)}`));
        }
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited (${code ?? signal}) before listening\n${err}`));
    });
  });
}

/** Starts s3rver with one bucket (default `sleeve-test`). */
export async function startS3(options: { bucket?: string } = {}): Promise<S3TestServer> {
  const base = await mkdtemp(path.join(tmpdir(), 'sleeve-s3-'));
  const directory = path.join(base, 'data');
  const bucket = options.bucket ?? 'sleeve-test';
  const region = 'us-east-1';
  let current: Running | undefined = await launch(directory, 0, [bucket]);
  const port = current.port;
  const endpoint = `http://127.0.0.1:${port}`;

  const urlFor: S3TestServer['urlFor'] = (o = {}) => {
    const params = new URLSearchParams({ endpoint, region, forcePathStyle: 'true', ...o.params });
    return `s3://${o.bucket ?? bucket}${o.prefix === undefined ? '' : `/${o.prefix}`}?${params}`;
  };
  const storageUrl = urlFor();

  const server: S3TestServer = {
    endpoint,
    port,
    bucket,
    region,
    storageUrl,
    env: {
      SLEEVE_STORAGE_URL: storageUrl,
      AWS_ACCESS_KEY_ID: S3RVER_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3RVER_CREDENTIALS.secretAccessKey,
    },
    credentials: { ...S3RVER_CREDENTIALS },
    publicUrl: `${endpoint}/${bucket}`,
    urlFor,
    async createBucket(name) {
      const res = await fetch(`${endpoint}/${name}`, { method: 'PUT' });
      if (res.status !== 200) throw new Error(`creating bucket ${name}: HTTP ${res.status} ${await res.text()}`);
    },
    async listKeys(prefix = '', b = bucket) {
      const keys: string[] = [];
      let token: string | undefined;
      do {
        const q = new URLSearchParams({ 'list-type': '2', prefix });
        if (token !== undefined) q.set('continuation-token', token);
        const res = await fetch(`${endpoint}/${b}?${q}`);
        const xml = await res.text();
        if (res.status !== 200) throw new Error(`listing ${b}: HTTP ${res.status} ${xml}`);
        for (const m of xml.matchAll(/<Key>([^<]*)<\/Key>/g)) keys.push(unescapeXml(m[1] as string));
        token = /<IsTruncated>true<\/IsTruncated>/.test(xml) ? unescapeXml(/<NextContinuationToken>([^<]*)</.exec(xml)?.[1] ?? '') : undefined;
      } while (token !== undefined && token !== '');
      return keys.sort();
    },
    fetchObject(key, b = bucket) {
      return fetch(`${endpoint}/${b}/${key}`);
    },
    running() {
      return current !== undefined;
    },
    async stop() {
      if (current === undefined) return;
      const { child, exited } = current;
      current = undefined;
      child.kill('SIGKILL');
      await exited;
    },
    async start() {
      if (current !== undefined) return;
      current = await launch(directory, port, [bucket]);
    },
    async close() {
      await server.stop();
      await rm(base, { recursive: true, force: true });
    },
  };
  return server;
}

function unescapeXml(text: string): string {
  return text.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: '<', gt: '>', quot: '"', apos: "'", amp: '&' })[e] as string);
}

import { createHash, hash, randomBytes, randomFillSync, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { DEFAULT_HASH_COST, DEFAULT_HASH_QUEUE, defaultHashThreads } from '../shared/password-hashing.js';

/**
 * Random bytes for tokens, drawn from the CSPRNG a block at a time and each handed out once
 * (docs/decisions.md, "Token endpoint CPU"): one draw of 4 KiB costs about what one of 32
 * bytes does, so a token costs a slice instead of a draw. Handed-out bytes are zeroed.
 */
const RANDOM_POOL = Buffer.allocUnsafeSlow(4096);
let randomOffset = RANDOM_POOL.length;

/** A fresh secret of 256 random bits, base64url (43 characters). Used for ids, secrets, codes and tokens. */
export function randomToken(bytes = 32): string {
  if (bytes > RANDOM_POOL.length) return randomBytes(bytes).toString('base64url');
  if (randomOffset + bytes > RANDOM_POOL.length) {
    randomFillSync(RANDOM_POOL);
    randomOffset = 0;
  }
  const start = randomOffset;
  randomOffset += bytes;
  const token = RANDOM_POOL.toString('base64url', start, randomOffset);
  RANDOM_POOL.fill(0, start, randomOffset);
  return token;
}

/** How tokens and client secrets are stored: SHA-256, base64url. They are random, so no salt or stretching is needed. */
export function tokenHash(token: string): string {
  return hash('sha256', token, 'base64url');
}

/** Compares two strings in time that depends only on their lengths. */
export function constantTimeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  if (x.length !== y.length) {
    timingSafeEqual(x, x);
    return false;
  }
  return timingSafeEqual(x, y);
}

/** scrypt's block size, parallelism and key length; N comes from the hasher's cost (SLEEVE_PASSWORD_HASH_COST). */
const SCRYPT = { r: 8, p: 1, keylen: 32 };

/**
 * The code each hashing thread runs (CommonJS, given inline so that the bundled CLI finds it
 * too): scryptSync on the worker's own thread, one job at a time.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { scryptSync } = require('node:crypto');
parentPort.on('message', (job) => {
  try {
    const key = scryptSync(job.password, Buffer.from(job.salt), job.keylen, job.options);
    parentPort.postMessage({ key });
  } catch (err) {
    parentPort.postMessage({ error: String((err && err.message) || err) });
  }
});
`;

/** Thrown when every hashing thread is busy and the queue is full: the caller answers 503. */
export class PasswordHashingBusy extends Error {
  constructor() {
    super('password hashing is at capacity');
    this.name = 'PasswordHashingBusy';
  }
}

export interface PasswordHashingLimits {
  /** Worker threads that hash (each holds 32 MiB while it works). */
  threads: number;
  /** Hashes that may wait for a thread; one more is refused with PasswordHashingBusy. */
  queue: number;
  /** log2 of scrypt's N for new hashes (default DEFAULT_HASH_COST). */
  cost?: number;
}

export { DEFAULT_HASH_QUEUE, defaultHashThreads };

interface Job {
  password: string;
  salt: Buffer;
  keylen: number;
  options: ScryptOptions;
  resolve(key: Buffer): void;
  reject(err: Error): void;
}

/**
 * scrypt on a small pool of worker threads of its own, with a bounded queue. Node's
 * `crypto.scrypt` runs on libuv's thread pool (four threads), which file reads and DNS share:
 * a burst of sign-ins there made every fs call of the file server wait behind the hashes.
 * Idle threads are unref'd, so a CLI command exits when its work is done.
 */
export class PasswordHasher {
  private readonly idle: Worker[] = [];
  private readonly running = new Map<Worker, Job>();
  private readonly waiting: Job[] = [];
  private threads = 0;
  private closed = false;

  /** scrypt's N for new hashes. */
  readonly n: number;

  constructor(private readonly limits: PasswordHashingLimits = { threads: defaultHashThreads(), queue: DEFAULT_HASH_QUEUE }) {
    this.n = 2 ** (limits.cost ?? DEFAULT_HASH_COST);
  }

  scrypt(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(new Error('the password hasher is closed'));
      const job: Job = { password, salt, keylen, options: { ...options, maxmem: 128 * options.N! * options.r! * 2 }, resolve, reject };
      const worker = this.idle.pop() ?? (this.threads < this.limits.threads ? this.spawn() : undefined);
      if (worker !== undefined) this.start(worker, job);
      else if (this.waiting.length < this.limits.queue) this.waiting.push(job);
      else reject(new PasswordHashingBusy());
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) job.reject(new Error('the password hasher is closed'));
    await Promise.all([...this.idle, ...this.running.keys()].map((w) => w.terminate()));
  }

  private spawn(): Worker {
    const worker = new Worker(WORKER_SOURCE, { eval: true });
    this.threads++;
    worker.on('message', (msg: { key?: Uint8Array; error?: string }) => {
      const job = this.running.get(worker);
      this.running.delete(worker);
      if (msg.key !== undefined) job?.resolve(Buffer.from(msg.key));
      else job?.reject(new Error(`scrypt failed: ${msg.error}`));
      this.next(worker);
    });
    worker.on('error', () => {});
    worker.on('exit', () => {
      this.threads--;
      const i = this.idle.indexOf(worker);
      if (i !== -1) this.idle.splice(i, 1);
      const job = this.running.get(worker);
      this.running.delete(worker);
      job?.reject(new Error('a password hashing thread stopped'));
      // A thread that died leaves its place to a new one for whoever waits.
      const waiting = this.closed ? undefined : this.waiting.shift();
      if (waiting !== undefined) this.start(this.spawn(), waiting);
    });
    return worker;
  }

  private start(worker: Worker, job: Job): void {
    this.running.set(worker, job);
    worker.ref();
    worker.postMessage({ password: job.password, salt: job.salt, keylen: job.keylen, options: job.options });
  }

  private next(worker: Worker): void {
    const job = this.waiting.shift();
    if (job !== undefined) return this.start(worker, job);
    worker.unref();
    this.idle.push(worker);
  }
}

let shared: PasswordHasher | undefined;
/** The hasher of processes that were given none (CLI commands): default limits. */
function sharedHasher(): PasswordHasher {
  shared ??= new PasswordHasher();
  return shared;
}

/** scrypt with a random salt and the hasher's cost, in a self-describing string: `scrypt$N$r$p$salt$hash`. */
export async function hashPassword(password: string, hasher: PasswordHasher = sharedHasher()): Promise<string> {
  const salt = randomBytes(16);
  const key = await hasher.scrypt(password.normalize('NFC'), salt, SCRYPT.keylen, { N: hasher.n, r: SCRYPT.r, p: SCRYPT.p });
  return ['scrypt', hasher.n, SCRYPT.r, SCRYPT.p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** A stored hash that never matches, at the hasher's cost: the same time spent when an account does not exist. */
export function dummyPasswordHash(hasher: PasswordHasher = sharedHasher()): string {
  return `scrypt$${hasher.n}$${SCRYPT.r}$${SCRYPT.p}$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`;
}

/** Whether a stored hash was made with other parameters than the hasher's: it is made again at the next sign-in. */
export function needsRehash(stored: string, hasher: PasswordHasher = sharedHasher()): boolean {
  const [algo, n, r, p] = stored.split('$');
  return algo !== 'scrypt' || Number(n) !== hasher.n || Number(r) !== SCRYPT.r || Number(p) !== SCRYPT.p;
}

/** Whether `password` matches a stored hash; throws PasswordHashingBusy when the hasher is full. */
export async function verifyPassword(password: string, stored: string, hasher: PasswordHasher = sharedHasher()): Promise<boolean> {
  const [algo, n, r, p, salt, hash] = stored.split('$');
  if (algo !== 'scrypt' || salt === undefined || hash === undefined) return false;
  const expected = Buffer.from(hash, 'base64url');
  const key = await hasher.scrypt(password.normalize('NFC'), Buffer.from(salt, 'base64url'), expected.length, { N: Number(n), r: Number(r), p: Number(p) });
  return timingSafeEqual(key, expected);
}

/** PKCE S256: base64url(SHA-256(verifier)). */
export function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}

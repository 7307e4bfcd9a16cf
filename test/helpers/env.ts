import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import type { Server } from '../../src/serve.js';
import type { Clock } from '../../src/shared/clock.js';
import type { CliDone, CliJob } from './cli-thread.js';

/** The build output these tests were compiled into (dist/ or another --outDir), and the repository root. */
export const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const ROOT = path.resolve(DIST, '..');
/** The CLI of the same build: the bundle bin/sleeve.js runs, or the plain tsc output when no bundle was made. */
export const CLI = existsSync(path.join(DIST, 'bundle', 'index.js')) ? path.join(DIST, 'bundle', 'index.js') : path.join(DIST, 'src', 'cli', 'index.js');

/** 'postgres' when the runner's PostgreSQL pass is on, else 'sqlite'. */
export const DIALECT: 'sqlite' | 'postgres' = process.env.SLEEVE_TEST_DB === 'postgres' ? 'postgres' : 'sqlite';

export interface TestEnv {
  dir: string;
  env: Record<string, string>;
  /** Removes the data directory and drops the PostgreSQL database. */
  cleanup(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env.SLEEVE_TEST_POSTGRES_URL;
  if (url === undefined || url === '') throw new Error('SLEEVE_TEST_DB=postgres needs SLEEVE_TEST_POSTGRES_URL');
  return url;
}

/**
 * A fresh sleeve environment: its own data directory and its own database (a new
 * SQLite file, or a new PostgreSQL database on the pass that uses PostgreSQL), migrated as
 * `sleeve migrate` leaves it (the CLI's commands other than serve, migrate and demo refuse a
 * database that does not exist), unless `migrated: false` asks for none at all.
 */
export async function makeTestEnv(extra: Record<string, string> = {}, options: { migrated?: boolean } = {}): Promise<TestEnv> {
  const dir = await mkdtemp(path.join(tmpdir(), 'sleeve-test-'));
  const env: Record<string, string> = {
    SLEEVE_DATA_DIR: dir,
    SLEEVE_LOG_LEVEL: 'warn',
    SLEEVE_DEMO: 'off',
    SLEEVE_COVERART_LISTEN: '127.0.0.1:0',
    SLEEVE_AUTH_LISTEN: '127.0.0.1:0',
    // A free port each: the default (127.0.0.1:9464) would collide between test servers running side by side.
    SLEEVE_METRICS_LISTEN: '127.0.0.1:0',
    // scrypt at 2^10 (1 MiB, a few ms a hash) instead of 2^15: passwords are made and checked
    // hundreds of times in a pass. Tests about the hashing's cost give the default back (15).
    SLEEVE_PASSWORD_HASH_COST: '10',
  };
  let dropDb = async () => {};
  if (DIALECT === 'postgres') {
    // Loaded here: the SQLite pass's 120-odd test files need none of it (30 ms of CPU each).
    const { default: pg } = await import('pg');
    const admin = adminUrl();
    const name = `sleeve_test_${randomBytes(6).toString('hex')}`;
    const client = new pg.Client({ connectionString: admin });
    await client.connect();
    await client.query(`CREATE DATABASE ${name}`);
    // A test's database need not survive a crash: commits do not wait for the disk.
    await client.query(`ALTER DATABASE ${name} SET synchronous_commit = off`);
    await client.end();
    const url = new URL(admin);
    url.pathname = `/${name}`;
    env.SLEEVE_DATABASE_URL = url.href;
    dropDb = async () => {
      const c = new pg.Client({ connectionString: admin });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    };
  }
  Object.assign(env, extra);
  if (options.migrated !== false) {
    // Only the database's settings: a test may give others that are meant to be refused.
    const { database } = loadConfig({ SLEEVE_DATA_DIR: dir, ...(env.SLEEVE_DATABASE_URL === undefined ? {} : { SLEEVE_DATABASE_URL: env.SLEEVE_DATABASE_URL }) });
    // Synced at checkpoints: a test's database need not survive a power cut.
    const handle = await openDatabase(database, { durability: 'normal' });
    try {
      await migrateToLatest(handle);
    } finally {
      await handle.close();
    }
  }
  return {
    dir,
    env,
    async cleanup() {
      await dropDb();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the real `sleeve` binary with this environment (in the folder `cwd`, or this process's). */
export function runCli(env: Record<string, string>, args: string[], options: { stdin?: Buffer | string; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
    const child = spawn(process.execPath, [CLI, ...args], { env: { ...clean, ...env }, stdio: ['pipe', 'pipe', 'pipe'], cwd: options.cwd });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? -1, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }));
    child.stdin.end(options.stdin ?? '');
  });
}

/** Runs the CLI and fails with its output unless it exits 0; returns stdout parsed as JSON when --json was given. */
export async function cliOk(env: Record<string, string>, args: string[], options: { stdin?: Buffer | string } = {}): Promise<any> {
  const r = await runCli(env, args, options);
  if (r.code !== 0) throw new Error(`sleeve ${args.join(' ')} exited ${r.code}\n${r.stderr}\n${r.stdout}`);
  return args.includes('--json') ? JSON.parse(r.stdout) : r.stdout;
}

/**
 * Runs a `sleeve` command in this process (the CLI's `main` on a worker thread, with this
 * environment and standard input, its output caught) and fails unless it exits 0; returns
 * stdout, parsed as JSON when --json was given. For a test's setup, where the command is not
 * what is tested: it spares the 0.2–0.4 s of CPU a process of its own costs. Tests of the CLI
 * itself run the binary (runCli, cliOk). Commands run one at a time, on a thread of their own
 * (cli-thread.ts). Refused: serve, which runs until a signal; an environment holding more than
 * SLEEVE_* settings (AWS_* reach the AWS SDK through the process's own) or a failpoint (which
 * waits for a signal to the process).
 */
export async function cliInProcess(env: Record<string, string>, args: string[], options: { stdin?: Buffer | string } = {}): Promise<any> {
  const foreign = Object.keys(env).filter((k) => !k.startsWith('SLEEVE_') || k === 'SLEEVE_TEST_FAILPOINT');
  if (foreign.length > 0) throw new Error(`cliInProcess: ${foreign.join(', ')} would not reach what reads the process's environment; run the binary (cliOk)`);
  if (args.find((a) => !a.startsWith('-')) === 'serve') throw new Error('cliInProcess: sleeve serve runs until a signal; start it with startServe or startServer');
  const done = await cliThread.run(args, env, typeof options.stdin === 'string' ? Buffer.from(options.stdin) : (options.stdin ?? Buffer.alloc(0)));
  if (done.code !== 0) throw new Error(`sleeve ${args.join(' ')} exited ${done.code}\n${done.stderr}\n${done.stdout}`);
  return args.includes('--json') ? JSON.parse(done.stdout) : done.stdout;
}

/** The one worker thread of cliInProcess, started at its first command; it keeps the process alive only while a command runs. */
const cliThread = {
  worker: undefined as Worker | undefined,
  next: 1,
  pending: new Map<number, (done: CliDone) => void>(),
  queue: Promise.resolve() as Promise<unknown>,
  run(args: string[], env: Record<string, string>, stdin: Buffer): Promise<CliDone> {
    const turn = this.queue.then(() => this.send(args, env, stdin));
    this.queue = turn.catch(() => {});
    return turn;
  },
  send(args: string[], env: Record<string, string>, stdin: Buffer): Promise<CliDone> {
    if (this.worker === undefined) {
      const worker = new Worker(new URL('./cli-thread.js', import.meta.url));
      worker.on('message', (done: CliDone) => {
        this.pending.get(done.id)?.(done);
        this.pending.delete(done.id);
        if (this.pending.size === 0) worker.unref();
      });
      // A command that threw past main, or ended the thread: its callers fail, and the next command starts a new thread.
      const lost = (why: string) => {
        for (const settle of this.pending.values()) settle({ id: 0, code: -1, stdout: '', stderr: why });
        this.pending.clear();
        this.worker = undefined;
      };
      worker.on('error', (err) => lost(String(err.stack ?? err)));
      worker.on('exit', (code) => lost(`the CLI's thread ended (exit ${code})`));
      this.worker = worker;
    }
    const worker = this.worker;
    const id = this.next++;
    worker.ref();
    return new Promise((resolve) => {
      this.pending.set(id, resolve);
      worker.postMessage({ id, args, env, stdin } satisfies CliJob);
    });
  },
};

/** A TCP port free at the time of asking. */
/**
 * A port free on 127.0.0.1 now, for a server a test starts next. Taken below the kernel's
 * ephemeral range (32768–60999 on Linux): a port the kernel hands out could be taken again,
 * before the server listens, as the local port of any outgoing connection of a test running
 * beside this one (to PostgreSQL, Redis, another server), which made rare EADDRINUSE failures.
 * A random port of 20000–32767 is tried until one binds.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_768);
    if (await bindable(port)) return port;
  }
  throw new Error('no free port found below the ephemeral range');
}

function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export interface RunningServer {
  server: Server;
  /** http://127.0.0.1:PORT of the cover art listener; also SLEEVE_BASE_URL. */
  base: string;
}

/**
 * Starts sleeve in this process on a free port, with SLEEVE_BASE_URL pointing at it,
 * so redirects can be followed to the built-in file server; on the system clock unless given one.
 */
export async function startServer(t: TestEnv, extra: Record<string, string> = {}, clock?: Clock): Promise<RunningServer> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  Object.assign(t.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base, ...extra });
  // Loaded here, not at the top: most test files start sleeve as a process of its own, and loading
  // the server's modules costs each file half a second of CPU.
  const { serve } = await import('../../src/serve.js');
  const server = await serve(loadConfig(t.env), { only: 'coverart', clock });
  return { server, base };
}

export interface RawResponse {
  /** The status line, e.g. `HTTP/1.1 200 OK`. */
  statusLine: string;
  status: number;
  /** Header names lower-cased; repeated headers joined with `, `. */
  headers: Record<string, string>;
  body: Buffer;
}

/**
 * Sends `request` verbatim (request line, headers, blank line) over a new TCP
 * connection to `base` and reads until the server closes it, for what fetch cannot
 * send: HTTP/1.0, `OPTIONS *`, odd request targets. Ask HTTP/1.1 with `Connection: close`.
 */
export async function rawHttp(base: string, request: string, timeoutMs = 5000): Promise<RawResponse> {
  const { connect } = await import('node:net');
  const url = new URL(base);
  const raw = await new Promise<Buffer>((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => socket.destroy(new Error(`no complete answer to ${JSON.stringify(request.split('\r\n')[0])} within ${timeoutMs} ms`)), timeoutMs);
    socket.on('connect', () => socket.write(request));
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks));
    });
  });
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) throw new Error(`incomplete HTTP answer: ${JSON.stringify(raw.toString('latin1'))}`);
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return { statusLine, status: Number(statusLine.split(' ')[1]), headers, body: raw.subarray(end + 4) };
}

/**
 * Calls `probe` until `done` holds for its result or `timeoutMs` passes; returns the
 * last result either way (so the caller's assertion shows what was seen).
 */
export async function pollUntil<T>(probe: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 3000, intervalMs = 50): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  for (;;) {
    const value = await probe();
    const ms = Date.now() - start;
    if (done(value) || ms >= timeoutMs) return { value, ms };
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

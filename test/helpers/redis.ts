/*
 * A private Redis server per test file (redis-server on a free port, nothing saved), so a
 * test may stop and start it without disturbing any other test or the machine's Redis.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from './env.js';

/** Why Redis tests cannot run here, or undefined when they can. */
export function redisUnavailable(): string | undefined {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  return r.error === undefined && r.status === 0 ? undefined : 'redis-server is not installed (apt-get install redis-server)';
}

export interface PrivateRedis {
  url: string;
  port: number;
  /** Stops the server (SIGTERM; it saves nothing) and waits until it has exited. */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
  /** Sends one command (inline protocol) and returns the raw reply. */
  command(line: string): Promise<string>;
  /** Stops it for good and removes its directory. */
  destroy(): Promise<void>;
}

/** Sends one inline command and returns its reply (a bulk reply whole, else the first line(s) received). */
function ask(port: number, line: string, timeoutMs = 1000): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let out = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`redis on ${port}: no answer to ${line}`));
    }, timeoutMs);
    socket.on('connect', () => socket.write(`${line}\r\n`));
    socket.on('data', (c: Buffer) => {
      out += c.toString();
      // A bulk reply ($length, then that many bytes) may come in several pieces.
      const bulk = /^\$(\d+)\r\n/.exec(out);
      const whole = bulk === null ? out.endsWith('\r\n') : Buffer.byteLength(out) >= bulk[0].length + Number(bulk[1]) + 2;
      if (whole) {
        clearTimeout(timer);
        socket.end();
        resolve(out);
      }
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export async function startRedis(): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), 'sleeve-redis-'));
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], {
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    child = proc;
    exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    // Never outlive the test process, even when it fails before destroy().
    const reap = () => proc.kill('SIGKILL');
    process.once('exit', reap);
    void exited.then(() => process.removeListener('exit', reap));
    const deadline = Date.now() + 10_000;
    for (;;) {
      try {
        if ((await ask(port, 'PING')).startsWith('+PONG')) return;
      } catch {
        // Not listening yet.
      }
      if (Date.now() > deadline || proc.exitCode !== null) throw new Error(`redis-server on port ${port} did not start`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const stop = async () => {
    if (child === undefined || child.exitCode !== null) return;
    child.kill('SIGTERM');
    await exited;
    child = undefined;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    stop,
    command: (line) => ask(port, line),
    async destroy() {
      await stop();
      await rm(dir, { recursive: true, force: true });
    },
  };
}


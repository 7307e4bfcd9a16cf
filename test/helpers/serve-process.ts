/*
 * `sleeve serve` as a child process, the way an operator runs it: for tests that need
 * several processes, signals, or a process outliving a dependency.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { CLI, freePort } from './env.js';

export interface ServeProcess {
  child: ChildProcess;
  /** http://127.0.0.1:PORT of the cover art listener (also its SLEEVE_BASE_URL). */
  base: string;
  /** https://127.0.0.1:PORT of the auth listener, when it runs. */
  authBase: string;
  /** Everything written so far: JSON logs on stdout, messages on stderr. */
  stdout(): string;
  stderr(): string;
  /** The exit code, once it exits. */
  exited: Promise<number | null>;
  /** Sends the signal and waits for the exit code (SIGKILL after `timeoutMs`). */
  stop(signal?: NodeJS.Signals, timeoutMs?: number): Promise<number | null>;
}

/** Starts `sleeve serve` with this environment on free ports (its listen addresses and public URLs replaced); resolves once it says it is running. */
export async function startServe(env: Record<string, string>, args: string[] = []): Promise<ServeProcess> {
  const port = await freePort();
  const authPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const authBase = `https://127.0.0.1:${authPort}`;
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
  const child = spawn(process.execPath, [CLI, 'serve', ...args], {
    env: { ...clean, ...env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_AUTH_LISTEN: `127.0.0.1:${authPort}`, SLEEVE_BASE_URL: base, SLEEVE_AUTH_URL: authBase },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  void exited.then(() => process.removeListener('exit', reap));
  const deadline = Date.now() + 60_000;
  while (!err.includes('sleeve is running')) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`sleeve serve did not start (exit ${child.exitCode})\n${err}\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  return {
    child,
    base,
    authBase,
    stdout: () => out,
    stderr: () => err,
    exited,
    async stop(signal = 'SIGTERM', timeoutMs = 20_000) {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      try {
        return await exited;
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** The JSON log lines a process wrote so far. */
export function logLines(p: ServeProcess): { level: number; msg: string; [k: string]: unknown }[] {
  return p
    .stdout()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l));
}

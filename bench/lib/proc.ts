import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, readFileSync } from 'node:fs';
import path from 'node:path';

/** Full path of an executable on PATH, or undefined. */
export function which(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (dir === '') continue;
    const p = path.join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

export const TASKSET = which('taskset');

/** The command line, prefixed with `taskset -c CORE` when taskset exists and a core is given. */
export function pinned(core: number | undefined, cmd: string, args: string[]): [string, string[]] {
  if (core === undefined || TASKSET === undefined) return [cmd, args];
  return [TASKSET, ['-c', String(core), cmd, ...args]];
}

/** The environment without any SLEEVE_* variable of the caller, plus `extra`. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLEEVE_')) env[k] = v;
  return { ...env, ...extra };
}

const live = new Set<ChildProcess>();
let hooked = false;

/** Children still running are killed when the benchmark stops, however it stops. */
function track(child: ChildProcess): void {
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (hooked) return;
  hooked = true;
  const killAll = () => {
    for (const c of live) c.kill('SIGKILL');
  };
  process.once('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

export interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit, ms. */
  ms: number;
}

/** Runs a command to completion, collecting its output. */
export function run(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; stdin?: string } = {}): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const start = process.hrtime.bigint();
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: [opts.stdin === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    track(child);
    child.stdin?.end(opts.stdin);
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr, ms: Number(process.hrtime.bigint() - start) / 1e6 }));
  });
}

/** Like run, but throws with the output when the exit code is not 0. */
export async function runOk(cmd: string, args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; stdin?: string } = {}): Promise<RunResult> {
  const r = await run(cmd, args, opts);
  if (r.code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited with ${r.code ?? r.signal}\n${r.stdout}\n${r.stderr}`);
  return r;
}

export interface Server {
  name: string;
  /** Base URL, e.g. http://127.0.0.1:41234 */
  url: string;
  pid: number;
  /** Everything it printed so far. */
  output(): string;
  /** CPU seconds (user + system) the process has used so far, from /proc; NaN where unavailable. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

const CLK_TCK = 100;

/** CPU seconds (user + system) a process has used so far, from /proc; NaN where unavailable. */
export function cpuOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the ")" closing the command name: state is field 3, utime 14, stime 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return Number.NaN;
  }
}

/**
 * Starts a long-running server and waits until its output matches `ready`, whose first
 * group is the base URL it listens on.
 */
export function startServer(opts: {
  name: string;
  cmd: string;
  args: string[];
  env?: NodeJS.ProcessEnv;
  ready: RegExp;
  timeoutMs?: number;
}): Promise<Server> {
  return new Promise((resolve, reject) => {
    const child = spawn(opts.cmd, opts.args, { env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    track(child);
    let out = '';
    let settled = false;
    const exited = new Promise<void>((r) => child.once('exit', () => r()));
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      reject(new Error(`${opts.name}: ${why}\n--- output ---\n${out}`));
    };
    const timer = setTimeout(() => fail(`not ready within ${opts.timeoutMs ?? 30_000} ms`), opts.timeoutMs ?? 30_000);
    const onData = (d: string) => {
      out += d;
      if (settled) return;
      const m = opts.ready.exec(out);
      if (m === null) return;
      settled = true;
      clearTimeout(timer);
      const pid = child.pid as number;
      resolve({
        name: opts.name,
        url: (m[1] as string).replace(/\/+$/, ''),
        pid,
        output: () => out,
        cpuSeconds: () => cpuOf(pid),
        async stop() {
          if (child.exitCode !== null || child.signalCode !== null) return;
          child.kill('SIGTERM');
          const force = setTimeout(() => child.kill('SIGKILL'), 8_000);
          await exited;
          clearTimeout(force);
        },
      });
    };
    child.stdout.setEncoding('utf8').on('data', onData);
    child.stderr.setEncoding('utf8').on('data', onData);
    child.once('error', (err) => fail(err.message));
    child.once('exit', (code, signal) => fail(`exited early with ${code ?? signal}`));
  });
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/*
 * `npm start`, the default way to run sleeve, gives the server its memory settings unless the
 * environment has its own (docs/decisions.md, "Server memory: the start script's defaults"):
 * glibc's malloc arenas limited to 2; node's own flags untouched. Checked on the
 * running server as the system sees it (its pid, command line and environment in /proc): package.json's
 * start script run by sh, as npm runs it (without the build npm runs first).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { makeTestEnv, ROOT, type TestEnv } from './helpers/env.js';

interface Started {
  pid: number;
  /** The pid the server's own log lines name. */
  loggedPid: number;
  environ: Map<string, string>;
  /** The server's command line (node's arguments included). */
  argv: string[];
  stop(): Promise<void>;
  /** What the server printed so far, for the assertion messages. */
  output(): string;
}

async function runStartScript(t: TestEnv, inherited: Record<string, string>): Promise<Started> {
  const start = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SLEEVE_') && k !== 'MALLOC_ARENA_MAX' && k !== 'NODE_OPTIONS' && v !== undefined) env[k] = v;
  const child = spawn('/bin/sh', ['-c', `${start} --only coverart`], {
    cwd: ROOT,
    env: { ...env, ...t.env, SLEEVE_LOG_LEVEL: 'info', SLEEVE_METRICS_LISTEN: 'off', ...inherited },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 60_000;
  // The banner goes to stderr and the log lines to stdout: wait for both, in whichever order they come.
  while (!err.includes('sleeve is running') || !out.split('\n').some((l) => l.startsWith('{') && l.endsWith('}'))) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the start script did not start a server (exit ${child.exitCode})\n${err}\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 25));
  }
  const pid = child.pid as number;
  const environ = new Map(
    readFileSync(`/proc/${pid}/environ`, 'utf8')
      .split('\0')
      .filter((e) => e.includes('='))
      .map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)] as [string, string]),
  );
  const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
  const logged = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { pid?: number });
  return {
    pid,
    loggedPid: logged[0]?.pid ?? Number.NaN,
    environ,
    argv,
    output: () => `stderr:\n${err}\nstdout:\n${out}`,
    async stop() {
      // Were the server a child of a shell that stayed, signalling the shell would leave it running.
      const loggedPid = logged[0]?.pid;
      if (loggedPid !== undefined && loggedPid !== pid) process.kill(loggedPid, 'SIGKILL');
      child.kill('SIGTERM');
      const force = setTimeout(() => child.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(force);
    },
  };
}

describe('npm start: the server memory defaults', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  const envs: TestEnv[] = [];
  after(async () => {
    for (const t of envs) await t.cleanup();
  });

  it('with nothing set, the server runs with 2 malloc arenas and no node flag of the script, as the started process itself', async () => {
    const t = await makeTestEnv();
    envs.push(t);
    const s = await runStartScript(t, {});
    try {
      // exec: no shell is left between the caller and the server (one pid for signals and systemd).
      assert.equal(s.loggedPid, s.pid, s.output());
      assert.equal(s.environ.get('MALLOC_ARENA_MAX'), '2', [...s.environ.keys()].join(' '));
      // V8's own young generation: a smaller one cost the token endpoint a quarter of its speed (docs/decisions.md).
      assert.deepEqual(s.argv.slice(0, s.argv.findIndex((a) => a.endsWith('sleeve.js'))).filter((a) => a.startsWith('--')), [], s.argv.join(' '));
      assert.equal(s.environ.get('NODE_OPTIONS'), undefined, s.environ.get('NODE_OPTIONS'));
    } finally {
      await s.stop();
    }
  });

  it("keeps the operator's own values: MALLOC_ARENA_MAX as given, NODE_OPTIONS passed on untouched", async () => {
    const t = await makeTestEnv();
    envs.push(t);
    const s = await runStartScript(t, { MALLOC_ARENA_MAX: '4', NODE_OPTIONS: '--max-semi-space-size=8' });
    try {
      assert.equal(s.environ.get('MALLOC_ARENA_MAX'), '4');
      assert.equal(s.environ.get('NODE_OPTIONS'), '--max-semi-space-size=8');
    } finally {
      await s.stop();
    }
  });
});

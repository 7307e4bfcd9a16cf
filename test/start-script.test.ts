/*
 * `npm start`, the default way to run sleeve, gives the server its memory settings unless the
 * environment has its own (docs/decisions.md, "Server memory: the start script's defaults"):
 * glibc's malloc arenas limited to 2, V8's semi-spaces capped at 8 MiB, an operator's NODE_OPTIONS after them. Checked on the
 * running server as the system sees it (its pid, command line and environment in /proc): package.json's
 * start script run by sh, as npm runs it (without the build npm runs first).
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
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

/**
 * The semi-space ceiling (MiB) a node started with `nodeOptions` runs with, as V8 itself sizes it:
 * no API reports the flag's value, so a child keeps enough objects alive across scavenges for
 * V8 to grow its young generation to the limit, and reports the largest new space it committed
 * (two semi-spaces in Node 20's V8).
 */
function effectiveMaxSemiSpaceMiB(nodeOptions: string): number {
  const probe = `
    const v8 = require('node:v8');
    const keep = [];
    let most = 0;
    for (let round = 0; round < 400; round++) {
      for (let i = 0; i < 20000; i++) keep.push({ round, i, pad: [round, i, round + i] });
      if (keep.length > 200000) keep.splice(0, 100000);
      const ns = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      most = Math.max(most, ns.space_size);
    }
    process.stdout.write(String(most));`;
  const out = execFileSync(process.execPath, ['-e', probe], { env: { ...process.env, NODE_OPTIONS: nodeOptions }, encoding: 'utf8' });
  return Math.round(Number(out) / 2 / (1024 * 1024));
}

describe('npm start: the server memory defaults', { skip: process.platform !== 'linux' && 'reads /proc' }, () => {
  const envs: TestEnv[] = [];
  after(async () => {
    for (const t of envs) await t.cleanup();
  });

  it('with nothing set, the server runs with 2 malloc arenas and 8 MiB semi-spaces, as the started process itself', async () => {
    const t = await makeTestEnv();
    envs.push(t);
    const s = await runStartScript(t, {});
    try {
      // exec: no shell is left between the caller and the server (one pid for signals and systemd).
      assert.equal(s.loggedPid, s.pid, s.output());
      assert.equal(s.environ.get('MALLOC_ARENA_MAX'), '2', [...s.environ.keys()].join(' '));
      // The flag goes through NODE_OPTIONS, where an operator's own flags come after it; none on node's command line.
      assert.deepEqual(s.argv.slice(0, s.argv.findIndex((a) => a.endsWith('sleeve.js'))).filter((a) => a.startsWith('--')), [], s.argv.join(' '));
      assert.equal(s.environ.get('NODE_OPTIONS')?.trim(), '--max-semi-space-size=8');
      assert.equal(effectiveMaxSemiSpaceMiB(s.environ.get('NODE_OPTIONS') ?? ''), 8);
    } finally {
      await s.stop();
    }
  });

  it("keeps the operator's own values: MALLOC_ARENA_MAX as given, NODE_OPTIONS after the script's, so that theirs wins", async () => {
    const t = await makeTestEnv();
    envs.push(t);
    const s = await runStartScript(t, { MALLOC_ARENA_MAX: '4', NODE_OPTIONS: '--max-semi-space-size=16 --max-http-header-size=16384' });
    try {
      assert.equal(s.environ.get('MALLOC_ARENA_MAX'), '4');
      const options = s.environ.get('NODE_OPTIONS') ?? '';
      assert.equal(options, '--max-semi-space-size=8 --max-semi-space-size=16 --max-http-header-size=16384');
      // V8 takes the last of a repeated flag: the operator's 16 MiB is what the server runs with.
      assert.equal(effectiveMaxSemiSpaceMiB(options), 16);
    } finally {
      await s.stop();
    }
  });
});

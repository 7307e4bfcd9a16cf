/**
 * young-gen-cpu: the server's CPU per request of the token endpoint (refresh grant) and userinfo
 * for several sizes of V8's young generation (`--max-semi-space-size`, through NODE_OPTIONS as an
 * operator would give it to the start script). One `sleeve serve --only auth` per setting, each on
 * its own copy of the same database, all started as `npm start` starts them and loaded AT THE SAME
 * TIME (one wrk each, same connections and length), so that a busy machine's load falls on every
 * setting alike; CPU from /proc (utime + stime) over the run ÷ requests answered, and the
 * scavenges per 1,000 requests from each server's metrics endpoint. Not part of `npm run bench`:
 *
 *     node dist/bench/young-gen-cpu.js [SETTINGS] [ROUNDS] [SECONDS] [CONNECTIONS] [KINDS]
 *
 * SETTINGS is a comma-separated list of semi-space sizes in MiB, `default` for none (V8's own);
 * the default is `default,8,4`, 5 rounds of 10 s, 20 connections; KINDS `refresh,userinfo` or
 * one of them. With BENCH_CPU_PROF=1 each server writes a CPU profile (bench/.work/profiles/) when
 * it stops, whose share of "(garbage collector)" samples does not depend on how busy the
 * machine is. The report goes to stdout.
 */
import { cpSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { prepareSleeve } from './auth.js';
import { startServer, which, type Server } from './lib/proc.js';
import { serveCommand, sleeveEnv } from './lib/servers.js';
import { median } from './lib/stats.js';
import { wrkOnce, writeScript, type Scenario } from './lib/wrk-rounds.js';

interface Run {
  setting: string;
  requests: number;
  rps: number;
  errors: number;
  cpuUs: number;
  scavengesPer1000: number;
}

async function metricsUrl(server: Server): Promise<string> {
  for (let i = 0; i < 100; i++) {
    const url = /metrics:\s+(http:\/\/\S+)/.exec(server.output())?.[1];
    if (url !== undefined) return url;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`${server.name}: no metrics address in its banner`);
}

/** Scavenges so far (prom-client's GC histogram, kind="minor"). */
async function scavenges(url: string): Promise<number> {
  const text = await (await fetch(url)).text();
  return Number(/^sleeve_nodejs_gc_duration_seconds_count\{kind="minor"\} (\S+)/m.exec(text)?.[1] ?? Number.NaN);
}

async function main(): Promise<void> {
  const [settingsArg = 'default,8,4', roundsArg = '5', secondsArg = '10', connectionsArg = '20', kindsArg = 'refresh,userinfo'] = process.argv.slice(2);
  const settings = settingsArg.split(',');
  if (!settings.includes('default')) settings.unshift('default');
  const rounds = Number(roundsArg);
  const seconds = Number(secondsArg);
  const connections = Number(connectionsArg);
  const cpuProf = process.env.BENCH_CPU_PROF === '1';
  const wrk = which('wrk');
  if (wrk === undefined) throw new Error('young-gen-cpu needs wrk');
  const base = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-young-gen-'));
  const servers = new Map<string, { server: Server; metrics: string }>();
  try {
    const seed = path.join(base, 'seed');
    const tokens = await prepareSleeve(seed);
    for (const setting of settings) {
      const dir = path.join(base, `semi-${setting}`);
      cpSync(seed, dir, { recursive: true });
      const serve = serveCommand(undefined, cpuProf, `young-gen-${kindsArg}-${setting}`, ['--only', 'auth']);
      const env = sleeveEnv(dir, { SLEEVE_AUTH_LISTEN: '127.0.0.1:0', SLEEVE_LOG_LEVEL: 'info' });
      delete env.NODE_OPTIONS;
      if (setting !== 'default') env.NODE_OPTIONS = `--max-semi-space-size=${setting}`;
      const server = await startServer({ name: `semi-${setting}`, cmd: serve.cmd, args: serve.args, env, ready: /Server listening at (https:\/\/[^"\s]+)/, timeoutMs: 60_000 });
      servers.set(setting, { server, metrics: await metricsUrl(server) });
    }
    const refreshBody = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refreshToken, client_id: tokens.clientId, client_secret: tokens.clientSecret }).toString();
    const all = {
      refresh: { path: '/oauth2/token', script: writeScript(base, 'refresh', `wrk.method = "POST"\nwrk.body = ${JSON.stringify(refreshBody)}\nwrk.headers["Content-Type"] = "application/x-www-form-urlencoded"\n`) },
      userinfo: { path: '/oauth2/userinfo', script: writeScript(base, 'userinfo', `wrk.method = "GET"\nwrk.headers["Authorization"] = ${JSON.stringify(`Bearer ${tokens.accessToken}`)}\n`) },
    };
    const kinds = Object.fromEntries(kindsArg.split(',').map((k) => [k, all[k as keyof typeof all]])) as Partial<typeof all> as typeof all;
    const once = (kind: keyof typeof kinds, durationS: number): Promise<Run[]> =>
      Promise.all(
        settings.map(async (setting) => {
          const { server, metrics } = servers.get(setting) as { server: Server; metrics: string };
          const scenario: Scenario = { label: `${kind} ${setting}`, server, ...kinds[kind] };
          const g0 = await scavenges(metrics);
          const c0 = server.cpuSeconds();
          const out = await wrkOnce(wrk, scenario, durationS, connections);
          const cpu = server.cpuSeconds() - c0;
          const g1 = await scavenges(metrics);
          return { setting, requests: out.requests, rps: out.rps, errors: out.errors, cpuUs: (cpu / out.requests) * 1e6, scavengesPer1000: ((g1 - g0) / out.requests) * 1000 };
        }),
      );
    for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) await once(kind, 3);
    const results: Record<string, Run[][]> = {};
    for (let r = 0; r < rounds; r++) {
      for (const kind of Object.keys(kinds) as (keyof typeof kinds)[]) {
        const runs = await once(kind, seconds);
        (results[kind] ??= []).push(runs);
        const load = os.loadavg()[0] as number;
        for (const x of runs) {
          process.stderr.write(`round ${r + 1} ${kind} ${x.setting}: ${x.requests} requests, ${Math.round(x.rps)}/s, ${x.cpuUs.toFixed(1)} µs CPU each, ${x.scavengesPer1000.toFixed(2)} scavenges/1000, errors ${x.errors}, load ${load.toFixed(1)}\n`);
        }
      }
    }
    const lines = [
      `| kind | semi-space | CPU per request, median [rounds] | vs V8's default, median of the rounds' ratios | scavenges per 1,000 requests | requests/s median | errors |`,
      `|---|---|---:|---:|---:|---:|---:|`,
    ];
    for (const [kind, perRound] of Object.entries(results)) {
      for (const [i, setting] of settings.entries()) {
        const runs = perRound.map((round) => round[i] as Run);
        const ratios = perRound.map((round) => (round[i] as Run).cpuUs / (round[0] as Run).cpuUs);
        lines.push(
          `| ${kind} | ${setting === 'default' ? "V8's default" : `${setting} MiB`} | ${median(runs.map((x) => x.cpuUs)).toFixed(0)} µs [${runs.map((x) => x.cpuUs.toFixed(0)).join(', ')}] | ${median(ratios).toFixed(3)} [${ratios.map((x) => x.toFixed(2)).join(', ')}] | ${median(runs.map((x) => x.scavengesPer1000)).toFixed(1)} | ${Math.round(median(runs.map((x) => x.rps)))} | ${runs.reduce((a, x) => a + x.errors, 0)} |`,
        );
      }
    }
    process.stdout.write(`${rounds} rounds × ${seconds} s, ${connections} connections, all settings loaded at once; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}\n\n${lines.join('\n')}\n`);
  } finally {
    await Promise.all([...servers.values()].map((x) => x.server.stop()));
    await rm(base, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`young-gen-cpu: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
});

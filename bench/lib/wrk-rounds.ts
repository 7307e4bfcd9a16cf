import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseWrk, type LoadResult } from './load.js';
import { pinned, run, type Server } from './proc.js';
import type { Series } from './rounds.js';
import { LOAD_CORE } from './servers.js';
import { fmtMs } from './stats.js';

/** One wrk load: a server, a path and the Lua script that shapes its requests. */
export interface Scenario {
  label: string;
  server: Server;
  path: string;
  script: string;
  /** Called before each run with its length in seconds (e.g. to write single-use requests for it). */
  prepare?: (seconds: number) => Promise<void>;
  /** Called with each run's result. */
  observe?: (result: LoadResult) => void;
  /**
   * Whether a run sent more requests than `prepare` wrote (single-use requests: past the end
   * each is a used one, answered with an error). Such a run measures error answers, not the
   * scenario; it is run again, prepared from what `observe` saw.
   */
  exhausted?: (result: LoadResult) => boolean;
}

export function writeScript(dir: string, name: string, lua: string): string {
  const file = path.join(dir, `${name}.lua`);
  writeFileSync(file, lua);
  return file;
}

/** How often a run that outran its single-use requests is made again before the benchmark gives up. */
const EXHAUSTED_TRIES = 4;

/** One wrk run of the scenario on the load core (again while it outruns its single-use requests); the server's CPU use during it. */
export async function wrkOnce(wrk: string, s: Scenario, durationS: number, connections: number): Promise<LoadResult> {
  for (let attempt = 1; ; attempt++) {
    const result = await wrkAttempt(wrk, s, durationS, connections);
    if (s.exhausted?.(result) !== true) return result;
    if (attempt === EXHAUSTED_TRIES) throw new Error(`${s.label}: ran out of its single-use requests ${attempt} times`);
    process.stderr.write(`  ${s.label}: ran out of its single-use requests (${result.requests} sent); again with more\n`);
  }
}

async function wrkAttempt(wrk: string, s: Scenario, durationS: number, connections: number): Promise<LoadResult> {
  await s.prepare?.(durationS);
  const cpu0 = s.server.cpuSeconds();
  const t0 = process.hrtime.bigint();
  const [cmd, args] = pinned(LOAD_CORE, wrk, ['-t1', `-c${connections}`, `-d${durationS}s`, '--latency', '-s', s.script, `${s.server.url}${s.path}`]);
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`wrk failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const result: LoadResult = { ...parseWrk(r.stdout), tool: 'wrk', serverCpu: ((s.server.cpuSeconds() - cpu0) / seconds) * 100 };
  s.observe?.(result);
  return result;
}

/**
 * A warm-up of each scenario, then `rounds` rounds, each running every scenario once, the
 * order rotated each round; progress on stderr with labels padded to `labelWidth`.
 */
export async function wrkRounds(
  wrk: string,
  scenarios: Scenario[],
  opts: { rounds: number; durationS: number; warmup: number; connections: number; labelWidth: number },
): Promise<Series[]> {
  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  for (const s of scenarios) {
    log(`  warm-up ${s.label} (${opts.warmup} s)`);
    await wrkOnce(wrk, s, opts.warmup, opts.connections);
  }
  const series: Series[] = scenarios.map((s) => ({ label: s.label, runs: [] }));
  for (let r = 0; r < opts.rounds; r++) {
    for (let k = 0; k < scenarios.length; k++) {
      const i = (r + k) % scenarios.length;
      const res = await wrkOnce(wrk, scenarios[i] as Scenario, opts.durationS, opts.connections);
      (series[i] as Series).runs.push(res);
      log(`  round ${r + 1}/${opts.rounds} ${(scenarios[i] as Scenario).label.padEnd(opts.labelWidth)} ${Math.round(res.rps)} req/s  p99 ${fmtMs(res.p99)}${res.errors > 0 ? `  ERRORS ${res.errors}` : ''}`);
    }
  }
  return series;
}

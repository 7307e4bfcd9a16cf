/**
 * What both auth benchmarks (bench/auth.ts, bench/auth-oidc.ts) measure a pair with: a check that
 * a scenario answers 200, the interleaved rounds of oidc-provider against sleeve and their report
 * section, and the choice of cases.
 */
import type { Options } from './options.js';
import { mediansTable, runsTable, seriesSummary } from './rounds.js';
import { fmtMs, fmtRatio, median, passFail } from './stats.js';
import { wrkRounds, type Scenario } from './wrk-rounds.js';

/** sleeve's requests/s over oidc-provider's, at least. */
const GOAL = 1.5;

/** A progress line, on stderr. */
export function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Checks one request of the scenario answers 200 before loading it. */
export async function check(s: Scenario, init: { method: string; headers: Record<string, string>; body?: string }): Promise<void> {
  const { request } = await import('node:https');
  const status = await new Promise<number>((resolve, reject) => {
    const req = request(`${s.server.url}${s.path}`, { method: init.method, headers: init.headers, rejectUnauthorized: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(init.body);
  });
  if (status !== 200) throw new Error(`${s.label}: answered ${status}, not 200`);
}

/**
 * Measures a pair [oidc-provider, sleeve]: a warm-up each, then `rounds` interleaved rounds;
 * the section of the report (runs, medians, the ratio against the goal, p99) and its data.
 */
export async function comparePair(wrk: string, pair: Scenario[], opts: Options, title: string): Promise<{ ok: boolean; data: unknown; section: string }> {
  const durationS = opts.duration ?? 8;
  const rounds = opts.rounds ?? 5;
  const series = await wrkRounds(wrk, pair, { rounds, durationS, warmup: opts.warmup, connections: opts.connections, labelWidth: 32 });
  const [p, s, floor] = series.map(seriesSummary) as [ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary> | undefined];
  const ratio = s.rps.median / p.rps.median;
  const ok = ratio >= GOAL && s.errors === 0;
  // A third scenario is the floor (bench/auth-floor.ts): the most any server's ratio can be here.
  const floorRatio = floor === undefined ? undefined : floor.rps.median / p.rps.median;
  const section = [
    `#### ${title}`,
    '',
    runsTable(series),
    '',
    mediansTable(series),
    '',
    `- sleeve/oidc-provider requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL}): **${passFail(ok)}**; p99 sleeve ${fmtMs(s.p99.median)}, oidc-provider ${fmtMs(p.p99.median)}; errors ${s.errors}/${p.errors}`,
    ...(floor === undefined || floorRatio === undefined
      ? []
      : [
          `- ceiling: ${floor.label}/oidc-provider requests/s **${fmtRatio(floorRatio)}** (a server that only answers with jose's signature, bench/auth-floor.ts); sleeve/floor ${fmtRatio(s.rps.median / floor.rps.median)}; errors ${floor.errors}`,
        ]),
    `- server CPU per request (median of the runs'): ${[p, s, ...(floor === undefined ? [] : [floor])].map((x) => `${x.label} ${Math.round(cpuPerRequest(x))} µs`).join(', ')}`,
  ].join('\n');
  return { ok, data: { peer: p, sleeve: s, ratio, ok, ...(floor === undefined ? {} : { floor, floorRatio }) }, section };
}

/** A series' server CPU per answered request (µs), the median of its runs': on a shared machine a steadier figure than requests/s. */
function cpuPerRequest(x: ReturnType<typeof seriesSummary>): number {
  return median(x.runs.map((r) => (r.serverCpu * 10_000) / r.rps));
}

/** SLEEVE_BENCH_AUTH_CASES=code_openid_es256,userinfo…: only those pairs, for a quick look at one (names as in the JSON). */
export function authCaseWanted(name: string): boolean {
  const only = process.env.SLEEVE_BENCH_AUTH_CASES?.split(',').filter((x) => x !== '');
  return only === undefined || only.length === 0 || only.includes(name);
}

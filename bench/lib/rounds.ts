import { runLoad, type LoadResult } from './load.js';
import { TASKSET, type Server } from './proc.js';
import { fmtInt, fmtMs, max, median, min, summary, table } from './stats.js';

/** A server (started on demand) and what to ask it. */
export interface Target {
  label: string;
  start: () => Promise<Server>;
  /** Checked once on each new process before any load (e.g. that the answer is a 307). */
  check: (server: Server) => Promise<void>;
  /** Path of the request (when no pathsFile). */
  path: string;
  /** Random paths to request instead. */
  pathsFile?: string;
  /** Request headers besides wrk's own (e.g. Host, for a server chosen by name). */
  headers?: Record<string, string>;
}

export interface Series {
  label: string;
  runs: LoadResult[];
}

export interface RoundSettings {
  durationS: number;
  rounds: number;
  warmupS: number;
  connections: number;
  /** Core of the load generator. */
  loadCore: number | undefined;
  /**
   * A new server process for every run (warmed before it), so that differences between
   * processes of the same program are sampled too; otherwise one process per target
   * serves every round, warmed once.
   */
  freshProcess: boolean;
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function once(t: Target, server: Server, durationS: number, s: RoundSettings): Promise<LoadResult> {
  return runLoad({
    url: `${server.url}${t.path}`,
    connections: s.connections,
    durationS,
    core: s.loadCore,
    pathsFile: t.pathsFile,
    headers: t.headers,
    serverCpuSeconds: () => server.cpuSeconds(),
  });
}

async function warm(t: Target, server: Server, s: RoundSettings, quiet: boolean): Promise<void> {
  if (!quiet) log(`  warm-up ${t.label} (${s.warmupS} s)`);
  const w = await once(t, server, s.warmupS, s);
  if (w.errors > 0) log(`  ! warm-up of ${t.label}: ${w.errors} errors / unexpected statuses`);
}

async function startChecked(t: Target): Promise<Server> {
  const server = await t.start();
  try {
    await t.check(server);
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/**
 * Runs `rounds` rounds in which every target gets one load run after a warm-up; the
 * order rotates from round to round so no target always goes first.
 */
export async function interleavedRounds(targets: Target[], s: RoundSettings): Promise<Series[]> {
  const series: Series[] = targets.map((t) => ({ label: t.label, runs: [] }));
  const persistent: Server[] = [];
  try {
    if (!s.freshProcess) {
      for (const t of targets) persistent.push(await startChecked(t));
      for (const [i, t] of targets.entries()) await warm(t, persistent[i] as Server, s, false);
    }
    for (let r = 0; r < s.rounds; r++) {
      for (let k = 0; k < targets.length; k++) {
        const i = (r + k) % targets.length;
        const t = targets[i] as Target;
        let res: LoadResult;
        if (s.freshProcess) {
          const server = await startChecked(t);
          try {
            await warm(t, server, s, true);
            res = await once(t, server, s.durationS, s);
          } finally {
            await server.stop();
          }
        } else res = await once(t, persistent[i] as Server, s.durationS, s);
        (series[i] as Series).runs.push(res);
        log(
          `  round ${r + 1}/${s.rounds} ${t.label.padEnd(34)} ${fmtInt(res.rps).padStart(8)} req/s  p50 ${fmtMs(res.p50)}  p99 ${fmtMs(res.p99)}` +
            `  server CPU ${Number.isFinite(res.serverCpu) ? `${Math.round(res.serverCpu)} %` : '?'}${res.errors > 0 ? `  ERRORS ${res.errors}` : ''}`,
        );
      }
    }
  } finally {
    await Promise.all(persistent.map((p) => p.stop()));
  }
  return series;
}

/** How the rounds were run, in one line. */
export function describeRounds(s: RoundSettings, tool: string | undefined): string {
  const how = s.freshProcess
    ? `each run on a new server process warmed for ${s.warmupS} s first`
    : `one process per server for all rounds, warmed once for ${s.warmupS} s`;
  return `${s.rounds} interleaved rounds × ${s.durationS} s per server, ${how}; ${s.connections} connections; ${tool ?? '?'}${TASKSET !== undefined && s.loadCore !== undefined ? ` on CPU ${s.loadCore}` : ' (not pinned)'}`;
}

/** Every run, round by round. */
export function runsTable(series: Series[]): string {
  const rows: string[][] = [];
  const rounds = Math.max(...series.map((s) => s.runs.length));
  for (let r = 0; r < rounds; r++) {
    for (const s of series) {
      const x = s.runs[r];
      if (x === undefined) continue;
      rows.push([
        String(r + 1),
        s.label,
        fmtInt(x.rps),
        fmtMs(x.p50),
        fmtMs(x.p90),
        fmtMs(x.p95),
        fmtMs(x.p99),
        fmtMs(x.p999),
        Number.isFinite(x.serverCpu) ? `${Math.round(x.serverCpu)} %` : '–',
        String(x.errors),
      ]);
    }
  }
  return table(['>round', 'server', '>req/s', '>p50', '>p90', '>p95', '>p99', '>p99.9', '>server CPU', '>errors'], rows);
}

/** Median [range] per series. */
export function mediansTable(series: Series[]): string {
  return table(
    ['server', '>req/s median [range]', '>p50 median', '>p90 median', '>p99 median [range]'],
    series.map((s) => [
      s.label,
      summary(s.runs.map((x) => x.rps), fmtInt),
      fmtMs(median(s.runs.map((x) => x.p50))),
      fmtMs(median(s.runs.map((x) => x.p90))),
      summary(s.runs.map((x) => x.p99), fmtMs),
    ]),
  );
}

export function seriesSummary(s: Series) {
  const rps = s.runs.map((x) => x.rps);
  const p99 = s.runs.map((x) => x.p99);
  return {
    label: s.label,
    rps: { median: median(rps), min: min(rps), max: max(rps) },
    p50: median(s.runs.map((x) => x.p50)),
    p90: median(s.runs.map((x) => x.p90)),
    p99: { median: median(p99), min: min(p99), max: max(p99) },
    serverCpu: median(s.runs.map((x) => x.serverCpu)),
    errors: s.runs.reduce((a, x) => a + x.errors, 0),
    runs: s.runs,
  };
}

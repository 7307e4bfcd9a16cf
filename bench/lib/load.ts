import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { benchScript, workDir } from './paths.js';
import { pinned, run, which } from './proc.js';

/** One load-generator run. Latencies in ms. */
export interface LoadResult {
  tool: 'wrk' | 'autocannon';
  rps: number;
  p50: number;
  p90: number;
  p99: number;
  /** p95 and p99.9 (wrk only, from its script's `done`; NaN otherwise): the shape of the tail. */
  p95: number;
  p999: number;
  requests: number;
  /** Socket errors, timeouts and responses other than the expected 2xx/3xx. */
  errors: number;
  /** CPU use of the server under test during the run, % of one core (NaN if unknown). */
  serverCpu: number;
}

export interface LoadOptions {
  url: string;
  connections: number;
  durationS: number;
  /** Core for the load generator (taskset), if any. */
  core: number | undefined;
  /** Request paths to pick from at random instead of `url`'s path. */
  pathsFile?: string;
  /** Request headers besides the load generator's own (wrk only). */
  headers?: Record<string, string>;
  /** Reads the server's CPU seconds, to report its CPU use during the run. */
  serverCpuSeconds?: () => number;
}

const WRK = process.env.SLEEVE_BENCH_LOADGEN === 'autocannon' ? undefined : (which('wrk') ?? undefined);

export function loadGenerator(): string {
  if (WRK !== undefined) return `wrk (${WRK})`;
  const require = createRequire(import.meta.url);
  const version = (require('autocannon/package.json') as { version: string }).version;
  return `autocannon ${version} (wrk not found)`;
}

export async function wrkVersion(): Promise<string | undefined> {
  if (WRK === undefined) return undefined;
  const r = await run(WRK, ['-v']);
  return /wrk\s+\S+/.exec(r.stdout + r.stderr)?.[0];
}

/** wrk's `done`: the percentiles its --latency summary leaves out, in µs, on one line parseWrk reads. */
const PERCENTILES_DONE = `done = function(summary, latency, requests)
  io.write(string.format("percentiles-us p95=%d p99.9=%d\\n", latency:percentile(95), latency:percentile(99.9)))
end
`;

/** A wrk Lua script that requests a random path of `pathsFile` each time (and prints PERCENTILES_DONE's line). */
export function wrkRandomScript(pathsFile: string): string {
  const file = `${pathsFile}.lua`;
  writeFileSync(
    file,
    `local paths = {}
for line in io.lines(${JSON.stringify(pathsFile)}) do
  if line ~= "" then paths[#paths + 1] = line end
end
local n = #paths
math.randomseed(os.time() + math.floor(os.clock() * 1000000))
request = function()
  return wrk.format("GET", paths[math.random(n)])
end
${PERCENTILES_DONE}`,
  );
  return file;
}

/** A wrk Lua script with only PERCENTILES_DONE (the URL's own path each time), in bench/.work/, written once per process. */
let percentilesScript: string | undefined;
function wrkPercentilesScript(): string {
  if (percentilesScript === undefined) {
    percentilesScript = path.join(workDir(), 'wrk-percentiles.lua');
    writeFileSync(percentilesScript, PERCENTILES_DONE);
  }
  return percentilesScript;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

/** Parses wrk --latency output. */
export function parseWrk(text: string): Omit<LoadResult, 'tool' | 'serverCpu'> {
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(text);
  if (rps === null) throw new Error(`could not parse wrk output:\n${text}`);
  const pct = (p: number) => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(text);
    return m === null ? Number.NaN : Number(m[1]) * (UNIT_MS[m[2] as string] as number);
  };
  const requests = Number(/(\d+) requests in/.exec(text)?.[1] ?? Number.NaN);
  let errors = 0;
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(text);
  if (sock !== null) errors += sock.slice(1).reduce((a, b) => a + Number(b), 0);
  const non = /Non-2xx or 3xx responses: (\d+)/.exec(text);
  if (non !== null) errors += Number(non[1]);
  const extra = /^percentiles-us p95=(\d+) p99\.9=(\d+)$/m.exec(text);
  const p95 = extra === null ? Number.NaN : Number(extra[1]) / 1000;
  const p999 = extra === null ? Number.NaN : Number(extra[2]) / 1000;
  return { rps: Number(rps[1]), p50: pct(50), p90: pct(90), p95, p99: pct(99), p999, requests, errors };
}

/** Runs the load generator once against a server. */
export async function runLoad(opts: LoadOptions): Promise<LoadResult> {
  const cpu0 = opts.serverCpuSeconds?.() ?? Number.NaN;
  const t0 = process.hrtime.bigint();
  let result: Omit<LoadResult, 'tool' | 'serverCpu'>;
  let tool: LoadResult['tool'];
  if (WRK !== undefined) {
    const args = ['-t1', `-c${opts.connections}`, `-d${opts.durationS}s`, '--latency'];
    for (const [name, value] of Object.entries(opts.headers ?? {})) args.push('-H', `${name}: ${value}`);
    args.push('-s', opts.pathsFile !== undefined ? wrkRandomScript(opts.pathsFile) : wrkPercentilesScript());
    args.push(opts.url);
    const [cmd, full] = pinned(opts.core, WRK, args);
    const r = await run(cmd, full);
    if (r.code !== 0) throw new Error(`wrk failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    result = parseWrk(r.stdout);
    tool = 'wrk';
  } else {
    if (opts.headers !== undefined) throw new Error('request headers need wrk (SLEEVE_BENCH_LOADGEN=autocannon cannot send them)');
    const args = [benchScript('autocannon-driver.js'), opts.url, String(opts.connections), String(opts.durationS)];
    if (opts.pathsFile !== undefined) args.push(path.resolve(opts.pathsFile));
    const [cmd, full] = pinned(opts.core, process.execPath, args);
    const r = await run(cmd, full);
    if (r.code !== 0) throw new Error(`autocannon failed (${r.code}):\n${r.stdout}\n${r.stderr}`);
    const parsed = JSON.parse(r.stdout.trim().split('\n').pop() as string) as Omit<LoadResult, 'tool' | 'serverCpu' | 'p95' | 'p999'>;
    result = { ...parsed, p95: Number.NaN, p999: Number.NaN };
    tool = 'autocannon';
  }
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu1 = opts.serverCpuSeconds?.() ?? Number.NaN;
  return { ...result, tool, serverCpu: ((cpu1 - cpu0) / seconds) * 100 };
}

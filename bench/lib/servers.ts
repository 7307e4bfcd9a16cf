import { readFileSync } from 'node:fs';
import path from 'node:path';
import { benchScript, ROOT, SLEEVE_CLI, workDir } from './paths.js';
import { cleanEnv, pinned, startServer, type Server } from './proc.js';

/** The core the servers run on and the one the load generator runs on. */
export const SERVER_CORE = 0;
export const LOAD_CORE = 1;

/** The SLEEVE_* settings every benchmark process gets. */
export function sleeveEnv(dataDir: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  return cleanEnv({
    SLEEVE_DATA_DIR: dataDir,
    SLEEVE_LOG_LEVEL: 'warn',
    SLEEVE_DEMO: 'off',
    // Metrics on, as by default (their per-request cost is part of what is measured), on a free port.
    SLEEVE_METRICS_LISTEN: '127.0.0.1:0',
    ...extra,
  });
}

/** Node flags for sleeve's processes: --cpu-prof into bench/.work/profiles/ when asked. */
export function nodeFlags(cpuProf: boolean, name: string): string[] {
  return cpuProf ? ['--cpu-prof', '--cpu-prof-dir', workDir('profiles'), '--cpu-prof-name', `${name}-${Date.now()}.cpuprofile`] : [];
}

/** What package.json's start script runs, the default way to run a server (docs/decisions.md, "Server memory: the start script's defaults"). */
const START_TARGET = 'bin/sleeve.js serve';

/**
 * `sleeve serve ARGS` started the way `npm start` starts it: package.json's start script run
 * by sh (as npm runs it), with the bundle of the build under test in place of bin/sleeve.js
 * and ARGS after it. The script ends in `exec`, so the process started is the server itself
 * (its pid is the server's). --cpu-prof's flags (which NODE_OPTIONS does not take) go on
 * node's command line in the script.
 */
export function serveCommand(core: number | undefined, cpuProf: boolean, name: string, args: string[], cli = SLEEVE_CLI): { cmd: string; args: string[] } {
  const start = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } }).scripts.start;
  if (!start.endsWith(START_TARGET)) throw new Error(`package.json's start script no longer ends in "${START_TARGET}": ${start}`);
  const flags = nodeFlags(cpuProf, name).map((f) => `'${f.replace(/'/g, `'\\''`)}'`);
  const script = `${start.slice(0, -START_TARGET.length)}${[...flags, '"$0"', 'serve', '"$@"'].join(' ')}`;
  const [cmd, full] = pinned(core, '/bin/sh', ['-c', script, cli, ...args]);
  return { cmd, args: full };
}

/**
 * `sleeve serve` as a child process on the server core, on a free port, started as `npm
 * start` starts it (serveCommand). `only` leaves out the auth listener (it takes no part in
 * these measurements); `cli`, another build's CLI (an A/B), run the same way.
 */
export function startSleeve(opts: {
  name: string;
  dataDir: string;
  env?: Record<string, string>;
  only?: 'coverart';
  cpuProf: boolean;
  /** The core to pin it to (default the server core); null leaves it unpinned. */
  core?: number | null;
  /** The CLI to run (default this build's). */
  cli?: string;
}): Promise<Server> {
  const serve = serveCommand(opts.core === null ? undefined : (opts.core ?? SERVER_CORE), opts.cpuProf, opts.name, opts.only === undefined ? [] : ['--only', opts.only], opts.cli);
  return startServer({
    name: opts.name,
    cmd: serve.cmd,
    args: serve.args,
    env: sleeveEnv(opts.dataDir, {
      SLEEVE_COVERART_LISTEN: '127.0.0.1:0',
      SLEEVE_AUTH_LISTEN: '127.0.0.1:0',
      ...opts.env,
    }),
    ready: /cover art:\s+(http:\/\/\S+)/,
    timeoutMs: 60_000,
  });
}

/** The bare node:http 307 server, on the server core; with `replay`, answering with that 307 instead. */
export function startBare(replay?: Captured307): Promise<Server> {
  const [cmd, full] = pinned(SERVER_CORE, process.execPath, [benchScript('bare-307.js')]);
  const env: Record<string, string> = replay === undefined ? {} : { BENCH_RESPONSE: JSON.stringify({ headers: replay.headers, body: replay.body }) };
  return startServer({ name: replay === undefined ? 'bare' : 'replay', cmd, args: full, env: cleanEnv(env), ready: /listening (http:\/\/\S+)/ });
}

/** A 307 as received: its own headers (not the connection's) and body. */
export interface Captured307 {
  location: string;
  headers: Record<string, string>;
  body: string;
}

const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'date', 'transfer-encoding']);

/** Checks that `path` on the server answers with a 307 and returns it. */
export async function expect307(server: Server, path: string): Promise<Captured307> {
  const res = await fetch(`${server.url}${path}`, { redirect: 'manual' });
  const body = await res.text();
  if (res.status !== 307) throw new Error(`${server.name}: GET ${path} answered ${res.status}, not 307`);
  const headers: Record<string, string> = {};
  for (const [k, v] of res.headers) if (!CONNECTION_HEADERS.has(k)) headers[k] = v;
  return { location: res.headers.get('location') ?? '', headers, body };
}

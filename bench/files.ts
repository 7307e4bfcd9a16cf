/**
 * files: sleeve's built-in file server (/download/…) against nginx (Debian's package, one
 * process, sendfile) serving the same store, each pinned to the same core, the load
 * generator on the other, rounds interleaved, medians. Cases: one hot 250 px thumbnail,
 * one hot index.json, one hot 1200 px thumbnail, a hot ~1 MB original, and a cold set
 * (requests spread uniformly over 20,000 thumbnails, sleeve's file cache smaller than the
 * set). Beside the hot thumbnail and index.json, the ceiling: the same file and headers from
 * memory through bare node:http and through node:net without an HTTP parser
 * (file-ceiling.ts). An A/B of ways to read a file (plain node:http servers) on the cold set,
 * and the redirect benchmark in the same run. Each case prints every server's CPU per request.
 * Goals, sleeve/nginx requests/s: ≥ 0.6 hot thumbnails and index.json, ≥ 0.5 hot original,
 * ≥ 0.4 cold set; p99 at most 2× nginx's; sleeve's peak RSS within its cache budget + 100 MB.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import sharp from 'sharp';
import { addArt, addRelease, indexKey } from '../src/cover-art/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime } from '../src/runtime.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { benchScript } from './lib/paths.js';
import { cleanEnv, pinned, sleep, startServer, type Server } from './lib/proc.js';
import { runLoad } from './lib/load.js';
import { freePort, NGINX, nginxMain, startNginx } from './lib/nginx.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary, type Series, type Target } from './lib/rounds.js';
import { LOAD_CORE, SERVER_CORE, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMiB, fmtMs, fmtRatio, passFail, table } from './lib/stats.js';
import { redirectBench } from './redirect.js';

const HOT = '4f11e5e0-0000-4000-8000-00000000f001';
const COLD = '4f11e5e0-0000-4000-8000-00000000c01d';
const GROUP = '4f11e5e0-0000-4000-8000-00000000a001';
const COLD_FILES = 20_000;
const FIRST_COLD_ID = 40_000_000_000;
/** sleeve's file cache in the hot cases (the default) and in the cold case (under a fifth of the set). */
const HOT_CACHE = 128 * 1024 * 1024;
const COLD_CACHE = 32 * 1024 * 1024;
const RSS_ALLOWANCE = 100 * 1024 * 1024;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** A photograph-like JPEG (blurred noise): thumbnails of realistic sizes, an original of about 1 MB at 2250 px. */
async function photo(size: number): Promise<Buffer> {
  const noisy = await makeNoisyJpeg(size, size, 95);
  return sharp(noisy).blur(1.4).jpeg({ quality: 90 }).toBuffer();
}

interface Store {
  dataDir: string;
  files: string;
  hot: { thumb250: string; thumb1200: string; original: string; index: string };
  coldPaths: string;
  sizes: Record<string, number>;
}

/** The catalogue: one release with one image (through sleeve), one with 20,000 thumbnails (rows and files written directly). */
async function makeStore(dataDir: string): Promise<Store> {
  const config = loadConfig({ SLEEVE_DATA_DIR: dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' });
  const rt = await openRuntime(config);
  const files = path.join(dataDir, 'files');
  try {
    await addRelease(rt.coverArt, { mbid: HOT, releaseGroup: GROUP, title: 'Hot' });
    const image = await addArt(rt.coverArt, { release: HOT, bytes: await photo(2250), types: ['Front'], approved: true });
    await addRelease(rt.coverArt, { mbid: COLD, releaseGroup: GROUP, title: 'Cold' });
    const release = await rt.database.db.selectFrom('release').select('id').where('gid', '=', COLD).executeTakeFirstOrThrow();
    const thumb = readFileSync(path.join(files, `mbid-${HOT}`, `mbid-${HOT}-${image.id}_thumb250.jpg`));
    const folder = path.join(files, `mbid-${COLD}`);
    mkdirSync(folder, { recursive: true });
    const lines: string[] = [];
    for (let start = 0; start < COLD_FILES; start += 500) {
      const rows = [];
      for (let i = start; i < Math.min(COLD_FILES, start + 500); i++) {
        const id = FIRST_COLD_ID + i;
        const name = `mbid-${COLD}-${id}_thumb250.jpg`;
        // Each file its own bytes (a different trailer after the JPEG's end).
        writeFileSync(path.join(folder, name), Buffer.concat([thumb, Buffer.from(`\n${id}\n`)]));
        lines.push(`/download/mbid-${COLD}/${name}`);
        rows.push({
          id,
          release: release.id,
          comment: '',
          edit: 0,
          ordering: i + 1,
          approved: 1,
          mime_type: 'image/jpeg',
          date_uploaded: Date.now(),
          filesize: thumb.length,
          thumb_250_filesize: thumb.length,
          thumb_500_filesize: thumb.length,
          thumb_1200_filesize: thumb.length,
        });
      }
      await rt.database.db.insertInto('cover_art').values(rows).execute();
    }
    const coldPaths = path.join(dataDir, 'cold-paths.txt');
    writeFileSync(coldPaths, `${lines.join('\n')}\n`);
    const hot = {
      thumb250: `/download/mbid-${HOT}/mbid-${HOT}-${image.id}_thumb250.jpg`,
      thumb1200: `/download/mbid-${HOT}/mbid-${HOT}-${image.id}_thumb1200.jpg`,
      original: `/download/mbid-${HOT}/mbid-${HOT}-${image.id}.jpg`,
      index: `/download/${indexKey(HOT)}`,
    };
    const sizes: Record<string, number> = {};
    for (const [name, p] of Object.entries(hot)) sizes[name] = readFileSync(path.join(files, p.slice('/download/'.length))).length;
    sizes.cold = thumb.length;
    return { dataDir, files, hot, coldPaths, sizes };
  } finally {
    await rt.close();
  }
}

/** nginx as the issue measured it: Debian's package, one process, sendfile, keep-alive without a request limit. */
function nginxConfig(prefix: string, root: string, port: number): string {
  return nginxMain(
    prefix,
    `  sendfile on;
  tcp_nopush on;
  types { image/jpeg jpg; image/png png; image/gif gif; application/json json; }
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${port};
    location /download/ {
      alias ${root}/;
      add_header Access-Control-Allow-Origin "*" always;
      add_header X-Content-Type-Options "nosniff" always;
      add_header Cache-Control "public, max-age=31536000, immutable" always;
    }
  }`,
  );
}

async function startFilesNginx(prefix: string, root: string): Promise<Server> {
  const port = await freePort();
  return startNginx({ prefix, conf: nginxConfig(prefix, root, port), port });
}

/** Peak resident set of a server's process (VmHWM), in KiB; for nginx the process the shell started. */
function peakRssKb(server: Server): number {
  const nginxPid = /listening \S+ pid (\d+)/.exec(server.output())?.[1];
  const pid = nginxPid ?? String(server.pid);
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? Number.NaN : Number(m[1]);
  } catch {
    return Number.NaN;
  }
}

/** The ceiling (bench/file-ceiling.ts): one file answered from memory by a bare server, `mode` object, list or raw. */
function startCeiling(mode: string, file: string, contentType: string): Promise<Server> {
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [benchScript('file-ceiling.js')]);
  return startServer({ name: `ceiling-${mode}`, cmd, args, env: cleanEnv({ BENCH_FILE: file, BENCH_SERVE: mode, BENCH_TYPE: contentType }), ready: /listening (http:\/\/\S+)/ });
}

function startFileRead(mode: string, root: string): Promise<Server> {
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [benchScript('file-read.js')]);
  return startServer({ name: `read-${mode}`, cmd, args, env: cleanEnv({ BENCH_ROOT: root, BENCH_READ: mode }), ready: /listening (http:\/\/\S+)/ });
}

interface Case {
  name: string;
  what: string;
  path: string;
  pathsFile?: string;
  goal: number;
  cacheBytes: number;
}

/** A check before a run: GET `p` answers 200. */
const check = (p: string) => async (server: Server) => {
  const res = await fetch(`${server.url}${p}`);
  await res.arrayBuffer();
  if (res.status !== 200) throw new Error(`${server.name}: GET ${p} answered ${res.status}`);
};

/** What every case's run shares: the options, the catalogue and its store, nginx's prefix, the round settings. */
interface FilesRun {
  opts: Options;
  dataDir: string;
  prefix: string;
  store: Store;
  settings: Parameters<typeof interleavedRounds>[1] & { rounds: number; durationS: number; warmupS: number; connections: number };
}

/** One case's verdict, its row of the summary table, and its section. */
interface CaseResult {
  verdict: { case: string; ratio: number; p99Ratio: number; ok: boolean; p99Ok: boolean; rssOk: boolean };
  row: string[];
  section: string;
}

/** The cases: hot files of each kind, and the cold set. */
function filesCases(store: Store): Case[] {
  return [
    { name: 'thumb250', what: `hot 250 px thumbnail (${fmtKb(store.sizes.thumb250)})`, path: store.hot.thumb250, goal: 0.6, cacheBytes: HOT_CACHE },
    { name: 'index', what: `hot index.json (${fmtKb(store.sizes.index)})`, path: store.hot.index, goal: 0.6, cacheBytes: HOT_CACHE },
    { name: 'thumb1200', what: `hot 1200 px thumbnail (${fmtKb(store.sizes.thumb1200)})`, path: store.hot.thumb1200, goal: 0.6, cacheBytes: HOT_CACHE },
    { name: 'original', what: `hot original (${fmtKb(store.sizes.original)})`, path: store.hot.original, goal: 0.5, cacheBytes: HOT_CACHE },
    {
      name: 'cold',
      what: `cold set: ${fmtInt(COLD_FILES)} thumbnails (${fmtKb(store.sizes.cold)} each) at random, sleeve's cache ${COLD_CACHE >> 20} MiB`,
      path: store.hot.thumb250,
      pathsFile: store.coldPaths,
      goal: 0.4,
      cacheBytes: COLD_CACHE,
    },
  ];
}

/** The servers of case `c`: nginx and sleeve first (their peak RSS kept in `rss`), then the case's own comparisons. */
function caseTargets(c: Case, run: FilesRun, rss: Record<'nginx' | 'sleeve', number[]>): Target[] {
  const { opts, dataDir, prefix, store } = run;
  const tracked = (name: 'nginx' | 'sleeve', start: () => Promise<Server>) => async () => {
    const server = await start();
    const stop = server.stop.bind(server);
    server.stop = async () => {
      rss[name].push(peakRssKb(server));
      await stop();
    };
    return server;
  };
  const targets: Target[] = [
    { label: 'nginx', start: tracked('nginx', () => startFilesNginx(prefix, store.files)), check: check(c.path), path: c.path, pathsFile: c.pathsFile },
    {
      label: 'sleeve /download/',
      start: tracked('sleeve', () => startSleeve({ name: 'sleeve', dataDir, only: 'coverart', cpuProf: opts.cpuProf, env: { SLEEVE_FILE_CACHE_BYTES: String(c.cacheBytes) } })),
      check: check(c.path),
      path: c.path,
      pathsFile: c.pathsFile,
    },
  ];
  if (c.name === 'thumb250' || c.name === 'cold') {
    // What the fast lane buys: the same build with every request read by node:http.
    targets.push({
      label: 'sleeve, fast lane off',
      start: () => startSleeve({ name: 'sleeve-nolane', dataDir, only: 'coverart', cpuProf: false, env: { SLEEVE_FILE_CACHE_BYTES: String(c.cacheBytes), SLEEVE_FAST_LANE: 'off' } }),
      check: check(c.path),
      path: c.path,
      pathsFile: c.pathsFile,
    });
  }
  if (c.name === 'thumb250' || c.name === 'index') {
    // The ceiling: the same file and headers from memory with nothing of sleeve in the way.
    const file = path.join(store.files, c.path.slice('/download/'.length));
    const type = c.name === 'index' ? 'application/json' : 'image/jpeg';
    targets.push(
      { label: 'ceiling: node:http, one writev', start: () => startCeiling('list', file, type), check: check('/x'), path: '/x' },
      { label: 'ceiling: node:net, no HTTP parser', start: () => startCeiling('raw', file, type), check: check('/x'), path: '/x' },
    );
  }
  if (c.name === 'cold') targets.push(...coldTargets(c, run));
  return targets;
}

/** The cold set's own comparisons: no file cache, a baseline build (SLEEVE_BENCH_FILES_BASELINE), and bare servers reading files three ways. */
function coldTargets(c: Case, run: FilesRun): Target[] {
  const { dataDir, store } = run;
  const targets: Target[] = [
    {
      label: 'sleeve, file cache off',
      start: () => startSleeve({ name: 'sleeve-nocache', dataDir, only: 'coverart', cpuProf: false, env: { SLEEVE_FILE_CACHE_BYTES: '0' } }),
      check: check(c.path),
      path: c.path,
      pathsFile: c.pathsFile,
    },
  ];
  // SLEEVE_BENCH_FILES_BASELINE=path of another build's CLI (dist/bundle/index.js): that build too, for an A/B in one
  // run, started as npm start starts a server (as the other sleeve runs are: the start script's memory settings).
  const baseline = process.env.SLEEVE_BENCH_FILES_BASELINE;
  if (baseline !== undefined && baseline !== '') {
    targets.push({
      label: 'sleeve, baseline build',
      start: () => startSleeve({ name: 'sleeve-baseline', dataDir, only: 'coverart', cpuProf: false, cli: baseline, env: { SLEEVE_FILE_CACHE_BYTES: String(c.cacheBytes) } }),
      check: check(c.path),
      path: c.path,
      pathsFile: c.pathsFile,
    });
  }
  for (const mode of ['stream', 'promises', 'sync']) {
    targets.push({ label: `A/B node:http, read: ${mode}`, start: () => startFileRead(mode, store.files), check: check(c.path), path: c.path, pathsFile: c.pathsFile });
  }
  return targets;
}

/** Case `c`'s rounds, and what they say against its goals. */
async function runCase(c: Case, run: FilesRun): Promise<CaseResult> {
  log(`files: ${c.what}`);
  const rss: Record<'nginx' | 'sleeve', number[]> = { nginx: [], sleeve: [] };
  const series: Series[] = await interleavedRounds(caseTargets(c, run, rss), run.settings);
  const baselineCli = process.env.SLEEVE_BENCH_FILES_BASELINE;
  const paired = c.name === 'cold' && baselineCli !== undefined && baselineCli !== '' ? await pairedRounds(run.dataDir, baselineCli, c, run.settings) : undefined;
  const [n, s] = series.map(seriesSummary) as [ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary>];
  const ratio = s.rps.median / n.rps.median;
  const p99Ratio = s.p99.median / n.p99.median;
  const sleeveRss = Math.max(...rss.sleeve);
  const nginxRss = Math.max(...rss.nginx);
  const rssOk = sleeveRss * 1024 <= c.cacheBytes + RSS_ALLOWANCE;
  const ok = ratio >= c.goal;
  const p99Ok = p99Ratio <= 2;
  const row = [
    c.what,
    fmtInt(n.rps.median),
    fmtInt(s.rps.median),
    `**${fmtRatio(ratio)}** (≥ ${c.goal}: ${passFail(ok)})`,
    `${fmtMs(n.p99.median)} / ${fmtMs(s.p99.median)} (${p99Ok ? 'met' : 'MISSED'})`,
    `${fmtMiB(nginxRss)} / ${fmtMiB(sleeveRss)} (budget ${fmtMiB((c.cacheBytes + RSS_ALLOWANCE) / 1024)}: ${rssOk ? 'met' : 'MISSED'})`,
  ];
  const section = [
    `#### ${c.what}`,
    '',
    runsTable(series),
    '',
    mediansTable(series),
    '',
    `- sleeve/nginx requests/s: **${fmtRatio(ratio)}** (goal ≥ ${c.goal}); per round ${s.runs.map((x, i) => fmtRatio(x.rps / (n.runs[i]?.rps ?? Number.NaN))).join(', ')}`,
    `- p99 sleeve/nginx: ${fmtRatio(p99Ratio)} (goal ≤ 2)`,
    `- server CPU per request, median of rounds: ${series.map((x) => `${x.label} ${cpuPerRequestUs(x).toFixed(1)} µs`).join('; ')}`,
    `- peak RSS (largest over the runs): nginx ${fmtMiB(nginxRss)}, sleeve ${fmtMiB(sleeveRss)} with SLEEVE_FILE_CACHE_BYTES=${c.cacheBytes}`,
    ...(paired === undefined ? [] : ['', paired]),
  ].join('\n');
  return { verdict: { case: c.name, ratio, p99Ratio, ok, p99Ok, rssOk }, row, section };
}

export async function filesBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  if (!existsSync(NGINX)) throw new Error(`files: ${NGINX} is missing; install Debian's nginx (apt-get install nginx)`);
  const durationS = opts.duration ?? 8;
  const rounds = opts.rounds ?? 5;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-files-'));
  const prefix = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-nginx-'));
  try {
    log(`files: catalogue in ${dataDir} (${COLD_FILES} cold thumbnails)`);
    const store = await makeStore(dataDir);
    log(`files: sizes ${JSON.stringify(store.sizes)}`);
    const settings = { durationS, rounds, warmupS: opts.warmup, connections: opts.connections, loadCore: LOAD_CORE, freshProcess: !opts.sameProcess };
    const cases = filesCases(store);
    // SLEEVE_BENCH_FILES_CASES=cold,index…: only those cases (and no redirect run), for a quick look at one.
    const only = process.env.SLEEVE_BENCH_FILES_CASES?.split(',').filter((x) => x !== '');
    if (only !== undefined && only.length > 0) cases.splice(0, cases.length, ...cases.filter((c) => only.includes(c.name)));
    const results: CaseResult[] = [];
    for (const c of cases) results.push(await runCase(c, { opts, dataDir, prefix, store, settings }));

    log('files: the redirect benchmark in the same run');
    const redirect = only !== undefined && only.length > 0 ? { markdown: '(redirect not run: SLEEVE_BENCH_FILES_CASES)', data: undefined, goalsMet: true } : await redirectBench(opts);
    const verdicts = results.map((r) => r.verdict);
    const goalsMet = verdicts.every((v) => v.ok && v.p99Ok && v.rssOk) && redirect.goalsMet;
    const markdown = [
      '### files: sleeve /download/ vs nginx',
      '',
      `nginx ${NGINX} (one process, sendfile, no keep-alive request limit, the same store) and \`sleeve serve --only coverart\` started as \`npm start\` starts it (its memory settings; SQLite + file storage; the file cache as given per case), each on CPU ${SERVER_CORE}. ${describeRounds(settings, undefined)}. Each fresh sleeve process starts with an empty file cache: the warm-up fills it.`,
      '',
      table(['case', '>nginx req/s', '>sleeve req/s', 'sleeve/nginx', 'p99 nginx / sleeve', 'peak RSS nginx / sleeve'], results.map((r) => r.row)),
      '',
      ...results.map((r) => r.section),
      '',
      redirect.markdown,
    ].join('\n');
    return { markdown, data: { settings, sizes: store.sizes, verdicts, redirect: redirect.data }, goalsMet };
  } finally {
    if (!opts.keep) {
      await rm(dataDir, { recursive: true, force: true });
      await rm(prefix, { recursive: true, force: true });
    }
  }
}

/**
 * This build against another (SLEEVE_BENCH_FILES_BASELINE) serving at the same time: both on the
 * server core, each under its own wrk with half the connections on the load core, so whatever
 * else the machine does in those seconds falls on both alike. Their CPU per request differs by
 * what the builds do differently; the same build against itself comes out within 1 %
 * (bench/RESULTS-archive.md, "Session 17"), where rounds one after the other differ by 10 % and more.
 * Returns the section's text.
 */
async function pairedRounds(dataDir: string, baselineCli: string, c: Case, s: { rounds: number; durationS: number; warmupS: number; connections: number }): Promise<string> {
  log(`files: ${c.name}, this build and the baseline at once on CPU ${SERVER_CORE}`);
  const env = { SLEEVE_FILE_CACHE_BYTES: String(c.cacheBytes) };
  const half = Math.max(1, Math.floor(s.connections / 2));
  const rows: string[][] = [];
  const ratios: number[] = [];
  for (let r = 0; r < s.rounds; r++) {
    const servers = await Promise.all([
      startSleeve({ name: 'sleeve', dataDir, only: 'coverart', cpuProf: false, env }),
      startSleeve({ name: 'sleeve-baseline', dataDir, only: 'coverart', cpuProf: false, cli: baselineCli, env }),
    ]);
    try {
      const load = (durationS: number) =>
        Promise.all(servers.map((server) => runLoad({ url: `${server.url}${c.path}`, connections: half, durationS, core: LOAD_CORE, pathsFile: c.pathsFile, serverCpuSeconds: () => server.cpuSeconds() })));
      await load(s.warmupS);
      await sleep(200);
      const [mine, base] = (await load(s.durationS)).map((x) => (x.serverCpu / 100 / x.rps) * 1e6) as [number, number];
      ratios.push(mine / base);
      rows.push([String(r + 1), `${base.toFixed(1)} µs`, `${mine.toFixed(1)} µs`, (mine / base).toFixed(3)]);
      log(`  paired round ${r + 1}/${s.rounds}: baseline ${base.toFixed(1)} µs, this build ${mine.toFixed(1)} µs per request (${(mine / base).toFixed(3)})`);
    } finally {
      await Promise.all(servers.map((x) => x.stop()));
    }
  }
  const sorted = [...ratios].sort((a, b) => a - b);
  return [
    `Paired rounds: this build and the baseline (${baselineCli}) serving at once on CPU ${SERVER_CORE}, each under its own wrk with ${half} connections on CPU ${LOAD_CORE}, ${s.durationS} s after a shared warm-up:`,
    '',
    table(['round', 'baseline CPU per request', 'this build', 'this/baseline'], rows),
    '',
    `- CPU per request, this build / baseline: **${(sorted[Math.floor(sorted.length / 2)] ?? Number.NaN).toFixed(3)}** (median of ${sorted.length})`,
  ].join('\n');
}

/** A server's CPU time per request (its share of a core over its requests/s), median of its rounds, µs. */
function cpuPerRequestUs(s: Series): number {
  const per = s.runs.map((x) => (x.serverCpu / 100 / x.rps) * 1e6).sort((a, b) => a - b);
  return per[Math.floor(per.length / 2)] ?? Number.NaN;
}

function fmtKb(bytes: number | undefined): string {
  return bytes === undefined ? '?' : bytes >= 1024 * 1024 ? `${(bytes / 1024 / 1024).toFixed(2)} MiB` : `${(bytes / 1024).toFixed(1)} KiB`;
}

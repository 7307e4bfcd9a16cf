/**
 * soak: sleeve on the embedded default (`sleeve serve`, SQLite, file store) under a steady
 * mix of traffic for --minutes (default 10): cached and uncached cover art lookups, /download/
 * file fetches, sign-ins (right and wrong passwords), token refreshes and userinfo. Open
 * model: requests start on a fixed schedule whatever the answers do, and a latency counts
 * from the request's scheduled start. Every 30 s the server's RSS (/proc) and heap (its
 * metrics endpoint) are sampled. Goals: RSS at the end within 10% of minute 2, no minute's
 * p99 of any kind above 4× its first minute's, 0 unexpected answers.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { mulberry32 } from '../datagen/prng.js';
import { BENCH_PASSWORD, prepareSleeve } from './auth.js';
import { ensureCatalogue } from './lib/catalogue.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { SLEEVE_CLI } from './lib/paths.js';
import { runOk, sleep, TASKSET, type Server } from './lib/proc.js';
import { LOAD_CORE, sleeveEnv, startSleeve } from './lib/servers.js';
import { fmtMiB, fmtMs, passFail, table } from './lib/stats.js';

const RELEASES = 5000;
const SAMPLE_S = 30;

/** Requests per second of each kind at --rate 1 (about 100 requests/s in all). */
const MIX = {
  'lookup cached': 40,
  'lookup uncached': 20,
  download: 12,
  'sign-in right': 1,
  'sign-in wrong': 2,
  refresh: 10,
  userinfo: 15,
} as const;
type Kind = keyof typeof MIX;
const KINDS = Object.keys(MIX) as Kind[];

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

interface Sample {
  second: number;
  rssKiB: number;
  /**
   * The lowest and highest RSS read (every second) since the last sample. The floor is what the
   * process keeps; above it are working buffers in use at that moment (a password hash holds
   * 32 MiB while it runs, one per hashing thread), which a single reading catches or misses.
   */
  rssFloorKiB: number;
  rssPeakKiB: number;
  /** Of which file-backed (reclaimable by the kernel; grows as SQLite's mmap touches a growing database). */
  rssFileKiB: number;
  heapBytes: number;
  /** What the response cache holds (bounded by SLEEVE_RESPONSE_CACHE_BYTES), part of RSS. */
  cacheBytes: number;
  /** The server's CPU use since the last sample, % of one core, and the machine's 1-minute load average: a stall with little CPU under a high load is the machine's, not sleeve's. */
  serverCpu: number;
  load: number;
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** Requests sent again because a kept-alive connection was closed by the server as they were sent. */
let resent = 0;

function send(agent: http.Agent, url: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}, retry = true): Promise<Answer> {
  const lib = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = lib.request(url, { agent, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', (err: NodeJS.ErrnoException) => {
      // The keep-alive race every client has (the server's idle timeout ends a connection the
      // agent just picked): sent again once on a new connection, as Node's documentation advises.
      if (retry && req.reusedSocket && err.code === 'ECONNRESET') {
        resent++;
        send(agent, url, init, false).then(resolve, reject);
      } else reject(err);
    });
    req.setTimeout(30_000, () => req.destroy(new Error('no answer within 30 s')));
    req.end(init.body);
  });
}

/** Resident memory in KiB: all of it, and the part backed by files (the binary, SQLite's mmap of the database). */
function rss(pid: number): { all: number; file: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => {
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    return m === null ? Number.NaN : Number(m[1]);
  };
  return { all: kib('VmRSS'), file: kib('RssFile') };
}

async function gauges(agent: http.Agent, metricsUrl: string): Promise<{ heap: number; cache: number }> {
  const res = await send(agent, metricsUrl);
  const read = (name: string): number => {
    const m = new RegExp(`^(?:\\w+_)?${name}(?:\\{[^}]*\\})?\\s+(\\S+)`, 'm').exec(res.body);
    return m === null ? Number.NaN : Number(m[1]);
  };
  return { heap: read('nodejs_heap_size_used_bytes'), cache: read('sleeve_response_cache_bytes') };
}

function p99(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)] as number;
}

/** The soak's copy of the catalogue: a few real images for /download/, alice signed up with an application and its tokens, the releases to look up. */
async function prepareSoak(dataDir: string, catalogue: Awaited<ReturnType<typeof ensureCatalogue>>): Promise<{ files: string[]; tokens: Awaited<ReturnType<typeof prepareSleeve>>; mbids: string[] }> {
  // A copy of the cached catalogue (the soak adds users, sessions and tokens to it), plus a few real images for /download/.
  copyFileSync(path.join(catalogue.dataDir, 'sleeve.db'), path.join(dataDir, 'sleeve.db'));
  const env = sleeveEnv(dataDir);
  const files: string[] = [];
  const jpeg = path.join(dataDir, 'soak.jpg');
  writeFileSync(jpeg, await makeNoisyJpeg(800, 600));
  for (let i = 0; i < 3; i++) {
    const mbid = `50a50a50-0000-4000-8000-00000000000${i}`;
    await runOk(process.execPath, [SLEEVE_CLI, 'release', 'add', mbid, '--release-group', `50a50a50-0000-4000-9000-00000000000${i}`, '--title', `Soak ${i}`], { env });
    const added = JSON.parse((await runOk(process.execPath, [SLEEVE_CLI, '--json', 'art', 'add', mbid, jpeg, '--approved', '--type', 'Front'], { env })).stdout) as { id: string };
    const base = `mbid-${mbid}/mbid-${mbid}-${added.id}`;
    files.push(`mbid-${mbid}/index.json`, `${base}.jpg`, `${base}_thumb250.jpg`, `${base}_thumb500.jpg`, `${base}_thumb1200.jpg`);
  }
  // alice signs in (rightly); the wrong passwords go to another account, so hers is never locked.
  const tokens = await prepareSleeve(dataDir, ['mallory-target']);
  const mbids = readFileSync(catalogue.pathsFile, 'utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => l.split('/')[2] as string);
  return { files, tokens, mbids };
}

/** What the soak's requests are sent to and with. */
interface SoakTarget {
  server: Server;
  authBase: string;
  plain: http.Agent;
  secure: https.Agent;
  files: string[];
  mbids: string[];
  tokens: Awaited<ReturnType<typeof prepareSleeve>>;
}

type Requests = Record<Kind, () => { run: () => Promise<Answer>; ok: (a: Answer) => boolean }>;

/** The next request of each kind, and what answers it rightly. */
async function soakRequests(t: SoakTarget): Promise<Requests> {
  const { server, authBase, plain, secure, files, mbids, tokens } = t;
  const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
  const formHeaders = { 'content-type': 'application/x-www-form-urlencoded' };

  // The CSRF cookie and token of the login form (not tied to a session, so shared by every sign-in).
  const loginPage = await send(secure, `${authBase}/login`);
  const csrf = /name="csrf_token" value="([^"]+)"/.exec(loginPage.body)?.[1];
  const csrfCookie = [loginPage.headers['set-cookie'] ?? []].flat().map((c) => c.split(';')[0]).join('; ');
  if (csrf === undefined) throw new Error('no CSRF token on the login page');

  const rng = mulberry32(0x50a50a50);
  const hot = mbids.slice(0, 20);
  // Uncached lookups walk (release, endpoint) pairs in order: none repeats within a run.
  const variants = ['front', 'front-250', 'front-500', 'front-1200', ''];
  let uncached = 0;
  let clients = 0;
  const requests: Requests = {
    'lookup cached': () => {
      const m = hot[rng() % hot.length] as string;
      return { run: () => send(plain, `${server.url}/release/${m}/front`), ok: (a) => a.status === 307 };
    },
    'lookup uncached': () => {
      const n = uncached++;
      const m = mbids[n % mbids.length] as string;
      const v = variants[Math.floor(n / mbids.length) % variants.length] as string;
      return { run: () => send(plain, `${server.url}/release/${m}/${v}`, { headers: { accept: 'application/json' } }), ok: (a) => a.status === 307 };
    },
    download: () => {
      const f = files[rng() % files.length] as string;
      return { run: () => send(plain, `${server.url}/download/${f}`), ok: (a) => a.status === 200 };
    },
    'sign-in right': () => {
      // From addresses (behind the trusted proxy) that never fail, so no throttle applies to them.
      const from = `10.1.${(clients >> 8) & 255}.${clients++ & 255}`;
      return {
        run: () => send(secure, `${authBase}/login`, { method: 'POST', headers: { ...formHeaders, cookie: csrfCookie, 'x-forwarded-for': from }, body: form({ csrf_token: csrf, username: 'alice', password: BENCH_PASSWORD, return_to: '/account/applications' }) }),
        ok: (a) => a.status === 303,
      };
    },
    'sign-in wrong': () => {
      const from = `10.2.${rng() & 255}.${rng() & 255}`;
      return {
        run: () => send(secure, `${authBase}/login`, { method: 'POST', headers: { ...formHeaders, cookie: csrfCookie, 'x-forwarded-for': from }, body: form({ csrf_token: csrf, username: rng() % 2 === 0 ? 'mallory-target' : `nobody${rng() % 1000}`, password: 'wrong', return_to: '/' }) }),
        // Refused, or throttled once the account or address has failed too often.
        ok: (a) => a.status === 400 || a.status === 429,
      };
    },
    refresh: () => ({
      run: () => send(secure, `${authBase}/oauth2/token`, { method: 'POST', headers: formHeaders, body: form({ grant_type: 'refresh_token', refresh_token: tokens.refreshToken, client_id: tokens.clientId, client_secret: tokens.clientSecret }) }),
      ok: (a) => a.status === 200,
    }),
    userinfo: () => ({
      run: () => send(secure, `${authBase}/oauth2/userinfo`, { headers: { authorization: `Bearer ${tokens.accessToken}` } }),
      ok: (a) => a.status === 200,
    }),
  };

  return requests;
}

/** What the soak measured: per kind, latencies by minute and unexpected answers; the samples; the most requests in flight. */
interface SoakRun {
  totalMinutes: number;
  latencies: Record<Kind, number[][]>;
  errors: Record<Kind, number>;
  firstErrors: string[];
  samples: Sample[];
  maxInFlight: number;
}

/** Sends the requests on their fixed schedule for `minutes`, sampling the server as it goes; then waits for every answer. */
async function runSoak(minutes: number, rate: number, server: Server, metricsUrl: string, probe: http.Agent, requests: Requests): Promise<SoakRun> {
  const totalMinutes = Math.max(1, Math.round(minutes));
  const latencies: Record<Kind, number[][]> = Object.fromEntries(KINDS.map((k) => [k, Array.from({ length: totalMinutes }, () => [])])) as never;
  const errors: Record<Kind, number> = Object.fromEntries(KINDS.map((k) => [k, 0])) as never;
  const firstErrors: string[] = [];
  const samples: Sample[] = [];
  let inFlight = 0;
  let maxInFlight = 0;
  const pending = new Set<Promise<void>>();

  const durationMs = minutes * 60_000;
  const start = performance.now();
  let cpuMark = { at: performance.now(), cpu: server.cpuSeconds() };
  let window = { floor: Number.POSITIVE_INFINITY, peak: 0 };
  const readRss = () => {
    const r = rss(server.pid);
    window = { floor: Math.min(window.floor, r.all), peak: Math.max(window.peak, r.all) };
    return r;
  };
  const sample = async () => {
    const now = performance.now();
    const second = Math.round((now - start) / 1000);
    const cpu = server.cpuSeconds();
    const serverCpu = now > cpuMark.at ? ((cpu - cpuMark.cpu) / ((now - cpuMark.at) / 1000)) * 100 : Number.NaN;
    cpuMark = { at: now, cpu };
    const g = await gauges(probe, metricsUrl).catch(() => ({ heap: Number.NaN, cache: Number.NaN }));
    const r = readRss();
    samples.push({ second, rssKiB: r.all, rssFloorKiB: window.floor, rssPeakKiB: window.peak, rssFileKiB: r.file, heapBytes: g.heap, cacheBytes: g.cache, serverCpu, load: os.loadavg()[0] as number });
    window = { floor: Number.POSITIVE_INFINITY, peak: 0 };
    const s = samples[samples.length - 1] as Sample;
    log(`  ${String(second).padStart(4)} s  RSS ${fmtMiB(s.rssKiB)} (floor ${fmtMiB(s.rssFloorKiB)}, peak ${fmtMiB(s.rssPeakKiB)}, file ${fmtMiB(s.rssFileKiB)})  heap ${fmtMiB(s.heapBytes / 1024)}  response cache ${fmtMiB(s.cacheBytes / 1024)}  server CPU ${Math.round(serverCpu)} %  load ${s.load.toFixed(1)}  in flight ${inFlight} (max ${maxInFlight})  errors ${Object.values(errors).reduce((a, b) => a + b, 0)}`);
  };
  await sample();
  let nextSample = SAMPLE_S * 1000;
  let nextRead = 1000;
  // Each kind has its own fixed schedule: the i-th request of a kind starts at i / rate seconds.
  const issued: Record<Kind, number> = Object.fromEntries(KINDS.map((k) => [k, 0])) as never;
  log(`  soak: ${minutes} min at ${Math.round(Object.values(MIX).reduce((a, b) => a + b, 0) * rate)} requests/s`);
  for (;;) {
    const now = performance.now() - start;
    if (now >= durationMs) break;
    for (const kind of KINDS) {
      const perS = MIX[kind] * rate;
      while ((issued[kind] * 1000) / perS <= now) {
        const scheduled = (issued[kind]++ * 1000) / perS;
        const r = requests[kind]();
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        const p: Promise<void> = r.run().then(
          (a) => {
            const minute = Math.min(totalMinutes - 1, Math.floor(scheduled / 60_000));
            latencies[kind][minute]?.push(performance.now() - start - scheduled);
            if (!r.ok(a)) {
              errors[kind]++;
              if (firstErrors.length < 10) firstErrors.push(`${kind}: ${a.status} ${a.body.slice(0, 120)}`);
            }
          },
          (err: unknown) => {
            errors[kind]++;
            if (firstErrors.length < 10) firstErrors.push(`${kind}: ${(err as Error).message}`);
          },
        ).finally(() => {
          inFlight--;
          pending.delete(p);
        });
        pending.add(p);
      }
    }
    if (now >= nextSample) {
      nextSample += SAMPLE_S * 1000;
      await sample();
    } else if (now >= nextRead) {
      nextRead = now + 1000;
      readRss();
    }
    await sleep(5);
  }
  // The end: sampled while the load is still on (an idle process soon shrinks its heap), then drained.
  await sample();
  await Promise.all(pending);
  return { totalMinutes, latencies, errors, firstErrors, samples, maxInFlight };
}

/** The soak's goals and its report. */
function soakReport(minutes: number, rate: number, m: SoakRun): { markdown: string; data: unknown; goalsMet: boolean } {
  const { totalMinutes, latencies, errors, firstErrors, samples, maxInFlight } = m;
  // Goals.
  // Minute 2: the sample at its end (120 s), or at its start (60 s) in runs too short to have one before the last.
  const during = samples.slice(0, -1);
  const minute2 = during.find((s) => s.second >= 120) ?? during.find((s) => s.second >= 60) ?? samples[0];
  const last = samples[samples.length - 1] as Sample;
  // Retained memory: the floor of the last 30 s against the floor of minute 2's last 30 s.
  const rssGrowth = minute2 === undefined ? Number.NaN : (last.rssFloorKiB - minute2.rssFloorKiB) / minute2.rssFloorKiB;
  const rawGrowth = minute2 === undefined ? Number.NaN : (last.rssKiB - minute2.rssKiB) / minute2.rssKiB;
  const rssOk = Math.abs(rssGrowth) <= 0.1;
  const p99s = Object.fromEntries(KINDS.map((k) => [k, latencies[k].map(p99)])) as Record<Kind, number[]>;
  const worst = Object.fromEntries(KINDS.map((k) => [k, Math.max(...(p99s[k] as number[]).filter(Number.isFinite)) / (p99s[k][0] as number)])) as Record<Kind, number>;
  const p99Ok = KINDS.every((k) => (worst[k] as number) <= 4);
  const errorCount = Object.values(errors).reduce((a, b) => a + b, 0);
  const goalsMet = rssOk && p99Ok && errorCount === 0;

  const sampleTable = table(
    ['>second', '>RSS', '>floor (30 s)', '>peak (30 s)', '>of which file-backed', '>heap used', '>response cache', '>server CPU', '>load average'],
    samples.map((s) => [String(s.second), fmtMiB(s.rssKiB), fmtMiB(s.rssFloorKiB), fmtMiB(s.rssPeakKiB), fmtMiB(s.rssFileKiB), fmtMiB(s.heapBytes / 1024), fmtMiB(s.cacheBytes / 1024), Number.isFinite(s.serverCpu) ? `${Math.round(s.serverCpu)} %` : '–', s.load.toFixed(1)]),
  );
  const p99Table = table(
    ['kind', '>req/s', ...Array.from({ length: totalMinutes }, (_, i) => `>min ${i + 1}`), '>worst/first', '>errors'],
    KINDS.map((k) => [k, String(MIX[k] * rate), ...(p99s[k] as number[]).map(fmtMs), (worst[k] as number).toFixed(2), String(errors[k])]),
  );
  const markdown = [
    '### soak: steady mixed traffic on the embedded default',
    '',
    `${minutes} min, open model at ${Math.round(Object.values(MIX).reduce((a, b) => a + b, 0) * rate)} requests/s (fixed schedule per kind, latency from the scheduled start); \`sleeve serve\` on SQLite and the file store, ${RELEASES.toLocaleString('en-US')} releases (uncached lookups never repeat a URL), pinned to core 0, the load generator on core 1. RSS read from /proc every second (each row: the reading, and the lowest and highest since the row before), CPU from /proc and heap from the metrics endpoint every ${SAMPLE_S} s; the machine's load average beside them.`,
    '',
    sampleTable,
    '',
    'p99 latency per minute:',
    '',
    p99Table,
    '',
    `- retained RSS (the floor of the last 30 s) at the end ${fmtMiB(last.rssFloorKiB)} vs minute 2 ${fmtMiB(minute2?.rssFloorKiB ?? Number.NaN)}: ${(rssGrowth * 100).toFixed(1)}% (goal within ±10%): **${passFail(rssOk)}**; single readings ${fmtMiB(last.rssKiB)} vs ${fmtMiB(minute2?.rssKiB ?? Number.NaN)} (${(rawGrowth * 100).toFixed(1)}%)`,
    `- worst minute's p99 / first minute's, per kind: ${KINDS.map((k) => `${k} ${(worst[k] as number).toFixed(2)}`).join(', ')} (goal ≤ 4): **${passFail(p99Ok)}**`,
    `- unexpected answers: ${errorCount} (goal 0): **${passFail(errorCount === 0)}**${firstErrors.length > 0 ? `; first: ${firstErrors.map((e) => `\`${e.replace(/`/g, "'").replace(/\s+/g, ' ')}\``).join('; ')}` : ''}`,
    `- most requests in flight at once: ${maxInFlight}; requests sent again after a kept-alive connection closed under them: ${resent}`,
  ].join('\n');
  return { markdown, data: { minutes, rate, samples, p99s, worst, errors, firstErrors, rssGrowth, rawGrowth, maxInFlight, resent, goals: { rssOk, p99Ok, errors: errorCount === 0 } }, goalsMet };
}

export async function soakBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const minutes = opts.minutes;
  const rate = opts.rate;
  const catalogue = await ensureCatalogue(RELEASES, RELEASES, opts.rebuild);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-soak-'));
  try {
    const { files, tokens, mbids } = await prepareSoak(dataDir, catalogue);

    // Uncached lookups never repeat a URL, so the response cache grows until its byte budget is
    // reached (about 1.5 KB an answer): a 2 MiB budget is full within the first minute or two,
    // so RSS after minute 2 shows what is not bounded by design.
    const server = await startSleeve({
      name: 'sleeve',
      dataDir,
      cpuProf: opts.cpuProf,
      env: { SLEEVE_TRUST_PROXY: '127.0.0.1', SLEEVE_RESPONSE_CACHE_BYTES: String(2 * 1024 * 1024) },
    });
    try {
      const out = server.output();
      const authBase = /auth:\s+(https:\/\/\S+)/.exec(out)?.[1];
      const metricsUrl = /metrics:\s+(http:\/\/\S+)/.exec(out)?.[1];
      if (authBase === undefined || metricsUrl === undefined) throw new Error(`no auth or metrics address in the banner:\n${out}`);
      // The load generator (this process) on the other core than the server.
      if (TASKSET !== undefined) execFileSync(TASKSET, ['-a', '-pc', String(LOAD_CORE), String(process.pid)], { stdio: 'ignore' });

      const plain = new http.Agent({ keepAlive: true, maxSockets: 64 });
      const secure = new https.Agent({ keepAlive: true, maxSockets: 64, rejectUnauthorized: false });
      const probe = new http.Agent({ keepAlive: true, maxSockets: 1 });
      const requests = await soakRequests({ server, authBase, plain, secure, files, mbids, tokens });
      const measured = await runSoak(minutes, rate, server, metricsUrl, probe, requests);
      plain.destroy();
      secure.destroy();
      probe.destroy();
      return soakReport(minutes, rate, measured);
    } finally {
      await server.stop();
    }
  } finally {
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}

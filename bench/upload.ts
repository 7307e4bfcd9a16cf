/**
 * upload: a 3000×3000 JPEG added through the write API (multipart, streamed to disk, to a
 * running `sleeve serve`) against `sleeve art add` of the same file (a whole CLI process).
 * Goals: the API's images/s ≥ 0.9 × the CLI's (one upload at a time); the server's peak RSS
 * < 250 MB with four uploads in flight, the server started as `npm start` starts it.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { SLEEVE_CLI } from './lib/paths.js';
import { runOk, sleep } from './lib/proc.js';
import { sleeveEnv, startSleeve } from './lib/servers.js';
import { fmtMiB, fmtMs, fmtRatio, median, passFail, summary, table } from './lib/stats.js';

const SIDE = 3000;
const GOAL_RATIO = 0.9;
const GOAL_RSS_MB = 250;
const IN_FLIGHT = 4;
/**
 * glibc's own limit on malloc arenas (8 per core on 64-bit), given explicitly: the start script
 * sets 2 unless the environment has a value (docs/decisions.md, "Server memory: the start
 * script's defaults"), so this is how the comparison runs with glibc's default arenas.
 */
const GLIBC_DEFAULT_ARENAS = { MALLOC_ARENA_MAX: String(8 * os.availableParallelism()) };
const PASSWORD = 'bench password for the upload benchmark';
const REDIRECT = 'https://tool.example/callback';

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
    s.on('error', reject);
  });
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

function send(url: string, opts: { method?: string; headers?: Record<string, string>; body?: Buffer | string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: opts.method ?? 'GET', headers: opts.headers, rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** An access token with cover_art, the way a person gives one to a tool: sign in, consent, code, exchange. */
async function coverArtToken(web: string, app: { client_id: string; client_secret: string }): Promise<string> {
  const jar = new Map<string, string>();
  const go = async (url: string, form?: Record<string, string>) => {
    const headers: Record<string, string> = { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join('; ') };
    if (form !== undefined) headers['content-type'] = 'application/x-www-form-urlencoded';
    const res = await send(url, { method: form === undefined ? 'GET' : 'POST', headers, body: form === undefined ? undefined : new URLSearchParams(form).toString() });
    const set = res.headers['set-cookie'];
    for (const c of Array.isArray(set) ? set : []) {
      const [pair = ''] = c.split(';');
      const eq = pair.indexOf('=');
      jar.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    return res;
  };
  const csrf = (a: Answer) => /name="csrf_token" value="([^"]+)"/.exec(a.body)?.[1] ?? '';
  const login = await go(`${web}/login`);
  await go(`${web}/login`, { csrf_token: csrf(login), username: 'bench', password: PASSWORD, return_to: '/account/applications' });
  const authorize = `${web}/oauth2/authorize?${new URLSearchParams({ client_id: app.client_id, response_type: 'code', redirect_uri: REDIRECT, scope: 'cover_art' })}`;
  const consent = await go(authorize);
  const allowed = await go(authorize, { csrf_token: csrf(consent), decision: 'allow' });
  const code = new URL(String(allowed.headers.location)).searchParams.get('code') ?? '';
  const tok = await go(`${web}/oauth2/token`, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: app.client_id, client_secret: app.client_secret });
  const accessToken = (JSON.parse(tok.body) as { access_token?: string }).access_token;
  if (accessToken === undefined) throw new Error(`no token: ${tok.body}`);
  return accessToken;
}

function multipart(bytes: Buffer): { body: Buffer; type: string } {
  const boundary = `----bench${randomUUID()}`;
  const body = Buffer.concat([
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="types"\r\n\r\nFront\r\n`),
    Buffer.from(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="cover.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return { body, type: `multipart/form-data; boundary=${boundary}` };
}

/** The process's peak resident set (VmHWM) in kB. */
function peakRssKb(pid: number): number {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m?.[1] ?? Number.NaN);
}

/** What a server measured: uploads in flight, the peak resident set before and after, and how long they all took. */
interface InFlight {
  before: number;
  ms: number;
  peak: number;
}

/** The upload benchmark's goals and report, from the start script's server (`measured`) and one with glibc's default arenas (`plain`). */
function uploadReport(
  opts: Options,
  imageBytes: number,
  measured: { rssStart: number; api: number[]; viaCli: number[]; flight: InFlight },
  plain: InFlight,
): { markdown: string; data: unknown; goalsMet: boolean } {
  const { rssStart, api, viaCli } = measured;
  const rounds = opts.cliRounds;
  const rssBefore = measured.flight.before;
  const rssPeak = measured.flight.peak;
  const concurrentMs = measured.flight.ms;
  const apiRate = 1000 / median(api);
  const cliRate = 1000 / median(viaCli);
  const ratio = apiRate / cliRate;
  const okRate = ratio >= GOAL_RATIO;
  const okRss = rssPeak / 1024 < GOAL_RSS_MB;
  const markdown = [
    `### upload: ${SIDE}×${SIDE} JPEG (q90, ${(imageBytes / 2 ** 20).toFixed(2)} MiB) through the write API vs sleeve art add`,
    '',
    `${rounds} rounds after a warm-up, order alternating; API: POST multipart over HTTPS with a bearer token to a running sleeve serve (response timed end to end) started as \`npm start\` starts it, nothing set in its environment (the start script's default: 2 malloc arenas); CLI: the whole process, spawn to exit.`,
    '',
    table(
      ['path', '>median [range]', '>images/s'],
      [
        ['POST /api/cover-art/release/{mbid}/images', summary(api, fmtMs), apiRate.toFixed(2)],
        ['sleeve art add MBID cover.jpg --type Front', summary(viaCli, fmtMs), cliRate.toFixed(2)],
      ],
    ),
    '',
    `- ratio API/CLI images/s: **${fmtRatio(ratio)}** (goal ≥ ${GOAL_RATIO}): **${passFail(okRate)}**`,
    `- ${IN_FLIGHT} uploads in flight: ${fmtMs(concurrentMs)} for all (${((IN_FLIGHT * 1000) / concurrentMs).toFixed(2)} images/s)`,
    `- server peak RSS (VmHWM): ${fmtMiB(rssStart)} started (before any upload), ${fmtMiB(rssBefore)} after the sequential rounds, **${fmtMiB(rssPeak)}** after ${IN_FLIGHT} in flight (goal < ${GOAL_RSS_MB} MB): **${passFail(okRss)}**`,
    `- the same server with glibc's default arenas (MALLOC_ARENA_MAX=${GLIBC_DEFAULT_ARENAS.MALLOC_ARENA_MAX}, 8 per core): ${fmtMiB(plain.before)} after a warm-up upload, **${fmtMiB(plain.peak)}** after ${IN_FLIGHT} in flight (${fmtMs(plain.ms)} for all)`,
  ].join('\n');
  return {
    markdown,
    data: { imageBytes, comparisonEnv: GLIBC_DEFAULT_ARENAS, api, cli: viaCli, ratio, concurrentMs, rssStartKb: rssStart, rssBeforeKb: rssBefore, rssPeakKb: rssPeak, defaultArenas: { beforeKb: plain.before, peakKb: plain.peak, ms: plain.ms } },
    goalsMet: okRate && okRss,
  };
}

export async function uploadBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-upload-'));
  const dataDir = path.join(tmp, 'data');
  const bytes = await makeNoisyJpeg(SIDE, SIDE, 90);
  const file = path.join(tmp, 'cover-3000.jpg');
  await writeFile(file, bytes);
  log(`upload: ${SIDE}×${SIDE} q90 JPEG of ${(bytes.length / 2 ** 20).toFixed(2)} MiB`);
  const webPort = await freePort();
  const web = `https://127.0.0.1:${webPort}`;
  const env = { SLEEVE_AUTH_LISTEN: `127.0.0.1:${webPort}`, SLEEVE_AUTH_URL: web };
  const cli = (args: string[], stdin?: string) => runOk(process.execPath, [SLEEVE_CLI, ...args], { env: sleeveEnv(dataDir, env), ...(stdin === undefined ? {} : { stdin }) });
  await cli(['migrate']);
  await cli(['user', 'add', 'bench', '--email', 'bench@example.com', '--password-stdin'], `${PASSWORD}\n`);
  const app = JSON.parse((await cli(['--json', 'app', 'add', '--owner', 'bench', '--name', 'Bench tool', '--type', 'confidential', '--redirect-uri', REDIRECT])).stdout) as { client_id: string; client_secret: string };
  const apiRelease = randomUUID();
  const cliRelease = randomUUID();
  const group = randomUUID();
  await cli(['release', 'add', apiRelease, '--release-group', group]);
  await cli(['release', 'add', cliRelease, '--release-group', group]);

  try {
    const upload = async (web: string, token: string) => {
      const m = multipart(bytes);
      const t0 = performance.now();
      const res = await send(`${web}/api/cover-art/release/${apiRelease}/images`, { method: 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': m.type }, body: m.body });
      if (res.status !== 201) throw new Error(`upload: ${res.status} ${res.body}`);
      return performance.now() - t0;
    };
    /** A server with `extra` in its environment: a token, a warm-up upload, then `work` with the server's pid. */
    const withServer = async <T>(name: string, extra: Record<string, string>, work: (token: string, pid: number) => Promise<T>): Promise<T> => {
      const server = await startSleeve({ name, dataDir, env: { ...env, ...extra }, cpuProf: opts.cpuProf, core: null });
      try {
        for (let i = 0; i < 50 && (await send(`${web}/login`).catch(() => undefined)) === undefined; i++) await sleep(100);
        return await work(await coverArtToken(web, app), server.pid);
      } finally {
        await server.stop();
      }
    };
    const inFlight = async (token: string, pid: number) => {
      const before = peakRssKb(pid);
      log(`upload: ${IN_FLIGHT} uploads in flight`);
      const t0 = performance.now();
      await Promise.all(Array.from({ length: IN_FLIGHT }, () => upload(web, token)));
      return { before, ms: performance.now() - t0, peak: peakRssKb(pid) };
    };

    // As `npm start` runs it, with nothing set (docs/decisions.md, "Server memory: the start script's defaults").
    const measured = await withServer('upload', {}, async (token, pid) => {
      const rssStart = peakRssKb(pid);
      const cliAdd = async () => {
        const t0 = performance.now();
        await cli(['art', 'add', cliRelease, file, '--type', 'Front']);
        return performance.now() - t0;
      };
      const rounds = opts.cliRounds;
      log('upload: warm-up');
      await upload(web, token);
      await cliAdd();
      const api: number[] = [];
      const viaCli: number[] = [];
      for (let r = 0; r < rounds; r++) {
        if (r % 2 === 0) {
          api.push(await upload(web, token));
          viaCli.push(await cliAdd());
        } else {
          viaCli.push(await cliAdd());
          api.push(await upload(web, token));
        }
        log(`  round ${r + 1}/${rounds}: API ${fmtMs(api[r] as number)}  sleeve art add ${fmtMs(viaCli[r] as number)}`);
      }
      return { rssStart, api, viaCli, flight: await inFlight(token, pid) };
    });
    // The same with glibc's default arenas, for comparison.
    const plain = await withServer('upload-default-arenas', GLIBC_DEFAULT_ARENAS, async (token, pid) => {
      await upload(web, token);
      return inFlight(token, pid);
    });
    return uploadReport(opts, bytes.length, measured, plain);
  } finally {
    if (!opts.keep) await rm(tmp, { recursive: true, force: true });
  }
}

/**
 * gallery: the website's release gallery page, warm (`GET /release/{mbid}/cover-art` over
 * HTTPS, anonymous), against the cover art API's release listing redirect
 * (`GET /release/{mbid}/` with Accept: application/json, a cached 307) of the same
 * `sleeve serve` process on the embedded default, pinned to one core, wrk on the other,
 * rounds interleaved. Goal: the gallery ≥ 0.5× the redirect's requests/s; p99 printed.
 * Also measured: the page asked for with gzip (as browsers ask), and the ceiling, a bare
 * node:https server sending the same page from memory (bare-page.ts); server CPU per request.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { addArt, addRelease } from '../src/cover-art/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime } from '../src/runtime.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { benchScript } from './lib/paths.js';
import { cleanEnv, pinned, startServer, which, type Server } from './lib/proc.js';
import { mediansTable, runsTable, seriesSummary, type Series } from './lib/rounds.js';
import { LOAD_CORE, SERVER_CORE, startSleeve } from './lib/servers.js';
import { fmtMs, fmtRatio, median, passFail } from './lib/stats.js';
import { wrkRounds, writeScript, type Scenario } from './lib/wrk-rounds.js';

const RELEASE = '4a2f2a4e-5e0e-4bd4-9d1a-6a1b8f0f7c11';
const RELEASE_GROUP = 'f0a3c1d2-6b7e-4c8d-9e0f-1a2b3c4d5e6f';
const IMAGES = 6;
const GOAL = 0.5;

async function makeCatalogue(dataDir: string): Promise<void> {
  const rt = await openRuntime(loadConfig({ SLEEVE_DATA_DIR: dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' }));
  try {
    await addRelease(rt.coverArt, { mbid: RELEASE, releaseGroup: RELEASE_GROUP, title: 'Gallery benchmark', date: '2001-02-03' });
    const types = [['Front'], ['Back'], ['Booklet'], ['Booklet'], ['Medium'], ['Tray']];
    for (let i = 0; i < IMAGES; i++) {
      await addArt(rt.coverArt, { release: RELEASE, bytes: await makeNoisyJpeg(800, 800), types: types[i], comment: `image ${i + 1}`, approved: true, edit: i + 1 });
    }
  } finally {
    await rt.close();
  }
}

/** The status of one request (HTTPS self-signed allowed). */
async function statusOf(url: string, headers: Record<string, string>): Promise<number> {
  const mod = url.startsWith('https:') ? await import('node:https') : await import('node:http');
  return new Promise((resolve, reject) => {
    const req = mod.request(url, { headers, rejectUnauthorized: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A page as received: status, its own headers (not the connection's) and body. */
async function pageOf(url: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  const { request } = await import('node:https');
  return new Promise((resolve, reject) => {
    const req = request(url, { rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const headers: Record<string, string> = {};
        for (const [k, v] of Object.entries(res.headers)) if (!['connection', 'keep-alive', 'date', 'content-length'].includes(k) && typeof v === 'string') headers[k] = v;
        resolve({ status: res.statusCode ?? 0, headers, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

function startBarePage(page: { status: number; headers: Record<string, string>; body: string }, tlsDir: string): Promise<Server> {
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [benchScript('bare-page.js')]);
  return startServer({ name: 'bare-page', cmd, args, env: cleanEnv({ BENCH_RESPONSE: JSON.stringify(page), BENCH_TLS_DIR: tlsDir }), ready: /listening (https:\/\/\S+)/ });
}

type Summary = ReturnType<typeof seriesSummary>;

/** Microseconds of server CPU per request, the median over the rounds. */
function cpuPerRequest(s: Series): number {
  return median(s.runs.map((r) => (r.serverCpu / 100 / r.rps) * 1e6));
}

export async function galleryBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const wrk = which('wrk');
  if (wrk === undefined) throw new Error('the gallery benchmark needs wrk (apt-get install wrk)');
  const durationS = opts.duration ?? 6;
  const rounds = opts.rounds ?? 3;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-gallery-'));
  let sleeve: Server | undefined;
  let bare: Server | undefined;
  try {
    await makeCatalogue(dataDir);
    sleeve = await startSleeve({ name: 'sleeve', dataDir, cpuProf: opts.cpuProf });
    const auth = /auth:\s+(https:\/\/\S+)/.exec(sleeve.output())?.[1];
    if (auth === undefined) throw new Error(`no auth address in:\n${sleeve.output()}`);
    const website: Server = { ...sleeve, url: auth };
    const pair: Scenario[] = [
      { label: 'API listing redirect (307)', server: sleeve, path: `/release/${RELEASE}/`, script: writeScript(dataDir, 'listing', 'wrk.headers["Accept"] = "application/json"\n') },
      { label: 'website gallery page (200)', server: website, path: `/release/${RELEASE}/cover-art`, script: writeScript(dataDir, 'gallery', '') },
    ];
    const statuses = [await statusOf(`${sleeve.url}${pair[0]?.path}`, { accept: 'application/json' }), await statusOf(`${auth}${pair[1]?.path}`, {})];
    if (statuses[0] !== 307 || statuses[1] !== 200) throw new Error(`unexpected answers ${statuses.join(', ')} (307 and 200 expected)`);
    // The ceiling: the same page (headers and bytes as sleeve sent them) from a bare node:https server with the same certificate.
    const page = await pageOf(`${auth}${pair[1]?.path}`);
    bare = await startBarePage(page, path.join(dataDir, 'tls'));
    const scenarios: Scenario[] = [
      ...pair,
      { label: 'gallery page, gzip', server: website, path: `/release/${RELEASE}/cover-art`, script: writeScript(dataDir, 'gallery-gzip', 'wrk.headers["Accept-Encoding"] = "gzip, deflate, br"\n') },
      { label: 'bare node:https, same page', server: bare, path: '/', script: writeScript(dataDir, 'bare', '') },
    ];
    const series = await wrkRounds(wrk, scenarios, { rounds, durationS, warmup: opts.warmup, connections: opts.connections, labelWidth: 28 });
    const [redirect, gallery, gzip, ceiling] = series.map(seriesSummary) as ReturnType<typeof seriesSummary>[] as [Summary, Summary, Summary, Summary];
    const ratio = gallery.rps.median / redirect.rps.median;
    const ok = ratio >= GOAL && gallery.errors === 0;
    const cpu = series.map(cpuPerRequest);
    const markdown = [
      '### gallery: the release gallery page vs the API listing redirect',
      '',
      `One \`sleeve serve\` (SQLite + files, both listeners) on core ${SERVER_CORE}, wrk on core ${LOAD_CORE}; ${rounds} interleaved rounds × ${durationS} s after ${opts.warmup} s warm-up each; ${opts.connections} connections, keep-alive. The gallery (${IMAGES} images, anonymous, ${page.body.length.toLocaleString('en-US')} bytes) over HTTPS, the redirect over HTTP; the same page asking for gzip as browsers do; and the ceiling: a bare node:https server sending the page sleeve sent from memory, same certificate, same core.`,
      '',
      runsTable(series),
      '',
      mediansTable(series),
      '',
      `- gallery/redirect requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL}): **${passFail(ok)}**; p99 gallery ${fmtMs(gallery.p99.median)}, redirect ${fmtMs(redirect.p99.median)}; errors ${gallery.errors}/${redirect.errors}`,
      `- the ceiling, bare node:https with the same page / redirect: ${fmtRatio(ceiling.rps.median / redirect.rps.median)}; gallery / bare node:https: ${fmtRatio(gallery.rps.median / ceiling.rps.median)}; gallery with gzip / redirect: ${fmtRatio(gzip.rps.median / redirect.rps.median)}`,
      `- server CPU per request (median of rounds): ${scenarios.map((sc, i) => `${sc.label} ${cpu[i]?.toFixed(0)} µs`).join('; ')}; by CPU time, gallery/redirect ${fmtRatio((cpu[0] as number) / (cpu[1] as number))}, bare/redirect ${fmtRatio((cpu[0] as number) / (cpu[3] as number))}`,
    ].join('\n');
    return { markdown, data: { redirect, gallery, gzip, ceiling, ratio, ok, cpuMicroseconds: cpu }, goalsMet: ok };
  } finally {
    await sleeve?.stop();
    await bare?.stop();
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}

/**
 * gallery: the website's release gallery page, warm (`GET /release/{mbid}/cover-art` over
 * HTTPS, anonymous), against the cover art API's release listing redirect
 * (`GET /release/{mbid}/` with Accept: application/json, a cached 307) of the same
 * `sleeve serve` process on the embedded default, pinned to one core, wrk on the other,
 * rounds interleaved. Goal: the gallery ≥ 0.5× the redirect's requests/s; p99 printed.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { addArt, addRelease } from '../src/cover-art/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime } from '../src/runtime.js';
import { wrkOnce, writeScript, type Scenario } from './auth.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { which, type Server } from './lib/proc.js';
import { mediansTable, runsTable, seriesSummary, type Series } from './lib/rounds.js';
import { LOAD_CORE, SERVER_CORE, startSleeve } from './lib/servers.js';
import { fmtMs, fmtRatio, passFail } from './lib/stats.js';

const RELEASE = '4a2f2a4e-5e0e-4bd4-9d1a-6a1b8f0f7c11';
const RELEASE_GROUP = 'f0a3c1d2-6b7e-4c8d-9e0f-1a2b3c4d5e6f';
const IMAGES = 6;
const GOAL = 0.5;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

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

export async function galleryBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const wrk = which('wrk');
  if (wrk === undefined) throw new Error('the gallery benchmark needs wrk (apt-get install wrk)');
  const durationS = opts.duration ?? 6;
  const rounds = opts.rounds ?? 3;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-gallery-'));
  let sleeve: Server | undefined;
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
    for (const s of pair) {
      log(`  warm-up ${s.label} (${opts.warmup} s)`);
      await wrkOnce(wrk, s, opts.warmup, opts.connections);
    }
    const series: Series[] = pair.map((s) => ({ label: s.label, runs: [] }));
    for (let r = 0; r < rounds; r++) {
      for (let k = 0; k < pair.length; k++) {
        const i = (r + k) % pair.length;
        const res = await wrkOnce(wrk, pair[i] as Scenario, durationS, opts.connections);
        (series[i] as Series).runs.push(res);
        log(`  round ${r + 1}/${rounds} ${(pair[i] as Scenario).label.padEnd(28)} ${Math.round(res.rps)} req/s  p99 ${fmtMs(res.p99)}${res.errors > 0 ? `  ERRORS ${res.errors}` : ''}`);
      }
    }
    const [redirect, gallery] = series.map(seriesSummary) as [ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary>];
    const ratio = gallery.rps.median / redirect.rps.median;
    const ok = ratio >= GOAL && gallery.errors === 0;
    const markdown = [
      '### gallery: the release gallery page vs the API listing redirect',
      '',
      `One \`sleeve serve\` (SQLite + files, both listeners) on core ${SERVER_CORE}, wrk on core ${LOAD_CORE}; ${rounds} interleaved rounds × ${durationS} s after ${opts.warmup} s warm-up each; ${opts.connections} connections, keep-alive. The gallery (${IMAGES} images, anonymous) over HTTPS, the redirect over HTTP.`,
      '',
      runsTable(series),
      '',
      mediansTable(series),
      '',
      `- gallery/redirect requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL}): **${passFail(ok)}**; p99 gallery ${fmtMs(gallery.p99.median)}, redirect ${fmtMs(redirect.p99.median)}; errors ${gallery.errors}/${redirect.errors}`,
    ].join('\n');
    return { markdown, data: { redirect, gallery, ratio, ok }, goalsMet: ok };
  } finally {
    await sleeve?.stop();
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}

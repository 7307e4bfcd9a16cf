/**
 * redirect: warm `GET /release/{mbid}/front` on the embedded default (SQLite + files,
 * `sleeve serve` as a child process) against a bare node:http 307 server, both pinned
 * to the same core, the load generator on the other, rounds interleaved.
 * Goals: sleeve/bare ≥ 0.8 in requests/s; sleeve's p99 under 2 ms at 50 connections.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { addArt, addRelease } from '../src/cover-art/index.js';
import { loadConfig } from '../src/config/load.js';
import { openRuntime } from '../src/runtime.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import type { Server } from './lib/proc.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary } from './lib/rounds.js';
import { expect307, LOAD_CORE, startBare, startSleeve, type Captured307 } from './lib/servers.js';
import { fmtMs, fmtRatio, passFail } from './lib/stats.js';

export const RELEASE = '9c9f1380-2516-4fc9-a3e6-f9f61941d090';
export const RELEASE_GROUP = '16eb6c2f-9ef1-3d1b-8a1f-6e2c5a1e2d2b';
const GOAL_RATIO = 0.8;
const GOAL_P99_MS = 2;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** A data directory holding one release with a real JPEG front, made through sleeve's own domain functions. */
export async function makeCatalogue(dataDir: string): Promise<void> {
  const config = loadConfig({ SLEEVE_DATA_DIR: dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' });
  const rt = await openRuntime(config);
  try {
    await addRelease(rt.coverArt, { mbid: RELEASE, releaseGroup: RELEASE_GROUP, title: 'Benchmark' });
    await addArt(rt.coverArt, { release: RELEASE, bytes: await makeNoisyJpeg(1000, 1000), types: ['Front'], approved: true });
  } finally {
    await rt.close();
  }
}

export async function redirectBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const durationS = opts.duration ?? 8;
  const rounds = opts.rounds ?? 5;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-redirect-'));
  try {
    log(`redirect: catalogue in ${dataDir}`);
    await makeCatalogue(dataDir);
    const urlPath = `/release/${RELEASE}/front`;
    // sleeve's answer, replayed by the reference server.
    const probe = await startSleeve({ name: 'sleeve', dataDir, cpuProf: false });
    let answer: Captured307;
    try {
      answer = await expect307(probe, urlPath);
    } finally {
      await probe.stop();
    }
    log(`redirect: sleeve answers ${urlPath} with 307 → ${answer.location}`);
    const check = async (server: Server) => {
      await expect307(server, urlPath);
    };
    const settings = {
      durationS,
      rounds,
      warmupS: opts.warmup,
      connections: opts.connections,
      loadCore: LOAD_CORE,
      freshProcess: !opts.sameProcess,
    };
    const series = await interleavedRounds(
      [
        { label: 'bare node:http 307', start: () => startBare(), check, path: urlPath },
        { label: 'sleeve GET /release/{mbid}/front', start: () => startSleeve({ name: 'sleeve', dataDir, cpuProf: opts.cpuProf }), check, path: urlPath },
        { label: "node:http replaying sleeve's 307 (ref.)", start: () => startBare(answer), check, path: urlPath },
      ],
      settings,
    );
    const [b, s, ref] = series.map(seriesSummary) as [Summary, Summary, Summary];
    const ratio = s.rps.median / b.rps.median;
    const ratioOk = ratio >= GOAL_RATIO;
    const p99Ok = s.p99.median < GOAL_P99_MS;
    const markdown = [
      `### redirect: warm GET /release/{mbid}/front vs bare node:http 307`,
      '',
      `sleeve: \`sleeve serve\` (SQLite + file storage, the embedded default; response cache on), log level warn, demo off. ${describeRounds(settings, s.runs[0]?.tool)}.`,
      '',
      runsTable(series),
      '',
      mediansTable(series),
      '',
      `- sleeve/bare requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL_RATIO}): **${passFail(ratioOk)}**; per-round ratios ${s.runs.map((x, i) => fmtRatio(x.rps / (b.runs[i]?.rps ?? Number.NaN))).join(', ')}`,
      `- sleeve p99 (median of rounds): **${fmtMs(s.p99.median)}** [${fmtMs(s.p99.min)}–${fmtMs(s.p99.max)}] (goal < ${GOAL_P99_MS} ms at ${opts.connections} connections): **${passFail(p99Ok)}**`,
      `- reference: plain node:http sending sleeve's exact 307 (headers ${Object.keys(answer.headers).join(', ')}; ${Buffer.byteLength(answer.body)}-byte body) reaches ${fmtRatio(ref.rps.median / b.rps.median)} of bare; sleeve reaches ${fmtRatio(s.rps.median / ref.rps.median)} of that reference. The bare server sends only Location (chunked, empty body).`,
    ].join('\n');
    return { markdown, data: { settings, answer, bare: b, sleeve: s, reference: ref, ratio, ratioOk, p99Ok }, goalsMet: ratioOk && p99Ok };
  } finally {
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}

type Summary = ReturnType<typeof seriesSummary>;

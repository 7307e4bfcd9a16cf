/**
 * ingest: adding a 3000×3000 JPEG against sharp alone making the same three thumbnails.
 *  (a) in one process: sleeve's addArt (domain API, real store and database) vs three
 *      plain sharp pipelines from the original, interleaved;
 *  (b) whole processes: `sleeve art add` vs `node sharp-plain.js`, wall time and peak RSS.
 * Goal: sharp time / sleeve time ≥ 0.8.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import sharp from 'sharp';
import { loadConfig } from '../src/config/load.js';
import { addArt, addRelease } from '../src/cover-art/index.js';
import { processImage } from '../src/cover-art/images/thumbnails.js';
import { openRuntime, type Runtime } from '../src/runtime.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { plainThumbnails } from './sharp-plain.js';
import { benchScript, SLEEVE_CLI } from './lib/paths.js';
import { run } from './lib/proc.js';
import { nodeFlags, sleeveEnv } from './lib/servers.js';
import { fmtMiB, fmtMs, fmtRatio, max, median, passFail, summary, table } from './lib/stats.js';

const GOAL_RATIO = 0.8;
const SIDE = 3000;
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

async function timed<T>(fn: () => Promise<T>): Promise<[number, T]> {
  const t0 = performance.now();
  const out = await fn();
  return [performance.now() - t0, out];
}

async function dims(bytes: Buffer): Promise<string> {
  const m = await sharp(bytes).metadata();
  return `${m.width}×${m.height} (${(bytes.length / 1024).toFixed(0)} KiB)`;
}

interface ProcessRun {
  ms: number;
  maxRssKb: number;
}

/** Runs a node process, measuring wall time and peak RSS (/usr/bin/time -v, else a preloaded probe). */
async function measureProcess(nodeArgs: string[], env: NodeJS.ProcessEnv): Promise<ProcessRun> {
  const [cmd, args] =
    TIME !== undefined
      ? [TIME, ['-v', process.execPath, ...nodeArgs]]
      : [process.execPath, ['--import', `file://${benchScript('rss-probe.js')}`, ...nodeArgs]];
  const r = await run(cmd, args, { env });
  if (r.code !== 0) throw new Error(`${nodeArgs.join(' ')} failed (${r.code ?? r.signal}):\n${r.stdout}\n${r.stderr}`);
  const rss = TIME !== undefined ? /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr) : /BENCH_MAX_RSS_KB=(\d+)/.exec(r.stderr);
  return { ms: r.ms, maxRssKb: Number(rss?.[1] ?? Number.NaN) };
}

type Procs = Record<'sleeve' | 'plain' | 'help' | 'node', ProcessRun[]>;

/**
 * (a): in one process, sleeve's addArt, three plain sharp pipelines and sleeve's processImage
 * alone, `rounds` rounds after `warm` warm-up rounds, the order rotating each round.
 */
async function inProcessRounds(
  rt: Runtime,
  image: { bytes: Buffer; maxPixels: number; nextRelease: () => string },
  warm: number,
  rounds: number,
): Promise<{ inProcess: { sleeve: number[]; plain: number[]; thumbs: number[] }; sizes: { sleeve: string[]; plain: string[] }; benchRssKb: number }> {
  const { bytes } = image;
  const sleeveAdd = () => addArt(rt.coverArt, { release: image.nextRelease(), bytes, types: ['Front'] });
  const plain = () => plainThumbnails(bytes);
  const thumbsOnly = () => processImage(bytes, image.maxPixels);
  log(`ingest (a): warm-up ×${warm}`);
  for (let i = 0; i < warm; i++) {
    await sleeveAdd();
    await plain();
    await thumbsOnly();
  }
  const made = await thumbsOnly();
  const sizes = {
    sleeve: await Promise.all([250, 500, 1200].map((s) => dims(made.thumbnails.get(s as 250) as Buffer))),
    plain: await Promise.all((await plain()).map(dims)),
  };
  const a = { sleeve: [] as number[], plain: [] as number[], thumbs: [] as number[] };
  const steps: [keyof typeof a, () => Promise<unknown>][] = [
    ['sleeve', sleeveAdd],
    ['plain', plain],
    ['thumbs', thumbsOnly],
  ];
  for (let r = 0; r < rounds; r++) {
    for (let k = 0; k < steps.length; k++) {
      const [name, fn] = steps[(r + k) % steps.length] as [keyof typeof a, () => Promise<unknown>];
      const [ms] = await timed(fn);
      a[name].push(ms);
    }
    log(`  round ${r + 1}/${rounds}: addArt ${fmtMs(a.sleeve[r] as number)}  plain sharp ${fmtMs(a.plain[r] as number)}  processImage ${fmtMs(a.thumbs[r] as number)}`);
  }
  return { inProcess: a, sizes, benchRssKb: process.resourceUsage().maxRSS };
}

/** (b): whole processes (`sleeve art add`, the plain script, and for reference `sleeve --help` and `node -e 0`), rounds after `cliWarm` warm-up rounds, the order rotating. */
async function processRounds(opts: Options, run: { env: NodeJS.ProcessEnv; file: string; outDir: string; nextRelease: () => string }, cliWarm: number): Promise<Procs> {
  const { env, file, outDir } = run;
  const procs: Procs = { sleeve: [], plain: [], help: [], node: [] };
  const steps: [keyof Procs, () => Promise<ProcessRun>][] = [
    ['sleeve', () => measureProcess([...nodeFlags(opts.cpuProf, 'art-add'), SLEEVE_CLI, 'art', 'add', run.nextRelease(), file, '--type', 'Front'], env)],
    ['plain', () => measureProcess([benchScript('sharp-plain.js'), file, outDir], env)],
    ['help', () => measureProcess([SLEEVE_CLI, '--help'], env)],
    ['node', () => measureProcess(['-e', '0'], env)],
  ];
  log(`ingest (b): warm-up ×${cliWarm}`);
  for (let i = 0; i < cliWarm; i++) for (const [, fn] of steps) await fn();
  for (let r = 0; r < opts.cliRounds; r++) {
    for (let k = 0; k < steps.length; k++) {
      const [name, fn] = steps[(r + k) % steps.length] as [keyof Procs, () => Promise<ProcessRun>];
      procs[name].push(await fn());
    }
    const last = (n: keyof Procs) => procs[n][r] as ProcessRun;
    log(
      `  round ${r + 1}/${opts.cliRounds}: art add ${fmtMs(last('sleeve').ms)} (${fmtMiB(last('sleeve').maxRssKb)})  ` +
        `plain script ${fmtMs(last('plain').ms)} (${fmtMiB(last('plain').maxRssKb)})  sleeve --help ${fmtMs(last('help').ms)}  node -e 0 ${fmtMs(last('node').ms)}`,
    );
  }
  return procs;
}

export async function ingestBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-ingest-'));
  const dataDir = path.join(tmp, 'data');
  const outDir = path.join(tmp, 'plain-out');
  await mkdir(outDir);
  try {
    const bytes = await makeNoisyJpeg(SIDE, SIDE, 90);
    const file = path.join(tmp, 'cover-3000.jpg');
    await writeFile(file, bytes);
    log(`ingest: ${SIDE}×${SIDE} q90 JPEG of ${(bytes.length / 2 ** 20).toFixed(2)} MiB in ${file}`);

    const config = loadConfig({ SLEEVE_DATA_DIR: dataDir, SLEEVE_DEMO: 'off', SLEEVE_LOG_LEVEL: 'warn' });
    const rt = await openRuntime(config);
    const warm = 2;
    const inRounds = opts.ingestRounds;
    const cliWarm = 1;
    const releases: string[] = [];
    const rg = randomUUID();
    for (let i = 0; i < warm + inRounds + cliWarm + opts.cliRounds; i++) {
      const mbid = randomUUID();
      await addRelease(rt.coverArt, { mbid, releaseGroup: rg });
      releases.push(mbid);
    }
    // (a) in one process
    let next = 0;
    const nextRelease = () => releases[next++] as string;
    let a: Awaited<ReturnType<typeof inProcessRounds>>;
    try {
      a = await inProcessRounds(rt, { bytes, maxPixels: config.uploadMaxPixels, nextRelease }, warm, inRounds);
    } finally {
      await rt.close();
    }
    const { inProcess, sizes, benchRssKb } = a;

    // (b) whole processes
    const procs = await processRounds(opts, { env: sleeveEnv(dataDir), file, outDir, nextRelease }, cliWarm);

    const ratioA = median(inProcess.plain) / median(inProcess.sleeve);
    const ratioThumbs = median(inProcess.plain) / median(inProcess.thumbs);
    const ms = (n: keyof Procs) => procs[n].map((x) => x.ms);
    const rss = (n: keyof Procs) => procs[n].map((x) => x.maxRssKb);
    const ratioB = median(ms('plain')) / median(ms('sleeve'));
    const okA = ratioA >= GOAL_RATIO;
    const okB = ratioB >= GOAL_RATIO;
    const markdown = [
      `### ingest: ${SIDE}×${SIDE} JPEG (q90, ${(bytes.length / 2 ** 20).toFixed(2)} MiB) → 250/500/1200 px JPEG q85 thumbnails`,
      '',
      `(a) in one process, ${inRounds} rounds after ${warm} warm-up rounds, order rotating each round:`,
      '',
      table(
        ['step', '>median [range]', 'what it does'],
        [
          ['sleeve addArt (domain API)', summary(inProcess.sleeve, fmtMs), 'checks, thumbnails, 4 files + index.json written with fsync, SQLite (synchronous=FULL) transactions'],
          ['sharp alone, 3 plain pipelines', summary(inProcess.plain, fmtMs), '3 × sharp(original).resize(fit inside).jpeg(q85).toBuffer(), all in flight together'],
          ['sleeve processImage only', summary(inProcess.thumbs, fmtMs), "sleeve's thumbnail step alone (metadata, decode once to ≤1200 px, 3 encodes)"],
        ],
      ),
      '',
      `- ratio sharp/sleeve addArt: **${fmtRatio(ratioA)}** (goal ≥ ${GOAL_RATIO}): **${passFail(okA)}**`,
      `- ratio sharp/sleeve processImage (thumbnail step alone): ${fmtRatio(ratioThumbs)}`,
      `- thumbnails: sleeve ${sizes.sleeve.join(', ')}; plain ${sizes.plain.join(', ')}`,
      `- peak RSS of the benchmark process after (a): ${fmtMiB(benchRssKb)} (holds both, plus the source image)`,
      '',
      `(b) whole processes, ${opts.cliRounds} rounds after ${cliWarm} warm-up round, order rotating; wall time from spawn to exit; peak RSS ${TIME !== undefined ? 'from /usr/bin/time -v' : 'from process.resourceUsage() in the child'}:`,
      '',
      table(
        ['command', '>wall median [range]', '>peak RSS median', '>peak RSS max'],
        [
          ['sleeve art add MBID cover.jpg --type Front', summary(ms('sleeve'), fmtMs), fmtMiB(median(rss('sleeve'))), fmtMiB(max(rss('sleeve')))],
          ['node sharp-plain.js cover.jpg OUT (plain script)', summary(ms('plain'), fmtMs), fmtMiB(median(rss('plain'))), fmtMiB(max(rss('plain')))],
          ['sleeve --help (start-up only, for reference)', summary(ms('help'), fmtMs), fmtMiB(median(rss('help'))), fmtMiB(max(rss('help')))],
          ['node -e 0 (for reference)', summary(ms('node'), fmtMs), fmtMiB(median(rss('node'))), fmtMiB(max(rss('node')))],
        ],
      ),
      '',
      `- ratio plain script/sleeve art add (wall): **${fmtRatio(ratioB)}** (goal ≥ ${GOAL_RATIO}): **${passFail(okB)}**`,
      `- peak RSS: sleeve art add **${fmtMiB(median(rss('sleeve')))}**, plain script ${fmtMiB(median(rss('plain')))}`,
    ].join('\n');
    return {
      markdown,
      data: {
        imageBytes: bytes.length,
        inProcess: { ...inProcess, ratio: ratioA, ratioThumbnailStep: ratioThumbs, benchRssKb },
        processes: { ...procs, ratio: ratioB },
        okA,
        okB,
      },
      goalsMet: okA && okB,
    };
  } finally {
    if (!opts.keep) await rm(tmp, { recursive: true, force: true });
    else log(`ingest: kept ${tmp}`);
  }
}

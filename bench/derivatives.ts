/**
 * derivatives: thumbnails made on demand (SLEEVE_THUMBNAIL_SIZES, SLEEVE_THUMBNAIL_FORMATS;
 * docs/file-serving.md, "Sizes and formats made on demand"). Goals:
 *  - a size made on demand (a 600 px JPEG of a 2000×1500 original, asked through HTTP of a
 *    running `sleeve serve`: lookup, read, resize, atomic store, listing refreshed) costs at most
 *    1.2× the CPU of sharp doing the same resize alone (a process on the same core, the same
 *    pipeline, timed around the resizes only);
 *  - once made, it (a 260 px JPEG: nearly a 250's bytes) is served at ≥ 0.9 of the rate of a stored 250 px thumbnail;
 *  - WebP and AVIF encodes are reported against sharp alone (no goal).
 * Rounds interleaved (each round a fresh size, so every request is a miss), medians; the server
 * and the sharp process on the server core, the load generator on the other.
 *
 * Run as a script (`node derivatives.js SIZE FORMAT FILE…`) it is the baseline: it resizes each
 * file once and prints the CPU seconds the resizes took.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import sharp from 'sharp';
import { makeNoisyJpeg } from './lib/images.js';
import { runLoad } from './lib/load.js';
import type { Options } from './lib/options.js';
import { benchScript, SLEEVE_CLI } from './lib/paths.js';
import { pinned, runOk } from './lib/proc.js';
import { LOAD_CORE, SERVER_CORE, sleeveEnv, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMs, fmtRatio, median, passFail, summary, table } from './lib/stats.js';

const IMAGES = 6;
const WIDTH = 2000;
const HEIGHT = 1500;
const BASE_SIZE = 600;
/** The size made once and then served against the stored 250 px thumbnail: nearly the same bytes, so the rates compare the serving. */
const SERVED_SIZE = 260;
/** The size each format is made at once before the rounds, as the baseline warms sharp: only the resizes are timed, not sharp's loading. */
const WARM_SIZE = 64;
const GOAL_CPU = 1.2;
const GOAL_RATE = 0.9;
const FORMATS = ['jpeg', 'webp', 'avif'] as const;
type Format = (typeof FORMATS)[number];
const RELEASE = 'd0d0d0d0-0000-4000-8000-00000000d001';

/** The same pipeline sleeve's derivatives.ts runs, written out with sharp alone. */
function plainResize(bytes: Buffer, size: number, format: Format): Promise<Buffer> {
  const p = sharp(bytes).rotate().resize(size, size, { fit: 'inside', withoutEnlargement: true }).flatten({ background: '#ffffff' }).toColourspace('srgb');
  if (format === 'webp') return p.webp({ quality: 80 }).toBuffer();
  if (format === 'avif') return p.avif({ quality: 50, effort: 4 }).toBuffer();
  return p.jpeg({ quality: 85 }).toBuffer();
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** CPU ms per image of sharp alone (a process on the server core; its start and sharp's load not counted). */
async function sharpAlone(size: number, format: Format, files: string[]): Promise<number> {
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [benchScript('derivatives.js'), String(size), format, ...files]);
  const r = await runOk(cmd, args);
  return (Number(r.stdout.trim()) * 1000) / files.length;
}

/** CPU ms per image of the server making `size` in `format` for every image, asked one at a time. */
async function sleeveMakes(url: string, cpu: () => number, ids: number[], size: number, format: Format): Promise<number> {
  const ext = format === 'jpeg' ? 'jpg' : format;
  const before = cpu();
  for (const id of ids) {
    const res = await fetch(`${url}/download/mbid-${RELEASE}/mbid-${RELEASE}-${id}_thumb${size}.${ext}`);
    if (res.status !== 200) throw new Error(`thumbnail ${size}.${ext} of ${id}: ${res.status}`);
    await res.arrayBuffer();
  }
  return ((cpu() - before) * 1000) / ids.length;
}

export async function derivativesBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const rounds = opts.rounds ?? 3;
  const duration = opts.duration ?? 5;
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-derivatives-'));
  const sizes = Array.from({ length: rounds }, (_, r) => BASE_SIZE + r);
  const env = { SLEEVE_THUMBNAIL_SIZES: [...sizes, SERVED_SIZE, WARM_SIZE].join(','), SLEEVE_THUMBNAIL_FORMATS: FORMATS.join(',') };
  const data = path.join(tmp, 'data');
  const cli = (args: string[]) => runOk(process.execPath, [SLEEVE_CLI, ...args], { env: sleeveEnv(data, env) });
  await cli(['migrate']);
  await cli(['release', 'add', RELEASE, '--release-group', 'd0d0d0d0-0000-4000-8000-00000000d0a1', '--title', 'Derivatives']);
  const files: string[] = [];
  const ids: number[] = [];
  for (let i = 0; i < IMAGES; i++) {
    const file = path.join(tmp, `original-${i}.jpg`);
    await writeFile(file, await makeNoisyJpeg(WIDTH, HEIGHT - 10 * i));
    files.push(file);
    ids.push(Number(JSON.parse((await cli(['--json', 'art', 'add', RELEASE, file, '--type', 'Front'])).stdout).id));
  }
  const server = await startSleeve({ name: 'sleeve-derivatives', dataDir: data, env, only: 'coverart', cpuProf: opts.cpuProf });
  const cpu: Record<Format, { sleeve: number[]; sharp: number[] }> = { jpeg: { sleeve: [], sharp: [] }, webp: { sleeve: [], sharp: [] }, avif: { sleeve: [], sharp: [] } };
  const rates = { made: [] as number[], stored: [] as number[] };
  try {
    for (const format of FORMATS) await sleeveMakes(server.url, () => server.cpuSeconds(), ids.slice(0, 1), WARM_SIZE, format);
    for (const [r, size] of sizes.entries()) {
      for (const format of FORMATS) {
        // Which goes first alternates by round.
        const pair = r % 2 === 0 ? (['sleeve', 'sharp'] as const) : (['sharp', 'sleeve'] as const);
        for (const who of pair) {
          const ms = who === 'sleeve' ? await sleeveMakes(server.url, () => server.cpuSeconds(), ids, size, format) : await sharpAlone(size, format, files);
          cpu[format][who].push(ms);
        }
        log(`  round ${r + 1}/${rounds} ${format}: sleeve ${fmtMs(cpu[format].sleeve.at(-1) as number)} sharp ${fmtMs(cpu[format].sharp.at(-1) as number)} CPU per image`);
      }
    }
    const made = `${server.url}/download/mbid-${RELEASE}/mbid-${RELEASE}-${ids[0]}_thumb${SERVED_SIZE}.jpg`;
    // Made once (the first request), then only served.
    if ((await fetch(made)).status !== 200) throw new Error(`${made} was not made`);
    const stored = `${server.url}/download/mbid-${RELEASE}/mbid-${RELEASE}-${ids[0]}_thumb250.jpg`;
    // Warm-up of both (the server has just been resizing; its JIT has not seen the file path under load).
    for (const url of [made, stored]) await runLoad({ url, connections: opts.connections, durationS: Math.max(1, opts.warmup), core: LOAD_CORE });
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? (['made', 'stored'] as const) : (['stored', 'made'] as const);
      for (const which of order) {
        const res = await runLoad({ url: which === 'made' ? made : stored, connections: opts.connections, durationS: duration, core: LOAD_CORE, serverCpuSeconds: () => server.cpuSeconds() });
        rates[which].push(res.rps);
      }
      log(`  round ${r + 1}/${rounds} serving: made ${fmtInt(rates.made.at(-1) as number)}/s, stored 250 ${fmtInt(rates.stored.at(-1) as number)}/s`);
    }
  } finally {
    await server.stop();
    if (!opts.keep) await rm(tmp, { recursive: true, force: true });
  }
  const ratio = (f: Format) => median(cpu[f].sleeve) / median(cpu[f].sharp);
  const rateRatio = median(rates.made) / median(rates.stored);
  const cpuOk = ratio('jpeg') <= GOAL_CPU;
  const rateOk = rateRatio >= GOAL_RATE;
  const markdown = [
    `### derivatives: thumbnails made on demand (${IMAGES} originals ${WIDTH}×${HEIGHT}, ${rounds} rounds, medians)`,
    '',
    table(
      ['format', `sleeve: CPU per ${BASE_SIZE} px thumbnail made on demand`, 'sharp alone', 'ratio', 'goal'],
      FORMATS.map((f) => [f, summary(cpu[f].sleeve, fmtMs), summary(cpu[f].sharp, fmtMs), fmtRatio(ratio(f)), f === 'jpeg' ? `≤ ${GOAL_CPU}× ${passFail(cpuOk)}` : 'reported']),
    ),
    '',
    table(
      ['served', 'requests/s', 'ratio', 'goal'],
      [
        [`made ${SERVED_SIZE} px JPEG (made on demand once)`, summary(rates.made, fmtInt), fmtRatio(rateRatio), `≥ ${GOAL_RATE} ${passFail(rateOk)}`],
        ['stored 250 px JPEG', summary(rates.stored, fmtInt), '1.00', ''],
      ],
    ),
  ].join('\n');
  return { markdown, data: { cpu, rates, ratios: { jpeg: ratio('jpeg'), webp: ratio('webp'), avif: ratio('avif'), rate: rateRatio } }, goalsMet: cpuOk && rateOk };
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [size = '600', format = 'jpeg', ...inputs] = process.argv.slice(2);
  // As sleeve runs it (thumbnails.ts): no operation cache.
  sharp.cache(false);
  const buffers = await Promise.all(inputs.map((f) => readFile(f)));
  // sharp loaded and warmed on another size first: only the resizes are timed.
  await plainResize(buffers[0] as Buffer, 64, format as Format);
  const before = process.cpuUsage();
  for (const bytes of buffers) await plainResize(bytes, Number(size), format as Format);
  const used = process.cpuUsage(before);
  process.stdout.write(`${(used.user + used.system) / 1e6}\n`);
}

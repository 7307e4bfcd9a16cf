/**
 * mirror: `sleeve mirror images --all` of N originals (5,000 by default: small JPEGs, a
 * catalogue written with datagen/ and imported) from a local archive.org-layout upstream that
 * serves at most RATE images a second, against Debian's curl fetching the same URL list with
 * the same concurrency (`xargs -P C -n 100 curl --remote-name-all`), each run on the server
 * core with the upstream on the other, rounds interleaved, medians. Then the pull-through:
 * sequential misses through `sleeve serve` against direct fetches from the same upstream
 * (the overhead), and hits of those files against hits of files the mirror stored.
 * Goals: sleeve's files/s ≥ 0.9× curl's; the mirror's peak RSS under 200 MB.
 *
 * Each run starts with its output folder empty. By default the last run's files are renamed
 * aside and all removed at the end (--mirror-clear move): deleted right before the next run
 * (--mirror-clear delete, as up to session 10), their inodes are "recently deleted", which a
 * journal-less ext4 skips one by one on every new file for a minute or more, and that scan
 * was about half of both tools' CPU time (bench/RESULTS-archive.md, "Session 11: mirror").
 */
import { createWriteStream, existsSync, mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { genGid, KIND, writeDump, type Value } from '../datagen/mbdump.js';
import { makeNoisyJpeg } from './lib/images.js';
import type { Options } from './lib/options.js';
import { benchScript, SLEEVE_CLI } from './lib/paths.js';
import { pinned, run, runOk, startServer, which } from './lib/proc.js';
import { LOAD_CORE, SERVER_CORE, sleeveEnv, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMiB, fmtMs, fmtRatio, median, passFail, summary, table } from './lib/stats.js';

const TS = '2012-01-26 00:54:05.519372+00';
const PER_RELEASE = 5;
const RSS_GOAL_KB = 200 * 1024;
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

interface Catalogue {
  dataDir: string;
  /** Storage key of every image, in catalogue order. */
  keys: string[];
  items: string;
  image: string;
}

/** N images in N/5 releases, imported as MusicBrainz's dump would be; the upstream's items and image. */
async function makeCatalogue(dir: string, n: number): Promise<Catalogue> {
  const dataDir = path.join(dir, 'data');
  const releases = Math.ceil(n / PER_RELEASE);
  const releaseRows: Value[][] = [];
  const art: Value[][] = [];
  const types: Value[][] = [];
  const items: Record<string, number[]> = {};
  const keys: string[] = [];
  for (let r = 1; r <= releases; r++) {
    const gid = genGid(KIND.release, r);
    releaseRows.push([r, gid, `Release ${r}`, 1, 1, 1, null, 120, 28, null, '', 0, -1, TS]);
    items[gid] = [];
    for (let j = 0; j < PER_RELEASE && keys.length < n; j++) {
      const id = r * 10 + j;
      art.push([id, r, '', 1000 + id, j + 1, TS, 0, 'image/jpeg', 1000, 100, 200, 300]);
      types.push([id, j === 0 ? 1 : 2]);
      items[gid]?.push(id);
      keys.push(`mbid-${gid}/mbid-${gid}-${id}.jpg`);
    }
  }
  const dump = await writeDump(path.join(dir, 'dump'), {
    release_group: [[1, genGid(KIND.group, 1), 'Group', 1, 1, '', 0, TS]],
    release: releaseRows,
    'cover_art_archive.cover_art': art,
    'cover_art_archive.cover_art_type': types,
  });
  // The import never makes a database (only serve, migrate and demo do).
  await runOk(process.execPath, [SLEEVE_CLI, 'migrate'], { env: sleeveEnv(dataDir) });
  await runOk(process.execPath, [SLEEVE_CLI, '--json', 'import', 'musicbrainz', dump], { env: sleeveEnv(dataDir) });
  const itemsFile = path.join(dir, 'items.json');
  writeFileSync(itemsFile, JSON.stringify(items));
  const image = path.join(dir, 'image.jpg');
  writeFileSync(image, await makeNoisyJpeg(250, 250, 80));
  return { dataDir, keys, items: itemsFile, image };
}

/** Empties `folder` for the next run: renamed into `trash` (removed at the end) or deleted. */
function clear(folder: string, mode: Options['mirrorClear'], trash: string): void {
  if (mode === 'delete' || !existsSync(folder)) {
    rmSync(folder, { recursive: true, force: true });
    return;
  }
  mkdirSync(trash, { recursive: true });
  renameSync(folder, path.join(trash, String(readdirSync(trash).length)));
}

interface Run {
  ms: number;
  files: number;
  rssKb: number;
}

async function mirrorRun(cat: Catalogue, upstream: string, concurrency: number, empty: (folder: string) => void): Promise<Run> {
  empty(path.join(cat.dataDir, 'files'));
  const [cmd, args] = pinned(SERVER_CORE, process.execPath, [
    ...(TIME === undefined ? ['--import', `file://${benchScript('rss-probe.js')}`] : []),
    SLEEVE_CLI,
    '--json',
    'mirror',
    'images',
    '--all',
    '--sizes',
    'original',
    '--concurrency',
    String(concurrency),
  ]);
  const [c, a] = TIME === undefined ? [cmd, args] : [TIME, ['-v', cmd, ...args]];
  const r = await run(c, a, { env: sleeveEnv(cat.dataDir, { SLEEVE_UPSTREAM_URL: upstream }) });
  if (r.code !== 0) throw new Error(`sleeve mirror images exited with ${r.code ?? r.signal}\n${r.stderr}`);
  const s = JSON.parse(r.stdout) as { fetched: number; failed_total: number };
  if (s.failed_total !== 0) throw new Error(`sleeve mirror images failed ${s.failed_total} files\n${r.stdout}`);
  const rss = TIME !== undefined ? /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr) : /BENCH_MAX_RSS_KB=(\d+)/.exec(r.stderr);
  return { ms: r.ms, files: s.fetched, rssKb: Number(rss?.[1] ?? Number.NaN) };
}

async function curlRun(curl: string, urls: string, out: string, concurrency: number, empty: (folder: string) => void): Promise<Run> {
  empty(out);
  mkdirSync(out, { recursive: true });
  const [cmd, args] = pinned(SERVER_CORE, 'xargs', ['-a', urls, '-P', String(concurrency), '-n', '100', curl, '-sSf', '--remote-name-all', '--output-dir', out]);
  const r = await run(cmd, args);
  if (r.code !== 0) throw new Error(`curl exited with ${r.code ?? r.signal}\n${r.stderr}`);
  return { ms: r.ms, files: readdirSync(out).length, rssKb: Number.NaN };
}

/** One GET, its body read whole; ms from the request to the last byte. */
async function timedGet(url: string): Promise<number> {
  const t0 = performance.now();
  const res = await fetch(url);
  await res.arrayBuffer();
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`${url}: ${res.status}`);
  return ms;
}

export async function mirrorBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const n = opts.mirrorImages;
  const rounds = opts.rounds ?? 3;
  const concurrency = opts.mirrorConcurrency;
  const curl = which('curl');
  if (curl === undefined) throw new Error('mirror needs curl (Debian: apt-get install curl)');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-mirror-'));
  const trash = path.join(dir, 'cleared');
  const empty = (folder: string) => clear(folder, opts.mirrorClear, trash);
  try {
    log(`mirror: a catalogue of ${n} images`);
    const cat = await makeCatalogue(dir, n);
    const up = await startServer({
      name: 'upstream',
      ...(([cmd, args]) => ({ cmd, args }))(pinned(LOAD_CORE, process.execPath, [benchScript('mirror-upstream.js'), cat.items, cat.image, String(opts.mirrorRate)])),
      ready: /upstream: (http:\/\/\S+)/,
    });
    const urls = path.join(dir, 'urls.txt');
    const list = createWriteStream(urls);
    for (const k of cat.keys) list.write(`${up.url}/${k}\n`);
    await new Promise<void>((resolve) => list.end(resolve));

    const mirrorRuns: Run[] = [];
    const curlRuns: Run[] = [];
    try {
      // A warm-up of each (page cache, the upstream's JIT), not counted.
      await mirrorRun(cat, up.url, concurrency, empty);
      await curlRun(curl, urls, path.join(dir, 'curl'), concurrency, empty);
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? ['sleeve', 'curl'] : ['curl', 'sleeve'];
        for (const which of order) {
          const got = which === 'sleeve' ? await mirrorRun(cat, up.url, concurrency, empty) : await curlRun(curl, urls, path.join(dir, 'curl'), concurrency, empty);
          if (got.files !== n) throw new Error(`${which} fetched ${got.files} of ${n} files`);
          (which === 'sleeve' ? mirrorRuns : curlRuns).push(got);
          log(`mirror: round ${r + 1} ${which}: ${((n * 1000) / got.ms).toFixed(0)} files/s${Number.isFinite(got.rssKb) ? `, peak RSS ${fmtMiB(got.rssKb)}` : ''}`);
        }
      }

      // Pull-through: the first K files gone from a full store, fetched through on their first request.
      await mirrorRun(cat, up.url, concurrency, empty);
      const k = Math.min(200, Math.floor(n / 2));
      for (const key of cat.keys.slice(0, k)) rmSync(path.join(cat.dataDir, 'files', key));
      const sleeve = await startSleeve({ name: 'pull-through', dataDir: cat.dataDir, only: 'coverart', cpuProf: opts.cpuProf, env: { SLEEVE_UPSTREAM_URL: up.url } });
      const miss: number[] = [];
      const direct: number[] = [];
      const pulledHit: number[] = [];
      const storedHit: number[] = [];
      try {
        for (let i = 0; i < k; i++) {
          miss.push(await timedGet(`${sleeve.url}/download/${cat.keys[i]}`));
          direct.push(await timedGet(`${up.url}/${cat.keys[i]}`));
        }
        for (let rep = 0; rep < 3; rep++) {
          for (let i = 0; i < k; i++) {
            pulledHit.push(await timedGet(`${sleeve.url}/download/${cat.keys[i]}`));
            storedHit.push(await timedGet(`${sleeve.url}/download/${cat.keys[n - 1 - i]}`));
          }
        }
      } finally {
        await sleeve.stop();
      }
      return report({ n, rounds, concurrency, rate: opts.mirrorRate, clear: opts.mirrorClear, curl, mirrorRuns, curlRuns, k, miss, direct, pulledHit, storedHit });
    } finally {
      await up.stop();
    }
  } finally {
    rmSync(trash, { recursive: true, force: true });
    if (!opts.keep) rmSync(dir, { recursive: true, force: true });
    else log(`mirror: kept ${dir}`);
  }
}

function report(r: {
  n: number;
  rounds: number;
  concurrency: number;
  rate: number;
  clear: Options['mirrorClear'];
  curl: string;
  mirrorRuns: Run[];
  curlRuns: Run[];
  k: number;
  miss: number[];
  direct: number[];
  pulledHit: number[];
  storedHit: number[];
}): { markdown: string; data: unknown; goalsMet: boolean } {
  const fps = (runs: Run[]) => runs.map((x) => (r.n * 1000) / x.ms);
  const sleeveFps = fps(r.mirrorRuns);
  const curlFps = fps(r.curlRuns);
  const ratio = median(sleeveFps) / median(curlFps);
  const rss = Math.max(...r.mirrorRuns.map((x) => x.rssKb));
  const overhead = median(r.miss) - median(r.direct);
  const hitRatio = median(r.storedHit) / median(r.pulledHit);
  const goals = { ratio: ratio >= 0.9, rss: rss < RSS_GOAL_KB };
  const rows = r.mirrorRuns.map((m, i) => [String(i + 1), fmtInt(sleeveFps[i] as number), fmtMiB(m.rssKb), fmtInt(curlFps[i] as number), fmtRatio((sleeveFps[i] as number) / (curlFps[i] as number))]);
  const markdown = [
    '### mirror',
    '',
    `${fmtInt(r.n)} originals (${PER_RELEASE} per release, one 250 px JPEG each) from a local upstream serving at most ${fmtInt(r.rate)} images/s (node:http, core ${LOAD_CORE}); ` +
      `\`sleeve mirror images --all --sizes original --concurrency ${r.concurrency}\` against \`xargs -P ${r.concurrency} -n 100 ${r.curl} --remote-name-all\` (Debian's curl) on core ${SERVER_CORE}; ` +
      `${r.rounds} interleaved rounds after one warm-up run of each; files/s from spawn to exit (sleeve's includes its start, the import's database, and one \`_files.xml\` per release for the md5 check); ` +
      `each run into an empty folder, the last run's files ${r.clear === 'move' ? 'renamed aside (removed at the end)' : 'deleted just before'} (\`--mirror-clear ${r.clear}\`).`,
    '',
    table(['round', '>sleeve files/s', '>sleeve peak RSS', '>curl files/s', '>ratio'], rows),
    '',
    table(
      ['', '>median', 'goal'],
      [
        ['sleeve / curl files/s', fmtRatio(ratio), `≥ 0.9 ${passFail(goals.ratio)}`],
        ['sleeve mirror peak RSS', fmtMiB(rss), `< 200 MB ${passFail(goals.rss)}`],
      ],
    ),
    '',
    `Pull-through (\`sleeve serve\`, core ${SERVER_CORE}, SLEEVE_UPSTREAM_URL the same upstream), ${r.k} files, one request at a time, keep-alive:`,
    '',
    table(
      ['', '>median [min–max]'],
      [
        ['miss: GET /download/… (fetched, checked, stored, served)', summary(r.miss, fmtMs)],
        ['direct GET of the same file from the upstream', summary(r.direct, fmtMs)],
        ['overhead of a miss (difference of medians)', fmtMs(overhead)],
        ['hit of a file fetched through (3 passes)', summary(r.pulledHit, fmtMs)],
        ['hit of a file the mirror stored (3 passes)', summary(r.storedHit, fmtMs)],
        ['stored hit / pulled-through hit', fmtRatio(hitRatio)],
      ],
    ),
  ].join('\n');
  return {
    markdown,
    data: { ...r, sleeveFps, curlFps, ratio, rssKb: rss, overheadMs: overhead, hitRatio, goals },
    goalsMet: goals.ratio && goals.rss,
  };
}

/**
 * cluster: sleeve on PostgreSQL (issue 4).
 *  (a) warm GET /release/{mbid}/front from one `sleeve serve` on PostgreSQL against the bare
 *      node:http 307 server, both pinned to the same core, the load generator on the other,
 *      rounds interleaved; plus the same lookups with the response cache off (random MBIDs,
 *      every request a PostgreSQL query). Goal: cached sleeve/bare ≥ 0.6.
 *  (b) two `sleeve serve` processes on one database (and one Redis when given) against one
 *      process, both unpinned, each served by the same two load generators: the total
 *      requests/s of two processes over one.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { runLoad, type LoadResult } from './lib/load.js';
import type { Options } from './lib/options.js';
import { runOk, type Server } from './lib/proc.js';
import { SLEEVE_CLI } from './lib/paths.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary, type RoundSettings } from './lib/rounds.js';
import { expect307, LOAD_CORE, sleeveEnv, startBare, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMs, fmtRatio, median, passFail, summary, table } from './lib/stats.js';

const GOAL_RATIO = 0.6;
const FIRST_IMAGE_ID = 40_000_000_000;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

interface PgCatalogue {
  databaseUrl: string;
  oneMbid: string;
  pathsFile: string;
  drop(): Promise<void>;
}

/**
 * A fresh PostgreSQL database migrated by `sleeve migrate`, filled with `releases`
 * releases (one approved front JPEG row each, no files: redirects need none) by one
 * set-based INSERT per table.
 */
async function makePgCatalogue(adminUrl: string, releases: number, sample: number, workDir: string): Promise<PgCatalogue> {
  const name = `sleeve_bench_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const databaseUrl = url.href;
  const drop = async () => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await c.end();
  };
  try {
    await runOk(process.execPath, [SLEEVE_CLI, 'migrate'], { env: sleeveEnv(workDir, { SLEEVE_DATABASE_URL: databaseUrl }) });
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    try {
      const t0 = Date.now();
      const gid = (salt: string) => `md5(i::text || '${salt}')::uuid::text`;
      await c.query('BEGIN');
      await c.query(`INSERT INTO release_group (id, gid) SELECT i, ${gid('rg')} FROM generate_series(1, $1) i`, [releases]);
      await c.query(`INSERT INTO release (id, gid, release_group) SELECT i, ${gid('rel')}, i FROM generate_series(1, $1) i`, [releases]);
      await c.query(
        `INSERT INTO cover_art (id, release, ordering, approved, mime_type, date_uploaded, filesize, thumb_250_filesize, thumb_500_filesize, thumb_1200_filesize)
         SELECT $2::bigint + i, i, 1, 1, 'image/jpeg', 1767225600000 + i, 1500000, 20000, 60000, 250000 FROM generate_series(1, $1) i`,
        [releases, FIRST_IMAGE_ID],
      );
      await c.query('INSERT INTO cover_art_type (id, type_id) SELECT $2::bigint + i, 1 FROM generate_series(1, $1) i', [releases, FIRST_IMAGE_ID]);
      await c.query("UPDATE counter SET value = $1 WHERE name = 'cover_art_id'", [FIRST_IMAGE_ID + releases]);
      for (const seq of ['release_group', 'release']) await c.query(`SELECT setval(pg_get_serial_sequence('${seq}', 'id'), $1)`, [releases]);
      await c.query('COMMIT');
      await c.query('ANALYZE');
      const one = await c.query<{ gid: string }>('SELECT gid FROM release WHERE id = $1', [Math.floor(releases / 2) + 1]);
      const picked = await c.query<{ gid: string }>('SELECT gid FROM release ORDER BY md5(gid) LIMIT $1', [Math.min(sample, releases)]);
      const pathsFile = path.join(workDir, 'front-paths.txt');
      writeFileSync(pathsFile, `${picked.rows.map((r) => `/release/${r.gid}/front`).join('\n')}\n`);
      log(`cluster: ${releases.toLocaleString('en-US')} releases in PostgreSQL database ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
      return { databaseUrl, oneMbid: (one.rows[0] as { gid: string }).gid, pathsFile, drop };
    } finally {
      await c.end();
    }
  } catch (err) {
    await drop().catch(() => {});
    throw err;
  }
}

/** Load from two generators at once, each against one of `urls` (the same URL twice for one process). */
async function pairedLoad(urls: [string, string], connections: number, durationS: number, pathsFile: string | undefined): Promise<LoadResult[]> {
  const half = Math.max(1, Math.round(connections / 2));
  return Promise.all(urls.map((url) => runLoad({ url, connections: half, durationS, core: undefined, pathsFile })));
}

/** One setup of (b): how many processes, whether answers are cached, and each round's totals. */
interface ScalingEntry {
  label: string;
  mode: 'cached' | 'uncached';
  processes: number;
  runs: number[];
  p99: number[];
}

/** (b): two processes against one on one database, cached and not, `rounds` rounds alternating which goes first. */
async function scalingRounds(
  opts: Options,
  run: { workDir: string; env: Record<string, string>; front: string; pathsFile: string; durationS: number; rounds: number; check: (s: Server) => Promise<void>; checkRandom: (s: Server) => Promise<void> },
): Promise<ScalingEntry[]> {
  const { workDir, env, front, durationS, rounds, check, checkRandom } = run;
  const scaling: ScalingEntry[] = [];
  for (const mode of ['cached', 'uncached'] as const) {
    const extra: Record<string, string> = mode === 'uncached' ? { SLEEVE_RESPONSE_CACHE: '0' } : {};
    const pathsFile = mode === 'uncached' ? run.pathsFile : undefined;
    const urlPath = mode === 'uncached' ? '/' : front;
    for (const processes of [1, 2]) scaling.push({ label: `${processes} process${processes > 1 ? 'es' : ''}, ${mode}`, mode, processes, runs: [], p99: [] });
    for (let r = 0; r < rounds; r++) {
      for (const processes of r % 2 === 0 ? [1, 2] : [2, 1]) {
        const entry = scaling.find((x) => x.mode === mode && x.processes === processes) as ScalingEntry;
        const servers: Server[] = [];
        try {
          for (let i = 0; i < processes; i++) {
            const server = await startSleeve({ name: `sleeve-pg-${i}`, dataDir: workDir, env: { ...env, ...extra }, only: 'coverart', cpuProf: false, core: null });
            servers.push(server);
            if (mode === 'uncached') await checkRandom(server);
            else await check(server);
          }
          const urls: [string, string] = [`${(servers[0] as Server).url}${urlPath}`, `${(servers[servers.length - 1] as Server).url}${urlPath}`];
          await pairedLoad(urls, opts.connections, opts.warmup, pathsFile);
          const res = await pairedLoad(urls, opts.connections, durationS, pathsFile);
          const total = res.reduce((a, x) => a + x.rps, 0);
          const errors = res.reduce((a, x) => a + x.errors, 0);
          entry.runs.push(total);
          entry.p99.push(Math.max(...res.map((x) => x.p99)));
          log(`  round ${r + 1}/${rounds} ${entry.label.padEnd(26)} ${fmtInt(total).padStart(8)} req/s  p99 ${fmtMs(Math.max(...res.map((x) => x.p99)))}${errors > 0 ? `  ERRORS ${errors}` : ''}`);
        } finally {
          await Promise.all(servers.map((x) => x.stop()));
        }
      }
    }
  }
  return scaling;
}

export async function clusterBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const durationS = opts.duration ?? 6;
  const rounds = opts.rounds ?? 5;
  const workDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-cluster-'));
  const cat = await makePgCatalogue(opts.postgresUrl, opts.pgReleases, opts.sample, workDir);
  const redisEnv: Record<string, string> = opts.redisUrl === undefined ? {} : { SLEEVE_REDIS_URL: opts.redisUrl };
  const env = { SLEEVE_DATABASE_URL: cat.databaseUrl, ...redisEnv };
  const front = `/release/${cat.oneMbid}/front`;
  const randomPaths = readFileSync(cat.pathsFile, 'utf8').split('\n').filter((l) => l !== '');
  try {
    // (a) one process on PostgreSQL against bare, pinned.
    const settings: RoundSettings = { durationS, rounds, warmupS: opts.warmup, connections: opts.connections, loadCore: LOAD_CORE, freshProcess: !opts.sameProcess };
    const check = async (server: Server) => {
      await expect307(server, front);
    };
    const checkRandom = async (server: Server) => {
      for (const p of randomPaths.slice(0, 5)) await expect307(server, p);
    };
    log('cluster (a): one process on PostgreSQL vs bare node:http');
    const series = await interleavedRounds(
      [
        { label: 'bare node:http 307', start: () => startBare(), check, path: front },
        { label: 'sleeve on PostgreSQL, cached', start: () => startSleeve({ name: 'sleeve-pg', dataDir: workDir, env, only: 'coverart', cpuProf: opts.cpuProf }), check, path: front },
        {
          label: 'sleeve on PostgreSQL, cache off, random',
          start: () => startSleeve({ name: 'sleeve-pg-nocache', dataDir: workDir, env: { ...env, SLEEVE_RESPONSE_CACHE: '0' }, only: 'coverart', cpuProf: opts.cpuProf }),
          check: checkRandom,
          path: '/',
          pathsFile: cat.pathsFile,
        },
      ],
      settings,
    );
    const [b, s, u] = series.map(seriesSummary) as [Summary, Summary, Summary];
    const ratio = s.rps.median / b.rps.median;
    const ratioOk = ratio >= GOAL_RATIO;

    // (b) two processes against one, unpinned, two load generators either way.
    log('cluster (b): two processes vs one on one PostgreSQL database');
    const scaling = await scalingRounds(opts, { workDir, env, front, pathsFile: cat.pathsFile, durationS, rounds, check, checkRandom });
    const scaleRatio = (mode: 'cached' | 'uncached') => {
      const one = scaling.find((x) => x.mode === mode && x.processes === 1) as ScalingEntry;
      const two = scaling.find((x) => x.mode === mode && x.processes === 2) as ScalingEntry;
      return median(two.runs) / median(one.runs);
    };

    const markdown = [
      `### cluster: sleeve on PostgreSQL; two processes vs one`,
      '',
      `PostgreSQL database of ${opts.pgReleases.toLocaleString('en-US')} releases (one front image each)${opts.redisUrl === undefined ? '' : `, Redis ${opts.redisUrl}`}; \`sleeve serve --only coverart\`, log level warn.`,
      '',
      `(a) one process, ${describeRounds(settings, s.runs[0]?.tool)}. "cache off, random" requests a random front of ${randomPaths.length.toLocaleString('en-US')} sampled releases with SLEEVE_RESPONSE_CACHE=0, so every request queries PostgreSQL.`,
      '',
      runsTable(series),
      '',
      mediansTable(series),
      '',
      `- cached sleeve on PostgreSQL / bare requests/s (ratio of medians): **${fmtRatio(ratio)}** (goal ≥ ${GOAL_RATIO}): **${passFail(ratioOk)}**; per-round ratios ${s.runs.map((x, i) => fmtRatio(x.rps / (b.runs[i]?.rps ?? Number.NaN))).join(', ')}`,
      `- uncached (a PostgreSQL query per request) / bare: ${fmtRatio(u.rps.median / b.rps.median)}`,
      '',
      `(b) ${rounds} rounds, alternating which goes first; a new set of processes per run, warmed for ${opts.warmup} s; two load generators of ${Math.round(opts.connections / 2)} connections each, both against the one process or one against each of the two; nothing pinned: the processes, the load generators and PostgreSQL share this machine's ${os.availableParallelism()} cores.`,
      '',
      table(
        ['setup', '>total req/s median [range]', '>worst p99 median'],
        scaling.map((x) => [x.label, summary(x.runs, fmtInt), fmtMs(median(x.p99))]),
      ),
      '',
      `- two processes / one, cached: **${fmtRatio(scaleRatio('cached'))}**; uncached: **${fmtRatio(scaleRatio('uncached'))}**`,
    ].join('\n');
    return {
      markdown,
      data: { settings, bare: b, cached: s, uncached: u, ratio, ratioOk, scaling, scaleCached: scaleRatio('cached'), scaleUncached: scaleRatio('uncached') },
      goalsMet: ratioOk,
    };
  } finally {
    await cat.drop().catch((err: unknown) => log(`cluster: could not drop the database: ${(err as Error).message}`));
    if (!opts.keep) await rm(workDir, { recursive: true, force: true });
  }
}

type Summary = ReturnType<typeof seriesSummary>;

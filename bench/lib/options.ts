import { parseArgs } from 'node:util';

export const BENCHMARKS = ['redirect', 'ingest', 'scale', 'auth', 'cluster', 'import', 'files', 'soak', 'mirror', 'gallery', 'upload', 'front-door', 'derivatives', 'mirror-db', 'mirror-scale'] as const;
export type BenchName = (typeof BENCHMARKS)[number];
/** What runs when no benchmark is named (import, files and soak only when asked: a while, nginx, ten minutes). */
export const DEFAULT_BENCHMARKS: BenchName[] = ['redirect', 'ingest', 'scale', 'auth', 'cluster'];

/** Settings of one benchmark run; each can come from a flag or a SLEEVE_BENCH_* variable. */
export interface Options {
  which: BenchName[];
  /** Seconds of each measured load run (undefined: each benchmark's default). */
  duration: number | undefined;
  /** Measured rounds of load runs (each round runs every server once). */
  rounds: number | undefined;
  /** Seconds of warm-up load before each measured run (fresh processes) or once per server. */
  warmup: number;
  /** One server process per server for all rounds (the method of the first runs) instead of a new one per run. */
  sameProcess: boolean;
  connections: number;
  /** Rounds of the in-process ingest comparison. */
  ingestRounds: number;
  /** Rounds of the CLI-process ingest comparison. */
  cliRounds: number;
  /** Catalogue sizes of the scale benchmark. */
  small: number;
  large: number;
  /** Random MBIDs the uncached scale runs pick from. */
  sample: number;
  /** Rebuild the cached scale catalogues (and the import benchmark's dump). */
  rebuild: boolean;
  /** Size of the import benchmark's synthetic dump. */
  importReleases: number;
  importImages: number;
  /** Measured imports into PostgreSQL. */
  importRounds: number;
  /** Also one import into SQLite. */
  importSqlite: boolean;
  /** Run sleeve's processes with --cpu-prof, writing into bench/.work/profiles/. */
  cpuProf: boolean;
  /** Keep the temporary data directories. */
  keep: boolean;
  /** Also write the results as JSON to this file. */
  json: string | undefined;
  /** PostgreSQL server (a database on it is created and dropped) for the cluster benchmark. */
  postgresUrl: string;
  /** Redis for the cluster benchmark's processes (unset: none). */
  redisUrl: string | undefined;
  /** Releases in the cluster benchmark's PostgreSQL catalogue. */
  pgReleases: number;
  /** Minutes of the soak benchmark. */
  minutes: number;
  /** Multiplier of the soak benchmark's request rates (1: about 100 requests/s). */
  rate: number;
  /** Originals the mirror benchmark mirrors. */
  mirrorImages: number;
  /** Images a second its upstream serves at most. */
  mirrorRate: number;
  /** Concurrency of the mirror and of curl. */
  mirrorConcurrency: number;
  /**
   * How the mirror benchmark clears the last run's files before the next: `move` (renamed aside,
   * all removed at the end) or `delete` (removed right before the run, as sessions 6-10 did; on a
   * journal-less ext4 the kernel then skips the freed inodes one by one for a minute or more).
   */
  mirrorClear: 'move' | 'delete';
  /** Releases of the mirror-db benchmark's mirror (twice as many images). */
  mirrorDbReleases: number;
  /** Changes whose latency mirror-db measures. */
  mirrorDbChanges: number;
  /** SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS of mirror-db's live server. */
  mirrorDbPollMs: number;
  /** Images of the mirror mirror-scale generates. */
  mirrorScaleImages: number;
}

export const USAGE = `usage: npm run bench -- [${BENCHMARKS.join('|')}|all ...] [options]
   or: node dist/bench/run.js [${BENCHMARKS.join('|')}|all ...] [options]

With no benchmark named, redirect, ingest, scale, auth and cluster run; the others run when named
(or with all):
  import, files, soak   a while, nginx, ten minutes
  gallery, mirror       the website's gallery; the bulk mirror against Debian's curl
  upload                the write API against sleeve art add (its rounds are --cli-rounds)
  front-door            the redirect through deploy/nginx/musicbrainz-mirror.conf against nginx's own 307
  derivatives           thumbnails made on demand against sharp alone
  mirror-db             the mirror's live database against the imported catalogue (PostgreSQL from --postgres)
  mirror-scale          the mirror's live database at MusicBrainz's size: first read, restart, changes, RSS
files and front-door need Debian's nginx (/usr/sbin/nginx); files runs the redirect benchmark too.
cluster and import take PostgreSQL from --postgres /
SLEEVE_BENCH_POSTGRES_URL (import also SLEEVE_TEST_POSTGRES_URL): an admin URL, a database
is made and dropped per run.

options (environment variable in brackets):
  --duration S      seconds per measured load run      [SLEEVE_BENCH_DURATION]  (redirect 8, scale 6)
  --rounds N        interleaved rounds of load runs     [SLEEVE_BENCH_ROUNDS]    (5)
  --warmup S        warm-up seconds before each run     [SLEEVE_BENCH_WARMUP]    (3; 5 with --same-process)
  --same-process    keep one process per server for all rounds, warmed once,
                    instead of a new process (warmed) for every run
  --connections N   concurrent connections              [SLEEVE_BENCH_CONNECTIONS] (50)
  --ingest-rounds N in-process ingest rounds            [SLEEVE_BENCH_INGEST_ROUNDS] (9)
  --cli-rounds N    CLI-process ingest rounds           [SLEEVE_BENCH_CLI_ROUNDS] (5)
  --small N         small scale catalogue (releases)    [SLEEVE_BENCH_SMALL]     (1000)
  --large N         large scale catalogue (releases)    [SLEEVE_BENCH_LARGE]     (1000000)
  --sample N        MBIDs the uncached runs pick from   [SLEEVE_BENCH_SAMPLE]    (10000)
  --postgres URL    PostgreSQL server for cluster       [SLEEVE_BENCH_POSTGRES_URL]
                    (postgres://postgres@127.0.0.1:5432/postgres; a database is created and dropped)
  --redis URL       Redis for cluster's processes       [SLEEVE_BENCH_REDIS_URL] (none)
  --pg-releases N   releases in cluster's catalogue     [SLEEVE_BENCH_PG_RELEASES] (100000)
  --rebuild         rebuild the cached scale catalogues and import dump in bench/.work/
  --import-releases N  releases in the import dump      [SLEEVE_BENCH_IMPORT_RELEASES] (1000000)
  --import-images N    images in the import dump        [SLEEVE_BENCH_IMPORT_IMAGES]   (2000000)
  --import-rounds N    imports into PostgreSQL          [SLEEVE_BENCH_IMPORT_ROUNDS]   (3)
  --no-import-sqlite   skip the one import into SQLite
  --minutes N       minutes of the soak benchmark       [SLEEVE_BENCH_MINUTES]   (10; --quick 2)
  --rate X          soak request rate multiplier        [SLEEVE_BENCH_RATE]      (1: about 100 requests/s)
  --mirror-images N  originals the mirror benchmark mirrors [SLEEVE_BENCH_MIRROR_IMAGES] (5000; --quick 500)
  --mirror-rate N    images/s its upstream serves at most    [SLEEVE_BENCH_MIRROR_RATE]   (1000)
  --mirror-concurrency N  of sleeve mirror and of curl      [SLEEVE_BENCH_MIRROR_CONCURRENCY] (16)
  --mirror-clear move|delete  the last run's files before the next: renamed aside
                    (removed at the end) or deleted         [SLEEVE_BENCH_MIRROR_CLEAR]  (move)
  --mirror-db-releases N  releases of the mirror-db mirror (twice as many images) [SLEEVE_BENCH_MIRROR_DB_RELEASES] (100000)
  --mirror-db-changes N   changes mirror-db times           [SLEEVE_BENCH_MIRROR_DB_CHANGES] (100; --quick 10)
  --mirror-db-poll-ms N   SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS of its live server [SLEEVE_BENCH_MIRROR_DB_POLL_MS] (1000)
                          (mirror-scale takes these two as well)
  --mirror-scale-images N images of the mirror mirror-scale generates [SLEEVE_BENCH_MIRROR_SCALE_IMAGES] (7000000; --quick 200000)
  --quick           a short trial: 3 s runs, 3 rounds, 2 s warm-up, fewer ingest rounds
  --cpu-prof        run sleeve's processes with node --cpu-prof (bench/.work/profiles/)
  --keep            keep the temporary data directories
  --json FILE       also write the results as JSON
Set SLEEVE_BENCH_LOADGEN=autocannon to use autocannon even when wrk is installed.
files: SLEEVE_BENCH_FILES_CASES=cold,index… runs only those cases (no redirect run);
SLEEVE_BENCH_FILES_BASELINE=<another build's dist/bundle/index.js> adds that build to the cold
case's rounds, then runs both at once for paired rounds (their CPU per request, side by side).
`;

function num(name: string, flag: string | undefined, env: string | undefined, fallback: number): number;
function num(name: string, flag: string | undefined, env: string | undefined, fallback: number | undefined): number | undefined;
function num(name: string, flag: string | undefined, env: string | undefined, fallback: number | undefined): number | undefined {
  const raw = flag ?? (env === '' ? undefined : env);
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0) throw new Error(`${name} must be a positive number, not ${JSON.stringify(raw)}`);
  return n;
}

function clearMode(raw: string): 'move' | 'delete' {
  if (raw !== 'move' && raw !== 'delete') throw new Error(`--mirror-clear takes move or delete, not ${JSON.stringify(raw)}`);
  return raw;
}

/** Parses the command line; returns undefined after printing the usage for --help. */
export function parseOptions(argv: string[]): Options | undefined {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      duration: { type: 'string' },
      rounds: { type: 'string' },
      warmup: { type: 'string' },
      connections: { type: 'string' },
      'ingest-rounds': { type: 'string' },
      'cli-rounds': { type: 'string' },
      small: { type: 'string' },
      large: { type: 'string' },
      sample: { type: 'string' },
      rebuild: { type: 'boolean' },
      'import-releases': { type: 'string' },
      'import-images': { type: 'string' },
      'import-rounds': { type: 'string' },
      'no-import-sqlite': { type: 'boolean' },
      'same-process': { type: 'boolean' },
      quick: { type: 'boolean' },
      'cpu-prof': { type: 'boolean' },
      keep: { type: 'boolean' },
      json: { type: 'string' },
      postgres: { type: 'string' },
      redis: { type: 'string' },
      'pg-releases': { type: 'string' },
      minutes: { type: 'string' },
      rate: { type: 'string' },
      'mirror-images': { type: 'string' },
      'mirror-rate': { type: 'string' },
      'mirror-concurrency': { type: 'string' },
      'mirror-clear': { type: 'string' },
      'mirror-db-releases': { type: 'string' },
      'mirror-db-changes': { type: 'string' },
      'mirror-db-poll-ms': { type: 'string' },
      'mirror-scale-images': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help === true) {
    process.stdout.write(USAGE);
    return undefined;
  }
  const which: BenchName[] = [];
  for (const p of positionals) {
    if (p === 'all') which.push(...BENCHMARKS);
    else if ((BENCHMARKS as readonly string[]).includes(p)) which.push(p as BenchName);
    else throw new Error(`unknown benchmark ${JSON.stringify(p)}\n\n${USAGE}`);
  }
  const e = process.env;
  const quick = values.quick === true;
  return {
    which: which.length === 0 ? [...DEFAULT_BENCHMARKS] : [...new Set(which)],
    duration: num('--duration', values.duration, e.SLEEVE_BENCH_DURATION, quick ? 3 : undefined),
    rounds: num('--rounds', values.rounds, e.SLEEVE_BENCH_ROUNDS, quick ? 3 : undefined),
    warmup: num('--warmup', values.warmup, e.SLEEVE_BENCH_WARMUP, quick ? 2 : values['same-process'] === true ? 5 : 3),
    sameProcess: values['same-process'] === true,
    connections: num('--connections', values.connections, e.SLEEVE_BENCH_CONNECTIONS, 50),
    ingestRounds: num('--ingest-rounds', values['ingest-rounds'], e.SLEEVE_BENCH_INGEST_ROUNDS, quick ? 3 : 9),
    cliRounds: num('--cli-rounds', values['cli-rounds'], e.SLEEVE_BENCH_CLI_ROUNDS, quick ? 2 : 5),
    small: num('--small', values.small, e.SLEEVE_BENCH_SMALL, 1000),
    large: num('--large', values.large, e.SLEEVE_BENCH_LARGE, 1_000_000),
    sample: num('--sample', values.sample, e.SLEEVE_BENCH_SAMPLE, 10_000),
    rebuild: values.rebuild === true,
    importReleases: num('--import-releases', values['import-releases'], e.SLEEVE_BENCH_IMPORT_RELEASES, 1_000_000),
    importImages: num('--import-images', values['import-images'], e.SLEEVE_BENCH_IMPORT_IMAGES, 2_000_000),
    importRounds: num('--import-rounds', values['import-rounds'], e.SLEEVE_BENCH_IMPORT_ROUNDS, quick ? 1 : 3),
    importSqlite: values['no-import-sqlite'] !== true,
    cpuProf: values['cpu-prof'] === true,
    keep: values.keep === true,
    json: values.json,
    postgresUrl: values.postgres ?? (e.SLEEVE_BENCH_POSTGRES_URL || 'postgres://postgres@127.0.0.1:5432/postgres'),
    redisUrl: values.redis ?? (e.SLEEVE_BENCH_REDIS_URL || undefined),
    pgReleases: num('--pg-releases', values['pg-releases'], e.SLEEVE_BENCH_PG_RELEASES, 100_000),
    minutes: num('--minutes', values.minutes, e.SLEEVE_BENCH_MINUTES, quick ? 2 : 10),
    rate: num('--rate', values.rate, e.SLEEVE_BENCH_RATE, 1),
    mirrorImages: Math.round(num('--mirror-images', values['mirror-images'], e.SLEEVE_BENCH_MIRROR_IMAGES, quick ? 500 : 5000)),
    mirrorRate: num('--mirror-rate', values['mirror-rate'], e.SLEEVE_BENCH_MIRROR_RATE, 1000),
    mirrorConcurrency: Math.round(num('--mirror-concurrency', values['mirror-concurrency'], e.SLEEVE_BENCH_MIRROR_CONCURRENCY, 16)),
    mirrorClear: clearMode(values['mirror-clear'] ?? (e.SLEEVE_BENCH_MIRROR_CLEAR || 'move')),
    mirrorDbReleases: Math.round(num('--mirror-db-releases', values['mirror-db-releases'], e.SLEEVE_BENCH_MIRROR_DB_RELEASES, 100_000)),
    mirrorDbChanges: Math.round(num('--mirror-db-changes', values['mirror-db-changes'], e.SLEEVE_BENCH_MIRROR_DB_CHANGES, quick ? 10 : 100)),
    mirrorDbPollMs: Math.round(num('--mirror-db-poll-ms', values['mirror-db-poll-ms'], e.SLEEVE_BENCH_MIRROR_DB_POLL_MS, 1000)),
    mirrorScaleImages: Math.round(num('--mirror-scale-images', values['mirror-scale-images'], e.SLEEVE_BENCH_MIRROR_SCALE_IMAGES, quick ? 200_000 : 7_000_000)),
  };
}

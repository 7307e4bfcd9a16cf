/**
 * import: `sleeve import musicbrainz` of a synthetic dump of 1,000,000 releases and
 * 2,000,000 images (real COPY text format, edit table included; generated once into
 * bench/.work/ and reused) into a fresh PostgreSQL database, whole process.
 * Goal: ≥ 50,000 rows/s over all rows read, peak RSS < 300 MB. Also once on SQLite.
 * PostgreSQL comes from SLEEVE_BENCH_POSTGRES_URL (or SLEEVE_TEST_POSTGRES_URL): an
 * admin URL; a database is created for each run and dropped after it.
 */
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { generateDump } from '../datagen/mbdump.js';
import type { Options } from './lib/options.js';
import { benchScript, SLEEVE_CLI, workDir } from './lib/paths.js';
import { run, runOk } from './lib/proc.js';
import { nodeFlags, sleeveEnv } from './lib/servers.js';
import { fmtInt, fmtMiB, median, passFail, table } from './lib/stats.js';

const GOAL_ROWS_PER_S = 50_000;
const GOAL_RSS_KB = 300 * 1000;
const TIME = existsSync('/usr/bin/time') ? '/usr/bin/time' : undefined;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

interface ImportRun {
  database: 'postgres' | 'sqlite';
  /** Wall time of the whole `sleeve import` process (start-up included; `sleeve migrate` made the database before, as an import needs one). */
  wallS: number;
  rowsRead: number;
  /** rows read / wall time. */
  rowsPerS: number;
  stagingS: number;
  applyS: number;
  maxRssKb: number;
  loadBefore: number;
  loadAfter: number;
}

/** The cached dump, generated when missing (or with --rebuild); returns its folder and line count. */
async function ensureDump(releases: number, images: number, rebuild: boolean): Promise<{ dir: string; rows: number }> {
  const dir = path.join(workDir(), `mbdump-${releases}-${images}`);
  const marker = path.join(dir, 'GENERATED.json');
  if (!rebuild && existsSync(marker)) {
    const info = JSON.parse(await readFile(marker, 'utf8')) as { total: number };
    log(`import: reusing the dump in ${dir} (${fmtInt(info.total)} rows; --rebuild makes it again)`);
    return { dir, rows: info.total };
  }
  await rm(dir, { recursive: true, force: true });
  log(`import: generating ${fmtInt(releases)} releases and ${fmtInt(images)} images into ${dir} …`);
  const t0 = Date.now();
  const made = await generateDump(dir, { releases, images, edits: true });
  await writeFile(marker, `${JSON.stringify({ total: made.total, rows: made.rows, seconds: (Date.now() - t0) / 1000 }, null, 2)}\n`);
  log(`import: ${fmtInt(made.total)} rows generated in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  return { dir, rows: made.total };
}

async function onAdmin<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function measure(database: 'postgres' | 'sqlite', dump: string, adminUrl: string | undefined, opts: Options): Promise<ImportRun> {
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-import-'));
  const extra: Record<string, string> = {};
  let drop = async () => {};
  if (database === 'postgres') {
    const name = `sleeve_bench_import_${randomBytes(4).toString('hex')}`;
    await onAdmin(adminUrl as string, (c) => c.query(`CREATE DATABASE ${name}`));
    const url = new URL(adminUrl as string);
    url.pathname = `/${name}`;
    extra.SLEEVE_DATABASE_URL = url.href;
    drop = () => onAdmin(adminUrl as string, (c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)).then(() => {});
  }
  try {
    // The import never makes a database (only serve, migrate and demo do).
    await runOk(process.execPath, [SLEEVE_CLI, 'migrate'], { env: sleeveEnv(path.join(tmp, 'data'), extra) });
    const nodeArgs = [...nodeFlags(opts.cpuProf, `import-${database}`), SLEEVE_CLI, '--json', 'import', 'musicbrainz', dump];
    const [cmd, args] =
      TIME !== undefined ? [TIME, ['-v', process.execPath, ...nodeArgs]] : [process.execPath, ['--import', `file://${benchScript('rss-probe.js')}`, ...nodeArgs]];
    const loadBefore = os.loadavg()[0] as number;
    const r = await run(cmd, args, { env: sleeveEnv(path.join(tmp, 'data'), extra) });
    if (r.code !== 0) throw new Error(`sleeve import failed (${r.code ?? r.signal}):\n${r.stderr.slice(-3000)}`);
    const summary = JSON.parse(r.stdout) as { rows_read: number; staging_seconds: number; apply_seconds: number };
    const rss = TIME !== undefined ? /Maximum resident set size \(kbytes\): (\d+)/.exec(r.stderr) : /BENCH_MAX_RSS_KB=(\d+)/.exec(r.stderr);
    const wallS = r.ms / 1000;
    return {
      database,
      wallS,
      rowsRead: summary.rows_read,
      rowsPerS: summary.rows_read / wallS,
      stagingS: summary.staging_seconds,
      applyS: summary.apply_seconds,
      maxRssKb: Number(rss?.[1] ?? Number.NaN),
      loadBefore,
      loadAfter: os.loadavg()[0] as number,
    };
  } finally {
    await drop().catch(() => {});
    if (!opts.keep) await rm(tmp, { recursive: true, force: true });
  }
}

export async function importBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const { dir, rows } = await ensureDump(opts.importReleases, opts.importImages, opts.rebuild);
  const adminUrl = process.env.SLEEVE_BENCH_POSTGRES_URL || process.env.SLEEVE_TEST_POSTGRES_URL || undefined;
  const runs: ImportRun[] = [];
  const plan: ('postgres' | 'sqlite')[] = [];
  if (adminUrl !== undefined) for (let i = 0; i < opts.importRounds; i++) plan.push('postgres');
  else log('import: no SLEEVE_BENCH_POSTGRES_URL (or SLEEVE_TEST_POSTGRES_URL): the PostgreSQL runs are skipped');
  if (opts.importSqlite) plan.push('sqlite');
  for (const [i, database] of plan.entries()) {
    log(`import: run ${i + 1}/${plan.length} on ${database} (load average ${os.loadavg()[0]?.toFixed(2)}) …`);
    const r = await measure(database, dir, adminUrl, opts);
    runs.push(r);
    log(
      `  ${fmtInt(r.rowsRead)} rows in ${r.wallS.toFixed(1)} s: ${fmtInt(r.rowsPerS)} rows/s (staging ${r.stagingS.toFixed(1)} s, apply ${r.applyS.toFixed(1)} s), peak RSS ${fmtMiB(r.maxRssKb)}`,
    );
  }

  const lines: string[] = [];
  lines.push(`### import: ${fmtInt(opts.importReleases)} releases, ${fmtInt(opts.importImages)} images (${fmtInt(rows)} rows in all files), whole \`sleeve import musicbrainz\` process`);
  lines.push('');
  lines.push(`Dump: \`${path.relative(process.cwd(), dir) || dir}\` (generated by datagen/mbdump.ts, edit table included). Each run into a fresh database;`);
  lines.push('rows/s = rows read from all files / wall time of the process (start-up, migrations, staging, apply, cleanup). Peak RSS from /usr/bin/time -v.');
  lines.push('');
  lines.push(
    table(
      ['run', 'database', '>wall', '>rows/s', '>staging', '>apply', '>peak RSS', '>load avg before→after'],
      runs.map((r, i) => [
        String(i + 1),
        r.database,
        `${r.wallS.toFixed(1)} s`,
        fmtInt(r.rowsPerS),
        `${r.stagingS.toFixed(1)} s`,
        `${r.applyS.toFixed(1)} s`,
        fmtMiB(r.maxRssKb),
        `${r.loadBefore.toFixed(2)}→${r.loadAfter.toFixed(2)}`,
      ]),
    ),
  );
  lines.push('');
  const verdicts: boolean[] = [];
  for (const database of ['postgres', 'sqlite'] as const) {
    const mine = runs.filter((r) => r.database === database);
    if (mine.length === 0) continue;
    const rate = median(mine.map((r) => r.rowsPerS));
    const rss = Math.max(...mine.map((r) => r.maxRssKb));
    const rateOk = rate >= GOAL_ROWS_PER_S;
    const rssOk = rss < GOAL_RSS_KB;
    if (database === 'postgres' || !runs.some((r) => r.database === 'postgres')) verdicts.push(rateOk, rssOk);
    lines.push(
      `- ${database}: median **${fmtInt(rate)} rows/s** (goal ≥ ${fmtInt(GOAL_ROWS_PER_S)}: ${passFail(rateOk)}), highest peak RSS **${fmtMiB(rss)}** (goal < 300 MB: ${passFail(rssOk)}) over ${mine.length} run(s)`,
    );
  }
  return {
    markdown: lines.join('\n'),
    data: { dump: dir, rows, runs },
    goalsMet: verdicts.length > 0 && verdicts.every(Boolean),
  };
}

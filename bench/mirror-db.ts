/**
 * mirror-db: the mirror's live database as the catalogue (docs/mirror-database.md) against the
 * imported catalogue of the same rows, in the same run, from one generated dump
 * (datagen/mbdump.ts; its rows COPYed into a PostgreSQL database with MusicBrainz's tables,
 * datagen/musicbrainz-db.ts, on --postgres):
 *  (a) warm GET /release/{mbid}/front, one URL — goal: live ≥ 0.9 × imported (requests/s);
 *  (b) uncached (SLEEVE_RESPONSE_CACHE=0), random MBIDs — goal: live ≥ 0.7 × imported;
 *  (c) a change committed on the mirror's tables → the new answer from sleeve (its listing):
 *      median and worst over --mirror-db-changes changes, with SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS
 *      = --mirror-db-poll-ms; goal: worst < 60 s.
 * Also reported: how long the first whole read of the mirror took.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { generateDump } from '../datagen/mbdump.js';
import { createMirror, type MirrorDb } from '../datagen/musicbrainz-db.js';
import type { Options } from './lib/options.js';
import { SLEEVE_CLI, workDir } from './lib/paths.js';
import { runOk, type Server } from './lib/proc.js';
import { describeRounds, interleavedRounds, mediansTable, runsTable, seriesSummary, type RoundSettings, type Series } from './lib/rounds.js';
import { expect307, LOAD_CORE, sleeveEnv, startSleeve } from './lib/servers.js';
import { fmtInt, fmtMs, fmtRatio, max, median, passFail } from './lib/stats.js';

const GOAL_WARM = 0.9;
const GOAL_UNCACHED = 0.7;
const GOAL_CHANGE_MS = 60_000;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function ensureDump(releases: number, rebuild: boolean): Promise<string> {
  const dir = workDir(`mbdump-${releases}-${2 * releases}`);
  if (!rebuild && existsSync(path.join(dir, 'GENERATED.json'))) return dir;
  await rm(dir, { recursive: true, force: true });
  log(`mirror-db: generating ${fmtInt(releases)} releases and ${fmtInt(2 * releases)} images into ${dir} …`);
  const made = await generateDump(dir, { releases, images: 2 * releases, edits: true });
  await writeFile(path.join(dir, 'GENERATED.json'), `${JSON.stringify({ total: made.total, rows: made.rows }, null, 2)}\n`);
  return dir;
}

async function waitReady(server: Server, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await fetch(`${server.url}/readyz`).catch(() => undefined))?.status !== 200) {
    if (Date.now() > deadline) throw new Error(`${server.name}: not ready within ${timeoutMs} ms`);
    await sleep(100);
  }
}

interface Setup {
  mirror: MirrorDb;
  importedDir: string;
  liveDir: string;
  liveEnv: Record<string, string>;
  pathsFile: string;
  oneMbid: string;
  firstReadS: number;
}

/** The mirror, the imported catalogue and the live one (read whole once, so later starts follow from there). */
async function setUp(opts: Options): Promise<Setup> {
  const dump = await ensureDump(opts.mirrorDbReleases, opts.rebuild);
  log('mirror-db: loading the mirror database …');
  const mirror = await createMirror(opts.postgresUrl, dump);
  const c = new pg.Client({ connectionString: mirror.url });
  await c.connect();
  await c.query('VACUUM ANALYZE');
  const sample = await c.query<{ gid: string }>(
    `SELECT r.gid::text AS gid FROM musicbrainz.release r WHERE EXISTS (SELECT 1 FROM cover_art_archive.cover_art a JOIN cover_art_archive.cover_art_type t ON t.id = a.id AND t.type_id = 1 WHERE a.release = r.id) ORDER BY random() LIMIT ${opts.sample}`,
  );
  await c.end();
  const base = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-mirror-db-'));
  const pathsFile = path.join(base, 'paths.txt');
  writeFileSync(pathsFile, sample.rows.map((r) => `/release/${r.gid}/front\n`).join(''));
  const importedDir = path.join(base, 'imported');
  log('mirror-db: importing the same dump …');
  await runOk(process.execPath, [SLEEVE_CLI, 'migrate'], { env: sleeveEnv(importedDir) });
  await runOk(process.execPath, [SLEEVE_CLI, 'import', 'musicbrainz', dump], { env: sleeveEnv(importedDir) });
  const liveDir = path.join(base, 'live');
  const liveEnv = { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: String(opts.mirrorDbPollMs) };
  log('mirror-db: the first whole read of the mirror …');
  const t0 = Date.now();
  const first = await startSleeve({ name: 'sleeve-live-first', dataDir: liveDir, env: liveEnv, only: 'coverart', cpuProf: false, core: null });
  try {
    await waitReady(first, 6 * 3600_000);
  } finally {
    await first.stop();
  }
  const firstReadS = (Date.now() - t0) / 1000;
  log(`mirror-db: read whole in ${firstReadS.toFixed(1)} s`);
  return { mirror, importedDir, liveDir, liveEnv, pathsFile, oneMbid: sample.rows[0]?.gid as string, firstReadS };
}

function phase(s: Setup, name: string, env: Record<string, string>, random: boolean, settings: RoundSettings, cpuProf: boolean): Promise<Series[]> {
  log(`mirror-db ${name}`);
  const targets = [
    { label: 'imported catalogue', dataDir: s.importedDir, env },
    { label: "mirror's live database", dataDir: s.liveDir, env: { ...env, ...s.liveEnv } },
  ];
  return interleavedRounds(
    targets.map((t) => ({
      label: t.label,
      start: () => startSleeve({ name: t.label.replace(/\W+/g, '-'), dataDir: t.dataDir, env: t.env, only: 'coverart', cpuProf }),
      check: async (server: Server) => {
        await waitReady(server, 60_000);
        await expect307(server, `/release/${s.oneMbid}/front`);
      },
      path: random ? '/' : `/release/${s.oneMbid}/front`,
      pathsFile: random ? s.pathsFile : undefined,
    })),
    settings,
  );
}

/** (c): each change committed on the mirror, then the time until sleeve's listing shows it. */
async function changes(s: Setup, count: number): Promise<number[]> {
  const server = await startSleeve({ name: 'sleeve-live-changes', dataDir: s.liveDir, env: s.liveEnv, only: 'coverart', cpuProf: false });
  const c = new pg.Client({ connectionString: s.mirror.url });
  await c.connect();
  const latencies: number[] = [];
  try {
    await waitReady(server, 60_000);
    const target = (await c.query<{ id: number; gid: string }>(`SELECT a.id::text AS id, r.gid::text AS gid FROM cover_art_archive.cover_art a JOIN musicbrainz.release r ON r.id = a.release WHERE r.gid = $1 LIMIT 1`, [s.oneMbid])).rows[0];
    if (target === undefined) throw new Error('no image to change');
    for (let i = 0; i < count; i++) {
      const mark = `bench change ${i} ${Date.now()}`;
      // From a connection of its own, ended after its commit, as a replication packet is applied by a
      // process of its own (a connection left open flushes its statistics only after 10 s: docs/mirror-database.md, "The bound").
      await s.mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = '${mark}' WHERE id = ${Number(target.id)}`);
      const t0 = Date.now();
      for (;;) {
        // The listing itself (the 307 of /release/{mbid}/ names SLEEVE_BASE_URL, not this port).
        const res = await fetch(`${server.url}/download/mbid-${target.gid}/index.json`);
        if (res.status === 200 && (await res.text()).includes(mark)) break;
        if (Date.now() - t0 > 5 * GOAL_CHANGE_MS) throw new Error(`change ${i} not seen within ${5 * GOAL_CHANGE_MS} ms`);
        await sleep(10);
      }
      latencies.push(Date.now() - t0);
      if ((i + 1) % 10 === 0) log(`  ${i + 1}/${count} changes; median so far ${fmtMs(median(latencies))}`);
    }
  } finally {
    await c.end();
    await server.stop();
  }
  return latencies;
}

export async function mirrorDbBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const settings: RoundSettings = {
    durationS: opts.duration ?? 6,
    rounds: opts.rounds ?? 5,
    warmupS: opts.warmup,
    connections: opts.connections,
    loadCore: LOAD_CORE,
    freshProcess: !opts.sameProcess,
  };
  const s = await setUp(opts);
  try {
    const warm = await phase(s, '(a) warm, one URL', {}, false, settings, opts.cpuProf);
    const uncached = await phase(s, '(b) uncached, random MBIDs', { SLEEVE_RESPONSE_CACHE: '0' }, true, settings, opts.cpuProf);
    log(`mirror-db (c) ${opts.mirrorDbChanges} changes`);
    const latencies = await changes(s, opts.mirrorDbChanges);
    const ratio = (series: Series[]) => {
      const [i, l] = series.map(seriesSummary) as [ReturnType<typeof seriesSummary>, ReturnType<typeof seriesSummary>];
      return l.rps.median / i.rps.median;
    };
    const a = ratio(warm);
    const b = ratio(uncached);
    const worst = max(latencies);
    const ok = { a: a >= GOAL_WARM, b: b >= GOAL_UNCACHED, c: worst < GOAL_CHANGE_MS };
    const how = describeRounds(settings, warm[0]?.runs[0]?.tool);
    const markdown = [
      `### mirror-db: the mirror's live database vs the imported catalogue (${fmtInt(opts.mirrorDbReleases)} releases, ${fmtInt(2 * opts.mirrorDbReleases)} images)`,
      '',
      `First whole read of the mirror into sleeve's tables: ${s.firstReadS.toFixed(1)} s.`,
      '',
      `(a) warm, one URL. ${how}.`,
      '',
      runsTable(warm),
      '',
      mediansTable(warm),
      '',
      `(b) uncached: SLEEVE_RESPONSE_CACHE=0, random MBIDs of ${fmtInt(opts.sample)} with a front. ${how}.`,
      '',
      runsTable(uncached),
      '',
      mediansTable(uncached),
      '',
      `- (a) warm: live / imported requests/s **${fmtRatio(a)}** (goal ≥ ${GOAL_WARM}): **${passFail(ok.a)}**`,
      `- (b) uncached: live / imported requests/s **${fmtRatio(b)}** (goal ≥ ${GOAL_UNCACHED}): **${passFail(ok.b)}**`,
      `- (c) ${latencies.length} changes (SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS=${opts.mirrorDbPollMs}): committed → answered, median **${fmtMs(median(latencies))}**, worst **${fmtMs(worst)}** (goal < 60 s): **${passFail(ok.c)}**`,
    ].join('\n');
    return { markdown, data: { settings, firstReadS: s.firstReadS, warmRatio: a, uncachedRatio: b, latencies }, goalsMet: ok.a && ok.b && ok.c };
  } finally {
    await s.mirror.drop();
    if (!opts.keep) await rm(path.dirname(s.importedDir), { recursive: true, force: true });
  }
}



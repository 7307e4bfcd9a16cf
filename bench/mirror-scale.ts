/**
 * mirror-scale: the mirror's live database at MusicBrainz's size (issue 36, item 5;
 * docs/mirror-database.md). A mirror of --mirror-scale-images images (default 7,000,000, about
 * the Cover Art Archive's originals; 2.8 images a release, 1.25 releases a group, events with
 * two images each at 1/350th) is generated inside PostgreSQL (generate_series, INSERT … SELECT)
 * in a database of its own, dropped at the end, with musicbrainz-server's tables
 * (datagen/musicbrainz-db.ts). sleeve (SQLite, as `npm start` runs it) then:
 *  (1) reads it whole for the first time: seconds from start to /readyz 200 (the catalogue
 *      answers 503 until then); its peak RSS meanwhile;
 *  (2) restarts with its copy in place: seconds from start to the first answer (307) of
 *      /release/{mbid}/front — goal < 10 s;
 *  (3) a change committed on the mirror's tables → sleeve's new listing, median and worst over
 *      --mirror-db-changes changes — goal worst < 60 s;
 *  (4) its RSS: peak of the first read against the import's 300 MB, and while following against
 *      the serving budget (SLEEVE_FILE_CACHE_BYTES, 128 MiB by default, + 100 MB:
 *      docs/configuration.md).
 */
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { createMirror, type MirrorDb } from '../datagen/musicbrainz-db.js';
import type { Options } from './lib/options.js';
import type { Server } from './lib/proc.js';
import { startSleeve } from './lib/servers.js';
import { fmtInt, fmtMs, max, median, passFail } from './lib/stats.js';

const GOAL_FIRST_ANSWER_MS = 10_000;
const GOAL_CHANGE_MS = 60_000;
const IMPORT_RSS_MB = 300;
/** SLEEVE_FILE_CACHE_BYTES' default (128 MiB) + 100 MB (docs/configuration.md). */
const SERVING_RSS_MIB = 128 + 100 / 1.048576;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface ScaleSizes {
  images: number;
  releases: number;
  groups: number;
  events: number;
}

export function scaleSizes(images: number): ScaleSizes {
  const releases = Math.max(10, Math.round(images / 2.8));
  return { images, releases, groups: Math.max(5, Math.round(releases / 1.25)), events: Math.max(2, Math.round(images / 350)) };
}

/** The mirror's rows, made by PostgreSQL itself (foreign keys not checked while loading: replica mode). */
function generation(s: ScaleSizes): string[] {
  const { images: n, releases: r, groups: g, events: e } = s;
  const uuid = (prefix: string, col: string) => `md5('${prefix}' || ${col})::uuid`;
  return [
    `SET session_replication_role = replica`,
    `INSERT INTO cover_art_archive.art_type (id, name, parent, child_order, description, gid) VALUES
       (1, 'Front', NULL, 0, NULL, ${uuid('at', '1')}), (2, 'Back', NULL, 0, NULL, ${uuid('at', '2')}), (3, 'Booklet', NULL, 0, NULL, ${uuid('at', '3')})`,
    `INSERT INTO cover_art_archive.image_type VALUES ('image/jpeg', 'jpg'), ('image/png', 'png'), ('application/pdf', 'pdf')`,
    `INSERT INTO musicbrainz.release_group (id, gid, name, artist_credit) SELECT i, ${uuid('rg', 'i')}, 'Group ' || i, 1 FROM generate_series(1, ${g}) i`,
    `INSERT INTO musicbrainz.release (id, gid, name, artist_credit, release_group) SELECT i, ${uuid('r', 'i')}, 'Release ' || i, 1, 1 + (i - 1) % ${g} FROM generate_series(1, ${r}) i`,
    `INSERT INTO musicbrainz.release_country SELECT i, 1 + i % 3, 1950 + i % 70, 1 + i % 12, 1 + i % 28 FROM generate_series(1, ${r}) i`,
    `INSERT INTO musicbrainz.release_unknown_country SELECT i, 1940 + i % 70, NULL, NULL FROM generate_series(5, ${r}, 5) i`,
    `INSERT INTO musicbrainz.release_gid_redirect (gid, new_id) SELECT ${uuid('rr', 'i')}, i FROM generate_series(50, ${r}, 50) i`,
    `INSERT INTO musicbrainz.release_group_gid_redirect (gid, new_id) SELECT ${uuid('rgr', 'i')}, i FROM generate_series(50, ${g}, 50) i`,
    // One add-edit an image, 1 in 100 still open.
    `INSERT INTO musicbrainz.edit (id, editor, type, status, open_time, close_time, expire_time)
       SELECT i, 1, 314, 2, now(), CASE WHEN i % 100 = 0 THEN NULL ELSE now() END, now() FROM generate_series(1, ${n + 2 * e}) i`,
    // Release i % r: image i is its ((i - 1) / r + 1)th; the first a Front, the second a Back.
    `INSERT INTO cover_art_archive.cover_art (id, release, comment, edit, ordering, mime_type, filesize)
       SELECT i, 1 + (i - 1) % ${r}, '', i, 1 + (i - 1) / ${r}, 'image/jpeg', 100000 + i % 900000 FROM generate_series(1, ${n}) i`,
    `INSERT INTO cover_art_archive.cover_art_type SELECT i, CASE WHEN i <= ${r} THEN 1 WHEN i <= ${2 * r} THEN 2 ELSE 3 END FROM generate_series(1, ${n}) i`,
    `INSERT INTO cover_art_archive.release_group_cover_art SELECT i, i FROM generate_series(10, ${Math.min(g, r)}, 10) i`,
    `INSERT INTO musicbrainz.event (id, gid, name) SELECT i, ${uuid('ev', 'i')}, 'Event ' || i FROM generate_series(1, ${e}) i`,
    `INSERT INTO event_art_archive.art_type (id, name, parent, child_order, description, gid) VALUES (1, 'Poster', NULL, 0, NULL, ${uuid('eat', '1')})`,
    `INSERT INTO event_art_archive.event_art (id, event, comment, edit, ordering, mime_type)
       SELECT ${n} + i, 1 + (i - 1) % ${e}, '', ${n} + i, 1 + (i - 1) / ${e}, 'image/jpeg' FROM generate_series(1, ${2 * e}) i`,
    `INSERT INTO event_art_archive.event_art_type SELECT ${n} + i, 1 FROM generate_series(1, ${e}) i`,
    `SET session_replication_role = DEFAULT`,
  ];
}

async function generateMirror(adminUrl: string, s: ScaleSizes): Promise<MirrorDb> {
  const mirror = await createMirror(adminUrl, undefined);
  const c = new pg.Client({ connectionString: mirror.url });
  await c.connect();
  try {
    for (const statement of generation(s)) {
      const t0 = Date.now();
      await c.query(statement);
      if (Date.now() - t0 > 2000) log(`  ${((Date.now() - t0) / 1000).toFixed(0)} s: ${statement.replace(/\s+/g, ' ').slice(0, 90)}`);
    }
    await c.query('VACUUM ANALYZE');
  } catch (err) {
    await c.end();
    await mirror.drop();
    throw err;
  }
  await c.end();
  return mirror;
}

/** A process's RSS now and at its peak (MiB), from /proc. */
function rssOf(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? Number.NaN);
  return { now: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

async function waitFor(what: string, timeoutMs: number, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(50);
  }
}

/** (3): a comment changed on the mirror, from a connection of its own (as a replication run), then the time until sleeve's listing shows it. */
async function changes(server: Server, mirror: MirrorDb, count: number): Promise<number[]> {
  const c = new pg.Client({ connectionString: mirror.url });
  await c.connect();
  const latencies: number[] = [];
  try {
    const [target] = (await c.query<{ id: string; gid: string }>(`SELECT a.id::text AS id, r.gid::text AS gid FROM cover_art_archive.cover_art a JOIN musicbrainz.release r ON r.id = a.release ORDER BY random() LIMIT 1`)).rows;
    if (target === undefined) throw new Error('no image to change');
    for (let i = 0; i < count; i++) {
      const mark = `bench change ${i} ${Date.now()}`;
      await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = '${mark}' WHERE id = ${Number(target.id)}`);
      const t0 = Date.now();
      await waitFor(`change ${i}`, 5 * GOAL_CHANGE_MS, async () => {
        const res = await fetch(`${server.url}/download/mbid-${target.gid}/index.json`);
        return res.status === 200 && (await res.text()).includes(mark);
      });
      latencies.push(Date.now() - t0);
      if ((i + 1) % 10 === 0) log(`  ${i + 1}/${count} changes; median so far ${fmtMs(median(latencies))}`);
    }
  } finally {
    await c.end();
  }
  return latencies;
}

interface Measured {
  sizes: ScaleSizes;
  generateS: number;
  firstReadS: number;
  firstReadPeakMiB: number;
  restartFirstAnswerMs: number;
  latencies: number[];
  followingRssMiB: number;
  followingPeakMiB: number;
}

async function measure(opts: Options, mirror: MirrorDb, sizes: ScaleSizes, generateS: number, dataDir: string): Promise<Measured> {
  const env = { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: String(opts.mirrorDbPollMs), SLEEVE_LOG_LEVEL: 'info' };
  log('mirror-scale (1) the first whole read …');
  const t0 = Date.now();
  const first = await startSleeve({ name: 'sleeve-mirror-scale-first', dataDir, env, only: 'coverart', cpuProf: false, core: null });
  let firstPeak = 0;
  try {
    await waitFor('the first whole read', 6 * 3600_000, async () => {
      firstPeak = Math.max(firstPeak, rssOf(first.pid).peak);
      return (await fetch(`${first.url}/readyz`)).status === 200;
    });
    firstPeak = Math.max(firstPeak, rssOf(first.pid).peak);
  } finally {
    await first.stop();
  }
  const firstReadS = (Date.now() - t0) / 1000;
  log(`  read whole in ${firstReadS.toFixed(1)} s, peak RSS ${firstPeak.toFixed(0)} MiB`);
  const c = new pg.Client({ connectionString: mirror.url });
  await c.connect();
  const [one] = (await c.query<{ gid: string }>(`SELECT gid::text AS gid FROM musicbrainz.release WHERE id = ${Math.ceil(sizes.releases / 2)}`)).rows;
  await c.end();
  log('mirror-scale (2) a restart with the copy in place …');
  const t1 = Date.now();
  const again = await startSleeve({ name: 'sleeve-mirror-scale-again', dataDir, env, only: 'coverart', cpuProf: false, core: null });
  try {
    await waitFor('the first answer after a restart', 600_000, async () => (await fetch(`${again.url}/release/${one?.gid}/front`, { redirect: 'manual' })).status === 307);
    const restartFirstAnswerMs = Date.now() - t1;
    log(`  first answer ${fmtMs(restartFirstAnswerMs)} after the start`);
    log(`mirror-scale (3) ${opts.mirrorDbChanges} changes …`);
    const latencies = await changes(again, mirror, opts.mirrorDbChanges);
    const rss = rssOf(again.pid);
    return { sizes, generateS, firstReadS, firstReadPeakMiB: firstPeak, restartFirstAnswerMs, latencies, followingRssMiB: rss.now, followingPeakMiB: rss.peak };
  } finally {
    await again.stop();
  }
}

export async function mirrorScaleBench(opts: Options): Promise<{ markdown: string; data: unknown; goalsMet: boolean }> {
  const sizes = scaleSizes(opts.mirrorScaleImages);
  log(`mirror-scale: generating a mirror of ${fmtInt(sizes.images)} images, ${fmtInt(sizes.releases)} releases, ${fmtInt(sizes.groups)} groups, ${fmtInt(sizes.events)} events …`);
  const g0 = Date.now();
  const mirror = await generateMirror(opts.postgresUrl, sizes);
  const generateS = (Date.now() - g0) / 1000;
  log(`  generated in ${generateS.toFixed(0)} s`);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-bench-mirror-scale-'));
  try {
    const m = await measure(opts, mirror, sizes, generateS, dataDir);
    const worst = max(m.latencies);
    const ok = {
      restart: m.restartFirstAnswerMs < GOAL_FIRST_ANSWER_MS,
      change: worst < GOAL_CHANGE_MS,
      importRss: m.firstReadPeakMiB * 1.048576 < IMPORT_RSS_MB,
      servingRss: m.followingPeakMiB <= SERVING_RSS_MIB,
    };
    const markdown = [
      `### mirror-scale: the mirror's live database at ${fmtInt(sizes.images)} images (${fmtInt(sizes.releases)} releases, ${fmtInt(sizes.groups)} groups, ${fmtInt(sizes.events)} events; sleeve on SQLite)`,
      '',
      `Mirror generated in PostgreSQL in ${m.generateS.toFixed(0)} s. SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS=${opts.mirrorDbPollMs}.`,
      '',
      `- (1) first whole read (a brand-new sleeve; the catalogue answers 503 until it is done): **${m.firstReadS.toFixed(1)} s**; peak RSS **${m.firstReadPeakMiB.toFixed(0)} MiB** (goal < ${IMPORT_RSS_MB} MB, the import's): **${passFail(ok.importRss)}**`,
      `- (2) restart with the copy in place → first answer (307): **${fmtMs(m.restartFirstAnswerMs)}** (goal < 10 s): **${passFail(ok.restart)}**`,
      `- (3) ${m.latencies.length} changes committed → answered: median **${fmtMs(median(m.latencies))}**, worst **${fmtMs(worst)}** (goal < 60 s): **${passFail(ok.change)}**`,
      `- (4) RSS while following: ${m.followingRssMiB.toFixed(0)} MiB now, peak **${m.followingPeakMiB.toFixed(0)} MiB** (budget ${SERVING_RSS_MIB.toFixed(0)} MiB: SLEEVE_FILE_CACHE_BYTES + 100 MB): **${passFail(ok.servingRss)}**`,
    ].join('\n');
    return { markdown, data: m, goalsMet: ok.restart && ok.change && ok.importRss && ok.servingRss };
  } finally {
    await mirror.drop();
    if (!opts.keep) await rm(dataDir, { recursive: true, force: true });
  }
}

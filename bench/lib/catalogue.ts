import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import { DIST, SLEEVE_CLI, workDir } from './paths.js';
import { runOk } from './proc.js';
import { sleeveEnv } from './servers.js';
import { mulberry32 } from '../../datagen/prng.js';

/** Bumped whenever the generated data changes, so cached catalogues are rebuilt. */
const GENERATOR_VERSION = 1;
/** Ids of the generated images start here (real ids are hundredths of a second since 2012). */
const FIRST_IMAGE_ID = 40_000_000_000;

export interface Catalogue {
  releases: number;
  dataDir: string;
  /** One line per sampled release: /release/{mbid}/front */
  pathsFile: string;
  /** A release in the middle of the catalogue, for the single-URL runs. */
  oneMbid: string;
  /** Seconds the build took (when it was built now or before, from its metadata). */
  buildSeconds: number;
  reused: boolean;
  dbBytes: number;
}

interface Meta {
  key: string;
  releases: number;
  sample: number;
  oneMbid: string;
  buildSeconds: number;
  built: string;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));

/** Version 4 UUIDs from the PRNG. */
function uuidMaker(next: () => number): () => string {
  return () => {
    const a = next();
    const b = next();
    const c = next();
    const d = next();
    const h = (x: number, shift: number) => HEX[(x >>> shift) & 0xff] as string;
    return (
      h(a, 24) + h(a, 16) + h(a, 8) + h(a, 0) + '-' +
      h(b, 24) + h(b, 16) + '-' + HEX[0x40 | ((b >>> 8) & 0x0f)] + h(b, 0) + '-' +
      HEX[0x80 | ((c >>> 24) & 0x3f)] + h(c, 16) + '-' + h(c, 8) + h(c, 0) + h(d, 24) + h(d, 16) + h(d, 8) + h(d, 0)
    );
  };
}

/** Identifies the schema the catalogue was built for: the compiled migrations and the generator. */
function schemaKey(releases: number, sample: number): string {
  const dir = path.join(DIST, 'src', 'db', 'migrations');
  const hash = createHash('sha256').update(`v${GENERATOR_VERSION} ${releases} ${sample}\n`);
  for (const f of readdirSync(dir).filter((n) => n.endsWith('.js')).sort()) hash.update(f).update(readFileSync(path.join(dir, f)));
  return hash.digest('hex').slice(0, 16);
}

/** Inserts rows with multi-row INSERT statements of up to `batch` rows. */
function bulkInserter(db: Database.Database, table: string, columns: string[], batch = 500) {
  const tuple = `(${columns.map(() => '?').join(',')})`;
  const sqlFor = (n: number) => `INSERT INTO ${table} (${columns.join(',')}) VALUES ${Array.from({ length: n }, () => tuple).join(',')}`;
  const full = db.prepare(sqlFor(batch));
  const pending: unknown[] = [];
  let count = 0;
  return {
    add(...values: unknown[]) {
      pending.push(...values);
      if (++count === batch) {
        full.run(pending);
        pending.length = 0;
        count = 0;
      }
    },
    flush() {
      if (count > 0) db.prepare(sqlFor(count)).run(pending);
      pending.length = 0;
      count = 0;
    },
  };
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/**
 * A catalogue of `releases` releases, each in its own release group with one approved
 * front JPEG row (no image files: redirects need none), built with batched SQL in one
 * transaction after `sleeve migrate`, and cached in bench/.work/scale-N/ between runs.
 */
export async function ensureCatalogue(releases: number, sample: number, rebuild: boolean): Promise<Catalogue> {
  const dataDir = path.join(workDir(), `scale-${releases}`);
  const dbFile = path.join(dataDir, 'sleeve.db');
  const metaFile = path.join(dataDir, 'catalogue.json');
  const pathsFile = path.join(dataDir, 'front-paths.txt');
  const key = schemaKey(releases, sample);
  if (!rebuild && existsSync(metaFile) && existsSync(dbFile) && existsSync(pathsFile)) {
    const meta = JSON.parse(readFileSync(metaFile, 'utf8')) as Meta;
    if (meta.key === key) {
      log(`scale: reusing the catalogue of ${releases.toLocaleString('en-US')} releases in ${dataDir} (built ${meta.built} in ${meta.buildSeconds.toFixed(1)} s)`);
      return { releases, dataDir, pathsFile, oneMbid: meta.oneMbid, buildSeconds: meta.buildSeconds, reused: true, dbBytes: dbSize(dbFile) };
    }
  }

  log(`scale: building a catalogue of ${releases.toLocaleString('en-US')} releases in ${dataDir}`);
  rmSync(dataDir, { recursive: true, force: true });
  workDir(`scale-${releases}`);
  const t0 = performance.now();
  await runOk(process.execPath, [SLEEVE_CLI, 'migrate'], { env: sleeveEnv(dataDir) });

  const db = new Database(dbFile);
  // Build-time settings only: sleeve sets its own (WAL, synchronous=FULL, foreign keys) when it opens the file.
  db.pragma('journal_mode = OFF');
  db.pragma('synchronous = OFF');
  db.pragma('foreign_keys = OFF');
  db.pragma('cache_size = -262144');
  db.pragma('temp_store = MEMORY');

  const rgGid = uuidMaker(mulberry32(0x5eed0000 + releases));
  const relGid = uuidMaker(mulberry32(0x5eed1111 + releases));
  const pick = mulberry32(0x5eed2222 + releases);
  const wanted = Math.min(sample, releases);
  // Selection sampling: exactly `wanted` of the releases, spread uniformly at random.
  let need = wanted;
  const sampled: string[] = [];
  const middle = Math.floor(releases / 2);
  let oneMbid = '';
  const uploaded = Date.UTC(2026, 0, 1);

  db.transaction(() => {
    const groups = bulkInserter(db, 'release_group', ['id', 'gid']);
    const rels = bulkInserter(db, 'release', ['id', 'gid', 'release_group']);
    const art = bulkInserter(db, 'cover_art', [
      'id',
      'release',
      'ordering',
      'approved',
      'mime_type',
      'date_uploaded',
      'filesize',
      'thumb_250_filesize',
      'thumb_500_filesize',
      'thumb_1200_filesize',
    ]);
    const types = bulkInserter(db, 'cover_art_type', ['id', 'type_id'], 800);
    for (let i = 1; i <= releases; i++) {
      const gid = relGid();
      groups.add(i, rgGid());
      rels.add(i, gid, i);
      const imageId = FIRST_IMAGE_ID + i;
      art.add(imageId, i, 1, 1, 'image/jpeg', uploaded + i, 1_500_000, 20_000, 60_000, 250_000);
      types.add(imageId, 1);
      if (i === middle + 1) oneMbid = gid;
      if (need > 0 && pick() / 2 ** 32 < need / (releases - i + 1)) {
        sampled.push(gid);
        need--;
      }
      if (i % 250_000 === 0) log(`  ${i.toLocaleString('en-US')} releases`);
    }
    groups.flush();
    rels.flush();
    art.flush();
    types.flush();
    db.prepare("UPDATE counter SET value = ? WHERE name = 'cover_art_id'").run(FIRST_IMAGE_ID + releases);
    db.prepare("UPDATE counter SET value = value + 1 WHERE name = 'catalogue_version'").run();
  })();
  db.pragma('journal_mode = WAL');
  db.close();

  // Shuffle the sample so the paths file has no order.
  const shuffle = mulberry32(0x5eed3333 + releases);
  for (let i = sampled.length - 1; i > 0; i--) {
    const j = shuffle() % (i + 1);
    [sampled[i], sampled[j]] = [sampled[j] as string, sampled[i] as string];
  }
  writeFileSync(pathsFile, `${sampled.map((g) => `/release/${g}/front`).join('\n')}\n`);
  const buildSeconds = (performance.now() - t0) / 1000;
  const meta: Meta = { key, releases, sample: wanted, oneMbid, buildSeconds, built: new Date().toISOString() };
  writeFileSync(metaFile, `${JSON.stringify(meta, null, 2)}\n`);
  log(`scale: built ${releases.toLocaleString('en-US')} releases in ${buildSeconds.toFixed(1)} s (${(dbSize(dbFile) / 2 ** 20).toFixed(0)} MiB)`);
  return { releases, dataDir, pathsFile, oneMbid, buildSeconds, reused: false, dbBytes: dbSize(dbFile) };
}

function dbSize(file: string): number {
  return statSync(file).size;
}

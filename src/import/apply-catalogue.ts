/*
 * The apply step's second part: the cleaned dump (apply-dump.ts) into sleeve's tables.
 * Local rows in the way are moved first; the dump's rows are written by id; rows
 * imported before and gone from the dump are removed, unless images uploaded to sleeve
 * hang on them (then they stay, as local rows).
 */
import type { ApplyRun } from './apply-run.js';
import type { EntityCounts } from './backend.js';

/** Loads smaller than this keep the table's indexes in place. */
const BULK_MIN_ROWS = 50_000;

/** Tables whose local rows may be in the way of the dump's. */
type Movable = 'release' | 'release_group' | 'event';

/** Tables whose imported rows an earlier import may have left. */
const IMPORTED_TABLES = ['release_group', 'release', 'cover_art', 'release_gid_redirect', 'release_group_gid_redirect'] as const;
type Had = Record<(typeof IMPORTED_TABLES)[number], boolean>;

export async function writeCatalogue(run: ApplyRun): Promise<void> {
  // Whether earlier imports left rows: when not, nothing can have left the dump.
  const had = {} as Had;
  for (const t of IMPORTED_TABLES) had[t] = await run.exists(t, 'imported = 1');

  await run.step('art and image types', async () => {
    await write(run, 'art_type', 'in_at', 'id', ['name', 'parent', 'child_order', 'description', 'gid'], run.result.art_type, false);
    await write(run, 'image_type', 'in_it', 'mime_type', ['suffix'], run.result.image_type, false);
  });
  await run.step('release groups', () => writeReleaseGroups(run));
  await run.step('releases', () => writeReleases(run));
  await run.step('images', () => writeImages(run, had));
  await run.step('merged MBIDs and release group covers', () => writeRedirectsAndGroupCovers(run, had));
  await run.step('removing what left the dump', () => removeGone(run, had));
}

/**
 * Runs `fn`, which only inserts into and updates `table`, with the table's secondary
 * indexes (and on PostgreSQL its foreign keys and unique constraints) set aside when
 * it receives more rows than it holds, as in a first import: building them once
 * afterwards is several times faster than maintaining them row by row, and the
 * foreign keys are checked again as they are put back. On PostgreSQL this locks the
 * table until the import commits (readers wait), hence only for such big loads.
 */
async function bulk(run: ApplyRun, table: string, incoming: number, fn: () => Promise<void>): Promise<void> {
  if (incoming < BULK_MIN_ROWS || incoming <= (await run.number(`SELECT count(*) AS n FROM ${table}`))) return fn();
  const restore = await run.dialect.setAsideIndexes(run.db, table);
  await fn();
  for (const statement of restore) await run.db.run(statement);
}

/**
 * Writes the rows of `incoming` into `table` by `key`: rows that differ are updated,
 * new ones inserted (two set-based statements; no per-row conflict handling).
 */
export async function write(run: ApplyRun, table: string, incoming: string, key: string, columns: string[], c: EntityCounts, flag = true): Promise<void> {
  const total = await run.number(`SELECT count(*) AS n FROM ${incoming}`);
  await bulk(run, table, total, async () => {
    const set = [...columns.map((col) => `${col} = i.${col}`), ...(flag ? ['imported = 1'] : [])].join(', ');
    const differ = [...columns.map((col) => `${table}.${col} IS DISTINCT FROM i.${col}`), ...(flag ? [`${table}.imported <> 1`] : [])].join(' OR ');
    c.changed = await run.db.run(`UPDATE ${table} SET ${set} FROM ${incoming} i WHERE ${table}.${key} = i.${key} AND (${differ})`);
    c.added = await run.db.run(
      `INSERT INTO ${table} (${[key, ...columns, ...(flag ? ['imported'] : [])].join(', ')})
         SELECT ${[`i.${key}`, ...columns.map((col) => `i.${col}`), ...(flag ? ['1'] : [])].join(', ')} FROM ${incoming} i
         WHERE NOT EXISTS (SELECT 1 FROM ${table} x WHERE x.${key} = i.${key})`,
    );
  });
}

/**
 * Moves rows of `table` to new ids (the pairs in temp table mv): a copy under the new
 * id (the MBID freed first, it is unique), the rows that refer to it re-pointed, the
 * old row deleted. Foreign keys hold at every statement on both databases.
 */
async function move(run: ApplyRun, table: Movable, columns: string, children: [string, string][]): Promise<number> {
  const n = await run.number('SELECT count(*) AS n FROM mv');
  if (n === 0) return 0;
  await run.db.run(`UPDATE ${table} SET gid = '~' || gid WHERE id IN (SELECT old_id FROM mv)`);
  const copied = columns
    .split(', ')
    .map((c) => `t.${c}`)
    .join(', ');
  await run.db.run(`INSERT INTO ${table} (id, gid, ${columns}) SELECT mv.new_id, substr(t.gid, 2), ${copied} FROM ${table} t JOIN mv ON mv.old_id = t.id`);
  for (const [child, column] of children) await run.db.run(`UPDATE ${child} SET ${column} = mv.new_id FROM mv WHERE ${child}.${column} = mv.old_id`);
  await run.db.run(`DELETE FROM ${table} WHERE id IN (SELECT old_id FROM mv)`);
  return n;
}

/**
 * Frees the ids and MBIDs the dump's rows need: rows at an id of the dump under another
 * MBID go to fresh ids past every id in use; then rows that have an MBID of the dump go
 * to that row's id (free by then). Returns how many rows moved.
 */
export async function makeRoom(run: ApplyRun, table: Movable, incoming: string, columns: string, children: [string, string][]): Promise<number> {
  const base = await run.number(`SELECT max(m) AS n FROM (SELECT max(id) AS m FROM ${table} UNION ALL SELECT max(id) AS m FROM ${incoming}) x`);
  let moved = 0;
  for (const pairs of [
    `SELECT t.id, ${base} + row_number() OVER (ORDER BY t.id) FROM ${table} t JOIN ${incoming} i ON i.id = t.id WHERE i.gid <> t.gid`,
    `SELECT t.id, i.id FROM ${table} t JOIN ${incoming} i ON i.gid = t.gid WHERE i.id <> t.id`,
  ]) {
    await run.db.run(run.dialect.createTempTable('mv', 'old_id integer PRIMARY KEY, new_id integer NOT NULL'));
    await run.db.run(`INSERT INTO mv ${pairs}`);
    moved += await move(run, table, columns, children);
    await run.db.run('DROP TABLE mv');
  }
  return moved;
}

async function writeReleaseGroups(run: ApplyRun): Promise<void> {
  run.result.release_group.moved = await makeRoom(run, 'release_group', 'in_rg', 'name, imported', [
    ['release', 'release_group'],
    ['release_group_gid_redirect', 'new_id'],
    ['release_group_cover_art', 'release_group'],
  ]);
  await write(run, 'release_group', 'in_rg', 'id', ['gid', 'name'], run.result.release_group);
}

async function writeReleases(run: ApplyRun): Promise<void> {
  run.result.release.moved = await makeRoom(run, 'release', 'in_rel', 'release_group, name, date_year, date_month, date_day, index_dirty, index_urls, imported', [
    ['cover_art', 'release'],
    ['release_gid_redirect', 'new_id'],
    ['release_group_cover_art', 'release'],
  ]);
  await write(run, 'release', 'in_rel', 'id', ['gid', 'release_group', 'name', 'date_year', 'date_month', 'date_day'], run.result.release);
}

async function writeImages(run: ApplyRun, had: Had): Promise<void> {
  const r = run.result.cover_art;
  await write(
    run,
    'cover_art',
    'in_ca',
    'id',
    ['release', 'comment', 'edit', 'ordering', 'approved', 'mime_type', 'date_uploaded', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize'],
    r,
  );
  const t = run.result.cover_art_type;
  if (had.cover_art) {
    // Their types go with them (ON DELETE CASCADE).
    r.removed = await run.db.run(`DELETE FROM cover_art WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM in_ca i WHERE i.id = cover_art.id)`);
    t.removed = await run.db.run(
      `DELETE FROM cover_art_type WHERE EXISTS (SELECT 1 FROM cover_art c WHERE c.id = cover_art_type.id AND c.imported = 1)
         AND NOT EXISTS (SELECT 1 FROM in_cat i WHERE i.id = cover_art_type.id AND i.type_id = cover_art_type.type_id)`,
    );
  }
  await bulk(run, 'cover_art_type', await run.number('SELECT count(*) AS n FROM in_cat'), async () => {
    t.added = await run.db.run(
      `INSERT INTO cover_art_type (id, type_id) SELECT id, type_id FROM in_cat i WHERE NOT EXISTS (SELECT 1 FROM cover_art_type x WHERE x.id = i.id AND x.type_id = i.type_id)`,
    );
  });
  if (await run.exists('cover_art', 'imported = 0')) await placeLocalImages(run);
  // Listings written on demand since an earlier import (cover-art/listings/listing-on-demand.ts) name its images: rewritten too.
  await run.db.run(`UPDATE release SET index_dirty = ${Math.max(1, Math.floor(run.input.now))} WHERE imported = 1 AND index_urls IS NOT NULL AND index_dirty = 0`);
}

/** Images uploaded to sleeve on an imported release come after the dump's, in their order. */
async function placeLocalImages(run: ApplyRun): Promise<void> {
  await run.db.run(
    `WITH l AS (
           SELECT c.id, (SELECT max(i.ordering) FROM cover_art i WHERE i.release = c.release AND i.imported = 1)
                        + row_number() OVER (PARTITION BY c.release ORDER BY c.ordering, c.id) AS o
           FROM cover_art c WHERE c.imported = 0 AND EXISTS (SELECT 1 FROM cover_art i WHERE i.release = c.release AND i.imported = 1))
         UPDATE cover_art SET ordering = l.o FROM l WHERE cover_art.id = l.id AND cover_art.ordering <> l.o`,
  );
  // Their index.json lives in sleeve's store: mark it for rewriting (no other release gets one written).
  await run.db.run(
    `UPDATE release SET index_dirty = ${Math.max(1, Math.floor(run.input.now))} WHERE imported = 1 AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
  );
}

async function writeRedirectsAndGroupCovers(run: ApplyRun, had: Had): Promise<void> {
  for (const [table, tmp, entity] of [
    ['release_gid_redirect', 'in_rr', 'release'],
    ['release_group_gid_redirect', 'in_rgr', 'release_group'],
  ] as const) {
    const r = run.result[table];
    if (had[table]) r.removed = await run.db.run(`DELETE FROM ${table} WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM ${tmp} i WHERE i.gid = ${table}.gid)`);
    // A merge made here of what the dump has as an entity again.
    r.removed += await run.db.run(`DELETE FROM ${table} WHERE imported = 0 AND EXISTS (SELECT 1 FROM ${entity} e WHERE e.gid = ${table}.gid AND e.imported = 1)`);
    await write(run, table, tmp, 'gid', ['new_id'], r);
  }
  const k = run.result.release_group_cover_art;
  if (had.release_group) {
    k.removed = await run.db.run(
      `DELETE FROM release_group_cover_art WHERE EXISTS (SELECT 1 FROM release_group g WHERE g.id = release_group_cover_art.release_group AND g.imported = 1)
         AND NOT EXISTS (SELECT 1 FROM in_rgca i WHERE i.release_group = release_group_cover_art.release_group)`,
    );
  }
  await write(run, 'release_group_cover_art', 'in_rgca', 'release_group', ['release'], k, false);
}

async function removeGone(run: ApplyRun, had: Had): Promise<void> {
  const gone = (table: string, incoming: string) => `${table}.imported = 1 AND NOT EXISTS (SELECT 1 FROM ${incoming} i WHERE i.id = ${table}.id)`;
  const { release, release_group } = run.result;
  if (had.release) {
    release.keptLocal = await run.db.run(
      `UPDATE release SET imported = 0 WHERE ${gone('release', 'in_rel')} AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
    );
    release.removed = await run.db.run(`DELETE FROM release WHERE ${gone('release', 'in_rel')}`);
  }
  if (had.release_group) {
    release_group.keptLocal = await run.db.run(
      `UPDATE release_group SET imported = 0 WHERE ${gone('release_group', 'in_rg')} AND EXISTS (SELECT 1 FROM release r WHERE r.release_group = release_group.id)`,
    );
    release_group.removed = await run.db.run(`DELETE FROM release_group WHERE ${gone('release_group', 'in_rg')}`);
  }
}

/** After everything is written: id counters, the catalogue's version and size. */
export async function updateCounters(run: ApplyRun): Promise<void> {
  // New rows made with `sleeve release add` must get ids past the imported ones.
  await run.dialect.resetIdSequences(run.db, ['release', 'release_group']);
  // Ids of new uploads never repeat an imported one.
  await run.db.run(
    `UPDATE counter SET value = (SELECT max(v) FROM (SELECT value AS v FROM counter WHERE name = 'cover_art_id' UNION ALL SELECT max(id) AS v FROM cover_art UNION ALL SELECT max(id) AS v FROM event_art) x) WHERE name = 'cover_art_id'`,
  );
  await run.db.run(`UPDATE counter SET value = value + 1 WHERE name = 'catalogue_version'`);
  // The catalogue's size for the metrics (kept up by sleeve's own changes; an import recounts).
  await run.db.run(`UPDATE counter SET value = (SELECT count(*) FROM release) WHERE name = 'releases'`);
  await run.db.run(`UPDATE counter SET value = (SELECT count(*) FROM cover_art) WHERE name = 'images'`);
}

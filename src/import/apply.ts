/*
 * Staging → sleeve's tables, in the one transaction the backend opens around it.
 *
 * What the dump says about the entities it holds wins; what sleeve's own commands
 * created ("local" rows, imported = 0) is kept (docs/decisions.md, "Import"):
 *  - rows of the dump are cleaned first (a key seen twice keeps one row; rows pointing
 *    at what the dump lacks are left out and counted);
 *  - local rows in the way are moved: a local release or group whose internal id the
 *    dump uses gets a new id, and one that has the MBID of a row of the dump takes
 *    that row's id and becomes imported;
 *  - the dump's rows are written by id (MusicBrainz ids become sleeve's ids); rows
 *    imported before and gone from the dump are removed, unless images uploaded to
 *    sleeve hang on them: those stay, as local rows;
 *  - image ids are public and name files, so a dump image whose id a local image has
 *    is left out (and counted) rather than overwriting it.
 */
import { performance } from 'node:perf_hooks';
import type { ApplyOptions, ApplyResult, EntityCounts, Omission } from './backend.js';

export interface SqlRunner {
  dialect: 'sqlite' | 'postgres';
  /** Runs a statement; resolves to the number of rows it changed. */
  run(sql: string): Promise<number>;
  /** A query with a small result. */
  all<T>(sql: string): Promise<T[]>;
  /** Runs `DELETE … RETURNING {label} AS x`; resolves to how many rows went, with the first three labels. */
  deleteReturning(sql: string): Promise<Omission>;
  /**
   * Runs a statement that may break a unique constraint; resolves to false when it
   * did (and nothing of it stays), true when it succeeded. Other errors throw.
   */
  attempt(sql: string): Promise<boolean>;
}

export interface ApplyInput extends Omit<ApplyOptions, 'runId' | 'outcome'> {
  /** Rows staged per dump table name (for the duplicate counts). */
  staged: Record<string, number>;
}

/** Reports each statement with its duration (for tuning). */
function traced(db: SqlRunner, trace: (sql: string, ms: number) => void): SqlRunner {
  const time = async <T>(sql: string, fn: () => Promise<T>): Promise<T> => {
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      trace(sql, performance.now() - t0);
    }
  };
  return {
    dialect: db.dialect,
    run: (sql) => time(sql, () => db.run(sql)),
    all: (sql) => time(sql, () => db.all(sql)),
    deleteReturning: (sql) => time(sql, () => db.deleteReturning(sql)),
    attempt: (sql) => time(sql, () => db.attempt(sql)),
  };
}

class Interrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'AbortError';
  }
}

/** Loads smaller than this keep the table's indexes in place. */
const BULK_MIN_ROWS = 50_000;

function counts(): EntityCounts {
  return { added: 0, changed: 0, removed: 0 };
}

/** A staged dump table, cleaned into a keyed temporary table. */
interface Incoming {
  table: string;
  /** The staged dump table (its name in tables.ts), read as `s`. */
  stage: string;
  /** Output columns: name, SQLite declared type, expression over `s` (and joined tables). */
  columns: [string, string, string][];
  /** Joins after `FROM {stage} s`. */
  joins?: string;
  key: string[];
  /** How a repeated key is shown in the summary (an expression over `s`). */
  label: string;
}

export async function applyStaging(raw: SqlRunner, input: ApplyInput): Promise<ApplyResult> {
  const db = input.trace === undefined ? raw : traced(raw, input.trace);
  const pg = db.dialect === 'postgres';
  const st = (name: string) => (pg ? `import_mb_${name}` : `stage.${name}`);
  const uuid = (c: string) => (pg ? `${c}::text` : c);
  const temp = (name: string, columns: string) => (pg ? `CREATE TEMP TABLE ${name} (${columns}) ON COMMIT DROP` : `CREATE TEMP TABLE ${name} (${columns})`);

  const result: ApplyResult = {
    release_group: counts(),
    release: counts(),
    cover_art: counts(),
    cover_art_type: counts(),
    release_gid_redirect: counts(),
    release_group_gid_redirect: counts(),
    release_group_cover_art: counts(),
    art_type: counts(),
    image_type: counts(),
    omitted: {},
    approvedFrom: input.withEdits ? 'edit' : 'edits_pending',
  };

  const step = async <T>(name: string, fn: () => Promise<T>): Promise<T> => {
    // A turn of the event loop, so a signal is seen even while SQLite works synchronously.
    await new Promise((resolve) => setImmediate(resolve));
    if (input.signal.aborted) throw new Interrupted();
    input.onStep?.(name);
    return fn();
  };
  const omit = (what: string, o: Omission) => {
    if (o.count > 0) result.omitted[what] = o;
  };
  const one = async (sql: string): Promise<number> => {
    const rows = await db.all<{ n: number | string }>(sql);
    return Number(rows[0]?.n ?? 0);
  };
  const any = async (table: string, where: string) => (await one(`SELECT count(*) AS n FROM (SELECT 1 FROM ${table} WHERE ${where} LIMIT 1) x`)) > 0;

  /**
   * Loads a staged table into a keyed temporary table. SQLite inserts in file order
   * into a table keyed from the start, so the first row of a repeated key wins.
   * PostgreSQL copies the rows as they are and then adds the key (a sorted build, far
   * faster than keeping a key during the load); only when that finds a repeated key is
   * the table made again with the first row of each key (in file order).
   */
  const load = async (spec: Incoming): Promise<void> => {
    const staged = input.staged[spec.stage] ?? 0;
    const select = spec.columns.map(([name, , expr]) => `${expr} AS ${name}`).join(', ');
    const from = `FROM ${st(spec.stage)} s ${spec.joins ?? ''}`;
    let rows: number;
    if (pg) {
      await db.run(`CREATE TEMP TABLE ${spec.table} ON COMMIT DROP AS SELECT ${select} ${from}`);
      if (await db.attempt(`ALTER TABLE ${spec.table} ADD PRIMARY KEY (${spec.key.join(', ')})`)) rows = staged;
      else {
        const keyExprs = spec.key.map((k) => spec.columns.find(([name]) => name === k)?.[2] ?? k);
        await db.run(`DROP TABLE ${spec.table}`);
        await db.run(
          `CREATE TEMP TABLE ${spec.table} ON COMMIT DROP AS SELECT DISTINCT ON (${keyExprs.join(', ')}) ${select} ${from} ORDER BY ${keyExprs.join(', ')}, s.ctid`,
        );
        await db.run(`ALTER TABLE ${spec.table} ADD PRIMARY KEY (${spec.key.join(', ')})`);
        rows = await one(`SELECT count(*) AS n FROM ${spec.table}`);
      }
      // Temporary tables get no statistics otherwise, and the plans that follow need them.
      await db.run(`ANALYZE ${spec.table}`);
    } else {
      await db.run(temp(spec.table, `${spec.columns.map(([name, type]) => `${name} ${type}`).join(', ')}, PRIMARY KEY (${spec.key.join(', ')})`));
      rows = await db.run(`INSERT INTO ${spec.table} SELECT ${select} ${from} WHERE true ORDER BY s.rowid ON CONFLICT DO NOTHING`);
    }
    const dups = staged - rows;
    if (dups > 0) {
      const keyExprs = spec.key.map((k) => spec.columns.find(([name]) => name === k)?.[2] ?? k);
      const ex = await db.all<{ k: unknown }>(`SELECT ${spec.label} AS k FROM ${st(spec.stage)} s GROUP BY ${keyExprs.join(', ')} HAVING count(*) > 1 LIMIT 3`);
      omit(`${spec.stage}: repeated key (first row kept)`, { count: dups, examples: ex.map((r) => String(r.k)) });
    }
  };

  /**
   * Makes gid unique: when the dump repeats a gid, the row with the lowest id keeps it.
   * SQLite gets a unique index (its joins look gids up); PostgreSQL joins by hashing and
   * only counts (a hash aggregate is several times faster than building the index).
   */
  const uniqueGid = async (table: string): Promise<Omission> => {
    const none = { count: 0, examples: [] };
    if (pg) {
      if ((await one(`SELECT count(*) AS n FROM (SELECT gid FROM ${table} GROUP BY gid HAVING count(*) > 1) x`)) === 0) return none;
      return db.deleteReturning(`DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${table} b WHERE b.gid = ${table}.gid AND b.id < ${table}.id) RETURNING gid AS x`);
    }
    if (await db.attempt(`CREATE UNIQUE INDEX ${table}_gid ON ${table} (gid)`)) return none;
    await db.run(`CREATE INDEX ${table}_gid_all ON ${table} (gid)`);
    const gone = await db.deleteReturning(`DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${table} b WHERE b.gid = ${table}.gid AND b.id < ${table}.id) RETURNING gid AS x`);
    await db.run(`DROP INDEX ${table}_gid_all`);
    await db.run(`CREATE UNIQUE INDEX ${table}_gid ON ${table} (gid)`);
    return gone;
  };

  if (pg) {
    // Server-side memory for the big hash joins and sorts of this transaction only.
    await db.run(`SET LOCAL work_mem = '128MB'`);
    await db.run(`SET LOCAL maintenance_work_mem = '256MB'`);
  } else {
    for (const t of ['in_at', 'in_it', 'in_rg', 'in_rel', 'in_rr', 'in_rgr', 'in_ca', 'in_cat', 'in_rgca', 'mv']) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  }

  // ---- 1. The dump, cleaned, in keyed temporary tables ----

  await step('art types', async () => {
    await load({
      table: 'in_at',
      stage: 'art_type',
      columns: [
        ['id', 'integer', 's.id'],
        ['name', 'text', 's.name'],
        ['parent', 'integer', 's.parent'],
        ['child_order', 'integer', 's.child_order'],
        ['description', 'text', `coalesce(s.description, '')`],
        ['gid', 'text', uuid('s.gid')],
      ],
      key: ['id'],
      label: 's.id',
    });
    omit(
      'art_type: name used by another art type',
      await db.deleteReturning(
        `DELETE FROM in_at WHERE EXISTS (SELECT 1 FROM art_type a WHERE a.name = in_at.name AND a.id <> in_at.id) OR EXISTS (SELECT 1 FROM in_at b WHERE b.name = in_at.name AND b.id < in_at.id) RETURNING id || ' ' || name AS x`,
      ),
    );
    await load({
      table: 'in_it',
      stage: 'image_type',
      columns: [
        ['mime_type', 'text', 's.mime_type'],
        ['suffix', 'text', 's.suffix'],
      ],
      key: ['mime_type'],
      label: 's.mime_type',
    });
  });

  await step('release groups', async () => {
    await load({
      table: 'in_rg',
      stage: 'release_group',
      columns: [
        ['id', 'integer', 's.id'],
        ['gid', 'text', uuid('s.gid')],
        ['name', 'text', 's.name'],
      ],
      key: ['id'],
      label: 's.id',
    });
    omit('release_group: repeated gid (lowest id kept)', await uniqueGid('in_rg'));
  });

  await step('releases', async () => {
    // The release date: its earliest event over both event tables, ranked row by row,
    // year, month, day ascending with NULLs last (coverartarchive.org's release-group order).
    const events = `SELECT release, date_year, date_month, date_day FROM ${st('release_country')} UNION ALL SELECT release, date_year, date_month, date_day FROM ${st('release_unknown_country')}`;
    const best = `SELECT release, date_year, date_month, date_day FROM (SELECT release, date_year, date_month, date_day, row_number() OVER (PARTITION BY release ORDER BY date_year ASC NULLS LAST, date_month ASC NULLS LAST, date_day ASC NULLS LAST) AS rn FROM (${events}) ev) ranked WHERE rn = 1`;
    await load({
      table: 'in_rel',
      stage: 'release',
      columns: [
        ['id', 'integer', 's.id'],
        ['gid', 'text', uuid('s.gid')],
        ['name', 'text', 's.name'],
        ['release_group', 'integer', 's.release_group'],
        ['date_year', 'integer', 'e.date_year'],
        ['date_month', 'integer', 'e.date_month'],
        ['date_day', 'integer', 'e.date_day'],
      ],
      joins: `LEFT JOIN (${best}) e ON e.release = s.id`,
      key: ['id'],
      label: 's.id',
    });
    omit('release: repeated gid (lowest id kept)', await uniqueGid('in_rel'));
    omit(
      'release: release group not in the dump',
      await db.deleteReturning(`DELETE FROM in_rel WHERE NOT EXISTS (SELECT 1 FROM in_rg g WHERE g.id = in_rel.release_group) RETURNING gid || ' (group ' || release_group || ')' AS x`),
    );
    const strayEvents = await one(`SELECT count(*) AS n FROM (${events}) ev WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = ev.release)`);
    if (strayEvents > 0) omit('release_country/release_unknown_country: release not in the dump', { count: strayEvents, examples: [] });
  });

  await step('merged MBIDs', async () => {
    for (const [name, tmp, target] of [
      ['release_gid_redirect', 'in_rr', 'in_rel'],
      ['release_group_gid_redirect', 'in_rgr', 'in_rg'],
    ] as const) {
      await load({
        table: tmp,
        stage: name,
        columns: [
          ['gid', 'text', uuid('s.gid')],
          ['new_id', 'integer', 's.new_id'],
        ],
        key: ['gid'],
        label: 's.gid',
      });
      omit(
        `${name}: target not in the dump`,
        await db.deleteReturning(`DELETE FROM ${tmp} WHERE NOT EXISTS (SELECT 1 FROM ${target} t WHERE t.id = ${tmp}.new_id) RETURNING gid || ' → ' || new_id AS x`),
      );
      omit(
        `${name}: MBID is itself an entity of the dump`,
        await db.deleteReturning(`DELETE FROM ${tmp} WHERE EXISTS (SELECT 1 FROM ${target} t WHERE t.gid = ${tmp}.gid) RETURNING gid AS x`),
      );
    }
  });

  await step('images', async () => {
    // approved = the add-edit is closed (as the Cover Art Archive's index_listing view decides); without the
    // edit table, no edit is pending on the image (docs/decisions.md). An uncorrelated
    // IN: both databases build its set once (the staged edits have no index).
    const approved = input.withEdits
      ? `CASE WHEN s.edit IN (SELECT id FROM ${st('edit')} WHERE close_time IS NOT NULL) THEN 1 ELSE 0 END`
      : 'CASE WHEN s.edits_pending = 0 THEN 1 ELSE 0 END';
    await load({
      table: 'in_ca',
      stage: 'cover_art',
      columns: [
        ['id', 'integer', 's.id'],
        ['release', 'integer', 's.release'],
        ['comment', 'text', 's.comment'],
        ['edit', 'integer', 's.edit'],
        ['ordering', 'integer', 's.ordering'],
        ['date_uploaded', 'integer', 's.date_uploaded'],
        ['approved', 'integer', approved],
        ['mime_type', 'text', 's.mime_type'],
        ['filesize', 'integer', 's.filesize'],
        ['thumb_250_filesize', 'integer', 's.thumb_250_filesize'],
        ['thumb_500_filesize', 'integer', 's.thumb_500_filesize'],
        ['thumb_1200_filesize', 'integer', 's.thumb_1200_filesize'],
      ],
      key: ['id'],
      label: 's.id',
    });
    omit(
      'cover_art: release not in the dump',
      await db.deleteReturning(`DELETE FROM in_ca WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = in_ca.release) RETURNING id || ' (release ' || release || ')' AS x`),
    );
    omit(
      'cover_art: unknown mime type',
      await db.deleteReturning(
        `DELETE FROM in_ca WHERE NOT EXISTS (SELECT 1 FROM in_it t WHERE t.mime_type = in_ca.mime_type) AND NOT EXISTS (SELECT 1 FROM image_type t WHERE t.mime_type = in_ca.mime_type) RETURNING id || ' (' || mime_type || ')' AS x`,
      ),
    );
    omit(
      'cover_art: id taken by an image uploaded to this sleeve',
      await db.deleteReturning(`DELETE FROM in_ca WHERE EXISTS (SELECT 1 FROM cover_art c WHERE c.id = in_ca.id AND c.imported = 0) RETURNING id AS x`),
    );

    await load({
      table: 'in_cat',
      stage: 'cover_art_type',
      columns: [
        ['id', 'integer', 's.id'],
        ['type_id', 'integer', 's.type_id'],
      ],
      key: ['id', 'type_id'],
      label: `s.id || ' type ' || s.type_id`,
    });
    omit(
      'cover_art_type: image not in the dump (or left out)',
      await db.deleteReturning(`DELETE FROM in_cat WHERE NOT EXISTS (SELECT 1 FROM in_ca c WHERE c.id = in_cat.id) RETURNING id || ' type ' || type_id AS x`),
    );
    omit(
      'cover_art_type: unknown art type',
      await db.deleteReturning(
        `DELETE FROM in_cat WHERE NOT EXISTS (SELECT 1 FROM in_at a WHERE a.id = in_cat.type_id) AND NOT EXISTS (SELECT 1 FROM art_type a WHERE a.id = in_cat.type_id) RETURNING id || ' type ' || type_id AS x`,
      ),
    );

    await load({
      table: 'in_rgca',
      stage: 'release_group_cover_art',
      columns: [
        ['release_group', 'integer', 's.release_group'],
        ['release', 'integer', 's.release'],
      ],
      key: ['release_group'],
      label: 's.release_group',
    });
    omit(
      'release_group_cover_art: release not in the dump or not in that group',
      await db.deleteReturning(
        `DELETE FROM in_rgca WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = in_rgca.release AND r.release_group = in_rgca.release_group) RETURNING release_group || ' → ' || release AS x`,
      ),
    );
  });

  // ---- 2. sleeve's tables ----

  /**
   * Runs `fn`, which only inserts into and updates `table`, with the table's secondary
   * indexes (and on PostgreSQL its foreign keys and unique constraints) set aside when
   * it receives more rows than it holds, as in a first import: building them once
   * afterwards is several times faster than maintaining them row by row, and the
   * foreign keys are checked again as they are put back. On PostgreSQL this locks the
   * table until the import commits (readers wait), hence only for such big loads.
   */
  const bulk = async (table: string, incoming: number, fn: () => Promise<void>): Promise<void> => {
    if (incoming < BULK_MIN_ROWS || incoming <= (await one(`SELECT count(*) AS n FROM ${table}`))) return fn();
    const restore: string[] = [];
    if (pg) {
      // Foreign keys of the table, and its primary key and unique constraints that no
      // foreign key leans on (those stay: the table's rows may be referenced meanwhile).
      const constraints = await db.all<{ name: string; def: string; kind: string }>(
        `SELECT c.conname AS name, pg_get_constraintdef(c.oid) AS def, c.contype AS kind FROM pg_constraint c WHERE c.conrelid = '${table}'::regclass
         AND (c.contype = 'f' OR (c.contype IN ('p', 'u') AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = c.conindid)))
         ORDER BY c.contype = 'f' DESC, c.conname`,
      );
      const indexes = await db.all<{ name: string; def: string }>(
        `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND tablename = '${table}'
         AND indexname NOT IN (SELECT conname FROM pg_constraint WHERE conrelid = '${table}'::regclass)`,
      );
      for (const c of constraints) await db.run(`ALTER TABLE ${table} DROP CONSTRAINT "${c.name}"`);
      for (const i of indexes) await db.run(`DROP INDEX "${i.name}"`);
      // Keys before foreign keys; each foreign key is checked again as it is added.
      const add = (c: { name: string; def: string }) => `ALTER TABLE ${table} ADD CONSTRAINT "${c.name}" ${c.def}`;
      restore.push(...indexes.map((i) => i.def), ...constraints.filter((c) => c.kind !== 'f').map(add), ...constraints.filter((c) => c.kind === 'f').map(add));
    } else {
      const indexes = await db.all<{ name: string; sql: string }>(`SELECT name, sql FROM main.sqlite_master WHERE type = 'index' AND tbl_name = '${table}' AND sql IS NOT NULL`);
      for (const i of indexes) await db.run(`DROP INDEX main."${i.name}"`);
      restore.push(...indexes.map((i) => i.sql));
    }
    await fn();
    for (const statement of restore) await db.run(statement);
  };

  /**
   * Writes the rows of `incoming` into `table` by `key`: rows that differ are updated,
   * new ones inserted (two set-based statements; no per-row conflict handling).
   */
  const write = async (table: string, incoming: string, key: string, columns: string[], c: EntityCounts, flag = true): Promise<void> => {
    const total = await one(`SELECT count(*) AS n FROM ${incoming}`);
    await bulk(table, total, async () => {
      const set = [...columns.map((col) => `${col} = i.${col}`), ...(flag ? ['imported = 1'] : [])].join(', ');
      const differ = [...columns.map((col) => `${table}.${col} IS DISTINCT FROM i.${col}`), ...(flag ? [`${table}.imported <> 1`] : [])].join(' OR ');
      c.changed = await db.run(`UPDATE ${table} SET ${set} FROM ${incoming} i WHERE ${table}.${key} = i.${key} AND (${differ})`);
      c.added = await db.run(
        `INSERT INTO ${table} (${[key, ...columns, ...(flag ? ['imported'] : [])].join(', ')})
         SELECT ${[`i.${key}`, ...columns.map((col) => `i.${col}`), ...(flag ? ['1'] : [])].join(', ')} FROM ${incoming} i
         WHERE NOT EXISTS (SELECT 1 FROM ${table} x WHERE x.${key} = i.${key})`,
      );
    });
  };

  // Whether earlier imports left rows: when not, nothing can have left the dump.
  const had: Record<string, boolean> = {};
  for (const t of ['release_group', 'release', 'cover_art', 'release_gid_redirect', 'release_group_gid_redirect']) had[t] = await any(t, 'imported = 1');

  await step('art and image types', async () => {
    await write('art_type', 'in_at', 'id', ['name', 'parent', 'child_order', 'description', 'gid'], result.art_type, false);
    await write('image_type', 'in_it', 'mime_type', ['suffix'], result.image_type, false);
  });

  /**
   * Moves rows of `table` to new ids (the pairs in temp table mv): a copy under the new
   * id (the MBID freed first, it is unique), the rows that refer to it re-pointed, the
   * old row deleted. Foreign keys hold at every statement on both databases.
   */
  const move = async (table: 'release' | 'release_group', columns: string, children: [string, string][]): Promise<number> => {
    const n = await one('SELECT count(*) AS n FROM mv');
    if (n === 0) return 0;
    await db.run(`UPDATE ${table} SET gid = '~' || gid WHERE id IN (SELECT old_id FROM mv)`);
    await db.run(`INSERT INTO ${table} (id, gid, ${columns}) SELECT mv.new_id, substr(t.gid, 2), ${columns.split(', ').map((c) => `t.${c}`).join(', ')} FROM ${table} t JOIN mv ON mv.old_id = t.id`);
    for (const [child, column] of children) await db.run(`UPDATE ${child} SET ${column} = mv.new_id FROM mv WHERE ${child}.${column} = mv.old_id`);
    await db.run(`DELETE FROM ${table} WHERE id IN (SELECT old_id FROM mv)`);
    return n;
  };

  /**
   * Frees the ids and MBIDs the dump's rows need: rows at an id of the dump under another
   * MBID go to fresh ids past every id in use; then rows that have an MBID of the dump go
   * to that row's id (free by then). Returns how many rows moved.
   */
  const makeRoom = async (table: 'release' | 'release_group', incoming: string, columns: string, children: [string, string][]): Promise<number> => {
    const base = await one(`SELECT max(m) AS n FROM (SELECT max(id) AS m FROM ${table} UNION ALL SELECT max(id) AS m FROM ${incoming}) x`);
    let moved = 0;
    for (const pairs of [
      `SELECT t.id, ${base} + row_number() OVER (ORDER BY t.id) FROM ${table} t JOIN ${incoming} i ON i.id = t.id WHERE i.gid <> t.gid`,
      `SELECT t.id, i.id FROM ${table} t JOIN ${incoming} i ON i.gid = t.gid WHERE i.id <> t.id`,
    ]) {
      await db.run(temp('mv', 'old_id integer PRIMARY KEY, new_id integer NOT NULL'));
      await db.run(`INSERT INTO mv ${pairs}`);
      moved += await move(table, columns, children);
      await db.run('DROP TABLE mv');
    }
    return moved;
  };

  await step('release groups', async () => {
    result.release_group.moved = await makeRoom('release_group', 'in_rg', 'name, imported', [
      ['release', 'release_group'],
      ['release_group_gid_redirect', 'new_id'],
      ['release_group_cover_art', 'release_group'],
    ]);
    await write('release_group', 'in_rg', 'id', ['gid', 'name'], result.release_group);
  });

  await step('releases', async () => {
    result.release.moved = await makeRoom('release', 'in_rel', 'release_group, name, date_year, date_month, date_day, index_dirty, index_urls, imported', [
      ['cover_art', 'release'],
      ['release_gid_redirect', 'new_id'],
      ['release_group_cover_art', 'release'],
    ]);
    await write('release', 'in_rel', 'id', ['gid', 'release_group', 'name', 'date_year', 'date_month', 'date_day'], result.release);
  });

  await step('images', async () => {
    const r = result.cover_art;
    await write(
      'cover_art',
      'in_ca',
      'id',
      ['release', 'comment', 'edit', 'ordering', 'approved', 'mime_type', 'date_uploaded', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize'],
      r,
    );
    const t = result.cover_art_type;
    if (had.cover_art) {
      // Their types go with them (ON DELETE CASCADE).
      r.removed = await db.run(`DELETE FROM cover_art WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM in_ca i WHERE i.id = cover_art.id)`);
      t.removed = await db.run(
        `DELETE FROM cover_art_type WHERE EXISTS (SELECT 1 FROM cover_art c WHERE c.id = cover_art_type.id AND c.imported = 1)
         AND NOT EXISTS (SELECT 1 FROM in_cat i WHERE i.id = cover_art_type.id AND i.type_id = cover_art_type.type_id)`,
      );
    }
    await bulk('cover_art_type', await one('SELECT count(*) AS n FROM in_cat'), async () => {
      t.added = await db.run(
        `INSERT INTO cover_art_type (id, type_id) SELECT id, type_id FROM in_cat i WHERE NOT EXISTS (SELECT 1 FROM cover_art_type x WHERE x.id = i.id AND x.type_id = i.type_id)`,
      );
    });

    if (await any('cover_art', 'imported = 0')) {
      // Images uploaded to sleeve on an imported release come after the dump's, in their order.
      await db.run(
        `WITH l AS (
           SELECT c.id, (SELECT max(i.ordering) FROM cover_art i WHERE i.release = c.release AND i.imported = 1)
                        + row_number() OVER (PARTITION BY c.release ORDER BY c.ordering, c.id) AS o
           FROM cover_art c WHERE c.imported = 0 AND EXISTS (SELECT 1 FROM cover_art i WHERE i.release = c.release AND i.imported = 1))
         UPDATE cover_art SET ordering = l.o FROM l WHERE cover_art.id = l.id AND cover_art.ordering <> l.o`,
      );
      // Their index.json lives in sleeve's store: mark it for rewriting (no other release gets one written).
      await db.run(
        `UPDATE release SET index_dirty = ${Math.max(1, Math.floor(input.now))} WHERE imported = 1 AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
      );
    }
    // Listings written on demand since an earlier import (cover-art/listing-on-demand.ts) name its images: rewritten too.
    await db.run(`UPDATE release SET index_dirty = ${Math.max(1, Math.floor(input.now))} WHERE imported = 1 AND index_urls IS NOT NULL AND index_dirty = 0`);
  });

  await step('merged MBIDs and release group covers', async () => {
    for (const [table, tmp, entity] of [
      ['release_gid_redirect', 'in_rr', 'release'],
      ['release_group_gid_redirect', 'in_rgr', 'release_group'],
    ] as const) {
      const r = result[table];
      if (had[table]) r.removed = await db.run(`DELETE FROM ${table} WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM ${tmp} i WHERE i.gid = ${table}.gid)`);
      // A merge made here of what the dump has as an entity again.
      r.removed += await db.run(`DELETE FROM ${table} WHERE imported = 0 AND EXISTS (SELECT 1 FROM ${entity} e WHERE e.gid = ${table}.gid AND e.imported = 1)`);
      await write(table, tmp, 'gid', ['new_id'], r);
    }
    const k = result.release_group_cover_art;
    if (had.release_group) {
      k.removed = await db.run(
        `DELETE FROM release_group_cover_art WHERE EXISTS (SELECT 1 FROM release_group g WHERE g.id = release_group_cover_art.release_group AND g.imported = 1)
         AND NOT EXISTS (SELECT 1 FROM in_rgca i WHERE i.release_group = release_group_cover_art.release_group)`,
      );
    }
    await write('release_group_cover_art', 'in_rgca', 'release_group', ['release'], k, false);
  });

  await step('removing what left the dump', async () => {
    const gone = (table: string, incoming: string) => `${table}.imported = 1 AND NOT EXISTS (SELECT 1 FROM ${incoming} i WHERE i.id = ${table}.id)`;
    if (had.release) {
      result.release.keptLocal = await db.run(
        `UPDATE release SET imported = 0 WHERE ${gone('release', 'in_rel')} AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
      );
      result.release.removed = await db.run(`DELETE FROM release WHERE ${gone('release', 'in_rel')}`);
    }
    if (had.release_group) {
      result.release_group.keptLocal = await db.run(
        `UPDATE release_group SET imported = 0 WHERE ${gone('release_group', 'in_rg')} AND EXISTS (SELECT 1 FROM release r WHERE r.release_group = release_group.id)`,
      );
      result.release_group.removed = await db.run(`DELETE FROM release_group WHERE ${gone('release_group', 'in_rg')}`);
    }
  });

  await step('counters', async () => {
    if (pg) {
      // New rows made with `sleeve release add` must get ids past the imported ones.
      for (const table of ['release', 'release_group']) {
        await db.all(`SELECT setval(pg_get_serial_sequence('${table}', 'id'), (SELECT coalesce(max(id), 0) + 1 FROM ${table}), false) AS n`);
      }
    }
    // Ids of new uploads never repeat an imported one.
    await db.run(`UPDATE counter SET value = (SELECT max(v) FROM (SELECT value AS v FROM counter WHERE name = 'cover_art_id' UNION ALL SELECT max(id) AS v FROM cover_art) x) WHERE name = 'cover_art_id'`);
    await db.run(`UPDATE counter SET value = value + 1 WHERE name = 'catalogue_version'`);
    // The catalogue's size for the metrics (kept up by sleeve's own changes; an import recounts).
    await db.run(`UPDATE counter SET value = (SELECT count(*) FROM release) WHERE name = 'releases'`);
    await db.run(`UPDATE counter SET value = (SELECT count(*) FROM cover_art) WHERE name = 'images'`);
  });

  if (!pg) for (const t of ['in_at', 'in_it', 'in_rg', 'in_rel', 'in_rr', 'in_rgr', 'in_ca', 'in_cat', 'in_rgca']) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  return result;
}

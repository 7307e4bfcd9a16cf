/*
 * Staging → sleeve's tables, in the one transaction the backend opens around it.
 *
 * What the dump says about the entities it holds wins; what sleeve's own commands
 * created ("local" rows, imported = 0) is kept (docs/decisions.md, "Import"):
 *  - rows of the dump are cleaned first (a key seen twice keeps its first row; rows
 *    pointing at what the dump lacks are left out and counted);
 *  - local rows in the way are moved: a local release or group whose internal id the
 *    dump uses gets a new id, and one that has the MBID of a row of the dump takes
 *    that row's id and becomes imported;
 *  - the dump's rows are upserted by id (MusicBrainz ids become sleeve's ids), rows
 *    imported before and gone from the dump are removed, unless images uploaded to
 *    sleeve hang on them: those stay, as local rows;
 *  - image ids are public and name files, so a dump image whose id a local image has
 *    is left out (and counted) rather than overwriting it.
 */
import type { ApplyOptions, ApplyResult, EntityCounts, Omission } from './backend.js';

export interface SqlRunner {
  dialect: 'sqlite' | 'postgres';
  /** Runs a statement; resolves to the number of rows it changed. */
  run(sql: string): Promise<number>;
  /** A query with a small result. */
  all<T>(sql: string): Promise<T[]>;
  /** Runs `DELETE … RETURNING {label} AS x`; resolves to how many rows went, with the first three labels. */
  deleteReturning(sql: string): Promise<Omission>;
}

export interface ApplyInput extends Omit<ApplyOptions, 'runId' | 'outcome'> {
  /** Rows staged per dump table name (for the duplicate counts). */
  staged: Record<string, number>;
}

class Interrupted extends Error {
  constructor() {
    super('interrupted');
    this.name = 'AbortError';
  }
}

function counts(): EntityCounts {
  return { added: 0, changed: 0, removed: 0 };
}

export async function applyStaging(db: SqlRunner, input: ApplyInput): Promise<ApplyResult> {
  const pg = db.dialect === 'postgres';
  const st = (name: string) => (pg ? `import_mb_${name}` : `stage.${name}`);
  /** The order rows were staged in: the file's order. */
  const seq = pg ? 'ctid' : 'rowid';
  const uuid = (c: string) => (pg ? `${c}::text` : c);
  const ms = (c: string) => (pg ? `floor(extract(epoch from ${c}) * 1000)::bigint` : c);
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
  /** Loads a staging table into a keyed temp table; the first row of a repeated key wins. */
  const load = async (name: string, table: string, key: string, insert: string) => {
    const inserted = await db.run(insert);
    const dups = (input.staged[name] ?? 0) - inserted;
    if (dups > 0) {
      const ex = await db.all<{ k: unknown }>(`SELECT ${key} AS k FROM ${st(name)} GROUP BY ${key} HAVING count(*) > 1 LIMIT 3`);
      omit(`${name}: repeated key (first row kept)`, { count: dups, examples: ex.map((r) => String(r.k)) });
    }
    return table;
  };

  if (pg) {
    // Server-side memory for the big hash joins and sorts of this transaction only.
    await db.run(`SET LOCAL work_mem = '128MB'`);
  } else {
    for (const t of ['in_at', 'in_it', 'in_rg', 'in_rel', 'in_rr', 'in_rgr', 'in_ca', 'in_cat', 'in_rgca', 'mv']) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  }

  // ---- 1. The dump, cleaned, in keyed temporary tables ----

  await step('art types', async () => {
    await db.run(temp('in_at', 'id integer PRIMARY KEY, name text NOT NULL, parent integer, child_order integer NOT NULL, description text NOT NULL, gid text'));
    await load(
      'art_type',
      'in_at',
      'id',
      `INSERT INTO in_at SELECT id, name, parent, child_order, coalesce(description, ''), ${uuid('gid')} FROM ${st('art_type')} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`,
    );
    omit(
      'art_type: name used by another art type',
      await db.deleteReturning(
        `DELETE FROM in_at WHERE EXISTS (SELECT 1 FROM art_type a WHERE a.name = in_at.name AND a.id <> in_at.id) OR EXISTS (SELECT 1 FROM in_at b WHERE b.name = in_at.name AND b.id < in_at.id) RETURNING id || ' ' || name AS x`,
      ),
    );
    await db.run(temp('in_it', 'mime_type text PRIMARY KEY, suffix text NOT NULL'));
    await load('image_type', 'in_it', 'mime_type', `INSERT INTO in_it SELECT mime_type, suffix FROM ${st('image_type')} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`);
  });

  await step('release groups', async () => {
    await db.run(temp('in_rg', 'id integer PRIMARY KEY, gid text NOT NULL, name text NOT NULL'));
    await load('release_group', 'in_rg', 'id', `INSERT INTO in_rg SELECT id, ${uuid('gid')}, name FROM ${st('release_group')} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`);
    await db.run('CREATE INDEX in_rg_gid ON in_rg (gid)');
    omit(
      'release_group: repeated gid (lowest id kept)',
      await db.deleteReturning(`DELETE FROM in_rg WHERE EXISTS (SELECT 1 FROM in_rg b WHERE b.gid = in_rg.gid AND b.id < in_rg.id) RETURNING gid AS x`),
    );
  });

  await step('releases', async () => {
    await db.run(
      temp('in_rel', 'id integer PRIMARY KEY, gid text NOT NULL, name text NOT NULL, release_group integer NOT NULL, date_year integer, date_month integer, date_day integer'),
    );
    // The release date: its earliest event over both event tables, ranked row by row,
    // year, month, day ascending with NULLs last (reference §A.4).
    const events = `SELECT release, date_year, date_month, date_day FROM ${st('release_country')} UNION ALL SELECT release, date_year, date_month, date_day FROM ${st('release_unknown_country')}`;
    const best = `SELECT release, date_year, date_month, date_day FROM (SELECT release, date_year, date_month, date_day, row_number() OVER (PARTITION BY release ORDER BY date_year ASC NULLS LAST, date_month ASC NULLS LAST, date_day ASC NULLS LAST) AS rn FROM (${events}) ev) ranked WHERE rn = 1`;
    await load(
      'release',
      'in_rel',
      'id',
      `INSERT INTO in_rel SELECT r.id, ${uuid('r.gid')}, r.name, r.release_group, e.date_year, e.date_month, e.date_day FROM ${st('release')} r LEFT JOIN (${best}) e ON e.release = r.id WHERE true ORDER BY r.${seq} ON CONFLICT DO NOTHING`,
    );
    await db.run('CREATE INDEX in_rel_gid ON in_rel (gid)');
    omit(
      'release: repeated gid (lowest id kept)',
      await db.deleteReturning(`DELETE FROM in_rel WHERE EXISTS (SELECT 1 FROM in_rel b WHERE b.gid = in_rel.gid AND b.id < in_rel.id) RETURNING gid AS x`),
    );
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
      await db.run(temp(tmp, 'gid text PRIMARY KEY, new_id integer NOT NULL'));
      await load(name, tmp, 'gid', `INSERT INTO ${tmp} SELECT ${uuid('gid')}, new_id FROM ${st(name)} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`);
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
    await db.run(
      temp(
        'in_ca',
        'id bigint PRIMARY KEY, release integer NOT NULL, comment text NOT NULL, edit integer NOT NULL, ordering integer NOT NULL, date_uploaded bigint NOT NULL, approved integer NOT NULL, mime_type text NOT NULL, filesize bigint, thumb_250_filesize bigint, thumb_500_filesize bigint, thumb_1200_filesize bigint',
      ),
    );
    // approved = the add-edit is closed (reference §C, view index_listing). Without the
    // edit table: no pending edit on the image (docs/decisions.md).
    // A join, not a correlated subquery: neither database indexes the staged edits.
    const [approved, closed] = input.withEdits
      ? ['CASE WHEN e.id IS NULL THEN 0 ELSE 1 END', `LEFT JOIN (SELECT DISTINCT id FROM ${st('edit')} WHERE close_time IS NOT NULL) e ON e.id = c.edit`]
      : ['CASE WHEN c.edits_pending = 0 THEN 1 ELSE 0 END', ''];
    await load(
      'cover_art',
      'in_ca',
      'id',
      `INSERT INTO in_ca SELECT c.id, c.release, c.comment, c.edit, c.ordering, ${ms('c.date_uploaded')}, ${approved}, c.mime_type, c.filesize, c.thumb_250_filesize, c.thumb_500_filesize, c.thumb_1200_filesize FROM ${st('cover_art')} c ${closed} WHERE true ORDER BY c.${seq} ON CONFLICT DO NOTHING`,
    );
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

    await db.run(temp('in_cat', 'id bigint NOT NULL, type_id integer NOT NULL, PRIMARY KEY (id, type_id)'));
    await load('cover_art_type', 'in_cat', `id || ' type ' || type_id`, `INSERT INTO in_cat SELECT id, type_id FROM ${st('cover_art_type')} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`);
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

    await db.run(temp('in_rgca', 'release_group integer PRIMARY KEY, release integer NOT NULL'));
    await load(
      'release_group_cover_art',
      'in_rgca',
      'release_group',
      `INSERT INTO in_rgca SELECT release_group, release FROM ${st('release_group_cover_art')} WHERE true ORDER BY ${seq} ON CONFLICT DO NOTHING`,
    );
    omit(
      'release_group_cover_art: release not in the dump or not in that group',
      await db.deleteReturning(
        `DELETE FROM in_rgca WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = in_rgca.release AND r.release_group = in_rgca.release_group) RETURNING release_group || ' → ' || release AS x`,
      ),
    );
  });

  // ---- 2. sleeve's tables ----

  await step('art and image types', async () => {
    result.art_type.added = await one(`SELECT count(*) AS n FROM in_at WHERE NOT EXISTS (SELECT 1 FROM art_type a WHERE a.id = in_at.id)`);
    result.art_type.changed =
      (await db.run(
        `INSERT INTO art_type (id, name, parent, child_order, description, gid) SELECT id, name, parent, child_order, description, gid FROM in_at WHERE true
         ON CONFLICT (id) DO UPDATE SET name = excluded.name, parent = excluded.parent, child_order = excluded.child_order, description = excluded.description, gid = excluded.gid
         WHERE art_type.name IS DISTINCT FROM excluded.name OR art_type.parent IS DISTINCT FROM excluded.parent OR art_type.child_order IS DISTINCT FROM excluded.child_order
            OR art_type.description IS DISTINCT FROM excluded.description OR art_type.gid IS DISTINCT FROM excluded.gid`,
      )) - result.art_type.added;
    result.image_type.added = await one(`SELECT count(*) AS n FROM in_it WHERE NOT EXISTS (SELECT 1 FROM image_type t WHERE t.mime_type = in_it.mime_type)`);
    result.image_type.changed =
      (await db.run(
        `INSERT INTO image_type (mime_type, suffix) SELECT mime_type, suffix FROM in_it WHERE true
         ON CONFLICT (mime_type) DO UPDATE SET suffix = excluded.suffix WHERE image_type.suffix IS DISTINCT FROM excluded.suffix`,
      )) - result.image_type.added;
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
    await db.run(temp('mv', 'old_id integer PRIMARY KEY, new_id integer NOT NULL'));
    await db.run(
      `INSERT INTO mv SELECT t.id, ${base} + row_number() OVER (ORDER BY t.id) FROM ${table} t JOIN ${incoming} i ON i.id = t.id WHERE i.gid <> t.gid`,
    );
    let moved = await move(table, columns, children);
    await db.run('DROP TABLE mv');
    await db.run(temp('mv', 'old_id integer PRIMARY KEY, new_id integer NOT NULL'));
    await db.run(`INSERT INTO mv SELECT t.id, i.id FROM ${table} t JOIN ${incoming} i ON i.gid = t.gid WHERE i.id <> t.id`);
    moved += await move(table, columns, children);
    await db.run('DROP TABLE mv');
    return moved;
  };

  await step('release groups', async () => {
    result.release_group.moved = await makeRoom('release_group', 'in_rg', 'name, imported', [
      ['release', 'release_group'],
      ['release_group_gid_redirect', 'new_id'],
      ['release_group_cover_art', 'release_group'],
    ]);
    result.release_group.added = await one(`SELECT count(*) AS n FROM in_rg WHERE NOT EXISTS (SELECT 1 FROM release_group g WHERE g.id = in_rg.id)`);
    result.release_group.changed =
      (await db.run(
        `INSERT INTO release_group (id, gid, name, imported) SELECT id, gid, name, 1 FROM in_rg WHERE true
         ON CONFLICT (id) DO UPDATE SET gid = excluded.gid, name = excluded.name, imported = 1
         WHERE release_group.gid IS DISTINCT FROM excluded.gid OR release_group.name IS DISTINCT FROM excluded.name OR release_group.imported <> 1`,
      )) - result.release_group.added;
  });

  await step('releases', async () => {
    result.release.moved = await makeRoom('release', 'in_rel', 'release_group, name, date_year, date_month, date_day, index_dirty, imported', [
      ['cover_art', 'release'],
      ['release_gid_redirect', 'new_id'],
      ['release_group_cover_art', 'release'],
    ]);
    result.release.added = await one(`SELECT count(*) AS n FROM in_rel WHERE NOT EXISTS (SELECT 1 FROM release r WHERE r.id = in_rel.id)`);
    result.release.changed =
      (await db.run(
        `INSERT INTO release (id, gid, release_group, name, date_year, date_month, date_day, imported)
         SELECT id, gid, release_group, name, date_year, date_month, date_day, 1 FROM in_rel WHERE true
         ON CONFLICT (id) DO UPDATE SET gid = excluded.gid, release_group = excluded.release_group, name = excluded.name,
           date_year = excluded.date_year, date_month = excluded.date_month, date_day = excluded.date_day, imported = 1
         WHERE release.gid IS DISTINCT FROM excluded.gid OR release.release_group IS DISTINCT FROM excluded.release_group OR release.name IS DISTINCT FROM excluded.name
            OR release.date_year IS DISTINCT FROM excluded.date_year OR release.date_month IS DISTINCT FROM excluded.date_month
            OR release.date_day IS DISTINCT FROM excluded.date_day OR release.imported <> 1`,
      )) - result.release.added;
  });

  await step('images', async () => {
    const r = result.cover_art;
    r.added = await one(`SELECT count(*) AS n FROM in_ca WHERE NOT EXISTS (SELECT 1 FROM cover_art c WHERE c.id = in_ca.id)`);
    r.changed =
      (await db.run(
        `INSERT INTO cover_art (id, release, comment, edit, ordering, approved, mime_type, date_uploaded, filesize, thumb_250_filesize, thumb_500_filesize, thumb_1200_filesize, imported)
         SELECT id, release, comment, edit, ordering, approved, mime_type, date_uploaded, filesize, thumb_250_filesize, thumb_500_filesize, thumb_1200_filesize, 1 FROM in_ca WHERE true
         ON CONFLICT (id) DO UPDATE SET release = excluded.release, comment = excluded.comment, edit = excluded.edit, ordering = excluded.ordering,
           approved = excluded.approved, mime_type = excluded.mime_type, date_uploaded = excluded.date_uploaded, filesize = excluded.filesize,
           thumb_250_filesize = excluded.thumb_250_filesize, thumb_500_filesize = excluded.thumb_500_filesize, thumb_1200_filesize = excluded.thumb_1200_filesize
         WHERE cover_art.release IS DISTINCT FROM excluded.release OR cover_art.comment IS DISTINCT FROM excluded.comment OR cover_art.edit IS DISTINCT FROM excluded.edit
            OR cover_art.ordering IS DISTINCT FROM excluded.ordering OR cover_art.approved IS DISTINCT FROM excluded.approved OR cover_art.mime_type IS DISTINCT FROM excluded.mime_type
            OR cover_art.date_uploaded IS DISTINCT FROM excluded.date_uploaded OR cover_art.filesize IS DISTINCT FROM excluded.filesize
            OR cover_art.thumb_250_filesize IS DISTINCT FROM excluded.thumb_250_filesize OR cover_art.thumb_500_filesize IS DISTINCT FROM excluded.thumb_500_filesize
            OR cover_art.thumb_1200_filesize IS DISTINCT FROM excluded.thumb_1200_filesize`,
      )) - r.added;
    // Their types go with them (ON DELETE CASCADE).
    r.removed = await db.run(`DELETE FROM cover_art WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM in_ca i WHERE i.id = cover_art.id)`);

    const t = result.cover_art_type;
    t.removed = await db.run(
      `DELETE FROM cover_art_type WHERE EXISTS (SELECT 1 FROM cover_art c WHERE c.id = cover_art_type.id AND c.imported = 1)
       AND NOT EXISTS (SELECT 1 FROM in_cat i WHERE i.id = cover_art_type.id AND i.type_id = cover_art_type.type_id)`,
    );
    t.added = await db.run(`INSERT INTO cover_art_type (id, type_id) SELECT id, type_id FROM in_cat WHERE true ON CONFLICT DO NOTHING`);

    // Images uploaded to sleeve on an imported release come after the dump's, in their order.
    await db.run(
      `WITH l AS (
         SELECT c.id, (SELECT max(i.ordering) FROM cover_art i WHERE i.release = c.release AND i.imported = 1)
                      + row_number() OVER (PARTITION BY c.release ORDER BY c.ordering, c.id) AS o
         FROM cover_art c WHERE c.imported = 0 AND EXISTS (SELECT 1 FROM cover_art i WHERE i.release = c.release AND i.imported = 1))
       UPDATE cover_art SET ordering = l.o FROM l WHERE cover_art.id = l.id AND cover_art.ordering <> l.o`,
    );
    // Their index.json lives in sleeve's store; mark it for rewriting (no other release gets one written).
    await db.run(
      `UPDATE release SET index_dirty = ${Math.max(1, Math.floor(input.now))} WHERE imported = 1 AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
    );
  });

  await step('merged MBIDs and release group covers', async () => {
    for (const [table, tmp, entity] of [
      ['release_gid_redirect', 'in_rr', 'release'],
      ['release_group_gid_redirect', 'in_rgr', 'release_group'],
    ] as const) {
      const r = result[table];
      r.removed = await db.run(`DELETE FROM ${table} WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM ${tmp} i WHERE i.gid = ${table}.gid)`);
      // A merge made here of what the dump has as an entity again.
      r.removed += await db.run(`DELETE FROM ${table} WHERE EXISTS (SELECT 1 FROM ${entity} e WHERE e.gid = ${table}.gid AND e.imported = 1)`);
      r.added = await one(`SELECT count(*) AS n FROM ${tmp} WHERE NOT EXISTS (SELECT 1 FROM ${table} x WHERE x.gid = ${tmp}.gid)`);
      r.changed =
        (await db.run(
          `INSERT INTO ${table} (gid, new_id, imported) SELECT gid, new_id, 1 FROM ${tmp} WHERE true
           ON CONFLICT (gid) DO UPDATE SET new_id = excluded.new_id, imported = 1 WHERE ${table}.new_id IS DISTINCT FROM excluded.new_id OR ${table}.imported <> 1`,
        )) - r.added;
    }
    const k = result.release_group_cover_art;
    k.removed = await db.run(
      `DELETE FROM release_group_cover_art WHERE EXISTS (SELECT 1 FROM release_group g WHERE g.id = release_group_cover_art.release_group AND g.imported = 1)
       AND NOT EXISTS (SELECT 1 FROM in_rgca i WHERE i.release_group = release_group_cover_art.release_group)`,
    );
    k.added = await one(`SELECT count(*) AS n FROM in_rgca WHERE NOT EXISTS (SELECT 1 FROM release_group_cover_art x WHERE x.release_group = in_rgca.release_group)`);
    k.changed =
      (await db.run(
        `INSERT INTO release_group_cover_art (release_group, release) SELECT release_group, release FROM in_rgca WHERE true
         ON CONFLICT (release_group) DO UPDATE SET release = excluded.release WHERE release_group_cover_art.release IS DISTINCT FROM excluded.release`,
      )) - k.added;
  });

  await step('removing what left the dump', async () => {
    const gone = (table: string, incoming: string) => `${table}.imported = 1 AND NOT EXISTS (SELECT 1 FROM ${incoming} i WHERE i.id = ${table}.id)`;
    result.release.keptLocal = await db.run(
      `UPDATE release SET imported = 0 WHERE ${gone('release', 'in_rel')} AND EXISTS (SELECT 1 FROM cover_art c WHERE c.release = release.id AND c.imported = 0)`,
    );
    result.release.removed = await db.run(`DELETE FROM release WHERE ${gone('release', 'in_rel')}`);
    result.release_group.keptLocal = await db.run(
      `UPDATE release_group SET imported = 0 WHERE ${gone('release_group', 'in_rg')} AND EXISTS (SELECT 1 FROM release r WHERE r.release_group = release_group.id)`,
    );
    result.release_group.removed = await db.run(`DELETE FROM release_group WHERE ${gone('release_group', 'in_rg')}`);
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
  });

  if (!pg) for (const t of ['in_at', 'in_it', 'in_rg', 'in_rel', 'in_rr', 'in_rgr', 'in_ca', 'in_cat', 'in_rgca']) await db.run(`DROP TABLE IF EXISTS temp.${t}`);
  return result;
}

/*
 * The apply step's first part: the dump, cleaned, in keyed temporary tables (in_at,
 * in_it, in_rg, in_rel, in_rr, in_rgr, in_ca, in_cat, in_rgca). A key seen twice keeps
 * one row; rows pointing at what the dump lacks are left out and counted.
 */
import type { ApplyRun } from './apply-run.js';

export async function cleanDump(run: ApplyRun): Promise<void> {
  await run.step('art types', () => loadTypes(run));
  await run.step('release groups', () => loadReleaseGroups(run));
  await run.step('releases', () => loadReleases(run));
  await run.step('merged MBIDs', () => loadRedirects(run));
  await run.step('images', async () => {
    await loadImages(run);
    await loadImageTypes(run);
    await loadGroupCovers(run);
  });
}

async function loadTypes(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_at',
    stage: 'art_type',
    columns: [
      ['id', 'integer', 's.id'],
      ['name', 'text', 's.name'],
      ['parent', 'integer', 's.parent'],
      ['child_order', 'integer', 's.child_order'],
      ['description', 'text', `coalesce(s.description, '')`],
      ['gid', 'text', run.dialect.uuidText('s.gid')],
    ],
    key: ['id'],
    label: 's.id',
  });
  run.omit(
    'art_type: name used by another art type',
    await run.db.deleteReturning(
      `DELETE FROM in_at WHERE EXISTS (SELECT 1 FROM art_type a WHERE a.name = in_at.name AND a.id <> in_at.id) OR EXISTS (SELECT 1 FROM in_at b WHERE b.name = in_at.name AND b.id < in_at.id) RETURNING id || ' ' || name AS x`,
    ),
  );
  await run.load({
    table: 'in_it',
    stage: 'image_type',
    columns: [
      ['mime_type', 'text', 's.mime_type'],
      ['suffix', 'text', 's.suffix'],
    ],
    key: ['mime_type'],
    label: 's.mime_type',
  });
}

async function loadReleaseGroups(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_rg',
    stage: 'release_group',
    columns: [
      ['id', 'integer', 's.id'],
      ['gid', 'text', run.dialect.uuidText('s.gid')],
      ['name', 'text', 's.name'],
    ],
    key: ['id'],
    label: 's.id',
  });
  run.omit('release_group: repeated gid (lowest id kept)', await run.dialect.uniqueGid(run.db, 'in_rg'));
}

async function loadReleases(run: ApplyRun): Promise<void> {
  // The release date: its earliest event over both event tables, ranked row by row,
  // year, month, day ascending with NULLs last (coverartarchive.org's release-group order).
  const events = `SELECT release, date_year, date_month, date_day FROM ${run.staged('release_country')} UNION ALL SELECT release, date_year, date_month, date_day FROM ${run.staged('release_unknown_country')}`;
  const best = `SELECT release, date_year, date_month, date_day FROM (SELECT release, date_year, date_month, date_day, row_number() OVER (PARTITION BY release ORDER BY date_year ASC NULLS LAST, date_month ASC NULLS LAST, date_day ASC NULLS LAST) AS rn FROM (${events}) ev) ranked WHERE rn = 1`;
  await run.load({
    table: 'in_rel',
    stage: 'release',
    columns: [
      ['id', 'integer', 's.id'],
      ['gid', 'text', run.dialect.uuidText('s.gid')],
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
  run.omit('release: repeated gid (lowest id kept)', await run.dialect.uniqueGid(run.db, 'in_rel'));
  run.omit(
    'release: release group not in the dump',
    await run.db.deleteReturning(`DELETE FROM in_rel WHERE NOT EXISTS (SELECT 1 FROM in_rg g WHERE g.id = in_rel.release_group) RETURNING gid || ' (group ' || release_group || ')' AS x`),
  );
  const strayEvents = await run.number(`SELECT count(*) AS n FROM (${events}) ev WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = ev.release)`);
  if (strayEvents > 0) run.omit('release_country/release_unknown_country: release not in the dump', { count: strayEvents, examples: [] });
}

async function loadRedirects(run: ApplyRun): Promise<void> {
  for (const [name, tmp, target] of [
    ['release_gid_redirect', 'in_rr', 'in_rel'],
    ['release_group_gid_redirect', 'in_rgr', 'in_rg'],
  ] as const) {
    await run.load({
      table: tmp,
      stage: name,
      columns: [
        ['gid', 'text', run.dialect.uuidText('s.gid')],
        ['new_id', 'integer', 's.new_id'],
      ],
      key: ['gid'],
      label: 's.gid',
    });
    run.omit(
      `${name}: target not in the dump`,
      await run.db.deleteReturning(`DELETE FROM ${tmp} WHERE NOT EXISTS (SELECT 1 FROM ${target} t WHERE t.id = ${tmp}.new_id) RETURNING gid || ' → ' || new_id AS x`),
    );
    run.omit(
      `${name}: MBID is itself an entity of the dump`,
      await run.db.deleteReturning(`DELETE FROM ${tmp} WHERE EXISTS (SELECT 1 FROM ${target} t WHERE t.gid = ${tmp}.gid) RETURNING gid AS x`),
    );
  }
}

async function loadImages(run: ApplyRun): Promise<void> {
  const approved = run.approvedExpression();
  await run.load({
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
  run.omit(
    'cover_art: release not in the dump',
    await run.db.deleteReturning(`DELETE FROM in_ca WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = in_ca.release) RETURNING id || ' (release ' || release || ')' AS x`),
  );
  run.omit(
    'cover_art: unknown mime type',
    await run.db.deleteReturning(
      `DELETE FROM in_ca WHERE NOT EXISTS (SELECT 1 FROM in_it t WHERE t.mime_type = in_ca.mime_type) AND NOT EXISTS (SELECT 1 FROM image_type t WHERE t.mime_type = in_ca.mime_type) RETURNING id || ' (' || mime_type || ')' AS x`,
    ),
  );
  run.omit(
    'cover_art: id taken by an image uploaded to this sleeve',
    await run.db.deleteReturning(`DELETE FROM in_ca WHERE EXISTS (SELECT 1 FROM cover_art c WHERE c.id = in_ca.id AND c.imported = 0) RETURNING id AS x`),
  );
}

async function loadImageTypes(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_cat',
    stage: 'cover_art_type',
    columns: [
      ['id', 'integer', 's.id'],
      ['type_id', 'integer', 's.type_id'],
    ],
    key: ['id', 'type_id'],
    label: `s.id || ' type ' || s.type_id`,
  });
  run.omit(
    'cover_art_type: image not in the dump (or left out)',
    await run.db.deleteReturning(`DELETE FROM in_cat WHERE NOT EXISTS (SELECT 1 FROM in_ca c WHERE c.id = in_cat.id) RETURNING id || ' type ' || type_id AS x`),
  );
  run.omit(
    'cover_art_type: unknown art type',
    await run.db.deleteReturning(
      `DELETE FROM in_cat WHERE NOT EXISTS (SELECT 1 FROM in_at a WHERE a.id = in_cat.type_id) AND NOT EXISTS (SELECT 1 FROM art_type a WHERE a.id = in_cat.type_id) RETURNING id || ' type ' || type_id AS x`,
    ),
  );
}

async function loadGroupCovers(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_rgca',
    stage: 'release_group_cover_art',
    columns: [
      ['release_group', 'integer', 's.release_group'],
      ['release', 'integer', 's.release'],
    ],
    key: ['release_group'],
    label: 's.release_group',
  });
  run.omit(
    'release_group_cover_art: release not in the dump or not in that group',
    await run.db.deleteReturning(
      `DELETE FROM in_rgca WHERE NOT EXISTS (SELECT 1 FROM in_rel r WHERE r.id = in_rgca.release AND r.release_group = in_rgca.release_group) RETURNING release_group || ' → ' || release AS x`,
    ),
  );
}

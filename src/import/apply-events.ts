/*
 * The Event Art Archive's tables of a dump (docs/import.md, "Events"), applied by the rules
 * the release's follow (apply.ts): cleaned into keyed temporary tables (in_ek, in_ev, in_evr,
 * in_ea, in_eat), then written by id; local events in the way moved, imported rows gone
 * from the dump removed unless images uploaded to sleeve hang on them. Only called when the
 * dump has these tables: a dump without them leaves sleeve's events as they are.
 */
import { makeRoom, write } from './apply-catalogue.js';
import type { ApplyRun } from './apply-run.js';
import type { EntityCounts } from './backend.js';

export async function cleanEvents(run: ApplyRun): Promise<void> {
  await run.step('events', async () => {
    await loadKinds(run);
    await loadEvents(run);
    await loadEventArt(run);
  });
}

async function loadKinds(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_ek',
    stage: 'event_art_kind',
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
    'event_art_archive.art_type: name used by another art type',
    await run.db.deleteReturning(
      `DELETE FROM in_ek WHERE EXISTS (SELECT 1 FROM event_art_kind a WHERE a.name = in_ek.name AND a.id <> in_ek.id) OR EXISTS (SELECT 1 FROM in_ek b WHERE b.name = in_ek.name AND b.id < in_ek.id) RETURNING id || ' ' || name AS x`,
    ),
  );
}

async function loadEvents(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_ev',
    stage: 'event',
    columns: [
      ['id', 'integer', 's.id'],
      ['gid', 'text', run.dialect.uuidText('s.gid')],
      ['name', 'text', 's.name'],
    ],
    key: ['id'],
    label: 's.id',
  });
  run.omit('event: repeated gid (lowest id kept)', await run.dialect.uniqueGid(run.db, 'in_ev'));
  await run.load({
    table: 'in_evr',
    stage: 'event_gid_redirect',
    columns: [
      ['gid', 'text', run.dialect.uuidText('s.gid')],
      ['new_id', 'integer', 's.new_id'],
    ],
    key: ['gid'],
    label: 's.gid',
  });
  run.omit(
    'event_gid_redirect: target not in the dump',
    await run.db.deleteReturning(`DELETE FROM in_evr WHERE NOT EXISTS (SELECT 1 FROM in_ev t WHERE t.id = in_evr.new_id) RETURNING gid || ' → ' || new_id AS x`),
  );
  run.omit(
    'event_gid_redirect: MBID is itself an entity of the dump',
    await run.db.deleteReturning(`DELETE FROM in_evr WHERE EXISTS (SELECT 1 FROM in_ev t WHERE t.gid = in_evr.gid) RETURNING gid AS x`),
  );
}

async function loadEventArt(run: ApplyRun): Promise<void> {
  await run.load({
    table: 'in_ea',
    stage: 'event_art',
    columns: [
      ['id', 'integer', 's.id'],
      ['event', 'integer', 's.event'],
      ['comment', 'text', 's.comment'],
      ['edit', 'integer', 's.edit'],
      ['ordering', 'integer', 's.ordering'],
      ['date_uploaded', 'integer', 's.date_uploaded'],
      ['approved', 'integer', run.approvedExpression()],
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
    'event_art: event not in the dump',
    await run.db.deleteReturning(`DELETE FROM in_ea WHERE NOT EXISTS (SELECT 1 FROM in_ev e WHERE e.id = in_ea.event) RETURNING id || ' (event ' || event || ')' AS x`),
  );
  run.omit(
    'event_art: unknown mime type',
    await run.db.deleteReturning(
      `DELETE FROM in_ea WHERE NOT EXISTS (SELECT 1 FROM in_it t WHERE t.mime_type = in_ea.mime_type) AND NOT EXISTS (SELECT 1 FROM image_type t WHERE t.mime_type = in_ea.mime_type) RETURNING id || ' (' || mime_type || ')' AS x`,
    ),
  );
  // Uploads take their ids from one counter for both archives (cover-art/catalogue/events.ts): no dump row may take one.
  run.omit(
    'event_art: id taken by an image uploaded to this sleeve',
    await run.db.deleteReturning(
      `DELETE FROM in_ea WHERE EXISTS (SELECT 1 FROM event_art c WHERE c.id = in_ea.id AND c.imported = 0) OR EXISTS (SELECT 1 FROM cover_art c WHERE c.id = in_ea.id AND c.imported = 0) RETURNING id AS x`,
    ),
  );
  await run.load({
    table: 'in_eat',
    stage: 'event_art_type',
    columns: [
      ['id', 'integer', 's.id'],
      ['type_id', 'integer', 's.type_id'],
    ],
    key: ['id', 'type_id'],
    label: `s.id || ' type ' || s.type_id`,
  });
  run.omit(
    'event_art_type: image not in the dump (or left out)',
    await run.db.deleteReturning(`DELETE FROM in_eat WHERE NOT EXISTS (SELECT 1 FROM in_ea c WHERE c.id = in_eat.id) RETURNING id || ' type ' || type_id AS x`),
  );
  run.omit(
    'event_art_type: unknown art type',
    await run.db.deleteReturning(
      `DELETE FROM in_eat WHERE NOT EXISTS (SELECT 1 FROM in_ek a WHERE a.id = in_eat.type_id) AND NOT EXISTS (SELECT 1 FROM event_art_kind a WHERE a.id = in_eat.type_id) RETURNING id || ' type ' || type_id AS x`,
    ),
  );
}

/** The counts of one event table (present whenever events are applied). */
function counts(run: ApplyRun, table: 'event' | 'event_art' | 'event_art_type' | 'event_gid_redirect' | 'event_art_kind'): EntityCounts {
  const c = run.result[table];
  if (c === undefined) throw new Error(`apply: no counts for ${table}`);
  return c;
}

export async function writeEvents(run: ApplyRun): Promise<void> {
  const had = {
    event: await run.exists('event', 'imported = 1'),
    event_art: await run.exists('event_art', 'imported = 1'),
    event_gid_redirect: await run.exists('event_gid_redirect', 'imported = 1'),
  };
  await run.step('events', async () => {
    await write(run, 'event_art_kind', 'in_ek', 'id', ['name', 'parent', 'child_order', 'description', 'gid'], counts(run, 'event_art_kind'), false);
    counts(run, 'event').moved = await makeRoom(run, 'event', 'in_ev', 'name, index_dirty, index_urls, revision, imported', [
      ['event_art', 'event'],
      ['event_gid_redirect', 'new_id'],
    ]);
    await write(run, 'event', 'in_ev', 'id', ['gid', 'name'], counts(run, 'event'));
  });
  await run.step('event images', () => writeEventArt(run, had.event_art));
  await run.step('merged event MBIDs', async () => {
    const r = counts(run, 'event_gid_redirect');
    if (had.event_gid_redirect) r.removed = await run.db.run(`DELETE FROM event_gid_redirect WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM in_evr i WHERE i.gid = event_gid_redirect.gid)`);
    // A merge made here of what the dump has as an event again.
    r.removed += await run.db.run(`DELETE FROM event_gid_redirect WHERE imported = 0 AND EXISTS (SELECT 1 FROM event e WHERE e.gid = event_gid_redirect.gid AND e.imported = 1)`);
    await write(run, 'event_gid_redirect', 'in_evr', 'gid', ['new_id'], r);
  });
  if (had.event) await run.step('removing events that left the dump', () => removeGoneEvents(run));
  await run.dialect.resetIdSequences(run.db, ['event']);
}

async function writeEventArt(run: ApplyRun, hadArt: boolean): Promise<void> {
  const r = counts(run, 'event_art');
  await write(
    run,
    'event_art',
    'in_ea',
    'id',
    ['event', 'comment', 'edit', 'ordering', 'approved', 'mime_type', 'date_uploaded', 'filesize', 'thumb_250_filesize', 'thumb_500_filesize', 'thumb_1200_filesize'],
    r,
  );
  const t = counts(run, 'event_art_type');
  if (hadArt) {
    // Their types go with them (ON DELETE CASCADE).
    r.removed = await run.db.run(`DELETE FROM event_art WHERE imported = 1 AND NOT EXISTS (SELECT 1 FROM in_ea i WHERE i.id = event_art.id)`);
    t.removed = await run.db.run(
      `DELETE FROM event_art_type WHERE EXISTS (SELECT 1 FROM event_art c WHERE c.id = event_art_type.id AND c.imported = 1)
         AND NOT EXISTS (SELECT 1 FROM in_eat i WHERE i.id = event_art_type.id AND i.type_id = event_art_type.type_id)`,
    );
  }
  t.added = await run.db.run(
    `INSERT INTO event_art_type (id, type_id) SELECT id, type_id FROM in_eat i WHERE NOT EXISTS (SELECT 1 FROM event_art_type x WHERE x.id = i.id AND x.type_id = i.type_id)`,
  );
  const now = Math.max(1, Math.floor(run.input.now));
  if (await run.exists('event_art', 'imported = 0')) {
    // Images uploaded to sleeve on an imported event come after the dump's, in their order.
    await run.db.run(
      `WITH l AS (
             SELECT c.id, (SELECT max(i.ordering) FROM event_art i WHERE i.event = c.event AND i.imported = 1)
                          + row_number() OVER (PARTITION BY c.event ORDER BY c.ordering, c.id) AS o
             FROM event_art c WHERE c.imported = 0 AND EXISTS (SELECT 1 FROM event_art i WHERE i.event = c.event AND i.imported = 1))
           UPDATE event_art SET ordering = l.o FROM l WHERE event_art.id = l.id AND event_art.ordering <> l.o`,
    );
    await run.db.run(`UPDATE event SET index_dirty = ${now} WHERE imported = 1 AND EXISTS (SELECT 1 FROM event_art c WHERE c.event = event.id AND c.imported = 0)`);
  }
  // Listings written since an earlier import name its images: rewritten too (cover-art/listings/indexer.ts).
  await run.db.run(`UPDATE event SET index_dirty = ${now} WHERE imported = 1 AND index_urls IS NOT NULL AND index_dirty = 0`);
}

async function removeGoneEvents(run: ApplyRun): Promise<void> {
  const c = counts(run, 'event');
  const gone = `event.imported = 1 AND NOT EXISTS (SELECT 1 FROM in_ev i WHERE i.id = event.id)`;
  c.keptLocal = await run.db.run(`UPDATE event SET imported = 0 WHERE ${gone} AND EXISTS (SELECT 1 FROM event_art a WHERE a.event = event.id AND a.imported = 0)`);
  // Their merged MBIDs go with them (ON DELETE CASCADE).
  c.removed = await run.db.run(`DELETE FROM event WHERE ${gone}`);
}

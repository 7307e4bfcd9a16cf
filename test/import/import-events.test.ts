/*
 * `sleeve import musicbrainz` with the Event Art Archive's tables (docs/import.md, "Events"):
 * read when the dump has them, applied as the release's are (added, changed, removed; local
 * rows kept), and answered at /event/… as eventartarchive.org does; a dump without them
 * leaves events as they are.
 */
import assert from 'node:assert/strict';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { generateDump } from '../../datagen/mbdump.js';
import { loadConfig } from '../../src/config/load.js';
import { cliOk, DIALECT, makeTestEnv, pollUntil, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { fetchState, readIndex, spawnCli, writeInput } from '../cover-art/cli-support.js';
import { E, EVENT_IMAGES, IMAGES, R, writeFixture } from './fixture.js';
import { dumpLines, query } from './support.js';

const ARCHIVE = 'https://archive.org/download';
const MB = 'https://mb.example.org';

function file(mbid: string, name: string): string {
  return `${ARCHIVE}/mbid-${mbid}/mbid-${mbid}-${name}`;
}

const EVENT_FILES = ['event_art_archive.art_type', 'event', 'event_gid_redirect', 'event_art_archive.event_art', 'event_art_archive.event_art_type'];

async function eventRows(t: TestEnv): Promise<unknown[][]> {
  const rows = await query(t, 'SELECT gid, name, imported FROM event ORDER BY id');
  return rows.map((r) => [r.gid, r.name, Number(r.imported)]);
}

async function eventArt(t: TestEnv): Promise<unknown[][]> {
  const rows = await query(t, 'SELECT a.id, e.gid, a.ordering, a.approved, a.comment, a.mime_type, a.imported FROM event_art a JOIN event e ON e.id = a.event ORDER BY a.id');
  return rows.map((r) => [Number(r.id), r.gid, Number(r.ordering), Number(r.approved), r.comment, r.mime_type, Number(r.imported)]);
}

describe(`sleeve import musicbrainz: the Event Art Archive's tables (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let dump: string;
  let summary: any;
  const get = (p: string) => fetchState(`${s.base}${p}`);

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0', SLEEVE_LISTING_FIELDS: 'caa' });
    dump = await writeFixture(path.join(t.dir, 'dump'), { events: true });
    summary = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
    s = await startServer(t, { SLEEVE_IMAGE_BASE_URL: ARCHIVE, SLEEVE_MUSICBRAINZ_URL: MB });
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('reads the event tables before the edit table and reports what it added', async () => {
    assert.equal(summary.rows_read, await dumpLines(dump));
    const files = summary.files.map((f: any) => f.file);
    assert.deepEqual(files.slice(-6), [...EVENT_FILES, 'edit']);
    // The event images' add-edits are kept with the cover art's.
    const edit = summary.files.find((f: any) => f.file === 'edit');
    assert.deepEqual([edit.rows, edit.staged], [13, 12]);
    const a = summary.applied;
    assert.deepEqual([a.event.added, a.event_art.added, a.event_art_type.added, a.event_gid_redirect.added, a.event_art_kind.changed], [3, 5, 4, 1, 1]);
    assert.deepEqual(a.omitted, {});
    // The releases as without the event tables.
    assert.deepEqual([a.release.added, a.cover_art.added], [7, 9]);
  });

  it('stores events and their images: names unescaped, approved from the add-edit', async () => {
    assert.deepEqual(await eventRows(t), [
      [E.one, 'Night\tOne', 1],
      [E.two, 'Two — Ünïcode', 1],
      [E.three, 'Three', 1],
    ]);
    assert.deepEqual(await eventArt(t), [
      [EVENT_IMAGES.e1Stage, E.one, 1, 1, 'the stage', 'image/jpeg', 1],
      [EVENT_IMAGES.e1Poster, E.one, 2, 1, '', 'image/png', 1],
      [EVENT_IMAGES.e1Pending, E.one, 3, 0, 'pending', 'image/jpeg', 1],
      [EVENT_IMAGES.e2Pdf, E.two, 1, 1, 'programme', 'application/pdf', 1],
      [EVENT_IMAGES.e2Poster, E.two, 2, 1, '', 'image/jpeg', 1],
    ]);
    const [kind] = await query(t, 'SELECT name, gid FROM event_art_kind WHERE id = 1');
    assert.deepEqual([kind?.name, kind?.gid], ['Poster', '1e6f9a0b-6a2d-3f5e-9d6c-0b1a2c3d4e5f']);
  });

  it('answers /event/… from the imported rows, with archive.org files and merged MBIDs', async () => {
    assert.deepEqual(await get(`/event/${E.one}/`), { status: 307, location: `${ARCHIVE}/mbid-${E.one}/index.json`, body: `See: ${ARCHIVE}/mbid-${E.one}/index.json\n` });
    assert.equal((await get(`/event/${E.one}/front`)).location, file(E.one, `${EVENT_IMAGES.e1Poster}.png`));
    assert.equal((await get(`/event/${E.one}/front-250`)).location, file(E.one, `${EVENT_IMAGES.e1Poster}_thumb250.jpg`));
    assert.equal((await get(`/event/${E.one}/${EVENT_IMAGES.e1Stage}-1200`)).location, file(E.one, `${EVENT_IMAGES.e1Stage}_thumb1200.jpg`));
    // The PDF Poster comes first, but a PDF is never an event's front.
    assert.equal((await get(`/event/${E.two}/front`)).location, file(E.two, `${EVENT_IMAGES.e2Poster}.jpg`));
    assert.equal((await get(`/event/${E.two}/${EVENT_IMAGES.e2Pdf}`)).location, file(E.two, `${EVENT_IMAGES.e2Pdf}.pdf`));
    assert.equal((await get(`/event/${E.oldOne}/front`)).location, file(E.one, `${EVENT_IMAGES.e1Poster}.png`));
    assert.equal((await get(`/event/${E.oldOne}/`)).location, `${ARCHIVE}/mbid-${E.one}/index.json`);
    const none = await get(`/event/${E.three}/`);
    assert.equal(none.status, 404);
    assert.match(none.body, new RegExp(`No artwork found for event ${E.three}`));
    const other = await get(`/event/${E.two}/${EVENT_IMAGES.e1Stage}`);
    assert.equal(other.status, 404);
    assert.match(other.body, new RegExp(`event image with id ${EVENT_IMAGES.e1Stage} not found`));
    // Releases answer as before.
    assert.equal((await get(`/release/${R.one}/front`)).location, file(R.one, `${IMAGES.r1Front}.jpg`));
  });

  it("writes the event's index.json with the link field \"event\"", async () => {
    const listing = await readIndex(t, E.one);
    assert.equal(listing.event, `${MB}/event/${E.one}`);
    assert.deepEqual(
      listing.images.map((i: any) => [i.id, i.front, i.approved, i.types, i.edit, i.image.endsWith(`/event/${E.one}/${i.id}.${i.id === String(EVENT_IMAGES.e1Poster) ? 'png' : 'jpg'}`)]),
      [
        [String(EVENT_IMAGES.e1Stage), false, true, [], 601, true],
        [String(EVENT_IMAGES.e1Poster), true, true, ['Poster'], 602, true],
        [String(EVENT_IMAGES.e1Pending), false, false, ['Poster'], 603, true],
      ],
    );
    assert.equal((await get(`/event/${E.two}/`)).status, 307);
    assert.deepEqual(
      (await readIndex(t, E.two)).images.map((i: any) => [i.id, i.front]),
      [
        [String(EVENT_IMAGES.e2Pdf), false],
        [String(EVENT_IMAGES.e2Poster), true],
      ],
    );
  });

  it('imports the same dump again without changes', async () => {
    const again = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
    for (const entity of ['event', 'event_art', 'event_art_type', 'event_gid_redirect', 'event_art_kind']) {
      assert.deepEqual([again.applied[entity].added, again.applied[entity].changed, again.applied[entity].removed], [0, 0, 0], entity);
    }
  });

  it('applies a later dump: changed, added and removed rows; local events and images kept', async () => {
    // Local: an event of its own, and an image uploaded here on imported event two.
    const LOCAL = 'e1e1e1e1-2222-4333-8444-0000000000aa';
    await cliOk(t.env, ['event', 'add', LOCAL, '--name', 'Local']);
    const jpeg = await writeInput(t, 'local.jpg', (await makeJpeg(300, 200)) as Buffer);
    const local = await cliOk(t.env, ['--json', 'art', 'add', E.two, jpeg]);
    await cliOk(t.env, ['--json', 'art', 'add', LOCAL, jpeg]);
    const later = await writeFixture(path.join(t.dir, 'dump2'), {
      events: true,
      meta: { timestamp: '2026-11-08 00:00:00.000000+00', replicationSequence: 170168 },
      edit: (tables) => {
        const ev = tables.event as any[][];
        ev.splice(2, 1); // event three is gone
        (ev[0] as any[])[2] = 'Night One, renamed';
        ev.push([4, 'e1e1e1e1-2222-4333-8444-000000000004', 'Four', null, null, null, null, null, null, null, null, 'f', null, '', 0, null, 'f']);
        const art = tables['event_art_archive.event_art'] as any[][];
        art.splice(2, 1); // the pending Poster is gone
        art.push([8201, 4, '', 605, 1, '2013-01-01 00:00:00+00', 0, 'image/gif', null, null, null, null]);
        tables['event_art_archive.event_art_type'] = [
          [EVENT_IMAGES.e1Stage, 1],
          [EVENT_IMAGES.e2Pdf, 1],
          [EVENT_IMAGES.e2Poster, 1],
          [8201, 1],
        ];
        tables.edit = [...(tables.edit ?? []), [605, 7, 158, 2, 0, '2013-01-01 00:00:00+00', '2013-01-01 00:00:00+00', '2013-01-01 00:00:00+00', null, 1]];
      },
    });
    const r = await cliOk(t.env, ['--json', 'import', 'musicbrainz', later]);
    const a = r.applied;
    // The local event had taken id 4, which the dump's new event has: moved to a fresh id.
    assert.deepEqual([a.event.added, a.event.changed, a.event.removed, a.event.moved], [1, 1, 1, 1]);
    assert.deepEqual([a.event_art.added, a.event_art.changed, a.event_art.removed], [1, 0, 1]);
    // The stage image became the Poster, the old Poster lost its type; the pending one went with its image.
    assert.deepEqual([a.event_art_type.added, a.event_art_type.removed], [2, 1]);
    const events = await eventRows(t);
    assert.deepEqual(events, [
      [E.one, 'Night One, renamed', 1],
      [E.two, 'Two — Ünïcode', 1],
      ['e1e1e1e1-2222-4333-8444-000000000004', 'Four', 1],
      [LOCAL, 'Local', 0],
    ]);
    assert.equal((await get(`/event/${LOCAL}/`)).status, 307);
    const art = await eventArt(t);
    assert.deepEqual(
      art.filter((row) => row[1] === E.two).map((row) => [row[0], row[2], row[6]]),
      [
        [EVENT_IMAGES.e2Pdf, 1, 1],
        [EVENT_IMAGES.e2Poster, 2, 1],
        [Number(local.id), 3, 0],
      ],
    );
    assert.deepEqual(await get(`/event/${E.one}/front`).then((x) => x.location), file(E.one, `${EVENT_IMAGES.e1Stage}.jpg`));
    assert.equal((await get(`/event/${E.one}/${EVENT_IMAGES.e1Pending}`)).status, 404);
    assert.equal((await get(`/event/${E.three}/`)).status, 404);
    assert.equal((await get(`/event/e1e1e1e1-2222-4333-8444-000000000004/front`)).location, file('e1e1e1e1-2222-4333-8444-000000000004', '8201.gif'));
    // The listing written before is due for rewriting (the indexer's sweep, as for releases).
    const [dirty] = await query(t, 'SELECT index_dirty FROM event WHERE gid = ?', [E.one]);
    assert.ok(Number(dirty?.index_dirty) > 0, 'its index.json is due for rewriting');
  });

  it('a dump without the event tables leaves events as they are', async () => {
    const before = [await eventRows(t), await eventArt(t)];
    const plain = await writeFixture(path.join(t.dir, 'dump3'), { meta: { timestamp: '2026-11-15 00:00:00.000000+00' } });
    const r = await cliOk(t.env, ['--json', 'import', 'musicbrainz', plain]);
    assert.equal(r.applied.event, undefined);
    assert.equal(r.files.length, 12);
    assert.deepEqual([await eventRows(t), await eventArt(t)], before);
    const human = await runCli(t.env, ['import', 'musicbrainz', plain]);
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /events: the dump has no event art archive tables/);
  });
});

describe(`sleeve import musicbrainz: event tables incomplete or generated (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => {
    await t?.cleanup();
  });

  it('refuses a dump with event_art but without its other event tables, naming them; nothing changes', async () => {
    const dump = await writeFixture(path.join(t.dir, 'partial'), { events: true });
    await rm(path.join(dump, 'mbdump', 'event_gid_redirect'));
    const r = await runCli(t.env, ['import', 'musicbrainz', dump]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /lacks mbdump\/event_gid_redirect; extract mbdump\.tar\.bz2 of the same dump there/);
    assert.deepEqual(await query(t, 'SELECT id FROM release'), []);
  });

  it('imports a generated dump with events, then its later variant', async () => {
    const first = await generateDump(path.join(t.dir, 'gen1'), { releases: 200, images: 300, events: 60, edits: true });
    const a = await cliOk(t.env, ['--json', 'import', 'musicbrainz', first.dir]);
    assert.equal(a.rows_read, first.total);
    assert.equal(a.applied.event.added, first.rows.event);
    assert.equal(a.applied.event_art.added, first.rows['event_art_archive.event_art']);
    assert.equal(a.applied.event_art_type.added, first.rows['event_art_archive.event_art_type']);
    assert.equal(a.applied.event_gid_redirect.added, first.rows.event_gid_redirect);
    assert.deepEqual(a.applied.omitted, {});
    // Every fortieth add-edit is open: those images are not approved.
    const [pending] = await query(t, 'SELECT count(*) AS n FROM event_art WHERE approved = 0');
    assert.ok(Number(pending?.n) > 0);
    const second = await generateDump(path.join(t.dir, 'gen2'), { releases: 200, images: 300, events: 60, edits: true, variant: 2 });
    const b = await cliOk(t.env, ['--json', 'import', 'musicbrainz', second.dir]);
    assert.ok(b.applied.event.removed > 0 && b.applied.event.added > 0 && b.applied.event.changed > 0, JSON.stringify(b.applied.event));
    assert.ok(b.applied.event_art.removed > 0, JSON.stringify(b.applied.event_art));
    const [events] = await query(t, 'SELECT count(*) AS n FROM event');
    assert.equal(Number(events?.n), second.rows.event);
    const [images] = await query(t, 'SELECT count(*) AS n FROM event_art');
    assert.equal(Number(images?.n), second.rows['event_art_archive.event_art']);
    // New uploads take ids past every imported image's.
    const [counter] = await query(t, `SELECT value FROM counter WHERE name = 'cover_art_id'`);
    const [top] = await query(t, 'SELECT max(id) AS m FROM event_art');
    assert.ok(Number(counter?.value) >= Number(top?.m));
  });
});

describe(`sleeve import musicbrainz: an interrupted import with events resumes (${DIALECT})`, () => {
  const envs: TestEnv[] = [];
  const CHUNK = ['--batch-rows', '200'];

  after(async () => {
    for (const t of envs) await t.cleanup();
  });

  async function eventState(t: TestEnv): Promise<string[][]> {
    const out: string[][] = [];
    for (const sql of [
      'SELECT id, gid, name, imported FROM event ORDER BY id',
      'SELECT gid, new_id FROM event_gid_redirect ORDER BY gid',
      'SELECT id, event, comment, edit, ordering, approved, mime_type, date_uploaded, filesize, imported FROM event_art ORDER BY id',
      'SELECT id, type_id FROM event_art_type ORDER BY id, type_id',
    ]) {
      out.push((await query(t, sql)).map((r) => JSON.stringify(Object.values(r).map((v) => (typeof v === 'bigint' ? Number(v) : v)))));
    }
    return out;
  }

  it('killed while staging event_art, it resumes and ends as an uninterrupted import', async () => {
    const reference = await makeTestEnv();
    envs.push(reference);
    const dump = await generateDump(path.join(reference.dir, 'gen'), { releases: 100, images: 150, events: 20_000, edits: true });
    await cliOk(reference.env, ['import', 'musicbrainz', dump.dir, ...CHUNK]);
    const expected = await eventState(reference);
    assert.equal(expected[0]?.length, dump.rows.event);

    const t = await makeTestEnv();
    envs.push(t);
    const first = spawnCli(t.env, ['import', 'musicbrainz', dump.dir, ...CHUNK]);
    // Once a chunk of the event images is committed, kill it without warning.
    const { value } = await pollUntil(() => stagedLines(t, 'event_art'), (lines) => lines > 0, 60_000, 5);
    assert.ok(value > 0);
    first.child.kill('SIGKILL');
    assert.equal((await first.done).signal, 'SIGKILL');
    assert.deepEqual(await query(t, 'SELECT id FROM event'), [], 'nothing applied');

    const second = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump.dir, ...CHUNK]);
    assert.equal(second.resumed, true);
    const art = second.files.find((f: any) => f.file === 'event_art_archive.event_art');
    assert.ok(art.already_staged === true || art.resumed_from_line > 1, JSON.stringify(art));
    assert.ok(second.rows_read < dump.total, `${second.rows_read} of ${dump.total}`);
    assert.deepEqual(await eventState(t), expected);
  });
});

/** Lines of a file committed to staging so far (0 before its staging starts). */
async function stagedLines(t: TestEnv, file: string): Promise<number> {
  try {
    const cfg = loadConfig(t.env).database;
    if (cfg.kind === 'sqlite') {
      const { default: Sqlite } = await import('better-sqlite3');
      const db = new Sqlite(`${cfg.file}.import-staging`, { fileMustExist: true, readonly: true });
      try {
        db.pragma('busy_timeout = 1000');
        const row = db.prepare('SELECT lines_done FROM progress WHERE file = ?').get(file) as { lines_done: number } | undefined;
        return row?.lines_done ?? 0;
      } finally {
        db.close();
      }
    }
    const rows = await query(t, 'SELECT lines_done FROM import_mb_progress WHERE file = ?', [file]);
    return Number(rows[0]?.lines_done ?? 0);
  } catch {
    return 0; // staging not made yet
  }
}

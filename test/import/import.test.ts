/*
 * `sleeve import musicbrainz` on a hand-made dump in the real format, then what
 * `sleeve serve` answers with archive.org as the image base: sleeve as a metadata
 * mirror of the real archive (docs/mirroring.md), answering as
 * coverartarchive.org does: archive.org file names with the real suffix, front and back,
 * the release chosen for a group, merged MBIDs resolved.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, pollUntil, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { fetchState, readIndex, storageTree } from '../cover-art/cli-support.js';
import { COMMENT, G, IMAGES, R, writeFixture } from './fixture.js';
import { dumpLines, query } from './support.js';

const ARCHIVE = 'https://archive.org/download';

function file(mbid: string, name: string): string {
  return `${ARCHIVE}/mbid-${mbid}/mbid-${mbid}-${name}`;
}

describe(`sleeve import musicbrainz: a mirror of the dump (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let dump: string;
  let summary: any;
  const get = (p: string) => fetchState(`${s.base}${p}`);

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    dump = await writeFixture(path.join(t.dir, 'dump'));
    summary = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
    s = await startServer(t, { SLEEVE_IMAGE_BASE_URL: ARCHIVE });
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('reports every row read and what it added', async () => {
    assert.equal(summary.rows_read, await dumpLines(dump));
    assert.equal(summary.rows_skipped, 0);
    assert.equal(summary.resumed, false);
    assert.equal(summary.dir, path.join(dump, 'mbdump'));
    assert.equal(summary.dump.timestamp, '2026-11-01 00:00:00.000000+00');
    assert.deepEqual(summary.files.map((f: any) => f.file), [
      'cover_art_archive.art_type',
      'cover_art_archive.image_type',
      'release_group',
      'release',
      'release_country',
      'release_unknown_country',
      'release_gid_redirect',
      'release_group_gid_redirect',
      'cover_art_archive.cover_art',
      'cover_art_archive.cover_art_type',
      'cover_art_archive.release_group_cover_art',
      'edit',
    ]);
    // The edit table is read whole but only the image add-edits are kept.
    const edit = summary.files.find((f: any) => f.file === 'edit');
    assert.deepEqual([edit.rows, edit.staged], [8, 7]);
    const a = summary.applied;
    assert.deepEqual([a.release.added, a.release_group.added, a.cover_art.added, a.cover_art_type.added], [7, 3, 9, 11]);
    assert.deepEqual([a.release_gid_redirect.added, a.release_group_gid_redirect.added, a.release_group_cover_art.added], [1, 1, 1]);
    assert.equal(a.approvedFrom, 'edit');
    assert.deepEqual(a.omitted, {});
  });

  it('answers a release listing with a 307 to the archive.org index.json', async () => {
    assert.deepEqual(await get(`/release/${R.one}/`), {
      status: 307,
      location: `${ARCHIVE}/mbid-${R.one}/index.json`,
      body: `See: ${ARCHIVE}/mbid-${R.one}/index.json\n`,
    });
  });

  it('redirects front, back, ids and thumbnails to archive.org files with their real suffix', async () => {
    const loc = async (p: string) => (await get(p)).location;
    assert.equal(await loc(`/release/${R.one}/front`), file(R.one, `${IMAGES.r1Front}.jpg`));
    assert.equal(await loc(`/release/${R.one}/front-250`), file(R.one, `${IMAGES.r1Front}_thumb250.jpg`));
    // The back is a PNG, whatever the request's extension says; thumbnails are always JPEG.
    assert.equal(await loc(`/release/${R.one}/back.jpg`), file(R.one, `${IMAGES.r1Back}.png`));
    assert.equal(await loc(`/release/${R.one}/back-1200`), file(R.one, `${IMAGES.r1Back}_thumb1200.jpg`));
    // The second Front (higher ordering) is reachable by id only.
    assert.equal(await loc(`/release/${R.one}/${IMAGES.r1SecondFront}`), file(R.one, `${IMAGES.r1SecondFront}.jpg`));
    assert.equal(await loc(`/release/${R.seven}/front`), file(R.seven, `${IMAGES.r7Front}.gif`));
    assert.equal((await get(`/release/${R.three}/front`)).status, 404);
    assert.equal(await loc(`/release/${R.three}/back`), file(R.three, `${IMAGES.r3Back}.jpg`));
    assert.equal((await get(`/release/${R.one}/${IMAGES.r3Back}`)).status, 404);
  });

  it('resolves a merged release MBID to the release it was merged into', async () => {
    assert.equal((await get(`/release/${R.oldOne}/front`)).location, file(R.one, `${IMAGES.r1Front}.jpg`));
    assert.equal((await get(`/release/${R.oldOne}/`)).location, `${ARCHIVE}/mbid-${R.one}/index.json`);
  });

  it('lists a release group as the chosen release’s images, values unescaped', async () => {
    const res = await get(`/release-group/${G.one}/`);
    assert.equal(res.status, 200);
    const listing = JSON.parse(res.body);
    const prefix = `${s.base}/release/${R.one}/`;
    const thumbs = (id: number) => ({
      '1200': `${prefix}${id}-1200.jpg`,
      '250': `${prefix}${id}-250.jpg`,
      '500': `${prefix}${id}-500.jpg`,
      large: `${prefix}${id}-500.jpg`,
      small: `${prefix}${id}-250.jpg`,
    });
    assert.deepEqual(listing, {
      images: [
        // approved: the add-edit is closed; not approved: still open (502).
        { approved: true, back: false, comment: COMMENT, edit: 501, front: true, id: String(IMAGES.r1Front), image: `${prefix}${IMAGES.r1Front}.jpg`, thumbnails: thumbs(IMAGES.r1Front), types: ['Front'] },
        { approved: false, back: true, comment: '', edit: 502, front: false, id: String(IMAGES.r1Back), image: `${prefix}${IMAGES.r1Back}.png`, thumbnails: thumbs(IMAGES.r1Back), types: ['Back', 'Booklet'] },
        { approved: true, back: false, comment: 'second front', edit: 501, front: false, id: String(IMAGES.r1SecondFront), image: `${prefix}${IMAGES.r1SecondFront}.jpg`, thumbnails: thumbs(IMAGES.r1SecondFront), types: ['Front'] },
      ],
      release: `https://musicbrainz.org/release/${R.one}`,
    });
  });

  it('chooses a group’s release as the real service does: editor’s choice, then not Raw/Unedited, then earliest event', async () => {
    // Group one: 1980 has no front, 1990's front is Raw/Unedited, so 2000.
    assert.equal((await get(`/release-group/${G.one}/front`)).location, file(R.one, `${IMAGES.r1Front}.jpg`));
    // Group two: the editor chose the 2005 release over 1999; its front is a PDF.
    assert.equal((await get(`/release-group/${G.two}/front`)).location, file(R.five, `${IMAGES.r5PdfFront}.pdf`));
    assert.equal((await get(`/release-group/${G.two}/front-500`)).location, file(R.five, `${IMAGES.r5PdfFront}_thumb500.jpg`));
    // Group three: 2001-06 (an unknown-country event) beats 2001-07-01; 2001 without a month ranks after both.
    assert.equal((await get(`/release-group/${G.three}/front`)).location, file(R.six, `${IMAGES.r6Front}.jpg`));
    // A merged group MBID works as the group.
    assert.equal((await get(`/release-group/${G.oldTwo}/front`)).location, file(R.five, `${IMAGES.r5PdfFront}.pdf`));
  });

  it('stores names unescaped, release dates from the earliest event, and pending edits as not approved', async () => {
    const rows = await query(t, 'SELECT gid, name, date_year, date_month, date_day, imported FROM release ORDER BY id');
    assert.deepEqual(
      rows.map((r) => [r.gid, r.name, r.date_year, r.date_month, r.date_day, Number(r.imported)]),
      [
        [R.one, 'One\twith\ttabs and \\ and \n', 2000, 5, null, 1],
        [R.two, 'Two', 1990, null, null, 1],
        [R.three, 'Three', 1980, 1, 1, 1],
        [R.four, 'Four', 1999, 12, 31, 1],
        [R.five, 'Five', 2005, null, null, 1],
        [R.six, 'Six — Ünïcode', 2001, 6, null, 1],
        [R.seven, 'Seven', null, null, null, 1],
      ],
    );
    assert.deepEqual((await query(t, 'SELECT name FROM release_group ORDER BY id')).map((r) => r.name), ['Group One', 'Group \\ Two\tTabbed', 'Group Three']);
    const approved = await query(t, 'SELECT id, approved FROM cover_art ORDER BY id');
    assert.deepEqual(
      approved.map((r) => [Number(r.id), Number(r.approved)]),
      [
        [IMAGES.r1Front, 1],
        [IMAGES.r1Back, 0],
        [IMAGES.r1SecondFront, 1],
        [IMAGES.r2RawFront, 1],
        [IMAGES.r3Back, 1],
        [IMAGES.r4Front, 1],
        // Its add-edit is missing from the edit table.
        [IMAGES.r5PdfFront, 0],
        [IMAGES.r6Front, 1],
        [IMAGES.r7Front, 1],
      ],
    );
    const [img] = await query(t, 'SELECT date_uploaded, filesize, thumb_250_filesize FROM cover_art WHERE id = ?', [IMAGES.r1Front]);
    assert.deepEqual([Number(img?.date_uploaded), Number(img?.filesize), Number(img?.thumb_250_filesize)], [Date.UTC(2012, 0, 26, 0, 54, 5, 519), 123456, 2000]);
  });

  it('keeps new uploads’ ids past the imported ones and records the run', async () => {
    const [counter] = await query(t, `SELECT value FROM counter WHERE name = 'cover_art_id'`);
    assert.ok(Number(counter?.value) >= IMAGES.r7Front);
    const runs = await query(t, 'SELECT status, rows_read, rows_skipped, dump_timestamp, replication_sequence, finished_at, details FROM import_run ORDER BY id');
    assert.equal(runs.length, 1);
    const run = runs[0] as any;
    assert.deepEqual([run.status, Number(run.rows_read), Number(run.rows_skipped), run.dump_timestamp, Number(run.replication_sequence)], ['succeeded', summary.rows_read, 0, '2026-11-01 00:00:00.000000+00', 170000]);
    assert.ok(Number(run.finished_at) > 0);
    assert.equal(JSON.parse(run.details).applied.release.added, 7);
  });

  it('imports the same dump again without changes, given mbdump/ itself, and tells serving processes', async () => {
    const [before] = await query(t, `SELECT value FROM counter WHERE name = 'catalogue_version'`);
    const again = await cliOk(t.env, ['--json', 'import', 'musicbrainz', path.join(dump, 'mbdump')]);
    for (const entity of ['release', 'release_group', 'cover_art', 'cover_art_type', 'release_gid_redirect', 'release_group_cover_art']) {
      assert.deepEqual([again.applied[entity].added, again.applied[entity].changed, again.applied[entity].removed], [0, 0, 0], entity);
    }
    assert.equal(again.dump.timestamp, '2026-11-01 00:00:00.000000+00');
    const [now] = await query(t, `SELECT value FROM counter WHERE name = 'catalogue_version'`);
    assert.equal(Number(now?.value), Number(before?.value) + 1);
  });

  it('writes no files itself; listings are written when asked for, as `sleeve art reindex` writes them', async () => {
    // Only the listings the requests above asked for (written before their redirect), never an image.
    const keys = Object.keys(await storageTree(t)).filter((k) => !k.endsWith('/') && !k.startsWith('.tmp/'));
    assert.ok(keys.length > 0);
    assert.deepEqual(keys.filter((k) => !k.endsWith('/index.json')), []);
    const onDemand = await readIndex(t, R.one);
    await cliOk(t.env, ['art', 'reindex', R.one]);
    assert.deepEqual(await readIndex(t, R.one), onDemand);
    const index = await readIndex(t, R.one);
    assert.deepEqual(index, JSON.parse((await get(`/release-group/${G.one}/`)).body));
  });
});

describe(`sleeve import musicbrainz without the edit table (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });
  after(async () => {
    await t?.cleanup();
  });

  it('decides approved from edits_pending', async () => {
    const dump = await writeFixture(path.join(t.dir, 'dump'), { edits: false });
    const summary = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
    assert.equal(summary.applied.approvedFrom, 'edits_pending');
    assert.equal(summary.files.length, 11);
    const rows = await query(t, 'SELECT id, approved FROM cover_art WHERE id IN (?, ?, ?) ORDER BY id', [IMAGES.r1Front, IMAGES.r1Back, IMAGES.r5PdfFront]);
    assert.deepEqual(
      rows.map((r) => [Number(r.id), Number(r.approved)]),
      [
        [IMAGES.r1Front, 1],
        // edits_pending 1: its add-edit is still open.
        [IMAGES.r1Back, 0],
        [IMAGES.r5PdfFront, 1],
      ],
    );
  });
});

describe(`sleeve import musicbrainz under a running server (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;

  before(async () => {
    // The response cache on (its default), so the server must notice the import to answer anew.
    t = await makeTestEnv({ SLEEVE_CHANGE_POLL_MS: '50' });
    s = await startServer(t, { SLEEVE_IMAGE_BASE_URL: ARCHIVE });
  });
  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('answers from the imported catalogue without a restart', async () => {
    const front = `${s.base}/release/${R.one}/front`;
    assert.equal((await fetchState(front)).status, 404);
    assert.equal((await fetchState(front)).status, 404);
    await cliOk(t.env, ['import', 'musicbrainz', await writeFixture(path.join(t.dir, 'dump'))]);
    const { value } = await pollUntil(() => fetchState(front), (r) => r.status === 307, 5000);
    assert.equal(value.location, file(R.one, `${IMAGES.r1Front}.jpg`));
  });
});

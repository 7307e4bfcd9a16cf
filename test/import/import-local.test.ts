/*
 * An import into a sleeve that already has releases and images of its own, then the
 * import of a later dump: what the dump holds ends up as the dump says; what was made
 * here stays, moved aside when the dump needs its ids.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import type { Value } from '../../datagen/mbdump.js';
import { dbImageIds, fetchState, newMbid, writeInput } from '../cover-art/cli-support.js';
import { G, IMAGES, R, writeFixture } from './fixture.js';
import { query } from './support.js';

const TS = '2013-05-05 05:05:05+00';
const HUGE_ID = 90_000_000_000_000;

describe(`sleeve import musicbrainz with local rows, and a later dump (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const local = newMbid();
  const localMerged = newMbid();
  const localGroup = newMbid();
  const otherGroup = newMbid();
  const eight = 'a0a0a0a0-1111-4111-8111-000000000008';
  let localImage: string;
  let adoptedImage: string;
  let first: any;
  const get = (p: string) => fetchState(`${s.base}${p}`);
  /** Follows a redirect to sleeve's own file server: the file must be there. */
  const served = async (p: string) => {
    const r = await get(p);
    if (r.status !== 307 || r.location === null) return r.status;
    return (await fetch(r.location)).status;
  };

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    s = await startServer(t);
    const jpeg = await makeJpeg(300, 300);
    // Made here before any import: on both databases these take ids 1, 2, … which the dump uses too.
    await cliOk(t.env, ['release', 'add', local, '--release-group', localGroup, '--title', 'Local']);
    await cliOk(t.env, ['release', 'add', localMerged, '--release-group', localGroup]);
    // A release of the dump, added here by hand under another group, with an image uploaded here.
    await cliOk(t.env, ['release', 'add', R.two, '--release-group', otherGroup, '--title', 'added here']);
    await cliOk(t.env, ['release', 'merge', localMerged, local]);
    localImage = (await cliOk(t.env, ['--json', 'art', 'add', local, await writeInput(t, 'a.jpg', jpeg), '--type', 'Front'])).id;
    adoptedImage = (await cliOk(t.env, ['--json', 'art', 'add', R.two, await writeInput(t, 'b.jpg', jpeg), '--type', 'Back', '--comment', 'uploaded here'])).id;
    const dump = await writeFixture(path.join(t.dir, 'dump1'), {
      edit: (tables) => {
        // An image id beyond the formula's present value: new uploads must still come after it.
        (tables['cover_art_archive.cover_art'] as Value[][]).push([HUGE_ID, 7, '', 508, 2, TS, 0, 'image/jpeg', null, null, null, null]);
      },
    });
    first = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('moves local rows off the ids the dump uses and takes over the local release with a dump MBID', async () => {
    assert.equal(first.applied.release.moved, 3);
    assert.equal(first.applied.release_group.moved, 2);
    const rows = await query(t, 'SELECT r.id, r.gid, r.imported, r.name, g.gid AS grp FROM release r JOIN release_group g ON g.id = r.release_group ORDER BY r.id');
    const byGid = new Map(rows.map((r) => [r.gid, r]));
    // The dump's ids are MusicBrainz's.
    assert.deepEqual(
      [R.one, R.two, R.three, R.four, R.five, R.six, R.seven].map((g) => Number(byGid.get(g)?.id)),
      [1, 2, 3, 4, 5, 6, 7],
    );
    // R.two now is the dump's release (its group and name), imported.
    assert.deepEqual([byGid.get(R.two)?.grp, byGid.get(R.two)?.name, Number(byGid.get(R.two)?.imported)], [G.one, 'Two', 1]);
    // The local release kept its MBID, group and name under a new id.
    const mine = byGid.get(local);
    assert.ok(Number(mine?.id) > 7);
    assert.deepEqual([mine?.grp, mine?.name, Number(mine?.imported)], [localGroup, 'Local', 0]);
  });

  it('still serves what was made here: local releases, their files, local merges', async () => {
    assert.equal(await served(`/release/${local}/front`), 200);
    assert.equal(await served(`/release/${local}/${localImage}-250`), 200);
    assert.equal((await get(`/release/${localMerged}/front`)).location, (await get(`/release/${local}/front`)).location);
  });

  it('keeps an image uploaded here on a release of the dump, after the dump’s images', async () => {
    assert.deepEqual(await dbImageIds(t, R.two), [String(IMAGES.r2RawFront), adoptedImage]);
    assert.equal(await served(`/release/${R.two}/back`), 200);
    const [row] = await query(t, 'SELECT index_dirty FROM release WHERE gid = ?', [R.two]);
    assert.ok(Number(row?.index_dirty) > 0, 'its index.json (in sleeve’s store) is due for rewriting');
  });

  it('lets sleeve add releases and images after the import, past every imported id', async () => {
    const fresh = newMbid();
    await cliOk(t.env, ['release', 'add', fresh, '--release-group', G.one]);
    const [row] = await query(t, 'SELECT id FROM release WHERE gid = ?', [fresh]);
    assert.ok(Number(row?.id) > 7);
    const image = await cliOk(t.env, ['--json', 'art', 'add', fresh, await writeInput(t, 'c.jpg', await makeJpeg(200, 200)), '--type', 'Front']);
    assert.equal(image.id, String(HUGE_ID + 1));
  });

  describe('a later dump', () => {
    let second: any;

    before(async () => {
      const dump = await writeFixture(path.join(t.dir, 'dump2'), {
        meta: { timestamp: '2026-11-08 00:00:00.000000+00', replicationSequence: 170168 },
        edit: (tables) => {
          const cut = (file: string, keep: (row: Value[]) => boolean) => {
            tables[file] = (tables[file] as Value[][]).filter(keep);
          };
          // R.seven is gone, with its images.
          cut('release', (r) => r[0] !== 7);
          cut('cover_art_archive.cover_art', (r) => r[1] !== 7);
          cut('cover_art_archive.cover_art_type', (r) => r[0] !== IMAGES.r7Front);
          // R.two is gone too, but an image uploaded here hangs on it.
          cut('release', (r) => r[0] !== 2);
          cut('release_country', (r) => r[0] !== 2);
          cut('cover_art_archive.cover_art', (r) => r[1] !== 2);
          cut('cover_art_archive.cover_art_type', (r) => r[0] !== IMAGES.r2RawFront);
          // R.three was merged into R.one: its image moved there, its MBID redirects.
          cut('release', (r) => r[0] !== 3);
          cut('release_country', (r) => r[0] !== 3);
          for (const r of tables['cover_art_archive.cover_art'] as Value[][]) if (r[0] === IMAGES.r3Back) [r[1], r[4]] = [1, 4];
          (tables.release_gid_redirect as Value[][]).push([R.three, 1, TS]);
          // Renamed, re-commented, a new release that is now group three's earliest.
          for (const r of tables.release as Value[][]) if (r[0] === 4) r[2] = 'Four (remastered)';
          for (const r of tables['cover_art_archive.cover_art'] as Value[][]) if (r[0] === IMAGES.r1SecondFront) r[2] = 'inlay';
          (tables.release as Value[][]).push([8, eight, 'Eight', 1, 3, null, null, null, null, null, '', 0, -1, TS]);
          (tables.release_country as Value[][]).push([8, 221, 1970, null, null]);
          (tables['cover_art_archive.cover_art'] as Value[][]).push([8001, 8, '', 509, 1, TS, 0, 'image/jpeg', null, null, null, null]);
          (tables['cover_art_archive.cover_art_type'] as Value[][]).push([8001, 1]);
          // The editor's choice for group two is withdrawn.
          tables['cover_art_archive.release_group_cover_art'] = [];
          // A dump image whose id an image uploaded here has.
          (tables['cover_art_archive.cover_art'] as Value[][]).push([Number(localImage), 4, '', 510, 2, TS, 0, 'image/jpeg', null, null, null, null]);
        },
      });
      second = await cliOk(t.env, ['--json', 'import', 'musicbrainz', dump]);
    });

    it('reports what changed', () => {
      const a = second.applied;
      assert.deepEqual([a.release.added, a.release.changed, a.release.removed, a.release.keptLocal], [1, 1, 2, 1]);
      // 7001 and the huge one went with R.seven, 2001 with R.two; 3001 moved; 1003 re-commented; 8001 is new.
      assert.deepEqual([a.cover_art.added, a.cover_art.changed, a.cover_art.removed], [1, 2, 3]);
      assert.deepEqual([a.release_gid_redirect.added, a.release_group_cover_art.removed], [1, 1]);
      assert.deepEqual(a.omitted['cover_art: id taken by an image uploaded to this sleeve'], { count: 1, examples: [localImage] });
      assert.equal(second.dump.timestamp, '2026-11-08 00:00:00.000000+00');
    });

    it('serves the later dump', async () => {
      assert.equal((await get(`/release/${R.seven}/front`)).status, 404);
      assert.equal((await get(`/release/${R.three}/${IMAGES.r3Back}`)).location, `${s.base}/download/mbid-${R.one}/mbid-${R.one}-${IMAGES.r3Back}.jpg`);
      assert.equal((await get(`/release-group/${G.three}/front`)).location, `${s.base}/download/mbid-${eight}/mbid-${eight}-8001.jpg`);
      assert.equal((await get(`/release-group/${G.two}/front`)).location, `${s.base}/download/mbid-${R.four}/mbid-${R.four}-${IMAGES.r4Front}.jpg`);
      const listing = JSON.parse((await get(`/release-group/${G.one}/`)).body);
      assert.deepEqual(
        listing.images.map((i: any) => [i.id, i.comment]),
        [
          [String(IMAGES.r1Front), listing.images[0].comment],
          [String(IMAGES.r1Back), ''],
          [String(IMAGES.r1SecondFront), 'inlay'],
          [String(IMAGES.r3Back), ''],
        ],
      );
      const [four] = await query(t, 'SELECT name FROM release WHERE id = 4');
      assert.equal(four?.name, 'Four (remastered)');
    });

    it('keeps what was made here, and a release of the old dump that carries an image uploaded here', async () => {
      assert.equal(await served(`/release/${local}/front`), 200);
      assert.deepEqual(await dbImageIds(t, local), [localImage]);
      const [two] = await query(t, 'SELECT imported FROM release WHERE gid = ?', [R.two]);
      assert.equal(Number(two?.imported), 0);
      assert.deepEqual(await dbImageIds(t, R.two), [adoptedImage]);
      assert.equal(await served(`/release/${R.two}/back`), 200);
    });
  });
});

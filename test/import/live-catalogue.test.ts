/*
 * The mirror's live database as the catalogue (docs/mirror-database.md): a PostgreSQL database
 * with MusicBrainz's own tables (test/helpers/musicbrainz-db.ts), read by `sleeve serve` with
 * SLEEVE_MUSICBRAINZ_DATABASE_URL. Its answers must be those of `sleeve import musicbrainz` of
 * the same rows, at the start and after changes applied as replication applies them (plain SQL
 * in transactions), each seen without a restart.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import type { MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { G, IMAGES, R } from './fixture.js';
import { answer, ids, listingOf, SEEN_MS, startLivePair, type Answer, type LivePair } from './live-support.js';

const RELEASES = [...Object.values(R), 'a0a0a0a0-1111-4111-8111-000000000008', 'a0a0a0a0-1111-4111-8111-000000000009'];
const GROUPS = [...Object.values(G), '1b3bd7b8-6a7c-4c2c-9d5c-000000000004'];

/** Every answer the catalogue gives for the fixture's releases and groups. */
async function everything(base: string): Promise<Record<string, Answer>> {
  const out: Record<string, Answer> = {};
  for (const m of RELEASES) for (const p of ['', 'front', 'back', 'front-250']) out[`/release/${m}/${p}`] = await answer(base, `/release/${m}/${p}`);
  for (const g of GROUPS) for (const p of ['', 'front']) out[`/release-group/${g}/${p}`] = await answer(base, `/release-group/${g}/${p}`);
  return out;
}

const listing = (base: string, mbid: string): Promise<any> => listingOf(base, 'release', mbid);

describe(`the mirror's live database as the catalogue (${DIALECT})`, () => {
  let pair: LivePair;
  let imported: TestEnv;
  let live: TestEnv;
  let mirror: MirrorDb;
  let importedServer: RunningServer;
  let liveServer: RunningServer;
  const logs: string[] = [];

  before(async () => {
    pair = await startLivePair({ events: false, logs });
    ({ imported, live, mirror, importedServer, liveServer } = pair);
  });

  after(async () => {
    await pair?.close();
  });

  it('answers as the import of the same rows answers', async () => {
    assert.deepEqual(await everything(liveServer.base), await everything(importedServer.base));
    // Not vacuous: the listings are there, with the fixture's images.
    assert.deepEqual(ids(await listing(liveServer.base, R.one)), [IMAGES.r1Front, IMAGES.r1Back, IMAGES.r1SecondFront]);
  });

  it("refuses the commands that change releases and groups: they change in the mirror's database", async () => {
    const before = await everything(liveServer.base);
    for (const args of [
      ['release', 'add', 'a0a0a0a0-1111-4111-8111-0000000000aa', '--release-group', G.one],
      ['release', 'merge', R.two, R.one],
      ['release-group', 'set-cover', G.one, R.two],
      ['import', 'musicbrainz', path.join(imported.dir, 'dump')],
    ]) {
      const r = await runCli(live.env, args);
      assert.equal(r.code, 2, `${args.join(' ')}: ${r.stderr}`);
      assert.match(r.stderr, /the catalogue is the mirror's database \(SLEEVE_MUSICBRAINZ_DATABASE_URL\)/);
      assert.ok(!r.stderr.includes('    at '), 'one line, no stack');
    }
    assert.deepEqual(await everything(liveServer.base), before);
  });

  it('sees an image added, with its edit still open (not approved)', async () => {
    await mirror.apply(
      `INSERT INTO musicbrainz.edit VALUES (510, 7, 314, 1, 0, now(), NULL, now() + interval '7 days', NULL, 1)`,
      `INSERT INTO cover_art_archive.cover_art VALUES (4002, 4, 'added', 510, 2, now(), 1, 'image/png', 1000, NULL, NULL, NULL)`,
      `INSERT INTO cover_art_archive.cover_art_type VALUES (4002, 2)`,
    );
    const l = await waitFor(async () => {
      const x = await listing(liveServer.base, R.four);
      return ids(x).includes(4002) ? x : undefined;
    }, { timeoutMs: SEEN_MS, what: 'image 4002 in the listing' });
    const added = l.images.find((i: any) => Number(i.id) === 4002);
    assert.equal(added.approved, false);
    assert.deepEqual(added.types, ['Back']);
    assert.equal(added.comment, 'added');
  });

  it('sees the edit applied: the image becomes approved', async () => {
    // Only the edit row changes, as when the edit closes and nothing else about the image does.
    await mirror.apply(`UPDATE musicbrainz.edit SET status = 2, close_time = now() WHERE id = 510`);
    await waitFor(async () => (await listing(liveServer.base, R.four))?.images?.find((i: any) => Number(i.id) === 4002)?.approved === true, {
      timeoutMs: SEEN_MS,
      what: 'image 4002 approved',
    });
  });

  it("sees an image's types and comment changed", async () => {
    await mirror.apply(
      `UPDATE cover_art_archive.cover_art SET comment = 'booklet page' WHERE id = 4002`,
      `DELETE FROM cover_art_archive.cover_art_type WHERE id = 4002`,
      `INSERT INTO cover_art_archive.cover_art_type VALUES (4002, 3), (4002, 8)`,
    );
    const image = await waitFor(async () => {
      const i = (await listing(liveServer.base, R.four))?.images?.find((x: any) => Number(x.id) === 4002);
      return i?.comment === 'booklet page' ? i : undefined;
    }, { timeoutMs: SEEN_MS, what: 'the new comment' });
    assert.deepEqual(image.types, ['Booklet', 'Other']);
  });

  it('sees images reordered', async () => {
    await mirror.apply(
      `UPDATE cover_art_archive.cover_art SET ordering = 1 WHERE id = ${IMAGES.r1SecondFront}`,
      `UPDATE cover_art_archive.cover_art SET ordering = 2 WHERE id = ${IMAGES.r1Front}`,
      `UPDATE cover_art_archive.cover_art SET ordering = 3 WHERE id = ${IMAGES.r1Back}`,
    );
    await waitFor(async () => JSON.stringify(ids(await listing(liveServer.base, R.one))) === JSON.stringify([IMAGES.r1SecondFront, IMAGES.r1Front, IMAGES.r1Back]), {
      timeoutMs: SEEN_MS,
      what: 'the new order',
    });
    // The front is now the first image typed Front.
    const front = await answer(liveServer.base, `/release/${R.one}/front`);
    assert.match(front.location ?? '', new RegExp(`-${IMAGES.r1SecondFront}\\.jpg$`));
  });

  it('sees an image removed (a row deleted: found without an xmin)', async () => {
    await mirror.apply(`DELETE FROM cover_art_archive.cover_art WHERE id = ${IMAGES.r1Back}`);
    await waitFor(async () => JSON.stringify(ids(await listing(liveServer.base, R.one))) === JSON.stringify([IMAGES.r1SecondFront, IMAGES.r1Front]), {
      timeoutMs: SEEN_MS,
      what: 'image 1002 gone',
    });
    assert.equal((await answer(liveServer.base, `/release/${R.one}/${IMAGES.r1Back}`)).status, 404);
  });

  it('sees a release merged into another, with its gid redirect', async () => {
    await mirror.apply(
      `UPDATE cover_art_archive.cover_art SET release = 6, ordering = 2 WHERE release = 7`,
      `UPDATE musicbrainz.release_gid_redirect SET new_id = 6 WHERE new_id = 7`,
      `INSERT INTO musicbrainz.release_gid_redirect (gid, new_id) VALUES ('${R.seven}', 6)`,
      `DELETE FROM musicbrainz.release_country WHERE release = 7`,
      `DELETE FROM musicbrainz.release_unknown_country WHERE release = 7`,
      `DELETE FROM musicbrainz.release WHERE id = 7`,
    );
    // (The listing is rewritten just after the change commits: wait for all of it.)
    const merged = await waitFor(async () => {
      const l = await listing(liveServer.base, R.seven);
      return l?.release?.endsWith(R.six) === true && ids(l).includes(IMAGES.r7Front) ? l : undefined;
    }, { timeoutMs: SEEN_MS, what: 'the old MBID answering with the release it was merged into, with its images' });
    assert.deepEqual(ids(merged), [IMAGES.r6Front, IMAGES.r7Front]);
    assert.deepEqual(ids(await listing(liveServer.base, R.six)), [IMAGES.r6Front, IMAGES.r7Front]);
  });

  it("sees a release group's cover chosen", async () => {
    // Release two's front is Raw/Unedited: release one represents the group until an editor chooses two.
    const before = await answer(liveServer.base, `/release-group/${G.one}/`);
    assert.ok((before.body as any)?.release?.endsWith(R.one));
    await mirror.apply(`INSERT INTO cover_art_archive.release_group_cover_art VALUES (1, 2)`);
    await waitFor(async () => {
      const a = await answer(liveServer.base, `/release-group/${G.one}/`);
      return (a.body as any)?.release?.endsWith(R.two) === true;
    }, { timeoutMs: SEEN_MS, what: 'group one showing release two' });
  });

  it("sees a release's earliest event deleted (the release group's choice moves)", async () => {
    const G4 = '1b3bd7b8-6a7c-4c2c-9d5c-000000000004';
    const R8 = 'a0a0a0a0-1111-4111-8111-000000000008';
    const R9 = 'a0a0a0a0-1111-4111-8111-000000000009';
    await mirror.apply(
      `INSERT INTO musicbrainz.release_group VALUES (4, '${G4}', 'Group Four', 1, NULL, '', 0, now())`,
      `INSERT INTO musicbrainz.release VALUES (8, '${R8}', 'Eight', 1, 4, NULL, NULL, NULL, NULL, NULL, '', 0, -1, now()), (9, '${R9}', 'Nine', 1, 4, NULL, NULL, NULL, NULL, NULL, '', 0, -1, now())`,
      `INSERT INTO musicbrainz.release_country VALUES (8, 221, 2010, NULL, NULL), (9, 221, 2005, NULL, NULL)`,
      `INSERT INTO musicbrainz.release_unknown_country VALUES (9, 2012, NULL, NULL)`,
      `INSERT INTO cover_art_archive.cover_art VALUES (8001, 8, '', 501, 1, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL), (9001, 9, '', 501, 1, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL)`,
      `INSERT INTO cover_art_archive.cover_art_type VALUES (8001, 1), (9001, 1)`,
    );
    const groupRelease = async () => ((await answer(liveServer.base, `/release-group/${G4}/`)).body as any)?.release as string | undefined;
    // Nine (2005) is earlier than eight (2010).
    await waitFor(async () => (await groupRelease())?.endsWith(R9), { timeoutMs: SEEN_MS, what: 'group four showing release nine' });
    // Only a row deleted: nine's earliest event is now 2012.
    await mirror.apply(`DELETE FROM musicbrainz.release_country WHERE release = 9`);
    await waitFor(async () => (await groupRelease())?.endsWith(R8), { timeoutMs: SEEN_MS, what: 'group four showing release eight' });
  });

  it("sees a release event deleted in the same transaction as another release's is added in its range of ids", async () => {
    const G4 = '1b3bd7b8-6a7c-4c2c-9d5c-000000000004';
    const R8 = 'a0a0a0a0-1111-4111-8111-000000000008';
    const R9 = 'a0a0a0a0-1111-4111-8111-000000000009';
    const dates = async () => {
      const list = (await cliOk(live.env, ['--json', 'release', 'list'])) as { releases: { mbid: string; date: string | null }[] };
      return Object.fromEntries(list.releases.filter((r) => r.mbid === R8 || r.mbid === R9).map((r) => [r.mbid, r.date]));
    };
    assert.deepEqual(await dates(), { [R8]: '2010', [R9]: '2012' });
    // Eight and nine are in one range of release ids, whose count of release_country rows stays 1:
    // eight's only event goes (no date now), nine gains 2011 (earlier than its 2012).
    await mirror.apply(`DELETE FROM musicbrainz.release_country WHERE release = 8`, `INSERT INTO musicbrainz.release_country VALUES (9, 81, 2011, NULL, NULL)`);
    // Nine (2011) now comes before eight (no date): only so once eight's deletion is seen.
    await waitFor(async () => ((await answer(liveServer.base, `/release-group/${G4}/`)).body as any)?.release?.endsWith(R9), {
      timeoutMs: SEEN_MS,
      what: 'group four showing release nine',
    });
    assert.deepEqual(await dates(), { [R8]: null, [R9]: '2011' });
  });

  it('sees a release removed', async () => {
    assert.equal((await answer(liveServer.base, `/release/${R.five}/`)).status, 307);
    await mirror.apply(
      `DELETE FROM cover_art_archive.release_group_cover_art WHERE release = 5`,
      `DELETE FROM cover_art_archive.cover_art WHERE release = 5`,
      `DELETE FROM musicbrainz.release_unknown_country WHERE release = 5`,
      `DELETE FROM musicbrainz.release WHERE id = 5`,
    );
    await waitFor(async () => (await answer(liveServer.base, `/release/${R.five}/`)).status === 404, { timeoutMs: SEEN_MS, what: 'release five gone' });
  });

  it('never answers half of a replication transaction', async () => {
    const open = await mirror.connect();
    try {
      await open.query('BEGIN');
      await open.query(`UPDATE cover_art_archive.cover_art SET ordering = 3 WHERE id = ${IMAGES.r1SecondFront}`);
      // Another change, committed: once it is answered, a pass has read the mirror with the first transaction open.
      await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = 'marker' WHERE id = ${IMAGES.r4Front}`);
      await waitFor(async () => (await listing(liveServer.base, R.four))?.images?.[0]?.comment === 'marker', { timeoutMs: SEEN_MS, what: 'the committed change' });
      assert.deepEqual(ids(await listing(liveServer.base, R.one)), [IMAGES.r1SecondFront, IMAGES.r1Front]);
      await open.query(`UPDATE cover_art_archive.cover_art SET ordering = 1 WHERE id = ${IMAGES.r1Front}`);
      await open.query('COMMIT');
    } finally {
      await open.end();
    }
    await waitFor(async () => JSON.stringify(ids(await listing(liveServer.base, R.one))) === JSON.stringify([IMAGES.r1Front, IMAGES.r1SecondFront]), {
      timeoutMs: SEEN_MS,
      what: 'both halves at once',
    });
  });

  it('skips rows it does not understand, logging each once, and takes a new art type', async () => {
    await mirror.apply(
      `INSERT INTO cover_art_archive.art_type VALUES (99, 'Hologram', NULL, 0, NULL, '0b1c2d3e-0000-4000-8000-000000000099')`,
      `INSERT INTO cover_art_archive.cover_art VALUES (6002, 6, 'hologram', 507, 3, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL)`,
      `INSERT INTO cover_art_archive.cover_art_type VALUES (6002, 99)`,
      // A mime type the mirror's image_type does not list (no foreign key holds it there).
      `INSERT INTO cover_art_archive.cover_art VALUES (6003, 6, 'webp', 507, 4, now(), 0, 'image/webp', NULL, NULL, NULL, NULL)`,
    );
    const l = await waitFor(async () => {
      const x = await listing(liveServer.base, R.six);
      return ids(x).includes(6002) ? x : undefined;
    }, { timeoutMs: SEEN_MS, what: 'image 6002' });
    assert.deepEqual(l.images.find((i: any) => Number(i.id) === 6002).types, ['Hologram']);
    assert.ok(!ids(l).includes(6003));
    // More passes (another change), and the skipped row is still logged once.
    await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = 'again' WHERE id = 6003`, `UPDATE cover_art_archive.cover_art SET comment = 'hologram 2' WHERE id = 6002`);
    await waitFor(async () => (await listing(liveServer.base, R.six))?.images?.some((i: any) => i.comment === 'hologram 2'), { timeoutMs: SEEN_MS, what: 'the second change' });
    assert.equal(logs.filter((line) => line.includes('unknown mime type') && line.includes('"6003"')).length, 1);
  });

  it('takes an image skipped for its mime type once the mime type is added, its own row unchanged', async () => {
    assert.ok(!ids(await listing(liveServer.base, R.six)).includes(6003));
    await mirror.apply(`INSERT INTO cover_art_archive.image_type VALUES ('image/webp', 'webp')`);
    const l = await waitFor(async () => {
      const x = await listing(liveServer.base, R.six);
      return ids(x).includes(6003) ? x : undefined;
    }, { timeoutMs: SEEN_MS, what: 'image 6003 in the listing' });
    const image = l.images.find((i: any) => Number(i.id) === 6003);
    assert.equal(image.comment, 'again');
    assert.match(image.image, /\/6003\.webp$/);
  });

  it('ends as an import of the mirror as it is now would', async () => {
    // The role may not read event_art_archive: its events are not followed, said once, and the releases are.
    assert.equal(logs.filter((l) => l.includes("event_art_archive.event_art, event_art_archive.event_art_type, event_art_archive.art_type not readable by sleeve's role")).length, 1);
    const fresh = await makeTestEnv();
    try {
      const dump = await mirror.dumpTo(path.join(fresh.dir, 'dump'));
      await cliOk(fresh.env, ['--json', 'import', 'musicbrainz', '--skip-malformed', dump]);
      const s = await startServer(fresh);
      try {
        assert.deepEqual(await everything(liveServer.base), await everything(s.base));
      } finally {
        await s.server.close();
      }
    } finally {
      await fresh.cleanup();
    }
  });
});

/*
 * The mirror's live database as the catalogue, for the Event Art Archive (docs/mirror-database.md):
 * `musicbrainz.event`, `event_gid_redirect` and the `event_art_archive` schema (with
 * musicbrainz-server's column orders, datagen/musicbrainz-db.ts) followed into sleeve's event
 * tables. Its /event/… answers must be those of `sleeve import musicbrainz` of the same rows, at
 * the start and after each change applied as replication applies them (plain SQL in
 * transactions), each seen without a restart.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import type { MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { E, EVENT_IMAGES, R } from './fixture.js';
import { answer, ids, listingOf, SEEN_MS, startLivePair, type Answer, type LivePair } from './live-support.js';

/** An event the mirror gains, with an image, and later loses. */
const E4 = 'e1e1e1e1-2222-4333-8444-000000000004';
const EVENTS = [...Object.values(E), E4];
const IMAGE_IDS = [...Object.values(EVENT_IMAGES), 8004, 8401];

/** Every answer the catalogue gives for the fixture's events (and the one added later): listings, fronts, each image. */
async function everything(base: string): Promise<Record<string, Answer>> {
  const out: Record<string, Answer> = {};
  for (const m of EVENTS) {
    for (const p of ['', 'front', 'front-250', 'back', ...IMAGE_IDS.map(String), `${EVENT_IMAGES.e1Stage}-500`]) out[`/event/${m}/${p}`] = await answer(base, `/event/${m}/${p}`);
  }
  return out;
}

const listing = (base: string, mbid: string): Promise<any> => listingOf(base, 'event', mbid);
/** Where a redirect answered for `p` points (answers other than a listing may come from a cache emptied just after the listing is rewritten: waited for). */
const pointsTo = async (base: string, p: string, re: RegExp) => re.test((await answer(base, p)).location ?? '');
const TS = `'2019-06-01 00:00:00+00'`;

describe(`the mirror's live database as the catalogue: events (${DIALECT})`, () => {
  let pair: LivePair;
  let live: TestEnv;
  let mirror: MirrorDb;
  let importedServer: RunningServer;
  let liveServer: RunningServer;
  const logs: string[] = [];
  const seen = <T>(what: string, check: () => Promise<T>) => waitFor(check, { timeoutMs: SEEN_MS, what });

  before(async () => {
    pair = await startLivePair({ events: true, logs });
    ({ live, mirror, importedServer, liveServer } = pair);
  });

  after(async () => {
    await pair?.close();
  });

  it('answers /event/… as the import of the same rows answers', async () => {
    assert.deepEqual(await everything(liveServer.base), await everything(importedServer.base));
    // Not vacuous: the listings are there, with the fixture's images, its merged MBID and its Poster fronts (never the PDF).
    assert.deepEqual(ids(await listing(liveServer.base, E.one)), [EVENT_IMAGES.e1Stage, EVENT_IMAGES.e1Poster, EVENT_IMAGES.e1Pending]);
    assert.deepEqual(ids(await listing(liveServer.base, E.oldOne)), ids(await listing(liveServer.base, E.one)));
    assert.match((await answer(liveServer.base, `/event/${E.one}/front`)).location ?? '', new RegExp(`-${EVENT_IMAGES.e1Poster}\\.png$`));
    assert.match((await answer(liveServer.base, `/event/${E.two}/front`)).location ?? '', new RegExp(`-${EVENT_IMAGES.e2Poster}\\.jpg$`));
    assert.equal((await answer(liveServer.base, `/event/${E.three}/`)).status, 404);
    assert.ok(!logs.some((l) => l.includes('Event Art Archive sleeve can read')), 'the archive is followed, not said missing');
  });

  it("refuses `event add`: events change in the mirror's database", async () => {
    const r = await runCli(live.env, ['event', 'add', 'e1e1e1e1-2222-4333-8444-0000000000bb', '--name', 'Here']);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /event add: the catalogue is the mirror's database \(SLEEVE_MUSICBRAINZ_DATABASE_URL\)/);
    assert.equal((await answer(liveServer.base, `/event/e1e1e1e1-2222-4333-8444-0000000000bb/`)).status, 404);
  });

  it('sees an image added, with its edit still open (not approved)', async () => {
    await mirror.apply(
      `INSERT INTO musicbrainz.edit VALUES (610, 7, 158, 1, 0, now(), NULL, now() + interval '7 days', NULL, 1)`,
      `INSERT INTO event_art_archive.event_art VALUES (8004, 1, 'added', 610, 4, now(), 1, 'image/jpeg', 1000, NULL, NULL, NULL)`,
      `INSERT INTO event_art_archive.event_art_type VALUES (8004, 1)`,
    );
    const l = await seen('image 8004 in the listing', async () => {
      const x = await listing(liveServer.base, E.one);
      return ids(x).includes(8004) ? x : undefined;
    });
    const added = l.images.find((i: any) => Number(i.id) === 8004);
    assert.deepEqual([added.approved, added.types, added.comment, added.front], [false, ['Poster'], 'added', false]);
    await seen('image 8004 answered', () => pointsTo(liveServer.base, `/event/${E.one}/8004`, new RegExp(`mbid-${E.one}-8004\\.jpg$`)));
  });

  it('sees the edit applied: the image becomes approved', async () => {
    // Only the edit row changes, as when the edit closes and nothing else about the image does.
    await mirror.apply(`UPDATE musicbrainz.edit SET status = 2, close_time = now() WHERE id = 610`);
    await seen('image 8004 approved', async () => (await listing(liveServer.base, E.one))?.images?.find((i: any) => Number(i.id) === 8004)?.approved === true);
  });

  it("sees an image's types and comment changed, to an art type added upstream", async () => {
    await mirror.apply(
      `INSERT INTO event_art_archive.art_type VALUES (2, 'Ticket', NULL, 0, 'A ticket to it.', '2e6f9a0b-6a2d-3f5e-9d6c-0b1a2c3d4e60')`,
      `UPDATE event_art_archive.event_art SET comment = 'a ticket' WHERE id = 8004`,
      `DELETE FROM event_art_archive.event_art_type WHERE id = 8004`,
      `INSERT INTO event_art_archive.event_art_type VALUES (8004, 2)`,
    );
    const image = await seen('the new comment', async () => {
      const i = (await listing(liveServer.base, E.one))?.images?.find((x: any) => Number(x.id) === 8004);
      return i?.comment === 'a ticket' ? i : undefined;
    });
    assert.deepEqual(image.types, ['Ticket']);
  });

  it('sees images reordered: the front is the first Poster', async () => {
    await mirror.apply(
      `UPDATE event_art_archive.event_art SET ordering = 1 WHERE id = ${EVENT_IMAGES.e1Pending}`,
      `UPDATE event_art_archive.event_art SET ordering = 2 WHERE id = ${EVENT_IMAGES.e1Poster}`,
      `UPDATE event_art_archive.event_art SET ordering = 3 WHERE id = ${EVENT_IMAGES.e1Stage}`,
    );
    const order = [EVENT_IMAGES.e1Pending, EVENT_IMAGES.e1Poster, EVENT_IMAGES.e1Stage, 8004];
    await seen('the new order', async () => JSON.stringify(ids(await listing(liveServer.base, E.one))) === JSON.stringify(order));
    await seen('the first Poster as the front', () => pointsTo(liveServer.base, `/event/${E.one}/front`, new RegExp(`-${EVENT_IMAGES.e1Pending}\\.jpg$`)));
  });

  it('sees an image removed (a row deleted: found without an xmin)', async () => {
    await mirror.apply(`DELETE FROM event_art_archive.event_art WHERE id = ${EVENT_IMAGES.e1Stage}`);
    await seen('image 8001 gone', async () => JSON.stringify(ids(await listing(liveServer.base, E.one))) === JSON.stringify([EVENT_IMAGES.e1Pending, EVENT_IMAGES.e1Poster, 8004]));
    const gone = await seen('image 8001 answered 404', async () => {
      const a = await answer(liveServer.base, `/event/${E.one}/${EVENT_IMAGES.e1Stage}`);
      return a.status === 404 ? a : undefined;
    });
    assert.match(String(gone?.body), new RegExp(`event image with id ${EVENT_IMAGES.e1Stage} not found`));
  });

  it('sees an event merged into another, with its gid redirect', async () => {
    await mirror.apply(
      `UPDATE event_art_archive.event_art SET event = 1, ordering = ordering + 10 WHERE event = 2`,
      `UPDATE musicbrainz.event_gid_redirect SET new_id = 1 WHERE new_id = 2`,
      `INSERT INTO musicbrainz.event_gid_redirect (gid, new_id) VALUES ('${E.two}', 1)`,
      `DELETE FROM musicbrainz.event WHERE id = 2`,
    );
    const order = [EVENT_IMAGES.e1Pending, EVENT_IMAGES.e1Poster, 8004, EVENT_IMAGES.e2Pdf, EVENT_IMAGES.e2Poster];
    const merged = await seen('the old MBID answering with the event it was merged into, with its images', async () => {
      const l = await listing(liveServer.base, E.two);
      return l?.event?.endsWith(E.one) === true && JSON.stringify(ids(l)) === JSON.stringify(order) ? l : undefined;
    });
    assert.deepEqual(ids(merged), ids(await listing(liveServer.base, E.one)));
    await seen("the old MBID's front", () => pointsTo(liveServer.base, `/event/${E.two}/front`, new RegExp(`mbid-${E.one}-${EVENT_IMAGES.e1Pending}\\.jpg$`)));
  });

  it('sees an event added, then removed', async () => {
    await mirror.apply(
      `INSERT INTO musicbrainz.event VALUES (4, '${E4}', 'Four', 2020, 1, 1, NULL, NULL, NULL, NULL, 1, false, NULL, '', 0, now(), false)`,
      `INSERT INTO event_art_archive.event_art VALUES (8401, 4, '', 601, 1, ${TS}, 0, 'image/gif', NULL, NULL, NULL, NULL)`,
      `INSERT INTO event_art_archive.event_art_type VALUES (8401, 1)`,
    );
    await seen('event four', async () => (await answer(liveServer.base, `/event/${E4}/front`)).location?.endsWith(`mbid-${E4}-8401.gif`));
    await mirror.apply(`DELETE FROM event_art_archive.event_art WHERE event = 4`, `DELETE FROM musicbrainz.event WHERE id = 4`);
    await seen('event four gone', async () => (await answer(liveServer.base, `/event/${E4}/`)).status === 404);
    await seen('its image gone', async () => (await answer(liveServer.base, `/event/${E4}/8401`)).status === 404);
  });

  it('sees a merge in a pass that adds 600 events beside it, with its gid redirect', async () => {
    const E1000 = 'e1e1e1e1-2222-4333-8444-000000001000';
    await mirror.apply(
      `INSERT INTO musicbrainz.event VALUES (1000, '${E1000}', 'Thousand', 2021, 1, 1, NULL, NULL, NULL, NULL, 1, false, NULL, '', 0, now(), false)`,
      `INSERT INTO event_art_archive.event_art VALUES (8900, 1000, '', 601, 1, ${TS}, 0, 'image/jpeg', NULL, NULL, NULL, NULL)`,
      `INSERT INTO event_art_archive.event_art_type VALUES (8900, 1)`,
    );
    await seen('event 1000', async () => (await answer(liveServer.base, `/event/${E1000}/front`)).location?.endsWith(`mbid-${E1000}-8900.jpg`));
    // 600 new events in the deleted one's range of ids (whose count then grows, though a row left it),
    // and between the two sides (a pass writes 500 a batch, by id): event one's batch comes before 1000's removal.
    await mirror.apply(
      `INSERT INTO musicbrainz.event (id, gid, name) SELECT g, ('e1e1e1e1-2222-4333-8444-' || lpad(to_hex(g), 12, '0'))::uuid, 'bulk ' || g FROM generate_series(10, 609) g`,
      `UPDATE event_art_archive.event_art SET event = 1, ordering = 20 WHERE event = 1000`,
      `INSERT INTO musicbrainz.event_gid_redirect (gid, new_id) VALUES ('${E1000}', 1)`,
      `DELETE FROM musicbrainz.event WHERE id = 1000`,
    );
    // The redirect and event one's rewritten listing are two writes: wait for both (each listing is
    // one state of its entity; the two entities are not one transaction).
    const l = await seen('the old MBID answering with event one, its image moved there', async () => {
      const x = await listing(liveServer.base, E1000);
      return x?.event?.endsWith(E.one) === true && ids(x).includes(8900) ? x : undefined;
    });
    assert.ok(ids(l).includes(8900));
    assert.ok(!logs.some((line) => line.includes('MBID is itself a event')), 'no redirect left out');
  });

  it('never answers half of a replication transaction', async () => {
    const [pending, poster] = [EVENT_IMAGES.e1Pending, EVENT_IMAGES.e1Poster];
    const first3 = async () => JSON.stringify(ids(await listing(liveServer.base, E.one)).slice(0, 3));
    assert.equal(await first3(), JSON.stringify([pending, poster, 8004]));
    const open = await mirror.connect();
    try {
      await open.query('BEGIN');
      // Half of it alone would list the Poster first: [poster, pending, 8004].
      await open.query(`UPDATE event_art_archive.event_art SET ordering = 3 WHERE id = ${pending}`);
      // Another change, committed: once it is answered, a pass has read the mirror with the first transaction open.
      await mirror.apply(`UPDATE event_art_archive.event_art SET comment = 'marker' WHERE id = ${poster}`);
      await seen('the committed change', async () => (await listing(liveServer.base, E.one))?.images?.find((i: any) => Number(i.id) === poster)?.comment === 'marker');
      assert.equal(await first3(), JSON.stringify([pending, poster, 8004]));
      await open.query(`UPDATE event_art_archive.event_art SET ordering = 5 WHERE id = ${poster}`);
      await open.query('COMMIT');
    } finally {
      await open.end();
    }
    await seen('both halves at once', async () => (await first3()) === JSON.stringify([pending, 8004, poster]));
  });

  it('takes an image skipped for its mime type once the mime type is added, its own row unchanged', async () => {
    await mirror.apply(
      // A mime type the mirror's image_type does not list yet, and a change beside it to know a pass has read it.
      `INSERT INTO event_art_archive.event_art VALUES (8301, 3, 'avif', 601, 1, ${TS}, 0, 'image/avif', NULL, NULL, NULL, NULL)`,
      `UPDATE event_art_archive.event_art SET comment = 'beside' WHERE id = ${EVENT_IMAGES.e2Poster}`,
    );
    await seen('the change beside it', async () => (await listing(liveServer.base, E.two))?.images?.some((i: any) => i.comment === 'beside'));
    assert.deepEqual(ids(await listing(liveServer.base, E.three)), []);
    await mirror.apply(`INSERT INTO cover_art_archive.image_type VALUES ('image/avif', 'avif')`);
    const l = await seen('image 8301 in the listing', async () => {
      const x = await listing(liveServer.base, E.three);
      return ids(x).includes(8301) ? x : undefined;
    });
    assert.match(l.images[0].image, /\/8301\.avif$/);
  });

  it('ends as an import of the mirror as it is now would, releases and events', async () => {
    const fresh = await makeTestEnv();
    try {
      const dump = await mirror.dumpTo(path.join(fresh.dir, 'dump'));
      await cliOk(fresh.env, ['--json', 'import', 'musicbrainz', dump]);
      const s = await startServer(fresh);
      try {
        assert.deepEqual(await everything(liveServer.base), await everything(s.base));
        for (const p of [`/release/${R.one}/`, `/release/${R.one}/front`]) assert.deepEqual(await answer(liveServer.base, p), await answer(s.base, p));
      } finally {
        await s.server.close();
      }
    } finally {
      await fresh.cleanup();
    }
  });
});

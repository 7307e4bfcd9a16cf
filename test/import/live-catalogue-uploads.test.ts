/*
 * Images uploaded to sleeve on the mirror's releases and events (docs/mirror-database.md,
 * "Images uploaded here"): they come after the mirror's images, in their own order, and stay
 * after them when the mirror adds or reorders its images, as after `sleeve import musicbrainz`.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { createMirror, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { writeInput } from '../cover-art/cli-support.js';
import { E, EVENT_IMAGES, IMAGES, R, writeFixture } from './fixture.js';
import { ids, listingOf, SEEN_MS } from './live-support.js';

const listing = listingOf;

describe(`the mirror's live database: images uploaded here (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let mirror: MirrorDb;
  let jpeg: string;
  const upload = async (mbid: string, type: string): Promise<number> => Number((await cliOk(t.env, ['--json', 'art', 'add', mbid, jpeg, '--type', type])).id);
  const order = (entity: 'release' | 'event', mbid: string, want: number[], what: string) =>
    waitFor(async () => JSON.stringify(ids(await listing(s.base, entity, mbid))) === JSON.stringify(want), { timeoutMs: SEEN_MS, what });

  before(async () => {
    t = await makeTestEnv();
    mirror = await createMirror(await writeFixture(path.join(t.dir, 'dump'), { events: true }));
    Object.assign(t.env, { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '50' });
    s = await startServer(t);
    await waitFor(async () => (await fetch(`${s.base}/readyz`)).status === 200, { timeoutMs: SEEN_MS, what: 'the catalogue read once' });
    jpeg = await writeInput(t, 'local.jpg', (await makeJpeg(300, 200)) as Buffer);
  });

  after(async () => {
    await s?.server.close();
    await mirror?.drop();
    await t?.cleanup();
  });

  it("on a release: after the mirror's images, and still after them once the mirror adds images at its place", async () => {
    const mirrored = [IMAGES.r1Front, IMAGES.r1Back, IMAGES.r1SecondFront];
    const local = await upload(R.one, 'Front');
    await order('release', R.one, [...mirrored, local], 'the upload last');
    // The mirror's next images take the upload's ordering (4) and the one after.
    await mirror.apply(
      `INSERT INTO cover_art_archive.cover_art VALUES (1004, 1, 'fourth', 501, 4, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL), (1005, 1, 'fifth', 501, 5, now(), 0, 'image/png', NULL, NULL, NULL, NULL)`,
      `INSERT INTO cover_art_archive.cover_art_type VALUES (1004, 2), (1005, 3)`,
    );
    await order('release', R.one, [...mirrored, 1004, 1005, local], "the mirror's new images, then the upload");
    // The mirror's first Front is still the front.
    const front = await fetch(`${s.base}/release/${R.one}/front`, { redirect: 'manual' });
    assert.match(front.headers.get('location') ?? '', new RegExp(`-${IMAGES.r1Front}\\.jpg$`));
  });

  it('on a release: uploads keep their own order after the mirror reorders and adds', async () => {
    const before = ids(await listing(s.base, 'release', R.one));
    const first = before[before.length - 1] as number;
    const second = await upload(R.one, 'Back');
    await order('release', R.one, [...before, second], 'the second upload last');
    await mirror.apply(
      `UPDATE cover_art_archive.cover_art SET ordering = 9 WHERE id = ${IMAGES.r1Front}`,
      `INSERT INTO cover_art_archive.cover_art VALUES (1006, 1, 'sixth', 501, 6, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL)`,
    );
    await order('release', R.one, [IMAGES.r1Back, IMAGES.r1SecondFront, 1004, 1005, 1006, IMAGES.r1Front, first, second], "the mirror's order, then both uploads in theirs");
    // The front answered before is cached until the catalogue version moves, just after the listing is rewritten.
    await waitFor(async () => (await fetch(`${s.base}/release/${R.one}/front`, { redirect: 'manual' })).headers.get('location')?.endsWith(`-${IMAGES.r1SecondFront}.jpg`), {
      timeoutMs: SEEN_MS,
      what: "the mirror's first Front as the front",
    });
  });

  it("on an event: after the mirror's images, and still after them once the mirror adds and reorders", async () => {
    const mirrored = [EVENT_IMAGES.e1Stage, EVENT_IMAGES.e1Poster, EVENT_IMAGES.e1Pending];
    const local = await upload(E.one, 'Poster');
    await order('event', E.one, [...mirrored, local], 'the upload last');
    await mirror.apply(
      `INSERT INTO event_art_archive.event_art VALUES (8004, 1, '', 601, 4, now(), 0, 'image/jpeg', NULL, NULL, NULL, NULL)`,
      `UPDATE event_art_archive.event_art SET ordering = 7 WHERE id = ${EVENT_IMAGES.e1Stage}`,
    );
    await order('event', E.one, [EVENT_IMAGES.e1Poster, EVENT_IMAGES.e1Pending, 8004, EVENT_IMAGES.e1Stage, local], "the mirror's images, then the upload");
    const front = await fetch(`${s.base}/event/${E.one}/front`, { redirect: 'manual' });
    assert.match(front.headers.get('location') ?? '', new RegExp(`-${EVENT_IMAGES.e1Poster}\\.png$`));
  });
});

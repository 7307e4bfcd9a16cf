/*
 * The mirror's live database away (docs/mirror-database.md, "Faults"): not there at start (sleeve starts; the catalogue answers 503 with Retry-After and
 * /readyz says why, until the database is read once, without a restart), and lost later
 * (the catalogue answers from its last state, /readyz says degraded, changes are followed
 * again once it is back). A mirror without the Event Art Archive: its releases are followed,
 * the missing archive said once, its events followed once the archive is there.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import { DIALECT, freePort, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { createMirror, EVENT_ART_ARCHIVE_DDL, mirrorName, mirrorUrl, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { E, EVENT_IMAGES, IMAGES, R, writeFixture } from './fixture.js';
import { asAdmin, SEEN_MS } from './live-support.js';
import { query } from './support.js';


const admin = (statement: string) => asAdmin('postgres', statement);

async function readyz(base: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/readyz`);
  return { status: res.status, body: await res.json() };
}

describe(`the mirror's live database away (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let mirror: MirrorDb | undefined;
  const name = mirrorName();

  before(async () => {
    t = await makeTestEnv({ SLEEVE_MUSICBRAINZ_DATABASE_URL: mirrorUrl(name), SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '50' });
    s = await startServer(t);
  });

  after(async () => {
    await admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`).catch(() => {});
    await s?.server.close();
    await mirror?.drop();
    await t?.cleanup();
  });

  it('starts without it: the catalogue answers 503 with Retry-After, /readyz says why', async () => {
    const res = await fetch(`${s.base}/release/${R.one}/`, { redirect: 'manual' });
    assert.equal(res.status, 503);
    assert.match(res.headers.get('retry-after') ?? '', /^\d+$/);
    const group = await fetch(`${s.base}/release-group/${R.one}/`, { redirect: 'manual' });
    assert.equal(group.status, 503);
    assert.equal((await fetch(`${s.base}/event/${R.one}/`, { redirect: 'manual' })).status, 503);
    const r = await readyz(s.base);
    assert.equal(r.status, 503);
    assert.equal(r.body.checks.catalogue, 'failing');
    assert.equal(r.body.checks.musicbrainz_database, 'failing');
    // What needs no catalogue still answers.
    assert.equal((await fetch(`${s.base}/healthz`)).status, 200);
    assert.equal((await fetch(`${s.base}/release/${R.one}/`, { method: 'OPTIONS' })).status, 200);
  });

  it('reads it once it is there, without a restart', async () => {
    const dump = await writeFixture(path.join(t.dir, 'dump'));
    mirror = await createMirror(dump, name);
    await waitFor(async () => (await readyz(s.base)).status === 200, { timeoutMs: SEEN_MS, what: 'ready' });
    const res = await fetch(`${s.base}/release/${R.one}/front`, { redirect: 'manual' });
    assert.equal(res.status, 307);
    assert.match(res.headers.get('location') ?? '', new RegExp(`-${IMAGES.r1Front}\\.jpg$`));
  });

  it('lost later: answers from the last state, /readyz says degraded; changes followed once it is back', async () => {
    await admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
    await admin(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${name}'`);
    const degraded = (await waitFor(async () => {
      const r = await readyz(s.base);
      return r.body.status === 'degraded' ? r : undefined;
    }, { timeoutMs: SEEN_MS, what: 'degraded' })) as { status: number; body: any };
    assert.equal(degraded.status, 200);
    assert.equal(degraded.body.checks.musicbrainz_database, 'failing');
    assert.equal((await fetch(`${s.base}/release/${R.one}/front`, { redirect: 'manual' })).status, 307);

    await admin(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
    await (mirror as MirrorDb).apply(`UPDATE cover_art_archive.cover_art SET comment = 'back again' WHERE id = ${IMAGES.r4Front}`);
    await waitFor(async () => {
      const res = await fetch(`${s.base}/download/mbid-${R.four}/index.json`);
      return res.status === 200 && (await res.text()).includes('back again');
    }, { timeoutMs: SEEN_MS, what: 'the change made after the database came back' });
    assert.equal((await readyz(s.base)).body.status, 'ok');
  });
});

describe(`the mirror's live database without the Event Art Archive (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let mirror: MirrorDb;
  const logs: string[] = [];
  const missing = (line: string) => line.includes('Event Art Archive sleeve can read');

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    // The dump has the events of musicbrainz.event; the mirror has no event_art_archive schema at all.
    mirror = await createMirror(await writeFixture(path.join(t.dir, 'dump'), { events: true }), undefined, { eventArtArchive: false });
    Object.assign(t.env, { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '50' });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    Object.assign(t.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base });
    const stream = new PassThrough();
    stream.on('data', (c: Buffer) => logs.push(...c.toString('utf8').split('\n').filter((l) => l !== '')));
    s = { server: await serve(loadConfig(t.env), { only: 'coverart', logStream: stream }), base };
    await waitFor(async () => (await readyz(s.base)).status === 200, { timeoutMs: SEEN_MS, what: 'ready' });
  });

  after(async () => {
    await s?.server.close();
    await mirror?.drop();
    await t?.cleanup();
  });

  it('follows the releases, says once why not the events, and has no events', async () => {
    assert.equal((await fetch(`${s.base}/release/${R.one}/front`, { redirect: 'manual' })).status, 307);
    // Releases are followed: a change is seen (so passes ran after the first whole read).
    await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = 'no events here' WHERE id = ${IMAGES.r4Front}`);
    await waitFor(async () => (await (await fetch(`${s.base}/release/${R.four}/`, { headers: { accept: 'application/json' } })).text()).includes('no events here'), {
      timeoutMs: SEEN_MS,
      what: 'the release change',
    });
    assert.equal((await fetch(`${s.base}/event/${E.one}/front`, { redirect: 'manual' })).status, 404);
    assert.deepEqual(await query(t, 'SELECT id FROM event'), [], 'no event was taken from musicbrainz.event alone');
    const said = logs.filter(missing);
    assert.equal(said.length, 1, said.join('\n'));
    assert.match(said[0] as string, /event_art_archive\.event_art, event_art_archive\.event_art_type, event_art_archive\.art_type not in the mirror's database/);
  });

  it('follows the events once the archive is there, without a restart', async () => {
    // The archive's schema made and loaded later (in one transaction, as a restore would be).
    await mirror.apply(
      EVENT_ART_ARCHIVE_DDL,
      `INSERT INTO event_art_archive.art_type VALUES (1, 'Poster', NULL, 0, NULL, '1e6f9a0b-6a2d-3f5e-9d6c-0b1a2c3d4e5f')`,
      `INSERT INTO event_art_archive.event_art VALUES (${EVENT_IMAGES.e1Poster}, 1, '', 602, 1, now(), 0, 'image/png', NULL, NULL, NULL, NULL)`,
      `INSERT INTO event_art_archive.event_art_type VALUES (${EVENT_IMAGES.e1Poster}, 1)`,
    );
    const front = await waitFor(async () => {
      const res = await fetch(`${s.base}/event/${E.one}/front`, { redirect: 'manual' });
      return res.status === 307 ? res.headers.get('location') : undefined;
    }, { timeoutMs: SEEN_MS, what: 'the event followed' });
    assert.match(front ?? '', new RegExp(`mbid-${E.one}-${EVENT_IMAGES.e1Poster}\\.png$`));
    // Every event of musicbrainz.event, its merged MBID too.
    assert.equal((await fetch(`${s.base}/event/${E.oldOne}/front`, { redirect: 'manual' })).status, 307);
    assert.equal((await query(t, 'SELECT id FROM event')).length, 3);
    assert.ok(logs.some((l) => l.includes("the mirror's Event Art Archive can be read now")));
    assert.equal(logs.filter(missing).length, 1);
  });
});

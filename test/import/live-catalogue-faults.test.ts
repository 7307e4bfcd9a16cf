/*
 * The mirror's live database away (docs/mirror-database.md, "Faults"): not there at start (sleeve starts; the catalogue answers 503 with Retry-After and
 * /readyz says why, until the database is read once, without a restart), and lost later
 * (the catalogue answers from its last state, /readyz says degraded, changes are followed
 * again once it is back).
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { ADMIN, createMirror, mirrorName, mirrorUrl, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { IMAGES, R, writeFixture } from './fixture.js';


const SEEN_MS = 20_000;

async function admin(statement: string): Promise<void> {
  const c = new pg.Client({ connectionString: ADMIN });
  await c.connect();
  try {
    await c.query(statement);
  } finally {
    await c.end();
  }
}

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

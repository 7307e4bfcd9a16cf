/*
 * The mirror's live database with several `sleeve serve` processes on one sleeve database
 * (docs/mirror-database.md, "How it works"): one follows the mirror (the lease), every one
 * answers a change; when the follower stops, another takes over.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { DIALECT, makeTestEnv, type TestEnv } from '../helpers/env.js';
import { createMirror, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { logLines, startServe, type ServeProcess } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait.js';
import { IMAGES, R, writeFixture } from './fixture.js';

const SEEN_MS = 30_000;

async function comment(s: ServeProcess, id: number): Promise<string | undefined> {
  const res = await fetch(`${s.base}/release/${R.four}/`, { headers: { accept: 'application/json' } });
  if (res.status !== 200) return undefined;
  const listing = (await res.json()) as { images: { id: number | string; comment: string }[] };
  return listing.images.find((i) => Number(i.id) === id)?.comment;
}

const follows = (s: ServeProcess) => logLines(s).some((l) => l.msg === "reading the whole catalogue from the mirror's database");

describe(`the mirror's live database, several serving processes (${DIALECT})`, () => {
  let t: TestEnv;
  let mirror: MirrorDb;
  let servers: ServeProcess[] = [];

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'info' });
    mirror = await createMirror(await writeFixture(path.join(t.dir, 'dump')));
    Object.assign(t.env, { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '100', SLEEVE_METRICS_LISTEN: 'off' });
    // Each is kept as soon as it runs, so `after` stops it even when the next fails to start.
    for (let i = 0; i < 2; i++) servers.push(await startServe(t.env, ['--only', 'coverart']));
    for (const s of servers) await waitFor(async () => (await fetch(`${s.base}/readyz`)).status === 200, { timeoutMs: SEEN_MS, what: 'ready' });
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
    await mirror?.drop();
    await t?.cleanup();
  });

  it('one process follows the mirror; every one answers its change', async () => {
    assert.equal(servers.filter(follows).length, 1, 'exactly one read the mirror');
    await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = 'seen by all' WHERE id = ${IMAGES.r4Front}`);
    for (const s of servers) await waitFor(async () => (await comment(s, IMAGES.r4Front)) === 'seen by all', { timeoutMs: SEEN_MS, what: `the change at ${s.base}` });
  });

  it('when the follower stops, another takes over', async () => {
    const follower = servers.find(follows) as ServeProcess;
    const other = servers.find((s) => s !== follower) as ServeProcess;
    assert.equal(await follower.stop(), 0);
    servers = [other];
    await mirror.apply(`UPDATE cover_art_archive.cover_art SET comment = 'after the handover' WHERE id = ${IMAGES.r4Front}`);
    await waitFor(async () => (await comment(other, IMAGES.r4Front)) === 'after the handover', { timeoutMs: SEEN_MS, what: 'the change after the handover' });
    // It followed from where the first left off: no second whole read.
    assert.ok(!follows(other));
  });
});

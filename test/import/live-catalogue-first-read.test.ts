/*
 * The first whole read of the mirror's database (docs/mirror-database.md, "The first read"): the
 * import's own, fed from the mirror, when sleeve holds no release, group or event made here;
 * page by page when it does, and then a release made here keeps its id and the mirror's release
 * with that id is skipped and logged ("Faults").
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import Sqlite from 'better-sqlite3';
import { PassThrough } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import { cliOk, DIALECT, freePort, makeTestEnv, type RunningServer, type TestEnv } from '../helpers/env.js';
import { createMirror, type MirrorDb } from '../helpers/musicbrainz-db.js';
import { waitFor } from '../helpers/wait.js';
import { R, writeFixture } from './fixture.js';

const SEEN_MS = 20_000;
const LOCAL_RELEASE = 'c0c0c0c0-1111-4111-8111-0000000000c1';
const LOCAL_GROUP = 'c0c0c0c0-2222-4222-8222-0000000000c2';

/** `sleeve serve` following `mirror`, its log lines in `logs` (not waiting for anything). */
async function startFollowing(t: TestEnv, mirror: MirrorDb, logs: string[]): Promise<RunningServer> {
  Object.assign(t.env, { SLEEVE_MUSICBRAINZ_DATABASE_URL: mirror.url, SLEEVE_MUSICBRAINZ_DATABASE_POLL_MS: '50', SLEEVE_LOG_LEVEL: 'info' });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  Object.assign(t.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base });
  const stream = new PassThrough();
  stream.on('data', (c: Buffer) => logs.push(...c.toString('utf8').split('\n').filter((l) => l !== '')));
  return { server: await serve(loadConfig(t.env), { only: 'coverart', logStream: stream }), base };
}

/** `sleeve serve` following `mirror`, its log lines in `logs`, once its catalogue is read. */
async function follow(t: TestEnv, mirror: MirrorDb, logs: string[]): Promise<RunningServer> {
  const s = await startFollowing(t, mirror, logs);
  const { base } = s;
  await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: SEEN_MS, what: 'the catalogue read once' });
  return s;
}

const front = async (base: string, mbid: string) => (await fetch(`${base}/release/${mbid}/front`, { redirect: 'manual' })).status;

describe(`the mirror's database read whole the first time (${DIALECT})`, () => {
  let mirror: MirrorDb;
  let fresh: TestEnv;
  let local: TestEnv;
  let freshServer: RunningServer;
  let localServer: RunningServer;
  const freshLogs: string[] = [];
  const localLogs: string[] = [];

  before(async () => {
    fresh = await makeTestEnv();
    mirror = await createMirror(await writeFixture(path.join(fresh.dir, 'dump')));
    freshServer = await follow(fresh, mirror, freshLogs);
    local = await makeTestEnv();
    // Made here before the mirror's database was set: sleeve's first release and group, id 1, which the mirror's R.one and group one have.
    await cliOk(local.env, ['release', 'add', LOCAL_RELEASE, '--release-group', LOCAL_GROUP, '--title', 'Made here']);
    localServer = await follow(local, mirror, localLogs);
  });

  after(async () => {
    await freshServer?.server.close();
    await localServer?.server.close();
    await mirror?.drop();
    await fresh?.cleanup();
    await local?.cleanup();
  });

  it("a new sleeve: through the import, table by table, and answers the mirror's releases", async () => {
    assert.ok(freshLogs.some((l) => l.includes("the mirror's table copied") && l.includes('cover_art_archive.cover_art')));
    assert.equal(await front(freshServer.base, R.one), 307);
    assert.equal(await front(freshServer.base, R.two), 307);
  });

  it('beside a release made here: page by page; that release keeps its id, the mirror’s release with it is skipped and logged', async () => {
    assert.ok(!localLogs.some((l) => l.includes("the mirror's table copied")));
    assert.ok(localLogs.some((l) => l.includes('release: id held by a release made in sleeve') && l.includes(R.one)));
    assert.equal(await front(localServer.base, R.one), 404);
    // Of another group than the one made here (which has the mirror's group one's id): taken.
    assert.equal(await front(localServer.base, R.four), 307);
    const made = await cliOk(local.env, ['--json', 'release', 'list']);
    assert.ok(JSON.stringify(made).includes(LOCAL_RELEASE));
  });
});

describe(`the first read keeps the serving thread free (${DIALECT})`, { skip: DIALECT === 'sqlite' ? false : 'on PostgreSQL the import applies inside the database' }, () => {
  let t: TestEnv;
  let mirror: MirrorDb;
  let server: RunningServer | undefined;
  const logs: string[] = [];

  before(async () => {
    t = await makeTestEnv();
    mirror = await createMirror(await writeFixture(path.join(t.dir, 'dump')));
  });

  after(async () => {
    await server?.server.close();
    await mirror?.drop();
    await t?.cleanup();
  });

  it("answers /healthz and /readyz while the import's apply step waits on sleeve's database, then serves the catalogue", async () => {
    // The mirror's images held by a transaction of the test: the import stops at their COPY, mid-staging.
    const holder = await mirror.connect();
    await holder.query('BEGIN');
    await holder.query('LOCK TABLE cover_art_archive.cover_art IN ACCESS EXCLUSIVE MODE');
    const file = (loadConfig(t.env).database as { file: string }).file;
    let writer: Sqlite.Database | undefined;
    let base = '';
    try {
      server = await startFollowing(t, mirror, logs);
      base = server.base;
      const waiting = "SELECT query FROM pg_stat_activity WHERE application_name = 'sleeve' AND wait_event_type = 'Lock'";
      // Asked on a connection of its own (a transaction sees one snapshot of pg_stat_activity).
      const watcher = await mirror.connect();
      try {
        await waitFor(async () => (await watcher.query<{ query: string }>(waiting)).rows.some((r) => r.query.startsWith('COPY')), { timeoutMs: SEEN_MS, what: "the import's COPY of the images waiting" });
      } finally {
        await watcher.end();
      }
      // Then sleeve's database held by the test, and the images let go: the apply step waits for sleeve's database (its busy timeout is 15 s).
      writer = new Sqlite(file);
      writer.exec('BEGIN IMMEDIATE');
      await holder.query('ROLLBACK');
      await waitFor(() => logs.some((l) => l.includes("applying the mirror's rows to sleeve's catalogue")), { timeoutMs: SEEN_MS, what: 'the apply step started' });
      // Were the apply step on the serving thread, these would wait with it.
      assert.equal((await fetch(`${base}/healthz`)).status, 200);
      const ready = await fetch(`${base}/readyz`);
      assert.equal(ready.status, 503);
      assert.match(await ready.text(), /"catalogue":"failing"/);
      assert.equal((await fetch(`${base}/release/${R.one}/front`, { redirect: 'manual' })).status, 503);
      // Answered while the apply step still waited: it has neither finished nor failed.
      assert.ok(writer.inTransaction);
      assert.ok(!logs.some((l) => l.includes("the mirror's rows applied") || l.includes('failed')), logs.slice(-3).join('\n'));
    } finally {
      if (writer?.inTransaction === true) writer.exec('ROLLBACK');
      writer?.close();
      await holder.query('ROLLBACK').catch(() => {});
      await holder.end();
    }
    await waitFor(async () => (await fetch(`${base}/readyz`)).status === 200, { timeoutMs: SEEN_MS, what: 'the catalogue read once' });
    assert.equal(await front(base, R.one), 307);
    assert.ok(logs.some((l) => l.includes("the mirror's rows applied")));
  });
});

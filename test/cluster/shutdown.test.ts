/*
 * Graceful shutdown of `sleeve serve`, as a load balancer needs it: requests in flight when
 * SIGTERM arrives finish (a download being read slowly; on PostgreSQL, a listing waiting on
 * a lock), and with SLEEVE_SHUTDOWN_DELAY_MS readiness fails at once while everything else
 * is still served, before the listeners close.
 */
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, writeFile } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { request } from '../helpers/auth.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startServe } from '../helpers/serve-process.js';
import { waitFor } from '../helpers/wait.js';

const R = '5d0e0000-0000-4000-8000-000000000001';
const G = '5d0e0000-0000-4000-8000-0000000000aa';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

describe(`graceful shutdown of sleeve serve (${DIALECT})`, () => {
  let t: TestEnv;

  before(async () => {
    t = await makeTestEnv();
  });

  after(async () => {
    await t?.cleanup();
  });

  it('a download still being read when SIGTERM arrives is sent in full; new connections are refused; then exit 0', async () => {
    const s = await startServe(t.env, ['--only', 'coverart']);
    // A large file of the storage layout, put straight into the storage directory.
    const name = `mbid-${R}/mbid-${R}-1234.jpg`;
    const bytes = randomBytes(48 * 1024 * 1024);
    await mkdir(path.join(t.dir, 'files', `mbid-${R}`), { recursive: true });
    await writeFile(path.join(t.dir, 'files', name), bytes);

    const received = new Promise<{ status: number; length: number; sha: string }>((resolve, reject) => {
      const req = http.get(`${s.base}/download/${name}`, { agent: false }, (res) => {
        const hash = createHash('sha256');
        let length = 0;
        let first = true;
        res.on('data', (c: Buffer) => {
          hash.update(c);
          length += c.length;
          if (first) {
            // Stop reading after the first chunk: the server is left with most of the file to send.
            first = false;
            res.pause();
            started();
          }
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, length, sha: hash.digest('hex') }));
        res.on('error', reject);
        resumeReading = () => res.resume();
      });
      req.on('error', reject);
    });
    let started = () => {};
    let resumeReading = () => {};
    await new Promise<void>((r) => (started = r));

    s.child.kill('SIGTERM');
    await pollUntil(
      () => fetch(`${s.base}/healthz`).then(() => 'open', () => 'refused'),
      (v) => v === 'refused',
      3000,
    );
    await assert.rejects(fetch(`${s.base}/healthz`), 'the listener no longer accepts connections');
    await waitFor(() => s.stderr().includes('finishing requests in flight'), { what: 'the shutdown to begin' });
    // Stopping, with its listener closed, it waits for the download (which arrives whole, below).
    assert.equal(s.child.exitCode, null, 'the process waits for the download in flight');

    resumeReading();
    const got = await received;
    assert.equal(got.status, 200);
    assert.equal(got.length, bytes.length, 'every byte arrived');
    assert.equal(got.sha, createHash('sha256').update(bytes).digest('hex'));
    assert.equal(await s.exited, 0, s.stderr());
    assert.match(s.stderr(), /SIGTERM, finishing requests in flight and stopping/);
  });

  it('with SLEEVE_SHUTDOWN_DELAY_MS, /readyz answers 503 at once while everything else is served; then the listeners close and it exits 0', async () => {
    const s = await startServe({ ...t.env, SLEEVE_SHUTDOWN_DELAY_MS: '1500' });
    assert.equal((await fetch(`${s.base}/readyz`)).status, 200);
    const sent = performance.now();
    s.child.kill('SIGTERM');
    const { value: ready, ms } = await pollUntil(
      async () => {
        const res = await fetch(`${s.base}/readyz`);
        return { status: res.status, body: await res.text(), connection: res.headers.get('connection') };
      },
      (v) => v.status === 503,
      1000,
      10,
    );
    assert.equal(ready.status, 503, `readiness failed ${ms} ms after SIGTERM`);
    assert.equal(ready.body, '{"status":"stopping","checks":{}}');
    assert.equal(ready.connection, 'close');
    const auth = await request(`${s.authBase}/readyz`);
    assert.equal(auth.status, 503);
    assert.deepEqual(auth.json(), { status: 'stopping', checks: {} });

    // Meanwhile, the process is alive and answers everything else as usual.
    const live = await fetch(`${s.base}/healthz`);
    assert.equal(live.status, 200);
    await live.arrayBuffer();
    const api = await fetch(`${s.base}/release/${UNKNOWN}/front`);
    assert.equal(api.status, 404);
    await api.arrayBuffer();
    assert.equal((await request(`${s.authBase}/.well-known/oauth-authorization-server`)).status, 200);

    assert.equal(await s.exited, 0, s.stderr());
    const took = performance.now() - sent;
    // That it waited is what was served above after readiness failed (no lower bound on the clock).
    assert.ok(took < 8000, `exited ${Math.round(took)} ms after SIGTERM`);
  });

  it(
    'a listing waiting on a database lock when SIGTERM arrives is answered, not cut off',
    { skip: DIALECT !== 'postgres' && 'on SQLite (WAL) readers never wait for a lock; runs on the PostgreSQL pass' },
    async () => {
      await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
      const file = path.join(t.dir, 'front.jpg');
      await writeFile(file, await makeJpeg(100, 100));
      const added = await cliInProcess(t.env, ['--json', 'art', 'add', R, file, '--type', 'Front']);
      const s = await startServe(t.env, ['--only', 'coverart']);
      const locker = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
      await locker.connect();
      try {
        await locker.query('BEGIN');
        await locker.query('LOCK TABLE cover_art IN ACCESS EXCLUSIVE MODE');
        let done = false;
        const listing = fetch(`${s.base}/release-group/${G}/`).then(async (res) => {
          done = true;
          return { status: res.status, body: await res.text() };
        });
        // Until PostgreSQL shows the listing's query waiting for the lock.
        await waitFor(async () => Number((await locker.query('SELECT count(*) AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE NOT l.granted AND d.datname = current_database()')).rows[0].n) > 0, { what: 'the listing to wait for the lock' });
        assert.equal(done, false, 'the listing waits for the lock');
        s.child.kill('SIGTERM');
        await waitFor(() => s.stderr().includes('finishing requests in flight'), { what: 'the shutdown to begin' });
        await pollUntil(
          () => fetch(`${s.base}/healthz`).then(() => 'open', () => 'refused'),
          (v) => v === 'refused',
          3000,
        );
        assert.equal(done, false);
        assert.equal(s.child.exitCode, null, 'the process waits for it');
        await locker.query('COMMIT');
        const got = await listing;
        assert.equal(got.status, 200, got.body);
        assert.equal(JSON.parse(got.body).images[0].id, added.id);
        assert.equal(await s.exited, 0, s.stderr());
      } finally {
        await locker.end();
        await s.stop('SIGKILL');
      }
    },
  );
});

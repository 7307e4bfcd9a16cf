/*
 * Read-your-writes for the operator: once a catalogue command exits 0, every `sleeve serve`
 * on the same database answers with its change, at once (the servers' own poll is set to a
 * minute here, so only the command's signal and wait can explain a fresh answer). Two
 * serving processes, with and without Redis; a hung process (SIGSTOP) is named in the
 * command's warning and the command still returns within SLEEVE_CHANGE_WAIT_MS; a killed
 * one is forgotten without a warning.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { redisUnavailable, startRedis, type PrivateRedis } from '../helpers/redis.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';

const G = 'f7e50000-0000-4000-8000-0000000000aa';
const release = (n: number) => `f7e50000-0000-4000-8000-${String(n).padStart(12, '0')}`;
const WAIT_MS = 1500;

for (const withRedis of [false, true]) {
  describe(`a change is seen as soon as its command returns (${DIALECT}, ${withRedis ? 'with' : 'without'} Redis)`, { skip: withRedis ? redisUnavailable() : undefined }, () => {
    let t: TestEnv;
    let redis: PrivateRedis | undefined;
    let servers: ServeProcess[] = [];
    const front: Record<string, string> = {};

    async function get(s: ServeProcess, p: string): Promise<{ status: number; location: string | null; body: string }> {
      const res = await fetch(`${s.base}${p}`, { redirect: 'manual' });
      return { status: res.status, location: res.headers.get('location'), body: await res.text() };
    }
    /** Which release the group's listing comes from, through `s`. */
    async function groupRelease(s: ServeProcess): Promise<string> {
      const r = await get(s, `/release-group/${G}/`);
      assert.equal(r.status, 200, r.body);
      return (JSON.parse(r.body) as { release: string }).release.split('/').pop() as string;
    }

    before(async () => {
      if (withRedis) redis = await startRedis();
      t = await makeTestEnv({
        SLEEVE_CHANGE_POLL_MS: '60000',
        SLEEVE_CHANGE_POLL_REDIS_MS: '60000',
        SLEEVE_CHANGE_WAIT_MS: String(WAIT_MS),
        ...(redis === undefined ? {} : { SLEEVE_REDIS_URL: redis.url }),
      });
      const file = path.join(t.dir, 'c.jpg');
      await writeFile(file, await makeJpeg(64, 64));
      for (const n of [1, 2, 3]) {
        await cliInProcess(t.env, ['release', 'add', release(n), '--release-group', G]);
        front[release(n)] = (await cliInProcess(t.env, ['--json', 'art', 'add', release(n), file, '--type', 'Front'])).id;
      }
      // One after the other, each kept as soon as it runs (so `after` stops it whatever happens next).
      for (let i = 0; i < 2; i++) servers.push(await startServe(t.env, ['--only', 'coverart']));
    });

    after(async () => {
      for (const s of servers) {
        s.child.kill('SIGCONT');
        await s.stop();
      }
      await redis?.destroy();
      await t?.cleanup();
    });

    it('release-group set-cover, then an immediate GET through every server, sees the new release, every time', async () => {
      for (let i = 0; i < 6; i++) {
        const chosen = release(1 + (i % 2));
        // Cached before the change: asked twice through each server.
        for (const s of servers) for (let k = 0; k < 2; k++) await groupRelease(s);
        const r = await runCli(t.env, ['release-group', 'set-cover', G, chosen]);
        assert.equal(r.code, 0, r.stderr);
        assert.equal(r.stderr, '', 'no server was late');
        for (const s of servers) assert.equal(await groupRelease(s), chosen, `round ${i} through ${s.base}`);
      }
    });

    it('release merge, then an immediate GET of the old MBID, redirects to the image in its new release', async () => {
      const old = release(3);
      const into = release(2);
      for (const s of servers) {
        for (let k = 0; k < 2; k++) {
          const r = await get(s, `/release/${old}/front`);
          assert.equal(r.status, 307);
          assert.match(r.location ?? '', new RegExp(`/mbid-${old}/`));
        }
      }
      const r = await runCli(t.env, ['release', 'merge', old, into]);
      assert.equal(r.code, 0, r.stderr);
      for (const s of servers) {
        const after = await get(s, `/release/${old}/front`);
        assert.equal(after.status, 307, after.body);
        assert.match(after.location ?? '', new RegExp(`/mbid-${into}/mbid-${into}-\\d+\\.jpg$`));
        const byId = await get(s, `/release/${old}/${front[old]}-250`);
        assert.equal(byId.location?.replace(/^.*\/download\//, ''), `mbid-${into}/mbid-${into}-${front[old]}_thumb250.jpg`);
      }
    });

    it('a hung server (SIGSTOP) is named in the warning, and the command returns within SLEEVE_CHANGE_WAIT_MS', async () => {
      const [live, hung] = servers as [ServeProcess, ServeProcess];
      await groupRelease(live);
      hung.child.kill('SIGSTOP');
      try {
        const chosen = (await groupRelease(live)) === release(1) ? release(2) : release(1);
        const started = performance.now();
        const r = await runCli(t.env, ['release-group', 'set-cover', G, chosen]);
        const ms = performance.now() - started;
        assert.equal(r.code, 0, r.stderr);
        assert.match(r.stderr, new RegExp(`did not confirm it within ${WAIT_MS} ms \\(SLEEVE_CHANGE_WAIT_MS\\): pid ${hung.child.pid} on `));
        assert.ok(r.stderr.includes(hung.base), r.stderr);
        assert.ok(!r.stderr.includes(`pid ${live.child.pid} `), 'the live server confirmed');
        // The bound plus start-up and the change itself (a loaded machine).
        assert.ok(ms < WAIT_MS + 10_000, `returned after ${ms.toFixed(0)} ms`);
        assert.equal(await groupRelease(live), chosen);
      } finally {
        hung.child.kill('SIGCONT');
      }
    });

    it('a killed server is forgotten: the next command neither waits for it nor warns', async () => {
      const [live, killed] = servers as [ServeProcess, ServeProcess];
      killed.child.kill('SIGKILL');
      await killed.exited;
      servers = [live];
      const chosen = (await groupRelease(live)) === release(1) ? release(2) : release(1);
      // A bound far above the command's own run time even on a loaded machine: had the command waited
      // for the killed server, it would have taken the whole bound and warned.
      const bound = 60_000;
      const started = performance.now();
      const r = await runCli({ ...t.env, SLEEVE_CHANGE_WAIT_MS: String(bound) }, ['release-group', 'set-cover', G, chosen]);
      const ms = performance.now() - started;
      assert.equal(r.code, 0, r.stderr);
      // SQLite: its signal port refuses; PostgreSQL: its session ended with it, and its liveness lock too.
      assert.equal(r.stderr, '');
      assert.ok(ms < bound, `took ${ms.toFixed(0)} ms`);
      assert.equal(await groupRelease(live), chosen);
    });
  });
}

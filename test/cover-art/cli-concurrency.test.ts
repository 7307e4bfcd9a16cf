/*
 * Several `sleeve art add` processes at once, and processes killed at random moments:
 * ids stay unique and increasing, orderings stay 1..n, and the served index.json never
 * names a file that is not there.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliOk, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  dbImageIds,
  dbImages,
  fetchState,
  formulaId,
  holdRelease,
  newMbid,
  readIndex,
  readIndexBytes,
  releaseFolder,
  spawnCli,
  writeInput,
  type HeldLock,
} from './cli-support.js';

/** Every file a listing names, by its storage name, must be in the release's folder. */
function assertListedFilesExist(t: TestEnv, mbid: string, index: any, when: string): void {
  for (const image of index.images as { id: string; image: string }[]) {
    const suffix = image.image.slice(image.image.lastIndexOf('.') + 1);
    for (const name of [`mbid-${mbid}-${image.id}.${suffix}`, ...[250, 500, 1200].map((size) => `mbid-${mbid}-${image.id}_thumb${size}.jpg`)]) {
      assert.ok(existsSync(path.join(releaseFolder(t, mbid), name)), `${when}: index.json names ${name}, which is not there`);
    }
  }
}

/** Waits until `n` processes queue behind the held release (PostgreSQL), then lets them all go at once. */
async function letGoTogether(gate: HeldLock, n: number): Promise<void> {
  try {
    if (DIALECT === 'postgres') {
      const deadline = Date.now() + 30_000;
      let waiting = 0;
      while ((waiting = (await gate.waiting()) ?? 0) < n && Date.now() < deadline) await sleep(50);
      assert.ok(waiting >= n, `all ${n} processes queue behind the held release row (${waiting} seen)`);
    }
  } finally {
    await gate.release();
  }
}

describe(`sleeve CLI under concurrency and crashes (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    s = await startServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('6 art add processes at once on one release: all succeed, unique increasing ids, every one listed, orderings 1..n', async () => {
    const release = newMbid();
    const group = newMbid();
    await cliOk(t.env, ['release', 'add', release, '--release-group', group]);
    const first = await cliOk(t.env, ['--json', 'art', 'add', release, await writeInput(t, 'c0.jpg', await makeJpeg(300, 300)), '--type', 'Front']);
    const files = await Promise.all([1, 2, 3, 4, 5, 6].map(async (n) => writeInput(t, `c${n}.png`, await makePng(200 + n * 10, 150))));

    // On PostgreSQL the processes pile up behind a lock on the release and then all commit at once.
    const gate = await holdRelease(t, release);
    const startMs = Date.now();
    const runs = files.map((file) => spawnCli(t.env, ['--json', 'art', 'add', release, file, '--comment', path.basename(file)]));
    await letGoTogether(gate, runs.length);
    const results = await Promise.all(runs.map((r) => r.done));
    const endMs = Date.now();

    for (const r of results) assert.equal(r.code, 0, `a concurrent art add failed: ${r.stderr}`);
    const entries = results.map((r) => JSON.parse(r.stdout));
    const ids = entries.map((e) => Number(e.id));
    assert.equal(new Set(ids).size, ids.length, `ids are unique: ${ids.join(' ')}`);
    for (const id of ids) {
      assert.ok(id > Number(first.id), 'above the id allocated before');
      assert.ok(id >= formulaId(startMs) && id <= formulaId(endMs), `id ${id} within the formula's range [${formulaId(startMs)}, ${formulaId(endMs)}]`);
    }
    // Each process got the entry of its own file.
    assert.deepEqual(entries.map((e) => e.comment), files.map((f) => path.basename(f)));

    const rows = await dbImages(t, release);
    assert.deepEqual(rows.map((r) => r.ordering), [1, 2, 3, 4, 5, 6, 7], 'orderings 1..n without gaps or duplicates');
    const index = await readIndex(t, release);
    assert.deepEqual(index.images.map((i: any) => i.id).sort(), [first.id, ...ids.map(String)].sort());
    assert.deepEqual(index.images.map((i: any) => i.id), rows.map((r) => r.id), 'index.json in the database order');
    assertListedFilesExist(t, release, index, 'after the concurrent uploads');
    // The last writer wrote what was committed last: index.json equals the listing built from the database.
    assert.equal((await readIndexBytes(t, release))?.toString('utf8'), (await fetchState(`${s.base}/release-group/${group}/`)).body);
    // And every image can be named in a reorder (all are the release's).
    const reversed = rows.map((r) => r.id).reverse();
    assert.deepEqual((await cliOk(t.env, ['--json', 'art', 'reorder', release, ...reversed])).order, reversed);
  });

  it('adds, a remove and an edit at once on one release: all succeed and orderings stay 1..n', async () => {
    const release = newMbid();
    const group = newMbid();
    await cliOk(t.env, ['release', 'add', release, '--release-group', group]);
    const file = await writeInput(t, 'mix.jpg', await makeJpeg(240, 240));
    const start: string[] = [];
    for (const type of ['Front', 'Back', 'Booklet']) start.push((await cliOk(t.env, ['--json', 'art', 'add', release, file, '--type', type])).id);
    const [front = '', back = '', booklet = ''] = start;

    const gate = await holdRelease(t, release);
    const runs = [
      spawnCli(t.env, ['--json', 'art', 'add', release, file]),
      spawnCli(t.env, ['--json', 'art', 'remove', release, back]),
      spawnCli(t.env, ['--json', 'art', 'add', release, file]),
      spawnCli(t.env, ['--json', 'art', 'edit', release, booklet, '--comment', 'edited']),
      spawnCli(t.env, ['--json', 'art', 'add', release, file]),
    ];
    await letGoTogether(gate, runs.length);
    const results = await Promise.all(runs.map((r) => r.done));
    for (const r of results) assert.equal(r.code, 0, `a concurrent change failed: ${r.stderr}`);
    const added = [0, 2, 4].map((i) => JSON.parse((results[i] as { stdout: string }).stdout).id as string);

    const rows = await dbImages(t, release);
    assert.deepEqual(rows.map((r) => r.ordering), [1, 2, 3, 4, 5]);
    assert.deepEqual(rows.slice(0, 2).map((r) => r.id), [front, booklet]);
    assert.deepEqual(rows.slice(2).map((r) => r.id).sort(), [...added].sort());
    const index = await readIndex(t, release);
    assert.deepEqual(index.images.map((i: any) => i.id), rows.map((r) => r.id));
    assert.equal(index.images[1].comment, 'edited');
    assertListedFilesExist(t, release, index, 'after the concurrent changes');
    assert.equal((await readIndexBytes(t, release))?.toString('utf8'), (await fetchState(`${s.base}/release-group/${group}/`)).body);
  });

  it('art add racing a release merge of its release: the upload is refused cleanly or kept, never lost', async () => {
    const group = newMbid();
    const file = await writeInput(t, 'race.jpg', await makeJpeg(220, 220));
    for (let round = 0; round < 2; round++) {
      const [old, into] = [newMbid(), newMbid()];
      for (const m of [old, into]) {
        await cliOk(t.env, ['release', 'add', m, '--release-group', group]);
        await cliOk(t.env, ['art', 'add', m, file, '--type', 'Front']);
      }
      const gate = await holdRelease(t, old);
      const add = spawnCli(t.env, ['--json', 'art', 'add', old, file]);
      const merge = spawnCli(t.env, ['--json', 'release', 'merge', old, into]);
      await letGoTogether(gate, 2);
      const [a, m] = await Promise.all([add.done, merge.done]);
      const what = `round ${round}: add exit ${a.code} ${a.stderr.trim()}; merge exit ${m.code} ${m.stderr.trim()}`;
      assert.ok(a.code === 0 || m.code === 0, `one of them succeeds (${what})`);
      for (const r of [a, m]) if (r.code !== 0) assert.match(r.stderr, /changed during the (upload|merge).*try again/, what);

      const mergedInto = m.code === 0 ? into : old;
      const ids = await dbImageIds(t, mergedInto);
      const index = await readIndex(t, mergedInto);
      assert.deepEqual(index.images.map((i: any) => i.id), ids, what);
      assertListedFilesExist(t, mergedInto, index, what);
      if (a.code === 0) {
        const id = JSON.parse(a.stdout).id;
        assert.ok(ids.includes(id), `the accepted upload ${id} is kept (${what})`);
      }
      const total = (await dbImageIds(t, old)).length + (m.code === 0 ? 0 : (await dbImageIds(t, into)).length);
      assert.equal(m.code === 0 ? ids.length : total, a.code === 0 ? 3 : 2, what);
    }
  });

  it('art add processes killed at random moments never leave index.json naming a missing file, nor lose an accepted upload', async () => {
    const release = newMbid();
    const group = newMbid();
    await cliOk(t.env, ['release', 'add', release, '--release-group', group]);
    const file = await writeInput(t, 'crash.jpg', await makeJpeg(1400, 1000));
    const t0 = Date.now();
    await cliOk(t.env, ['art', 'add', release, file, '--type', 'Front']);
    const took = Date.now() - t0;
    // Images for the killed removes to take away.
    const removable: string[] = [];
    for (let i = 0; i < 3; i++) removable.push((await cliOk(t.env, ['--json', 'art', 'add', release, file])).id);

    const accepted: string[] = [];
    const log: string[] = [];
    let killed = 0;
    for (let i = 0; i < 10; i++) {
      const remove = i % 4 === 3 && removable.length > 0;
      const args = remove ? ['art', 'remove', release, removable.pop() as string] : ['--json', 'art', 'add', release, file];
      const delay = Math.floor(Math.random() * Math.max(400, took * 1.2));
      const run = spawnCli(t.env, args);
      const timer = setTimeout(() => run.child.kill('SIGKILL'), delay);
      const r = await run.done;
      clearTimeout(timer);
      log.push(`${remove ? 'remove' : 'add'} after ${delay} ms: ${r.signal ?? r.code}`);
      if (r.signal === 'SIGKILL') killed++;
      else {
        assert.equal(r.code, 0, `${args.join(' ')} failed on its own: ${r.stderr}`);
        if (!remove) accepted.push(JSON.parse(r.stdout).id);
      }

      const bytes = await readIndexBytes(t, release);
      assert.ok(bytes !== undefined, `index.json exists (${log.join('; ')})`);
      let index: any;
      assert.doesNotThrow(() => {
        index = JSON.parse(bytes.toString('utf8'));
      }, `index.json is valid JSON (${log.join('; ')})`);
      assertListedFilesExist(t, release, index, log.join('; '));
    }
    assert.ok(killed > 0, `some processes were killed: ${log.join('; ')}`);

    // A later successful change finishes the listing: it then names exactly what the database holds.
    const last = await cliOk(t.env, ['--json', 'art', 'add', release, file]);
    accepted.push(last.id);
    const index = await readIndex(t, release);
    const ids = await dbImageIds(t, release);
    assert.deepEqual(index.images.map((i: any) => i.id), ids, log.join('; '));
    for (const id of accepted) assert.ok(ids.includes(id), `accepted upload ${id} is kept`);
    assertListedFilesExist(t, release, index, 'at the end');
    assert.deepEqual((await dbImages(t, release)).map((r) => r.ordering), ids.map((_, i) => i + 1), 'orderings 1..n');
    const listed = await readIndexBytes(t, release);
    assert.equal(listed?.toString('utf8'), (await fetchState(`${s.base}/release-group/${group}/`)).body, 'index.json is the listing the database gives');
    await cliOk(t.env, ['art', 'reindex', release]);
    assert.deepEqual(await readIndexBytes(t, release), listed, 'art reindex finds nothing to change');
  });
});

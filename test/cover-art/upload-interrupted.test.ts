/*
 * Interrupted uploads leave nothing behind. `sleeve art add` of a large image is killed
 * with SIGKILL at each point of its work (failpoints: before the original, halfway
 * through writing it, with everything staged, after the commit, after the files moved)
 * and at random moments. Nothing of an upload killed before its commit is ever served,
 * the next command removes what it left (or finishes an upload killed after its commit),
 * a serving process's periodic sweep does the same without a command, and an upload
 * still in flight in another process is never touched and completes. With s3:// storage
 * too.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { CLI, cliOk, DIALECT, freePort, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { filesRoot, newMbid, writeInput } from './cli-support.js';

interface Paused {
  child: ChildProcess;
  id: string;
  exited: Promise<number | null>;
  stderr(): string;
}

/** Starts `art add` with a failpoint on; resolves once it stops there (it waits for SIGUSR2, or SIGKILL). */
async function addUntil(env: Record<string, string>, release: string, file: string, failpoint: string): Promise<Paused> {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
  const child = spawn(process.execPath, [CLI, 'art', 'add', release, file, '--type', 'Front'], {
    env: { ...clean, ...env, SLEEVE_TEST_FAILPOINT: failpoint },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  child.stderr?.on('data', (c: Buffer) => (err += c.toString()));
  child.stdout?.resume();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const reap = () => child.kill('SIGKILL');
  process.once('exit', reap);
  void exited.then(() => process.removeListener('exit', reap));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const m = new RegExp(`sleeve: failpoint ${failpoint} (?:uploads/)?(\\d+)`).exec(err);
    if (m !== null) return { child, id: m[1] as string, exited, stderr: () => err };
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`art add never reached failpoint ${failpoint} (exit ${child.exitCode}):\n${err}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function kill(p: Paused): Promise<void> {
  p.child.kill('SIGKILL');
  await p.exited;
}

/** Every file under the storage root (dot folders too), relative paths, sorted. */
async function allFiles(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string): Promise<void> => {
    let entries;
    try {
      entries = await readdir(path.join(root, rel), { withFileTypes: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw err;
    }
    for (const e of entries) {
      const p = rel === '' ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory()) await walk(p);
      else out.push(p);
    }
  };
  await walk('');
  return out.sort();
}

/** Leftovers: staged uploads and part-written files. */
function leftovers(files: string[]): string[] {
  return files.filter((f) => f.startsWith('uploads/') || f.startsWith('.tmp/') || /(^|\/)\.tmp-/.test(f));
}

async function status(url: string): Promise<number> {
  const res = await fetch(url, { redirect: 'manual' });
  await res.arrayBuffer();
  return res.status;
}

/** The four public files of an image (original and thumbnails). */
function publicFiles(release: string, id: string): string[] {
  return [`mbid-${release}/mbid-${release}-${id}.jpg`, ...[250, 500, 1200].map((s) => `mbid-${release}/mbid-${release}-${id}_thumb${s}.jpg`)];
}

/** Nothing of image `id` is public: no file under its public names, no redirect, no download. */
async function assertNotServed(base: string, release: string, id: string, files: string[]): Promise<void> {
  for (const f of publicFiles(release, id)) {
    assert.ok(!files.includes(f), `${f} exists`);
    assert.equal(await status(`${base}/download/${f}`), 404, `/download/${f}`);
  }
  for (const suffix of ['', '-250', '-500', '-1200']) assert.equal(await status(`${base}/release/${release}/${id}${suffix}`), 404);
}

/** Image `id` is complete: in the listing, each of its files served. */
async function assertServed(base: string, release: string, id: string): Promise<void> {
  for (const suffix of ['', '-250', '-500', '-1200']) {
    const res = await fetch(`${base}/release/${release}/${id}${suffix}`);
    await res.arrayBuffer();
    assert.equal(res.status, 200, `${release}/${id}${suffix} followed to the file`);
  }
  const index = (await (await fetch(`${base}/download/mbid-${release}/index.json`)).json()) as { images: { id: string }[] };
  assert.ok(
    index.images.some((i) => i.id === id),
    `index.json lists ${id}`,
  );
}

describe(`interrupted uploads leave nothing behind (file storage, ${DIALECT})`, () => {
  let t: TestEnv;
  let big: string;
  let small: string;
  let server: ServeProcess;
  const release = newMbid();
  const other = newMbid();
  const startCoverArt = () => startServe({ ...t.env, SLEEVE_UPLOAD_SWEEP_MS: '30000', SLEEVE_METRICS_LISTEN: 'off' }, ['--only', 'coverart']);

  before(async () => {
    t = await makeTestEnv();
    big = await writeInput(t, 'big.jpg', await makeJpeg(3000, 2000, 95));
    small = await writeInput(t, 'small.jpg', await makeJpeg(200, 200));
    await cliOk(t.env, ['release', 'add', release, '--release-group', newMbid()]);
    await cliOk(t.env, ['release', 'add', other, '--release-group', newMbid()]);
    // A server whose own sweep is slow (every 30 s): here the next command is what cleans up.
    server = await startCoverArt();
  });
  after(async () => {
    await server?.stop();
    await t?.cleanup();
  });

  for (const point of ['upload-leased', 'upload-original-half', 'upload-staged']) {
    it(`killed at ${point}: nothing served, and the next command removes every leftover`, async () => {
      const p = await addUntil(t.env, release, big, point);
      await kill(p);
      const files = await allFiles(filesRoot(t));
      assert.ok(leftovers(files).length > 0, 'the killed upload left files (the case under test)');
      if (point === 'upload-original-half') assert.ok(files.some((f) => f.startsWith('.tmp/')), 'a part-written original');
      await assertNotServed(server.base, release, p.id, files);
      // The next catalogue command, about another release.
      await cliOk(t.env, ['art', 'reindex', other]);
      assert.deepEqual(leftovers(await allFiles(filesRoot(t))), [], 'nothing left');
      await assertNotServed(server.base, release, p.id, await allFiles(filesRoot(t)));
    });
  }

  for (const point of ['upload-committed', 'upload-published']) {
    it(`killed at ${point} (after the commit): the next command finishes the upload`, async () => {
      const p = await addUntil(t.env, release, big, point);
      await kill(p);
      await cliOk(t.env, ['art', 'reindex', release]);
      assert.deepEqual(leftovers(await allFiles(filesRoot(t))), [], 'nothing left');
      await assertServed(server.base, release, p.id);
    });
  }

  it('a committed upload whose staged file was removed by hand: the next command warns, publishes the rest and still works', async () => {
    // No server meanwhile: its sweep (every 30 s) could finish the upload before the command, and warn in its own log.
    await server.stop();
    try {
      const p = await addUntil(t.env, release, small, 'upload-committed');
      await kill(p);
      const staged = (await allFiles(filesRoot(t))).filter((f) => f.startsWith(`uploads/${p.id}-`));
      const lost = staged.find((f) => f.endsWith('/thumb500.jpg')) as string;
      await rm(path.join(filesRoot(t), lost));
      const r = await runCli(t.env, ['art', 'reindex', release]);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stderr, new RegExp(`sleeve: warning: image ${p.id} was saved by an upload that was interrupted, and some of its files are lost: mbid-${release}/mbid-${release}-${p.id}_thumb500\\.jpg`));
      const files = await allFiles(filesRoot(t));
      assert.deepEqual(leftovers(files), []);
      assert.ok(files.includes(`mbid-${release}/mbid-${release}-${p.id}_thumb250.jpg`));
      // Put right the way the warning says, so the release is whole again for the tests after this one.
      await cliOk(t.env, ['art', 'remove', release, p.id]);
    } finally {
      server = await startCoverArt();
    }
  });

  it('killed at random moments: afterwards every public image file belongs to a listed image, and each listed image is complete', async () => {
    for (const delay of [150, 400, 700, 1000, 1400]) {
      const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('SLEEVE_')));
      const child = spawn(process.execPath, [CLI, 'art', 'add', release, big], { env: { ...clean, ...t.env }, stdio: 'ignore' });
      const exited = new Promise((resolve) => child.once('exit', resolve));
      await new Promise((r) => setTimeout(r, delay));
      child.kill('SIGKILL');
      await exited;
    }
    await cliOk(t.env, ['art', 'reindex', release]);
    const files = await allFiles(filesRoot(t));
    assert.deepEqual(leftovers(files), []);
    const listed = ((await cliOk(t.env, ['--json', 'art', 'list', release])) as { images: { id: string }[] }).images.map((i) => i.id);
    const expected = [`mbid-${release}/index.json`, ...listed.flatMap((id) => publicFiles(release, id))].sort();
    assert.deepEqual(
      files.filter((f) => f.startsWith(`mbid-${release}/`)),
      expected,
    );
    for (const id of listed) await assertServed(server.base, release, id);
  });

  it("art reindex removes an hour-old .tmp-* file an earlier sleeve left beside the images, not a fresh one", async () => {
    const folder = path.join(filesRoot(t), `mbid-${release}`);
    const stale = path.join(folder, '.tmp-0123456789abcdef');
    const fresh = path.join(folder, '.tmp-fedcba9876543210');
    await writeFile(stale, 'part of an original');
    await writeFile(fresh, 'being written');
    const hourAgo = new Date(Date.now() - 61 * 60 * 1000);
    await utimes(stale, hourAgo, hourAgo);
    await cliOk(t.env, ['art', 'reindex', release]);
    const names = await readdir(folder);
    assert.ok(!names.includes('.tmp-0123456789abcdef'), 'the stale one went');
    assert.ok(names.includes('.tmp-fedcba9876543210'), 'the fresh one stays');
    await rm(fresh);
  });

  it('an upload in flight in another process is untouched by the next command and by a fast server sweep, and completes', async () => {
    const fast = await startServe({ ...t.env, SLEEVE_UPLOAD_SWEEP_MS: '50', SLEEVE_METRICS_LISTEN: 'off' }, ['--only', 'coverart']);
    try {
      const live = await addUntil(t.env, release, small, 'upload-staged');
      const dead = await addUntil(t.env, release, small, 'upload-staged');
      await kill(dead);
      const staged = (f: string, id: string) => f.startsWith(`uploads/${id}-`);
      // The server's sweep removes the dead one's files within moments (no command runs).
      const swept = await pollUntil(
        () => allFiles(filesRoot(t)),
        (files) => !files.some((f) => staged(f, dead.id)),
        5000,
      );
      assert.ok(!swept.value.some((f) => staged(f, dead.id)), `the killed upload's files went: ${swept.value.join(' ')}`);
      await cliOk(t.env, ['art', 'reindex', other]);
      const files = await allFiles(filesRoot(t));
      assert.deepEqual(
        files.filter((f) => staged(f, live.id)).map((f) => f.replace(/^uploads\/\d+-[0-9a-f]+\//, '')),
        ['lease.json', 'original.jpg', 'thumb1200.jpg', 'thumb250.jpg', 'thumb500.jpg'],
        'the live upload is untouched',
      );
      live.child.kill('SIGUSR2');
      assert.equal(await live.exited, 0, live.stderr());
      await assertServed(fast.base, release, live.id);
      await assertNotServed(fast.base, release, dead.id, await allFiles(filesRoot(t)));
      assert.deepEqual(leftovers(await allFiles(filesRoot(t))), []);
    } finally {
      await fast.stop();
    }
  });
});

describe(`the server's sweep, with its clock (${DIALECT})`, () => {
  let t: TestEnv;
  let server: Server;
  let now = Date.UTC(2026, 0, 1);
  const clock = { now: () => now };

  before(async () => {
    t = await makeTestEnv();
    const port = await freePort();
    Object.assign(t.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: `http://127.0.0.1:${port}`, SLEEVE_UPLOAD_SWEEP_MS: '20' });
    server = await serve(loadConfig(t.env), { only: 'coverart', clock });
  });
  after(async () => {
    await server?.close();
    await t?.cleanup();
  });

  it("another machine's upload is left alone while its heartbeat is fresh, and removed 30 s after it stopped", async () => {
    const folder = path.join(filesRoot(t), 'uploads', '46000000000-00112233445566778899aabb');
    await mkdir(folder, { recursive: true });
    await writeFile(path.join(folder, 'lease.json'), JSON.stringify({ host: 'another-machine', pid: 4242, heartbeat: now }));
    await writeFile(path.join(folder, 'thumb250.jpg'), 'x');
    now += 25_000;
    // Sweeps run meanwhile (every 20 ms); none may take it. That they ran is seen from uploads
    // whose heartbeat stopped 31 s ago, put beside it one after the other: each is taken.
    for (let i = 0; i < 3; i++) {
      const stale = path.join(filesRoot(t), 'uploads', `4700000000${i}-00112233445566778899aabb`);
      await mkdir(stale, { recursive: true });
      await writeFile(path.join(stale, 'lease.json'), JSON.stringify({ host: 'another-machine', pid: 4243, heartbeat: now - 31_000 }));
      const lease = path.join(stale, 'lease.json');
      await pollUntil(async () => existsSync(lease), (there) => !there, 5000, 10);
      assert.equal(existsSync(lease), false, 'a sweep ran');
    }
    assert.deepEqual((await readdir(folder)).sort(), ['lease.json', 'thumb250.jpg']);
    now += 6_000;
    const gone = await pollUntil(
      () => allFiles(filesRoot(t)),
      (files) => leftovers(files).length === 0,
      3000,
    );
    assert.deepEqual(leftovers(gone.value), []);
  });
});

describe(`interrupted uploads on s3:// storage (${DIALECT})`, () => {
  let s3: S3TestServer;
  let t: TestEnv;
  let file: string;
  const release = newMbid();

  before(async () => {
    s3 = await startS3();
    t = await makeTestEnv({ ...s3.env });
    file = await writeInput(t, 'cover.jpg', await makeJpeg(1200, 900));
    await cliOk(t.env, ['release', 'add', release, '--release-group', newMbid()]);
  });
  after(async () => {
    await t?.cleanup();
    await s3?.close();
  });

  it('killed before the commit: nothing public, and the next command empties the staging area', async () => {
    const p = await addUntil(t.env, release, file, 'upload-staged');
    await kill(p);
    const staged = await s3.listKeys('uploads/');
    assert.equal(staged.length, 5, staged.join(' '));
    assert.deepEqual(await s3.listKeys(`mbid-${release}/`), []);
    await cliOk(t.env, ['art', 'reindex', release]);
    assert.deepEqual(await s3.listKeys('uploads/'), []);
    // Only the (empty) listing reindex writes.
    assert.deepEqual(await s3.listKeys(`mbid-${release}/`), [`mbid-${release}/index.json`]);
  });

  it('killed after the commit: the next command moves the files into place', async () => {
    const p = await addUntil(t.env, release, file, 'upload-committed');
    await kill(p);
    await cliOk(t.env, ['art', 'reindex', release]);
    assert.deepEqual(await s3.listKeys('uploads/'), []);
    assert.deepEqual(await s3.listKeys(`mbid-${release}/`), [`mbid-${release}/index.json`, ...publicFiles(release, p.id)].sort());
  });
});

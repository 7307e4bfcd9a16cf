/*
 * Cover art on S3, through the public surface only: the `sleeve` binary with
 * SLEEVE_STORAGE_URL=s3://… against a real S3-compatible server (s3rver), `sleeve serve`
 * as its own process, the bucket read back over plain HTTP. Then the store going away:
 * clear errors, nothing changed, no wrong answers, and recovery when it returns.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { cliOk, DIALECT, freePort, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { dbDump, newMbid, spawnCli, writeInput } from '../cover-art/cli-support.js';

interface ServeProcess {
  base: string;
  /** The JSON log lines so far. */
  log(): string;
  stop(): Promise<number | null>;
}

/** `sleeve serve --only coverart` as a child process, answering on its own port. */
async function startServe(env: Record<string, string>): Promise<ServeProcess> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const { child, done } = spawnCli({ ...env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base }, ['serve', '--only', 'coverart']);
  let log = '';
  child.stdout?.on('data', (c: Buffer) => (log += c.toString()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await fetch(`${base}/robots.txt`).catch(() => undefined);
    if (res?.status === 200) break;
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      const r = await done;
      throw new Error(`sleeve serve did not come up (exit ${r.code})\n${r.stderr}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    base,
    log: () => log,
    async stop() {
      child.kill('SIGTERM');
      return (await done).code;
    },
  };
}

async function get(url: string, init: RequestInit = {}): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}

/** The catalogue's rows, but for the id counter (a failed upload burns its id by design: ids are never reused). */
async function catalogue(t: TestEnv): Promise<Record<string, string[]>> {
  const dump = await dbDump(t);
  return { ...dump, counter: (dump.counter ?? []).filter((row) => !row.includes('"cover_art_id"')) };
}

async function indexDirty(t: TestEnv, mbid: string): Promise<number> {
  const row = (await dbDump(t)).release?.map((r) => Object.fromEntries(JSON.parse(r) as [string, unknown][])).find((r) => r.gid === mbid);
  return Number(row?.index_dirty);
}

describe(`cover art on S3 (${DIALECT})`, () => {
  let s3: S3TestServer;
  let t: TestEnv;
  let serve: ServeProcess | undefined;
  const release = newMbid();
  const group = newMbid();
  let jpeg: Buffer;
  let png: Buffer;
  let front: { id: string };
  let back: { id: string };

  before(async () => {
    s3 = await startS3();
    t = await makeTestEnv({ ...s3.env });
    jpeg = await makeJpeg(1600, 1000);
    png = await makePng(300, 200);
    await cliOk(t.env, ['release', 'add', release, '--release-group', group, '--title', 'On S3']);
  });

  after(async () => {
    await serve?.stop();
    await t?.cleanup();
    await s3?.close();
  });

  it('art add puts the original, three JPEG thumbnails and index.json in the bucket, and nothing on local disk', async () => {
    front = await cliOk(t.env, ['--json', 'art', 'add', release, await writeInput(t, 'front.jpg', jpeg), '--type', 'Front', '--approved']);
    back = await cliOk(t.env, ['--json', 'art', 'add', release, await writeInput(t, 'back.png', png), '--type', 'Back']);
    const stem = (id: string) => `mbid-${release}/mbid-${release}-${id}`;
    assert.deepEqual(
      await s3.listKeys(),
      [
        `mbid-${release}/index.json`,
        ...[front.id, back.id].flatMap((id, i) => [`${stem(id)}.${i === 0 ? 'jpg' : 'png'}`, `${stem(id)}_thumb1200.jpg`, `${stem(id)}_thumb250.jpg`, `${stem(id)}_thumb500.jpg`]),
      ].sort(),
    );

    const original = await s3.fetchObject(`${stem(front.id)}.jpg`);
    assert.equal(original.status, 200);
    assert.equal(original.headers.get('content-type'), 'image/jpeg');
    assert.ok(Buffer.from(await original.arrayBuffer()).equals(jpeg), 'the original byte for byte');
    const pngObject = await s3.fetchObject(`${stem(back.id)}.png`);
    assert.equal(pngObject.headers.get('content-type'), 'image/png');
    assert.ok(Buffer.from(await pngObject.arrayBuffer()).equals(png));
    for (const [size, dims] of [
      [250, [250, 156]],
      [500, [500, 313]],
      [1200, [1200, 750]],
    ] as const) {
      const res = await s3.fetchObject(`${stem(front.id)}_thumb${size}.jpg`);
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      const meta = await sharp(Buffer.from(await res.arrayBuffer())).metadata();
      assert.equal(meta.format, 'jpeg');
      assert.deepEqual([meta.width, meta.height], dims, `thumb${size}`);
    }

    const index = await s3.fetchObject(`mbid-${release}/index.json`);
    assert.equal(index.headers.get('content-type'), 'application/json');
    assert.equal(index.headers.get('cache-control'), 'public, no-cache');
    const listing = (await index.json()) as { images: { id: string; front: boolean; back: boolean }[] };
    assert.deepEqual(
      listing.images.map((i) => [i.id, i.front, i.back]),
      [
        [front.id, true, false],
        [back.id, false, true],
      ],
    );
    assert.equal(existsSync(path.join(t.dir, 'files')), false, 'no local storage directory');
  });

  it('sleeve serve redirects to the bucket public URL, and following the redirect gives the stored bytes', async () => {
    serve = await startServe(t.env);
    const frontRes = await get(`${serve.base}/release/${release}/front`);
    assert.equal(frontRes.status, 307);
    const location = `${s3.publicUrl}/mbid-${release}/mbid-${release}-${front.id}.jpg`;
    assert.equal(frontRes.headers.get('location'), location);
    assert.equal(frontRes.body.toString(), `See: ${location}\n`);
    const followed = await fetch(`${serve.base}/release/${release}/front`);
    assert.equal(followed.status, 200);
    assert.equal(followed.url, location);
    assert.ok(Buffer.from(await followed.arrayBuffer()).equals(jpeg));

    assert.equal((await get(`${serve.base}/release/${release}/back-250`)).headers.get('location'), `${s3.publicUrl}/mbid-${release}/mbid-${release}-${back.id}_thumb250.jpg`);
    const listing = await fetch(`${serve.base}/release/${release}/`, { headers: { accept: 'application/json' } });
    assert.equal(listing.url, `${s3.publicUrl}/mbid-${release}/index.json`);
    assert.deepEqual(((await listing.json()) as { images: { id: string }[] }).images.map((i) => i.id), [front.id, back.id]);
  });

  it('/download/* still serves the bucket through sleeve (for a private bucket), with validators and ranges', async () => {
    assert.ok(serve);
    const key = `mbid-${release}/mbid-${release}-${front.id}.jpg`;
    const whole = await get(`${serve.base}/download/${key}`);
    assert.equal(whole.status, 200);
    assert.ok(whole.body.equals(jpeg));
    assert.equal(whole.headers.get('etag'), (await s3.fetchObject(key)).headers.get('etag'));
    const part = await get(`${serve.base}/download/${key}`, { headers: { range: 'bytes=100-199' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 100-199/${jpeg.length}`);
    assert.ok(part.body.equals(jpeg.subarray(100, 200)));
    const first = await get(`${serve.base}/download/${key}`, { headers: { range: 'bytes=0-0' } });
    assert.equal(first.status, 206);
    assert.ok(first.body.equals(jpeg.subarray(0, 1)), 'one byte, although s3rver sends the whole object for bytes=0-0');
    assert.equal((await get(`${serve.base}/download/${key}`, { headers: { 'if-none-match': whole.headers.get('etag') ?? '' } })).status, 304);
    assert.equal((await get(`${serve.base}/download/mbid-${release}/mbid-${release}-1.jpg`)).status, 404);
  });

  it('with SLEEVE_IMAGE_BASE_URL set (a CDN), redirects point at the CDN instead', async () => {
    const cdn = await startServe({ ...t.env, SLEEVE_IMAGE_BASE_URL: 'https://cdn.example.com/covers/' });
    try {
      const res = await get(`${cdn.base}/release/${release}/front-500`);
      assert.equal(res.status, 307);
      assert.equal(res.headers.get('location'), `https://cdn.example.com/covers/mbid-${release}/mbid-${release}-${front.id}_thumb500.jpg`);
    } finally {
      assert.equal(await cdn.stop(), 0);
    }
  });

  it('a key prefix in the URL keeps every object under it, and redirects carry it', async () => {
    const t2 = await makeTestEnv({ ...s3.env, SLEEVE_STORAGE_URL: s3.urlFor({ prefix: 'caa/v1' }) });
    const r2 = newMbid();
    try {
      await cliOk(t2.env, ['release', 'add', r2, '--release-group', newMbid()]);
      const entry = await cliOk(t2.env, ['--json', 'art', 'add', r2, await writeInput(t2, 'p.png', png), '--type', 'Front']);
      assert.deepEqual(await s3.listKeys(`mbid-${r2}/`), [], 'nothing outside the prefix');
      assert.equal((await s3.listKeys(`caa/v1/mbid-${r2}/`)).length, 5);
      const s = await startServe(t2.env);
      try {
        const res = await fetch(`${s.base}/release/${r2}/front`);
        assert.equal(res.url, `${s3.publicUrl}/caa/v1/mbid-${r2}/mbid-${r2}-${entry.id}.png`);
        assert.ok(Buffer.from(await res.arrayBuffer()).equals(png));
      } finally {
        await s.stop();
      }
    } finally {
      await t2.cleanup();
    }
  });

  it('art remove deletes the image objects and rewrites index.json in the bucket', async () => {
    assert.ok(serve);
    const extra = await cliOk(t.env, ['--json', 'art', 'add', release, await writeInput(t, 'extra.png', png)]);
    assert.equal((await s3.listKeys(`mbid-${release}/mbid-${release}-${extra.id}`)).length, 4);
    await cliOk(t.env, ['--json', 'art', 'remove', release, extra.id]);
    assert.deepEqual(await s3.listKeys(`mbid-${release}/mbid-${release}-${extra.id}`), []);
    const listing = (await (await s3.fetchObject(`mbid-${release}/index.json`)).json()) as { images: { id: string }[] };
    assert.deepEqual(
      listing.images.map((i) => i.id),
      [front.id, back.id],
    );
    assert.equal((await get(`${serve.base}/release/${release}/${extra.id}`)).status, 404);
  });

  describe('when the store goes away', () => {
    let keysBefore: string[];
    let indexBefore: Buffer;
    let rowsBefore: Record<string, string[]>;
    const answers = async (base: string) => ({
      listing: (await get(`${base}/release/${release}/`)).headers.get('location'),
      front: (await get(`${base}/release/${release}/front`)).headers.get('location'),
      back250: (await get(`${base}/release/${release}/back-250`)).headers.get('location'),
      group: (await get(`${base}/release-group/${group}/front`)).headers.get('location'),
    });
    let answersBefore: Awaited<ReturnType<typeof answers>>;

    before(async () => {
      assert.ok(serve);
      // The server's connections to the store are warm before it goes.
      assert.equal((await get(`${serve.base}/download/mbid-${release}/index.json`)).status, 200);
      keysBefore = await s3.listKeys();
      indexBefore = Buffer.from(await (await s3.fetchObject(`mbid-${release}/index.json`)).arrayBuffer());
      rowsBefore = await catalogue(t);
      answersBefore = await answers(serve.base);
      await s3.stop();
    });

    after(async () => {
      await s3.start();
    });

    it('art add fails fast with a clear message and a non-zero exit, and changes nothing', async () => {
      const file = await writeInput(t, 'later.jpg', await makeJpeg(640, 480));
      const started = Date.now();
      const r = await runCli(t.env, ['art', 'add', release, file, '--type', 'Booklet']);
      assert.ok(Date.now() - started < 20_000, `gave up within 20 s (took ${Date.now() - started} ms)`);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(r.stdout, '');
      assert.match(r.stderr, /^sleeve: object store s3:\/\/sleeve-test at http:\/\/127\.0\.0\.1:\d+ is unavailable: could not store uploads\/\d+-[0-9a-f]+\/lease\.json: connect ECONNREFUSED 127\.0\.0\.1:\d+ \(after 3 attempts\)\n$/);
      const json = await runCli(t.env, ['--json', 'art', 'add', release, file]);
      assert.equal(json.code, 1);
      assert.equal(JSON.parse(json.stdout).error.code, 'STORE_UNAVAILABLE');
      assert.deepEqual(await catalogue(t), rowsBefore, 'the database is as it was');
    });

    it('the API still answers from the database, exactly as before', async () => {
      assert.ok(serve);
      assert.deepEqual(await answers(serve.base), answersBefore);
      assert.equal((await get(`${serve.base}/release/${newMbid()}/front`)).status, 404);
      // A bucket is shared by every process: a load balancer must not take them all out for it.
      const ready = await get(`${serve.base}/readyz`);
      assert.equal(ready.status, 200, 'ready, degraded: redirects and listings still answer');
      const body = JSON.parse(ready.body.toString()) as { status: string; checks: Record<string, string> };
      assert.equal(body.status, 'degraded');
      assert.notEqual(body.checks.storage, 'ok');
      assert.equal(body.checks.database, 'ok');
    });

    it('/download/* answers 503 with Retry-After, never a 404 or stale bytes; files read before come from memory', async () => {
      assert.ok(serve);
      // Read through sleeve just before the store went away, and unchanged since: the file cache
      // answers it, with the bucket's bytes. (The catalogue changes made earlier emptied the cache
      // of everything else.)
      const held = await get(`${serve.base}/download/mbid-${release}/index.json`);
      assert.equal(held.status, 200);
      assert.ok(held.body.equals(indexBefore));
      for (const key of [`mbid-${release}/mbid-${release}-${front.id}.jpg`, `mbid-${release}/mbid-${release}-${front.id}_thumb1200.jpg`, `mbid-${release}/mbid-${release}-1.jpg`]) {
        for (const method of ['GET', 'HEAD']) {
          const res = await get(`${serve.base}/download/${key}`, { method });
          assert.equal(res.status, 503, `${method} ${key}`);
          assert.equal(res.headers.get('retry-after'), '5');
          assert.equal(res.headers.get('access-control-allow-origin'), '*');
          assert.equal(res.headers.get('cache-control'), null, 'nothing tells a cache to keep it');
          if (method === 'GET') assert.equal(res.body.toString(), 'The file store is unavailable; try again later.\n');
        }
      }
    });

    it('a change that needs no new file is saved, with a warning that index.json waits for the store', async () => {
      const r = await runCli(t.env, ['--json', 'art', 'edit', release, back.id, '--comment', 'edited while away']);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(JSON.parse(r.stdout).comment, 'edited while away');
      assert.match(r.stderr, new RegExp(`^sleeve: warning: the change is saved, but index\\.json of release ${release} could not be rewritten: object store .* is unavailable: .*ECONNREFUSED.*\\n$`));
      assert.ok((await indexDirty(t, release)) > 0, 'the release stays marked for a rewrite');
      // The listing held in memory is the old one: once the server has seen the change, it is gone.
      assert.ok(serve);
      const listing = `${serve.base}/download/mbid-${release}/index.json`;
      const { value } = await pollUntil(async () => (await get(listing)).status, (v) => v === 503, 3000);
      assert.equal(value, 503, 'the old index.json is not served after the change');
      rowsBefore = await catalogue(t);
    });

    it('sleeve serve starts while the store is away and answers from the database', async () => {
      const late = await startServe(t.env);
      try {
        const res = await get(`${late.base}/release/${release}/front`);
        assert.equal(res.status, 307);
        assert.equal(res.headers.get('location'), answersBefore.front);
        assert.equal((await get(`${late.base}/download/mbid-${release}/index.json`)).status, 503);
      } finally {
        assert.equal(await late.stop(), 0);
      }
      const warning = late.log().split('\n').find((l) => l.includes('index.json files left to rewrite'));
      assert.ok(warning !== undefined, late.log());
      assert.match(JSON.parse(warning).err.message, /object store s3:\/\/sleeve-test .* is unavailable/);
    });

    it('when it returns: no stray objects, index.json untouched by the failures, the server catches up, and everything works again', async () => {
      assert.ok(serve);
      const running = serve;
      // Meanwhile the running server's sweep (every 10 s, marks older than 10 s) finds the edit's index.json and waits.
      const waited = await pollUntil(async () => running.log(), (log) => log.includes('index.json files left to rewrite wait for the store'), 40_000, 250);
      assert.match(waited.value, /index\.json files left to rewrite wait for the store/, 'the sweep says why it waits');
      assert.doesNotMatch(waited.value, /cannot read the catalogue version/, 'the store away is not reported as the database away');
      await s3.start();
      assert.deepEqual(await s3.listKeys(), keysBefore, 'no object of the failed uploads');
      assert.ok(Buffer.from(await (await s3.fetchObject(`mbid-${release}/index.json`)).arrayBuffer()).equals(indexBefore));

      // The running server recovers on its own: it serves files again, and its sweep rewrites
      // the index.json left waiting by the edit (marks older than 10 s, every 10 s).
      const back_ = await get(`${serve.base}/download/mbid-${release}/mbid-${release}-${front.id}.jpg`);
      assert.equal(back_.status, 200);
      assert.ok(back_.body.equals(jpeg));
      const swept = await pollUntil(
        async () => ((await (await s3.fetchObject(`mbid-${release}/index.json`)).json()) as { images: { comment: string }[] }).images.map((i) => i.comment),
        (comments) => comments.includes('edited while away'),
        40_000,
        500,
      );
      assert.deepEqual(swept.value, ['', 'edited while away'], `index.json rewritten by the server within ${swept.ms} ms`);
      assert.equal(await indexDirty(t, release), 0);

      // The same upload now works, and its rewrite of index.json carries the edit made while the store was away.
      const entry = await cliOk(t.env, ['--json', 'art', 'add', release, await writeInput(t, 'later.jpg', await makeJpeg(640, 480)), '--type', 'Booklet']);
      const listing = (await (await s3.fetchObject(`mbid-${release}/index.json`)).json()) as { images: { id: string; comment: string }[] };
      assert.deepEqual(
        listing.images.map((i) => [i.id, i.comment]),
        [
          [front.id, ''],
          [back.id, 'edited while away'],
          [entry.id, ''],
        ],
      );
      assert.equal(await indexDirty(t, release), 0);
      assert.equal((await s3.listKeys()).length, keysBefore.length + 4);
      assert.equal((await get(`${serve.base}/release/${release}/${entry.id}`)).status, 307);
    });
  });
});

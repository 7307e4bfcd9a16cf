/*
 * SLEEVE_IMAGE_RESPONSE=bytes: the image endpoints of the cover art API answer 200 with the
 * file (from the store, fetched through the upstream when the store lacks it) with the file
 * server's validators, ranges and 304s and the endpoint's own Cache-Control; listings stay as
 * they are. On file and s3:// storage, with the pull-through's counters on GET /metrics, its cap
 * on waiting upstream requests (503), and two serving processes filling the same file.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { cliInProcess, cliOk, DIALECT, freePort, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { dimensions, makeJpeg, makePng } from '../helpers/images.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { countOf, scrape } from '../metrics/support.js';

const TS = '2012-01-26 00:54:05.519372+00';
const G1 = '5b0a1f00-0000-4000-8000-000000000021';
const G2 = '5b0a1f00-0000-4000-8000-000000000022';
const G3 = '5b0a1f00-0000-4000-8000-000000000023';
const R1 = '7e1ea5e0-0000-4000-8000-000000000021';
/** The original only upstream: its thumbnails are made here. */
const R2 = '7e1ea5e0-0000-4000-8000-000000000022';
/** Many images, each held upstream: the cap on waiting upstream requests. */
const R3 = '7e1ea5e0-0000-4000-8000-000000000023';
const UNKNOWN = '7e1ea5e0-0000-4000-8000-0000000000ff';
/** SLEEVE_UPSTREAM_CONCURRENCY=1: one request upstream, 64 waiting (upstream.ts), the rest 503. */
const CAPPED = Array.from({ length: 70 }, (_, i) => 3001 + i);

const orig = (m: string, id: number, suffix = 'jpg') => `mbid-${m}/mbid-${m}-${id}.${suffix}`;
const thumb = (m: string, id: number, size: number) => `mbid-${m}/mbid-${m}-${id}_thumb${size}.jpg`;

function release(id: number, gid: string, group: number): Value[] {
  return [id, gid, `Release ${id}`, 1, group, 1, null, 120, 28, null, '', 0, -1, TS];
}

function image(id: number, releaseId: number, ordering: number, mime = 'image/jpeg'): Value[] {
  return [id, releaseId, '', 5000 + id, ordering, TS, 0, mime, 1000, 100, 200, 300];
}

async function writeTestDump(t: TestEnv): Promise<string> {
  return writeDump(path.join(t.dir, 'dump'), {
    release_group: [
      [1, G1, 'Group One', 1, 1, '', 0, TS],
      [2, G2, 'Group Two', 1, 1, '', 0, TS],
      [3, G3, 'Group Three', 1, 1, '', 0, TS],
    ],
    release: [release(1, R1, 1), release(2, R2, 2), release(3, R3, 3)],
    'cover_art_archive.cover_art': [image(101, 1, 1), image(102, 1, 2, 'image/png'), image(201, 2, 1), ...CAPPED.map((id, i) => image(id, 3, i + 1))],
    'cover_art_archive.cover_art_type': [[101, 1], [102, 2], [201, 1], ...CAPPED.map((id) => [id, 3] as Value[])],
  });
}

const body = async (res: Response) => Buffer.from(await res.arrayBuffer());

describe(`SLEEVE_IMAGE_RESPONSE=bytes on file storage (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let server: Server;
  let base: string;
  const images: Record<string, Buffer> = {};
  const stored = (key: string) => path.join(t.dir, 'files', key);
  const metrics = () => scrape(server.metricsAddress);
  const pulled = async (labels: Record<string, string>) => countOf(await metrics(), 'sleeve_pull_through_total', labels);

  before(async () => {
    up = await startUpstream();
    images.front = await makeJpeg(400, 300, 80);
    images.back = await makePng(300, 200);
    images.r2 = await makeJpeg(600, 400, 80);
    images.plain = await makeJpeg(64, 64, 70);
    up.put(orig(R1, 101), images.front);
    up.put(orig(R1, 102, 'png'), images.back, 'image/png');
    up.put(orig(R2, 201), images.r2);
    for (const id of CAPPED) {
      up.put(orig(R3, id), images.plain);
      up.fault(orig(R3, id), { kind: 'held' });
    }
    t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url, SLEEVE_UPSTREAM_CONCURRENCY: '1', SLEEVE_IMAGE_RESPONSE: 'bytes' });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(t)]);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    const env = { ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base, SLEEVE_METRICS_LISTEN: `127.0.0.1:${await freePort()}` };
    server = await serve(loadConfig(env), { only: 'coverart' });
  });

  after(async () => {
    up?.release();
    await server?.close();
    await up?.close();
    await t?.cleanup();
  });

  it('answers /front with the image fetched through, then from the store (response cache replays too)', async () => {
    assert.equal(existsSync(stored(orig(R1, 101))), false);
    const first = await fetch(`${base}/release/${R1}/front`, { redirect: 'manual' });
    assert.equal(first.status, 200);
    assert.equal(first.headers.get('content-type'), 'image/jpeg');
    assert.equal(first.headers.get('cache-control'), 'public, max-age=60', "the endpoint's, not the file's (front may change)");
    assert.equal(first.headers.get('access-control-allow-origin'), '*');
    assert.equal(first.headers.get('accept-ranges'), 'bytes');
    assert.equal(first.headers.get('location'), null);
    assert.deepEqual(await body(first), images.front);
    assert.deepEqual(await readFile(stored(orig(R1, 101))), images.front);
    const etag = first.headers.get('etag');
    assert.ok(etag !== null);
    // The second answer comes from the response cache's entry (the front door), the file from the store.
    const again = await fetch(`${base}/release/${R1}/front`);
    assert.equal(again.status, 200);
    assert.equal(again.headers.get('etag'), etag);
    assert.deepEqual(await body(again), images.front);
    assert.equal(up.count(orig(R1, 101)), 1);
    // The file itself under /download/ keeps its own long Cache-Control.
    const file = await fetch(`${base}/download/${orig(R1, 101)}`);
    assert.equal(file.headers.get('etag'), etag);
    assert.equal(file.headers.get('cache-control'), 'public, max-age=31536000, immutable');
    await file.arrayBuffer();
  });

  it('answers If-None-Match with 304, a range with 206 or 416, HEAD without a body', async () => {
    const etag = (await fetch(`${base}/download/${orig(R1, 101)}`, { method: 'HEAD' })).headers.get('etag') as string;
    const fresh = await fetch(`${base}/release/${R1}/front`, { headers: { 'if-none-match': etag } });
    assert.equal(fresh.status, 304);
    assert.equal(fresh.headers.get('cache-control'), 'public, max-age=60');
    assert.equal(fresh.headers.get('etag'), etag);
    const part = await fetch(`${base}/release/${R1}/front`, { headers: { range: 'bytes=0-9' } });
    assert.equal(part.status, 206);
    assert.equal(part.headers.get('content-range'), `bytes 0-9/${images.front?.length}`);
    assert.deepEqual(await body(part), images.front?.subarray(0, 10));
    const beyond = await fetch(`${base}/release/${R1}/front`, { headers: { range: `bytes=${images.front?.length}-` } });
    assert.equal(beyond.status, 416);
    await beyond.arrayBuffer();
    const head = await fetch(`${base}/release/${R1}/front`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(head.headers.get('content-length'), String(images.front?.length));
    assert.equal((await body(head)).length, 0);
  });

  it('answers /{id}, /back and the release group front (a thumbnail made from the original)', async () => {
    const byId = await fetch(`${base}/release/${R1}/102.png`);
    assert.equal(byId.status, 200);
    assert.equal(byId.headers.get('content-type'), 'image/png');
    assert.equal(byId.headers.get('cache-control'), 'public, max-age=86400');
    assert.deepEqual(await body(byId), images.back);
    const back = await fetch(`${base}/release/${R1}/back`);
    assert.deepEqual(await body(back), images.back);
    const before = await pulled({ result: 'stored' });
    const group = await fetch(`${base}/release-group/${G2}/front-250`);
    assert.equal(group.status, 200);
    assert.equal(group.headers.get('content-type'), 'image/jpeg');
    assert.deepEqual(await dimensions(await body(group)), { format: 'jpeg', width: 250, height: 167 });
    assert.ok(existsSync(stored(thumb(R2, 201, 250))));
    assert.equal(up.count(thumb(R2, 201, 250)), 1, 'asked once, absent');
    assert.equal(await pulled({ result: 'stored' }), before + 1);
  });

  it('leaves listings and error answers as they were', async () => {
    const listing = await fetch(`${base}/release/${R1}/`, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(listing.status, 307);
    assert.equal(listing.headers.get('location'), `${base}/download/mbid-${R1}/index.json`);
    const group = await fetch(`${base}/release-group/${G1}/`, { headers: { accept: 'application/json' } });
    assert.equal(group.status, 200);
    assert.equal(((await group.json()) as { images: unknown[] }).images.length, 2);
    const unknown = await fetch(`${base}/release/${UNKNOWN}/front`);
    assert.equal(unknown.status, 404);
    assert.match(await unknown.text(), /No front cover image found/);
    const noSuchId = await fetch(`${base}/release/${R1}/999`);
    assert.equal(noSuchId.status, 404);
    await noSuchId.arrayBuffer();
    const made = await fetch(`${base}/release/${R1}/101-1200`);
    assert.equal(made.status, 200, 'made from the original');
    assert.deepEqual(await dimensions(await body(made)), { format: 'jpeg', width: 400, height: 300 });
  });

  it('answers 503 with Retry-After once more requests wait for the upstream than the cap allows, and counts them', async () => {
    const before = await metrics();
    const misses = countOf(before, 'sleeve_file_store_reads_total', { result: 'miss' });
    let answered = 0;
    const requests = CAPPED.map((id) =>
      fetch(`${base}/release/${R3}/${id}`).then(async (res) => {
        answered++;
        return { status: res.status, retryAfter: res.headers.get('retry-after'), bytes: await body(res) };
      }),
    );
    // 1 in flight and 64 waiting (SLEEVE_UPSTREAM_CONCURRENCY=1): the other 5 are refused at once.
    const { value } = await pollUntil(async () => answered, (n) => n >= 5, 10_000);
    assert.equal(value, 5);
    const upstreamRequests = () => CAPPED.reduce((n, id) => n + up.count(orig(R3, id)), 0);
    assert.equal(upstreamRequests(), 1, 'one request upstream at a time');
    for (const id of CAPPED) up.fault(orig(R3, id), undefined);
    up.release();
    const answers = await Promise.all(requests);
    const refused = answers.filter((a) => a.status === 503);
    assert.equal(refused.length, 5);
    for (const a of refused) {
      assert.equal(a.retryAfter, '30');
      assert.match(a.bytes.toString(), /too many requests wait for the upstream/);
    }
    const served = answers.filter((a) => a.status === 200);
    assert.equal(served.length, 65);
    assert.equal(upstreamRequests(), 65);
    for (const a of served) assert.deepEqual(a.bytes, images.plain);
    const after = await metrics();
    assert.equal(countOf(after, 'sleeve_pull_through_total', { result: 'failed', reason: 'busy' }) - countOf(before, 'sleeve_pull_through_total', { result: 'failed', reason: 'busy' }), 5);
    assert.equal(countOf(after, 'sleeve_pull_through_total', { result: 'stored' }) - countOf(before, 'sleeve_pull_through_total', { result: 'stored' }), 65);
    assert.equal(countOf(after, 'sleeve_file_store_reads_total', { result: 'miss' }) - misses, 70);
    // The refused ones were never stored: a retry fetches them.
    const retried = await fetch(`${base}/release/${R3}/${CAPPED.find((id) => !existsSync(stored(orig(R3, id))))}`);
    assert.equal(retried.status, 200);
    await retried.arrayBuffer();
  });
});

describe('SLEEVE_IMAGE_RESPONSE', () => {
  it('is redirect by default; anything but redirect or bytes is refused', () => {
    assert.equal(loadConfig({ SLEEVE_DATA_DIR: '/tmp/x' }).imageResponse, 'redirect');
    assert.equal(loadConfig({ SLEEVE_DATA_DIR: '/tmp/x', SLEEVE_IMAGE_RESPONSE: 'Bytes' }).imageResponse, 'bytes');
    assert.throws(() => loadConfig({ SLEEVE_DATA_DIR: '/tmp/x', SLEEVE_IMAGE_RESPONSE: 'proxy' }), /SLEEVE_IMAGE_RESPONSE="proxy": must be redirect or bytes/);
  });
});

describe(`SLEEVE_IMAGE_RESPONSE=bytes on s3:// storage, from two serving processes (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s3: S3TestServer;
  let a: ServeProcess;
  let b: ServeProcess;
  let front: Buffer;

  before(async () => {
    up = await startUpstream();
    s3 = await startS3();
    front = await makeJpeg(600, 400, 80);
    up.put(orig(R2, 201), front);
    up.fault(orig(R2, 201), { kind: 'held' });
    t = await makeTestEnv({ ...s3.env, SLEEVE_UPSTREAM_URL: up.url, SLEEVE_IMAGE_RESPONSE: 'bytes' });
    await cliOk(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(t)]);
    [a, b] = await Promise.all([startServe(t.env, ['--only', 'coverart']), startServe(t.env, ['--only', 'coverart'])]);
  });

  after(async () => {
    up?.release();
    await a?.stop();
    await b?.stop();
    await up?.close();
    await s3?.close();
    await t?.cleanup();
  });

  it('fetches the file into the bucket at most once per process and answers every request with it', async () => {
    const urls = [a.base, b.base, a.base, b.base].map((s) => `${s}/release/${R2}/front`);
    const requests = urls.map((u) => fetch(u));
    // Each process sends one request upstream (its own single flight); the others wait on it.
    await pollUntil(async () => up.count(orig(R2, 201)), (n) => n >= 2, 10_000);
    up.fault(orig(R2, 201), undefined);
    up.release();
    const answers = await Promise.all(requests);
    for (const res of answers) {
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.deepEqual(await body(res), front);
    }
    assert.equal(up.count(orig(R2, 201)), 2);
    // The fetched original, and the listing rewritten to describe it, soon after (docs/decisions.md,
    // "Listings that describe the images"; cover-art/listings/listing-rewrites.ts).
    const keys = await pollUntil(() => s3.listKeys(`mbid-${R2}/`), (k) => k.length === 2, 10_000);
    assert.deepEqual(keys.value, [`mbid-${R2}/index.json`, orig(R2, 201)]);
    const etag = answers[0]?.headers.get('etag') as string;
    const fresh = await fetch(`${b.base}/release/${R2}/front`, { headers: { 'if-none-match': etag } });
    assert.equal(fresh.status, 304);
    const part = await fetch(`${a.base}/release-group/${G2}/front`, { headers: { range: 'bytes=-4' } });
    assert.equal(part.status, 206);
    assert.deepEqual(await body(part), front.subarray(front.length - 4));
    assert.equal(up.count(orig(R2, 201)), 2, 'later requests are the bucket');
  });
});

/*
 * After `sleeve import musicbrainz`, with the default image base: listings are written from
 * the database when first asked for, and with SLEEVE_UPSTREAM_URL the images and thumbnails
 * the store lacks are fetched from an archive.org-like upstream (a fake one in this process),
 * checked and stored; every upstream fault ends with a clear answer and nothing stored.
 */
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { existsSync } from 'node:fs';
import { readFile, readdir } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { isPublicAddress } from '../../src/http/public-address.js';
import { serve, type Server } from '../../src/serve.js';
import { cliInProcess, cliOk, DIALECT, freePort, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { dimensions, makeJpeg, makePng } from '../helpers/images.js';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { query } from '../import/support.js';
import { countOf, scrape } from '../metrics/support.js';

const TS = '2012-01-26 00:54:05.519372+00';
const G1 = '5b0a1f00-0000-4000-8000-000000000001';
const G2 = '5b0a1f00-0000-4000-8000-000000000002';
const R1 = '7e1ea5e0-0000-4000-8000-000000000001';
const R2 = '7e1ea5e0-0000-4000-8000-000000000002';
const R3 = '7e1ea5e0-0000-4000-8000-000000000003';
/** A release without images. */
const R4 = '7e1ea5e0-0000-4000-8000-000000000004';
const UNKNOWN = '7e1ea5e0-0000-4000-8000-0000000000ff';

/** Images of R3, one per upstream fault. */
const FAULT = {
  slow: 301,
  flaky: 302,
  missing: 303,
  truncated: 304,
  wrongType: 305,
  notImage: 306,
  tooLarge: 307,
  reset: 308,
  /** The catalogue says PNG; the upstream has JPEG bytes under the .png name. */
  otherFormat: 309,
  held: 310,
  /** Half a JPEG, sent whole (its Content-Length matches). */
  cutImage: 311,
  slowBody: 312,
} as const;

function release(id: number, gid: string, group: number): Value[] {
  return [id, gid, `Release ${id}`, 1, group, 1, null, 120, 28, null, '', 0, -1, TS];
}

function image(id: number, releaseId: number, ordering: number, mime = 'image/jpeg'): Value[] {
  return [id, releaseId, '', 5000 + id, ordering, TS, 0, mime, 1000, 100, 200, 300];
}

async function writeTestDump(dir: string): Promise<string> {
  const faults = Object.values(FAULT);
  return writeDump(dir, {
    release_group: [
      [1, G1, 'Group One', 1, 1, '', 0, TS],
      [2, G2, 'Group Two', 1, 1, '', 0, TS],
    ],
    release: [release(1, R1, 1), release(2, R2, 1), release(3, R3, 2), release(4, R4, 2)],
    'cover_art_archive.cover_art': [
      image(101, 1, 1),
      image(102, 1, 2, 'image/png'),
      image(201, 2, 1),
      ...faults.map((id, i) => image(id, 3, i + 1, id === FAULT.otherFormat ? 'image/png' : 'image/jpeg')),
    ],
    'cover_art_archive.cover_art_type': [
      [101, 1],
      [102, 2],
      [201, 1],
      ...faults.map((id) => [id, 3] as Value[]),
    ],
  });
}

const orig = (m: string, id: number, suffix = 'jpg') => `mbid-${m}/mbid-${m}-${id}.${suffix}`;
const thumb = (m: string, id: number, size: number) => `mbid-${m}/mbid-${m}-${id}_thumb${size}.jpg`;

interface Running {
  server: Server;
  base: string;
}

/** sleeve serve in this process with the given clock (the negative cache's time). */
async function startWith(t: TestEnv, clock: { now(): number }, extra: Record<string, string> = {}): Promise<Running> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const env = { ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base, SLEEVE_IMAGE_BASE_URL: `${base}/download`, ...extra };
  const server = await serve(loadConfig(env), { only: 'coverart', clock });
  return { server, base };
}

/** Part-written files of the file store (.tmp/…), which must never outlive a request. */
async function tempFiles(t: TestEnv): Promise<string[]> {
  const dir = path.join(t.dir, 'files', '.tmp');
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const sub of await readdir(dir)) out.push(...(await readdir(path.join(dir, sub))));
  return out;
}

describe(`listings on demand and pull-through after an import (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s: Running;
  let offset = 0;
  const clock = { now: () => Date.now() + offset };
  const stored = (key: string) => path.join(t.dir, 'files', key);
  const images: Record<string, Buffer> = {};

  before(async () => {
    up = await startUpstream();
    images.r1front = await makeJpeg(400, 300, 80);
    images.r1back = await makePng(300, 200);
    images.r1thumb = await makeJpeg(250, 188, 80);
    images.r2front = await makeJpeg(600, 400, 80);
    images.plain = await makeJpeg(320, 240, 80);
    images.large = await makeJpeg(1500, 1500, 95);
    up.put(orig(R1, 101), images.r1front);
    up.put(orig(R1, 102, 'png'), images.r1back, 'image/png');
    up.put(thumb(R1, 101, 250), images.r1thumb);
    // R2: the original only (archive.org's gaps in derivatives).
    up.put(orig(R2, 201), images.r2front);
    for (const id of Object.values(FAULT)) if (id !== FAULT.missing) up.put(orig(R3, id, id === FAULT.otherFormat ? 'png' : 'jpg'), images.plain, id === FAULT.otherFormat ? 'image/png' : 'image/jpeg');
    up.put(orig(R3, FAULT.tooLarge), images.large);
    up.put(orig(R3, FAULT.cutImage), images.plain.subarray(0, Math.floor(images.plain.length / 2)));
    up.put(orig(R3, FAULT.notImage), Buffer.from('<html>this is not an image</html>'.repeat(20)));
    up.fault(orig(R3, FAULT.slow), { kind: 'slow-first-byte', ms: 10_000 });
    up.fault(orig(R3, FAULT.slowBody), { kind: 'slow-body', ms: 10_000 });
    up.fault(orig(R3, FAULT.flaky), { kind: 'fail-then-serve', status: 500, times: 1 });
    up.fault(orig(R3, FAULT.truncated), { kind: 'truncated' });
    up.fault(orig(R3, FAULT.wrongType), { kind: 'content-type', type: 'text/html' });
    up.fault(orig(R3, FAULT.tooLarge), { kind: 'chunked' });
    up.fault(orig(R3, FAULT.reset), { kind: 'reset' });
    up.fault(orig(R3, FAULT.held), { kind: 'held' });

    t = await makeTestEnv({
      SLEEVE_RESPONSE_CACHE: '0',
      SLEEVE_UPSTREAM_URL: up.url,
      SLEEVE_UPSTREAM_TIMEOUT_MS: '400',
      SLEEVE_UPSTREAM_MAX_BYTES: '200000',
      SLEEVE_UPSTREAM_NOT_FOUND_TTL_MS: '60000',
    });
    const dump = await writeTestDump(path.join(t.dir, 'dump'));
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', dump]);
    s = await startWith(t, clock);
  });

  after(async () => {
    up?.release();
    await s?.server.close();
    await up?.close();
    await t?.cleanup();
  });

  it('answers a release listing at once after the import (default image base), written from the database', async () => {
    assert.equal(existsSync(stored(`mbid-${R1}/index.json`)), false, 'the import writes no listing');
    const redirect = await fetch(`${s.base}/release/${R1}/`, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(redirect.status, 307);
    assert.equal(redirect.headers.get('location'), `${s.base}/download/mbid-${R1}/index.json`);
    const res = await fetch(`${s.base}/release/${R1}/`, { headers: { accept: 'application/json' } });
    assert.equal(res.status, 200);
    const listing = (await res.json()) as { images: { id: string; front: boolean; back: boolean; image: string }[]; release: string };
    assert.deepEqual(
      listing.images.map((i) => [i.id, i.front, i.back, i.image]),
      [
        ['101', true, false, `${s.base}/release/${R1}/101.jpg`],
        ['102', false, true, `${s.base}/release/${R1}/102.png`],
      ],
    );
    assert.equal(listing.release, `https://musicbrainz.org/release/${R1}`);
    assert.ok(existsSync(stored(`mbid-${R1}/index.json`)), 'stored for the next request');
    // The release-group listing, from the database as always.
    const group = await fetch(`${s.base}/release-group/${G1}/`, { headers: { accept: 'application/json' } });
    assert.equal(group.status, 200);
    assert.equal(((await group.json()) as { images: unknown[] }).images.length, 2);
  });

  it('serves /download/mbid-{id}/index.json of a release never asked for, and 404 for a release without images', async () => {
    const res = await fetch(`${s.base}/download/mbid-${R3}/index.json`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(((await res.json()) as { images: unknown[] }).images.length, Object.keys(FAULT).length);
    assert.equal((await fetch(`${s.base}/download/mbid-${R4}/index.json`)).status, 404);
    assert.equal((await fetch(`${s.base}/download/mbid-${UNKNOWN}/index.json`)).status, 404);
    assert.equal(existsSync(stored(`mbid-${R4}/index.json`)), false);
    // Listings are never fetched from the upstream.
    assert.deepEqual(up.paths.filter((p) => p.endsWith('index.json')), []);
  });

  it('fetches an original through, stores it and serves it (PNG too); the next request is the store', async () => {
    const res = await fetch(`${s.base}/release/${R1}/front`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'image/jpeg');
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), images.r1front);
    assert.deepEqual(await readFile(stored(orig(R1, 101))), images.r1front);
    const png = await fetch(`${s.base}/download/${orig(R1, 102, 'png')}`);
    assert.equal(png.status, 200);
    assert.equal(png.headers.get('content-type'), 'image/png');
    assert.deepEqual(Buffer.from(await png.arrayBuffer()), images.r1back);
    const before = up.count(orig(R1, 101));
    assert.equal(before, 1);
    assert.equal((await fetch(`${s.base}/download/${orig(R1, 101)}`)).status, 200);
    assert.equal(up.count(orig(R1, 101)), 1, 'served from the store');
  });

  it('fetches a thumbnail the upstream has', async () => {
    const res = await fetch(`${s.base}/release/${R1}/front-250`);
    assert.equal(res.status, 200);
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), images.r1thumb);
    assert.deepEqual(await readFile(stored(thumb(R1, 101, 250))), images.r1thumb);
  });

  it('makes a thumbnail the upstream lacks from the original, fetching the original through', async () => {
    const res = await fetch(`${s.base}/download/${thumb(R2, 201, 500)}`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'image/jpeg');
    const dims = await dimensions(Buffer.from(await res.arrayBuffer()));
    assert.deepEqual(dims, { format: 'jpeg', width: 500, height: 333 });
    assert.equal(up.count(thumb(R2, 201, 500)), 1);
    assert.equal(up.count(orig(R2, 201)), 1);
    assert.deepEqual(await readFile(stored(orig(R2, 201))), images.r2front);
    assert.ok(existsSync(stored(thumb(R2, 201, 500))));
  });

  it('never sends the upstream a path the catalogue does not know', async () => {
    const total = up.total();
    for (const p of [
      orig(R1, 999),
      orig(R1, 101, 'png'),
      orig(R1, 201),
      orig(UNKNOWN, 101),
      thumb(R1, 999, 250),
      `mbid-${R1}/mbid-${R1}-101_thumb300.jpg`,
      `mbid-${R1}/other.jpg`,
      `mbid-${R1}/mbid-${R1}-101.jpg%2f..%2f..%2fx.jpg`,
    ]) {
      const res = await fetch(`${s.base}/download/${p}`);
      assert.equal(res.status, 404, p);
    }
    assert.equal(up.total(), total);
  });

  it("fetches and makes files only under the catalogue's own spelling of an id (no leading zeros, no other release's id)", async () => {
    // R2's original and its 500 thumbnail are in the store by now (the test above); the upstream lacks its thumbnails.
    const folder = path.join(t.dir, 'files', `mbid-${R2}`);
    // The image files: index.json is rewritten soon after a pull-through (listing-rewrites.ts), on its own time.
    const files = async () => (await readdir(folder)).filter((f) => f !== 'index.json').sort();
    const before = await files();
    const total = up.total();
    const spelled = (id: string, tail: string) => `mbid-${R2}/mbid-${R2}-${id}${tail}`;
    const variants: string[] = [];
    for (const id of ['0201', '00201', '0000000000000000201', `${'0'.repeat(16)}201`, '000201']) {
      variants.push(spelled(id, '.jpg'), ...[250, 500, 1200].map((size) => spelled(id, `_thumb${size}.jpg`)));
    }
    variants.push(
      // Over long: 20 digits, and one past 2^53 (a double would make it 2^53).
      spelled('12345678901234567890', '_thumb250.jpg'),
      spelled('9007199254740993', '_thumb250.jpg'),
      // Ids of another release (R1's), original and thumbnail, plain and zero-padded.
      spelled('101', '.jpg'),
      spelled('101', '_thumb250.jpg'),
      spelled('0101', '_thumb500.jpg'),
    );
    for (const key of variants) {
      const res = await fetch(`${s.base}/download/${key}`);
      assert.equal(res.status, 404, key);
      assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
      await res.arrayBuffer();
    }
    assert.equal(up.total(), total, `no upstream request: ${up.paths.slice(total).join(', ')}`);
    assert.deepEqual(await files(), before, 'no file stored');
    // The canonical names still work, and the API answers as coverartarchive.org does
    // (leading zeros dropped), pointing at the canonical name.
    const thumbnail = await fetch(`${s.base}/download/${thumb(R2, 201, 250)}`);
    assert.equal(thumbnail.status, 200);
    assert.deepEqual(await dimensions(Buffer.from(await thumbnail.arrayBuffer())), { format: 'jpeg', width: 250, height: 167 });
    assert.deepEqual(await files(), [...before, `mbid-${R2}-201_thumb250.jpg`].sort());
    for (const [name, key] of [
      ['00201', orig(R2, 201)],
      ['0201-250', thumb(R2, 201, 250)],
      ['000201.png', orig(R2, 201)],
    ] as const) {
      const res = await fetch(`${s.base}/release/${R2}/${name}`, { redirect: 'manual' });
      assert.equal(res.status, 307, name);
      assert.equal(res.headers.get('location'), `${s.base}/download/${key}`, name);
    }
    const missing = await fetch(`${s.base}/release/${R2}/0101`, { redirect: 'manual' });
    assert.equal(missing.status, 404);
    assert.match(await missing.text(), /cover image with id 101 not found/);
  });

  it('makes one upstream request for concurrent requests of one file', async () => {
    const key = orig(R3, FAULT.held);
    // A server of its own that waits for the held upstream answer as long as gathering the
    // requests may take under load (this suite's 400 ms timeout is for its slow upstreams).
    const patient = await startWith(t, clock, { SLEEVE_UPSTREAM_TIMEOUT_MS: '30000' });
    // Requests for the file that reached this (in-process) server's node:http.
    let received = 0;
    const port = Number(new URL(patient.base).port);
    const started = (message: unknown) => {
      const { request } = message as { request: http.IncomingMessage };
      if (request.socket.localPort === port && request.url === `/download/${key}`) received++;
    };
    const misses = async () => countOf(await scrape(patient.server.metricsAddress), 'sleeve_file_store_reads_total', { result: 'miss' });
    const missesBefore = await misses();
    diagnostics.subscribe('http.server.request.start', started);
    try {
      const answers = Array.from({ length: 6 }, () => fetch(`${patient.base}/download/${key}`));
      // Every request is in the server and has found the store without the file (so it goes to
      // the one upstream request, which is held) before that request is answered.
      const { value } = await pollUntil(
        async () => ({ received, missed: (await misses()) - missesBefore, asked: up.count(key) }),
        (v) => v.received === 6 && v.missed === 6 && v.asked === 1,
        5000,
        10,
      );
      assert.deepEqual(value, { received: 6, missed: 6, asked: 1 });
      up.release();
      const done = await Promise.all(answers);
      assert.deepEqual(
        done.map((r) => r.status),
        [200, 200, 200, 200, 200, 200],
      );
      for (const r of done) assert.deepEqual(Buffer.from(await r.arrayBuffer()), images.plain);
      assert.equal(up.count(key), 1);
    } finally {
      diagnostics.unsubscribe('http.server.request.start', started);
      up.release();
      await patient.server.close();
    }
  });

  it('answers 504 with Retry-After when the upstream is slow to answer, storing nothing', async () => {
    const started = Date.now();
    const res = await fetch(`${s.base}/download/${orig(R3, FAULT.slow)}`);
    assert.equal(res.status, 504);
    assert.equal(res.headers.get('retry-after'), '30');
    assert.match(await res.text(), /no answer from the upstream within 400 ms/);
    assert.ok(Date.now() - started < 5000);
    assert.equal(existsSync(stored(orig(R3, FAULT.slow))), false);
  });

  it('answers 504 when the body does not arrive within three times the timeout, storing nothing', async () => {
    const started = Date.now();
    const res = await fetch(`${s.base}/download/${orig(R3, FAULT.slowBody)}`);
    assert.equal(res.status, 504);
    assert.equal(res.headers.get('retry-after'), '30');
    assert.match(await res.text(), /did not send the whole file within 1200 ms/);
    assert.ok(Date.now() - started < 5000);
    assert.equal(up.count(orig(R3, FAULT.slowBody)), 1);
    assert.equal(existsSync(stored(orig(R3, FAULT.slowBody))), false);
  });

  it('retries a 500 and serves the file the second try brings', async () => {
    const res = await fetch(`${s.base}/download/${orig(R3, FAULT.flaky)}`);
    assert.equal(res.status, 200);
    assert.deepEqual(Buffer.from(await res.arrayBuffer()), images.plain);
    assert.equal(up.count(orig(R3, FAULT.flaky)), 2);
  });

  it('answers 404 for a file the upstream lacks and remembers it until the TTL passes (injected clock)', async () => {
    const key = orig(R3, FAULT.missing);
    assert.equal((await fetch(`${s.base}/download/${key}`)).status, 404);
    assert.equal(up.count(key), 1);
    assert.equal((await fetch(`${s.base}/download/${key}`)).status, 404);
    assert.equal(up.count(key), 1, 'remembered: no second upstream request');
    offset += 61_000;
    assert.equal((await fetch(`${s.base}/download/${key}`)).status, 404);
    assert.equal(up.count(key), 2, 'asked again once the TTL passed');
    // Its thumbnails: the upstream lacks them and the original, so 404 too.
    assert.equal((await fetch(`${s.base}/download/${thumb(R3, FAULT.missing, 250)}`)).status, 404);
    assert.equal(existsSync(stored(key)), false);
  });

  for (const [name, id, status, message] of [
    ['a truncated body', FAULT.truncated, 502, /could not be read|sent \d+ of \d+ bytes/],
    ['a Content-Type that is not an image', FAULT.wrongType, 502, /"text\/html", not an image/],
    ['bytes that are not an image', FAULT.notImage, 502, /not a usable image/],
    ['an image cut short but sent whole', FAULT.cutImage, 502, /not a usable image: the image could not be decoded \(truncated or corrupt\)/],
    ['an image larger than the limit', FAULT.tooLarge, 502, /more than 200000 bytes/],
    ['a connection reset', FAULT.reset, 502, /could not be read/],
    ['an image of another type than the catalogue says', FAULT.otherFormat, 502, /is image\/jpeg, the catalogue says image\/png/],
  ] as const) {
    it(`answers ${status} with Retry-After for ${name}, storing nothing`, async () => {
      const suffix = id === FAULT.otherFormat ? 'png' : 'jpg';
      const key = orig(R3, id, suffix);
      const res = await fetch(`${s.base}/download/${key}`);
      assert.equal(res.status, status);
      assert.equal(res.headers.get('retry-after'), '30');
      assert.equal(res.headers.get('access-control-allow-origin'), '*');
      assert.equal(res.headers.get('content-security-policy'), 'sandbox');
      assert.match(await res.text(), message);
      assert.equal(existsSync(stored(key)), false);
      assert.deepEqual(await tempFiles(t), []);
    });
  }

  it('retried the reset connection and the truncated body, not the answers that cannot get better', () => {
    assert.equal(up.count(orig(R3, FAULT.reset)), 3);
    assert.equal(up.count(orig(R3, FAULT.truncated)), 3);
    assert.equal(up.count(orig(R3, FAULT.wrongType)), 1);
    assert.equal(up.count(orig(R3, FAULT.notImage)), 1);
    assert.equal(up.count(orig(R3, FAULT.slow)), 1);
    assert.equal(up.count(orig(R3, FAULT.otherFormat, 'png')), 1);
  });
});

describe(`listings on demand from two serving processes at once (${DIALECT})`, () => {
  let t: TestEnv;
  let a: ServeProcess;
  let b: ServeProcess;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(path.join(t.dir, 'dump'))]);
    [a, b] = await Promise.all([startServe(t.env, ['--only', 'coverart']), startServe(t.env, ['--only', 'coverart'])]);
  });

  after(async () => {
    await a?.stop();
    await b?.stop();
    await t?.cleanup();
  });

  it('gives every concurrent request the same listing, whichever server writes it', async () => {
    const urls = [`${a.base}/release/${R1}/`, `${b.base}/release/${R1}/`, `${a.base}/download/mbid-${R1}/index.json`, `${b.base}/download/mbid-${R1}/index.json`];
    const answers = await Promise.all([...urls, ...urls].map((u) => fetch(u, { headers: { accept: 'application/json' } })));
    assert.deepEqual(
      answers.map((r) => r.status),
      answers.map(() => 200),
    );
    const bodies = new Set(await Promise.all(answers.map((r) => r.text())));
    assert.equal(bodies.size, 1);
    assert.equal(((JSON.parse([...bodies][0] as string) as { images: unknown[] }).images).length, 2);
    // Without an upstream, images the store lacks are a plain 404 (today's behaviour).
    assert.equal((await fetch(`${a.base}/download/${orig(R1, 101)}`)).status, 404);
  });

  it('rewrites a listing written on demand when a later import changes its images', async () => {
    const edited = path.join(t.dir, 'dump2');
    await writeDump(edited, {
      release_group: [
        [1, G1, 'Group One', 1, 1, '', 0, TS],
        [2, G2, 'Group Two', 1, 1, '', 0, TS],
      ],
      release: [release(1, R1, 1), release(2, R2, 1), release(3, R3, 2), release(4, R4, 2)],
      'cover_art_archive.cover_art': [image(101, 1, 1), image(201, 2, 1)],
      'cover_art_archive.cover_art_type': [
        [101, 1],
        [201, 1],
      ],
    }, { timestamp: '2026-11-08 00:00:00.000000+00', replicationSequence: 170168 });
    const marked = async () => (await query<{ gid: string }>(t, 'SELECT gid FROM release WHERE index_dirty > 0 ORDER BY gid')).map((r) => r.gid);
    assert.deepEqual(await marked(), []);
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', edited]);
    // The import marks the listings written so far (R1's only), which a serving process's sweep or the next command rewrites.
    assert.deepEqual(await marked(), [R1]);
    await cliInProcess(t.env, ['art', 'reindex', R1]);
    const res = await fetch(`${b.base}/download/mbid-${R1}/index.json`);
    assert.equal(res.status, 200);
    assert.deepEqual(((await res.json()) as { images: { id: string }[] }).images.map((i) => i.id), ['101']);
  });
});

describe(`pull-through into an S3 bucket, redirects to the bucket (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s3: S3TestServer;
  let s: ServeProcess;

  before(async () => {
    up = await startUpstream();
    s3 = await startS3();
    up.put(orig(R2, 201), await makeJpeg(600, 400, 80));
    t = await makeTestEnv({ ...s3.env, SLEEVE_RESPONSE_CACHE: '0', SLEEVE_UPSTREAM_URL: up.url });
    await cliOk(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(path.join(t.dir, 'dump'))]);
    s = await startServe(t.env, ['--only', 'coverart']);
  });

  after(async () => {
    await s?.stop();
    await up?.close();
    await s3?.close();
    await t?.cleanup();
  });

  it('writes the listing into the bucket before redirecting to it, and fetches images through into the bucket', async () => {
    const redirect = await fetch(`${s.base}/release/${R2}/`, { redirect: 'manual', headers: { accept: 'application/json' } });
    assert.equal(redirect.headers.get('location'), `${s3.publicUrl}/mbid-${R2}/index.json`);
    // Followed to the bucket itself, which sleeve does not answer for.
    const listing = await fetch(`${s.base}/release/${R2}/`, { headers: { accept: 'application/json' } });
    assert.equal(listing.status, 200);
    assert.equal(((await listing.json()) as { images: unknown[] }).images.length, 1);
    const res = await fetch(`${s.base}/download/${thumb(R2, 201, 250)}`);
    assert.equal(res.status, 200);
    assert.deepEqual(await dimensions(Buffer.from(await res.arrayBuffer())), { format: 'jpeg', width: 250, height: 167 });
    assert.deepEqual(await s3.listKeys(`mbid-${R2}/`), [`mbid-${R2}/index.json`, orig(R2, 201), thumb(R2, 201, 250)]);
    const again = await fetch(`${s.base}/download/${orig(R2, 201)}`);
    assert.equal(again.status, 200);
    assert.equal(up.count(orig(R2, 201)), 1);
  });
});

describe('pull-through settings', () => {
  it('are off by default, and read with their defaults when SLEEVE_UPSTREAM_URL is set', () => {
    assert.equal(loadConfig({ SLEEVE_DATA_DIR: '/tmp/x' }).upstream, undefined);
    assert.deepEqual(loadConfig({ SLEEVE_DATA_DIR: '/tmp/x', SLEEVE_UPSTREAM_URL: 'https://archive.org/download/' }).upstream, {
      url: 'https://archive.org/download',
      timeoutMs: 10_000,
      maxBytes: 52_428_800,
      concurrency: 8,
      notFoundTtlMs: 600_000,
      redirectAllowPrivate: false,
    });
  });

  it('name every bad value through the binary, before anything runs', async () => {
    const t = await makeTestEnv();
    try {
      const r = await runCli(
        { ...t.env, SLEEVE_UPSTREAM_URL: 'ftp://archive.org/download', SLEEVE_UPSTREAM_CONCURRENCY: '0', SLEEVE_UPSTREAM_TIMEOUT_MS: 'soon', SLEEVE_UPSTREAM_MAX_BYTES: '-1', SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE: 'yes please' },
        ['release', 'list'],
      );
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, /SLEEVE_UPSTREAM_URL="ftp:\/\/archive.org\/download": must be an absolute http or https URL/);
      assert.match(r.stderr, /SLEEVE_UPSTREAM_CONCURRENCY="0": must be a whole number from 1 to 1024/);
      assert.match(r.stderr, /SLEEVE_UPSTREAM_TIMEOUT_MS="soon": must be a whole number/);
      assert.match(r.stderr, /SLEEVE_UPSTREAM_MAX_BYTES="-1": must be a whole number/);
      assert.match(r.stderr, /SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE="yes please": must be on or off/);
    } finally {
      await t.cleanup();
    }
  });
});

describe(`pull-through: the upstream's redirects (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s: Running;
  /** Another service on this machine (as the metrics listener is): it must never be reached through a redirect. */
  let inner: http.Server;
  let innerPort = 0;
  const innerPaths: string[] = [];
  let jpeg: Buffer;
  const stored = (key: string) => path.join(t.dir, 'files', key);
  /** Sends `key` of R3 (an image the catalogue names) to `location`. */
  const redirect = (id: number, location: string) => {
    up.put(orig(R3, id), jpeg);
    up.fault(orig(R3, id), { kind: 'redirect', location });
  };

  before(async () => {
    jpeg = await makeJpeg(320, 240, 80);
    up = await startUpstream();
    inner = http.createServer((req, res) => {
      innerPaths.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(jpeg.length) });
      res.end(jpeg);
    });
    await new Promise<void>((resolve) => inner.listen(0, '127.0.0.1', resolve));
    innerPort = (inner.address() as AddressInfo).port;
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0', SLEEVE_UPSTREAM_URL: up.url, SLEEVE_UPSTREAM_TIMEOUT_MS: '2000' });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(path.join(t.dir, 'dump'))]);
    s = await startWith(t, { now: () => Date.now() });
  });

  after(async () => {
    await s?.server.close();
    await up?.close();
    inner?.closeAllConnections();
    await new Promise((resolve) => inner?.close(resolve));
    await t?.cleanup();
  });

  for (const [name, id, target, reason] of [
    ['to a loopback address (another port of this machine)', FAULT.slow, () => `http://127.0.0.1:${innerPort}/metrics`, /redirect was not followed: a redirect to 127\.0\.0\.1: not a public address/],
    ['to a host name that resolves to loopback', FAULT.flaky, () => `http://localhost:${innerPort}/internal.jpg`, /a redirect to localhost: it resolves to (127\.0\.0\.1|::1), not a public address/],
    ['to a private address', FAULT.missing, () => 'http://10.1.2.3/x.jpg', /a redirect to 10\.1\.2\.3: not a public address/],
    ['to a link-local address (cloud metadata)', FAULT.truncated, () => 'http://169.254.169.254/latest/meta-data/', /a redirect to 169\.254\.169\.254: not a public address/],
    ['to IPv6 loopback', FAULT.wrongType, () => `http://[::1]:${innerPort}/x.jpg`, /a redirect to ::1: not a public address/],
    ['to another scheme', FAULT.notImage, () => 'ftp://example.org/x.jpg', /a redirect to ftp: \(only https and http are followed off the configured upstream\)/],
  ] as const) {
    it(`refuses a redirect ${name}: 502, nothing fetched there, nothing stored, not retried`, async () => {
      redirect(id, target());
      const before = innerPaths.length;
      const res = await fetch(`${s.base}/download/${orig(R3, id)}`);
      const text = await res.text();
      assert.equal(res.status, 502, text);
      assert.match(text, reason);
      assert.equal(res.headers.get('retry-after'), '30');
      assert.equal(innerPaths.length, before, 'the other service was not reached');
      assert.equal(up.count(orig(R3, id)), 1, 'a refused redirect is not tried again');
      assert.equal(existsSync(stored(orig(R3, id))), false);
    });
  }

  it("follows the configured upstream's own redirects (as configured), at most 3 of them", async () => {
    const hop = (n: number) => `mbid-${R3}/hop-${n}`;
    for (let n = 1; n <= 4; n++) {
      up.put(hop(n), jpeg);
      up.fault(hop(n), { kind: 'redirect', location: n === 4 ? `${up.url}/${orig(R3, FAULT.tooLarge)}` : `${up.url}/${hop(n + 1)}` });
    }
    up.put(orig(R3, FAULT.tooLarge), jpeg);
    // original → hop-2 → hop-3 → hop-4 → the file is 4 redirects, one too many; → hop-3 → hop-4 → the file is 3.
    redirect(FAULT.reset, `${up.url}/${hop(2)}`);
    const tooMany = await fetch(`${s.base}/download/${orig(R3, FAULT.reset)}`);
    assert.equal(tooMany.status, 502);
    assert.match(await tooMany.text(), /more than 3 redirects/);
    redirect(FAULT.cutImage, `${up.url}/${hop(3)}`);
    const three = await fetch(`${s.base}/download/${orig(R3, FAULT.cutImage)}`);
    assert.equal(three.status, 200);
    assert.deepEqual(Buffer.from(await three.arrayBuffer()), jpeg);
    assert.equal(up.count(orig(R3, FAULT.tooLarge)), 1, 'the file at the end of 3 hops was fetched');
    assert.deepEqual(await readFile(stored(orig(R3, FAULT.cutImage))), jpeg);
  });

  it('follows a redirect to another host on a private network when the operator allows it (a mirror beside its storage nodes)', async () => {
    // The test's "storage node" is on loopback, as a private mirror's may be on 10.0.0.0/8.
    const allowing = await startWith(t, { now: () => Date.now() }, { SLEEVE_UPSTREAM_REDIRECT_ALLOW_PRIVATE: 'on' });
    try {
      for (const [id, target] of [
        [FAULT.held, `http://localhost:${innerPort}/storage-node/x.jpg`],
        [FAULT.slowBody, `http://127.0.0.1:${innerPort}/storage-node/y.jpg`],
      ] as const) {
        redirect(id, target);
        const before = innerPaths.length;
        const res = await fetch(`${allowing.base}/download/${orig(R3, id)}`);
        assert.equal(res.status, 200, await res.clone().text());
        assert.deepEqual(Buffer.from(await res.arrayBuffer()), jpeg);
        assert.deepEqual(innerPaths.slice(before), [new URL(target).pathname]);
        assert.deepEqual(await readFile(stored(orig(R3, id))), jpeg);
      }
      // Only the addresses are let through: the scheme rule still holds.
      const png = orig(R3, FAULT.otherFormat, 'png');
      up.put(png, jpeg);
      up.fault(png, { kind: 'redirect', location: 'ftp://127.0.0.1/x.png' });
      const ftp = await fetch(`${allowing.base}/download/${png}`);
      assert.equal(ftp.status, 502);
      assert.match(await ftp.text(), /a redirect to ftp: \(only https and http are followed off the configured upstream\)/);
    } finally {
      await allowing.server.close();
    }
  });
});

describe('isPublicAddress (the redirect check)', () => {
  it('allows public unicast addresses only', () => {
    for (const a of ['207.241.224.2', '8.8.8.8', '1.1.1.1', '2620:0:9c0:200::2', '2001:4860:4860::8888', '::ffff:207.241.224.2']) assert.equal(isPublicAddress(a), true, a);
    for (const a of [
      '0.0.0.0',
      '10.0.0.1',
      '100.64.0.1',
      '127.0.0.1',
      '127.8.9.10',
      '169.254.169.254',
      '172.16.0.1',
      '172.31.255.255',
      '192.0.0.8',
      '192.0.2.1',
      '192.168.1.1',
      '198.18.0.1',
      '198.51.100.7',
      '203.0.113.9',
      '224.0.0.1',
      '240.0.0.1',
      '255.255.255.255',
      '::',
      '::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '::ffff:10.0.0.1',
      'fc00::1',
      'fd12:3456::1',
      'fe80::1',
      'ff02::1',
      '2001:db8::1',
      '2002:7f00:1::1',
      '64:ff9b::7f00:1',
      'localhost',
      '',
    ]) {
      assert.equal(isPublicAddress(a), false, a);
    }
  });
});

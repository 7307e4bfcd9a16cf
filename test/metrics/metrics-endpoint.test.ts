/*
 * The metrics listener (SLEEVE_METRICS_LISTEN) through HTTP against a real server: the
 * text format, request counts and latency histograms on both listeners (answers replayed
 * from the response cache and rate-limit refusals included), bounded route labels, and
 * the counts that CLI processes leave in the database.
 */
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import { request } from '../helpers/auth.js';
import { ShiftedClock } from '../helpers/clock.js';
import { cliInProcess, cliOk, DIALECT, makeTestEnv, pollUntil, rawHttp, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { spawnCli } from '../cover-art/cli-support.js';
import { generateDump } from '../../datagen/mbdump.js';
import { redisUnavailable, startRedis, type PrivateRedis } from '../helpers/redis.js';
import { COVER_ART_ROUTES, countOf, scrape, startLoggedServer, valueOf, type LoggedServer, type Scrape } from './support.js';

const R = '3e7a0000-0000-4000-8000-000000000001';
const G = '3e7a0000-0000-4000-8000-0000000000aa';
const UNKNOWN = '3e7a0000-0000-4000-8000-00000000ffff';
const REQS = 'sleeve_http_requests_total';
const DUR = 'sleeve_http_request_duration_seconds';

function req(listener: string, route: string, method: string, status: number): Record<string, string> {
  return { listener, route, method, status: String(status) };
}
function dur(listener: string, route: string, method: string): Record<string, string> {
  return { listener, route, method };
}

/** After minus before, for one sample. */
function moved(before: Scrape, after: Scrape, name: string, labels: Record<string, string>): number {
  return countOf(after, name, labels) - countOf(before, name, labels);
}

async function get(url: string, init: RequestInit = {}): Promise<Response> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  await res.arrayBuffer();
  return res;
}

describe(`metrics listener (${DIALECT})`, () => {
  let t: TestEnv;
  let s: LoggedServer;
  let imageBytes: Buffer;
  /** Real time (the CLI's changes are polled for), moved on past the database-held values' age. */
  const clock = new ShiftedClock();

  before(async () => {
    // The CLI's changes below have emptied the server's response cache before the counting
    // starts (and not in the middle): its caches are brought up to the catalogue before it.
    t = await makeTestEnv({ SLEEVE_CHANGE_POLL_MS: '20' });
    s = await startLoggedServer(t, {}, clock);
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
    imageBytes = await makeJpeg(300, 300);
    const file = path.join(t.dir, 'front.jpg');
    await writeFile(file, imageBytes);
    await cliInProcess(t.env, ['art', 'add', R, file, '--type', 'Front']);
    await s.server.refreshCaches();
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('answers GET /metrics in the Prometheus text format, every line well formed, with process metrics', async () => {
    const res = await fetch(`${s.server.metricsAddress}/metrics`);
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
    const m = await scrape(s.server.metricsAddress);
    // Default process metrics, in this registry, prefixed.
    for (const name of ['sleeve_process_cpu_user_seconds_total', 'sleeve_process_resident_memory_bytes', 'sleeve_nodejs_eventloop_lag_seconds', 'sleeve_nodejs_heap_size_used_bytes']) {
      assert.ok(m.types.has(name), `${name} is reported`);
    }
    for (const [name, type] of [
      [REQS, 'counter'],
      [DUR, 'histogram'],
      ['sleeve_response_cache_total', 'counter'],
      ['sleeve_rate_limited_total', 'counter'],
      ['sleeve_uploads_total', 'counter'],
      ['sleeve_images', 'gauge'],
    ]) {
      assert.equal(m.types.get(name as string), type, name);
      assert.ok((m.help.get(name as string) ?? '').length > 10, `${name} has a HELP text`);
    }
    // HEAD too; other paths 404, other methods 405.
    const head = await fetch(`${s.server.metricsAddress}/metrics`, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assert.equal(await head.text(), '');
    assert.equal((await get(`${s.server.metricsAddress}/`)).status, 404);
    assert.equal((await get(`${s.server.metricsAddress}/metrics/x`)).status, 404);
    const post = await get(`${s.server.metricsAddress}/metrics`, { method: 'POST' });
    assert.equal(post.status, 405);
    assert.equal(post.headers.get('allow'), 'GET, HEAD');
  });

  it('counts N cover art requests exactly, cached replays included, with a histogram per route', async () => {
    const N = 7;
    const before = await scrape(s.server.metricsAddress);
    // The first front lookup is computed (and cached), the other N-1 replayed from the cache.
    const loopStart = performance.now();
    for (let i = 0; i < N; i++) {
      const res = await get(`${s.base}/release/${R}/front`);
      assert.equal(res.status, 307);
      assert.match(res.headers.get('x-request-id') ?? '', /./);
    }
    const frontLoopMs = performance.now() - loopStart;
    for (let i = 0; i < 3; i++) assert.equal((await get(`${s.base}/release/${UNKNOWN}/`)).status, 404);
    for (let i = 0; i < 2; i++) assert.equal((await get(`${s.base}/release-group/${G}/`, { method: 'HEAD' })).status, 200);
    assert.equal((await get(`${s.base}/release/${R}/front`, { method: 'DELETE' })).status, 405);
    const after = await scrape(s.server.metricsAddress);

    const image = '/release/:mbid/:image';
    assert.equal(moved(before, after, REQS, req('coverart', image, 'GET', 307)), N);
    assert.equal(moved(before, after, REQS, req('coverart', '/release/:mbid/', 'GET', 404)), 3);
    assert.equal(moved(before, after, REQS, req('coverart', '/release-group/:mbid/', 'HEAD', 200)), 2);
    assert.equal(moved(before, after, REQS, req('coverart', image, 'DELETE', 405)), 1);
    // Cache: the front computed once, then hits; the 404 listing once then hits; the group listing once then one hit.
    assert.equal(moved(before, after, 'sleeve_response_cache_total', { result: 'miss' }), 1 + 1 + 1);
    assert.equal(moved(before, after, 'sleeve_response_cache_total', { result: 'hit' }), N - 1 + 2 + 1);
    assert.ok((valueOf(after, 'sleeve_response_cache_entries') ?? 0) >= 3, `cache entries ${valueOf(after, 'sleeve_response_cache_entries')}`);

    // The histogram of the image route: count, +Inf and sum moved with the requests; buckets cumulative.
    const d = dur('coverart', image, 'GET');
    assert.equal(moved(before, after, `${DUR}_count`, d), N);
    assert.equal(moved(before, after, `${DUR}_bucket`, { ...d, le: '+Inf' }), N);
    assert.ok(moved(before, after, `${DUR}_sum`, d) > 0, 'the sum moved');
    const buckets = after.samples.filter((x) => x.name === `${DUR}_bucket` && x.labels.route === image && x.labels.method === 'GET' && x.labels.listener === 'coverart');
    assert.equal(buckets.length, 17, '16 bounds and +Inf');
    const les = buckets.map((b) => b.labels.le);
    assert.equal(les[0], '0.0001');
    assert.equal(les.at(-1), '+Inf');
    for (let i = 1; i < buckets.length; i++) assert.ok((buckets[i]?.value ?? 0) >= (buckets[i - 1]?.value ?? 0), `bucket ${les[i]} is cumulative`);
    // Each duration is part of its request's round trip, so together they are less than the loop's wall time.
    assert.ok(moved(before, after, `${DUR}_sum`, d) < frontLoopMs / 1000, `sum ${moved(before, after, `${DUR}_sum`, d)} s within ${frontLoopMs} ms`);
  });

  it('labels unknown paths `other`: no label value is ever taken from a URL', async () => {
    const before = await scrape(s.server.metricsAddress);
    const odd = ['/nonsense-a1', '/nonsense-b2/x/y/z', '/release', '/event/abc', '/%zz', `/RELEASE/${R}/front`, '/robots.txt/nonsense-c3'];
    for (const p of odd) await get(`${s.base}${p}?nonsense-q=1`);
    const star = await rawHttp(s.base, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(star.status, 200);
    for (const probe of ['/healthz', '/readyz', '/healthz?x=1']) assert.equal((await get(`${s.base}${probe}`)).status, 200);
    const after = await pollUntil(
      () => scrape(s.server.metricsAddress),
      (m) => moved(before, m, REQS, req('coverart', 'other', 'OPTIONS', 200)) === 1,
    );
    const m = after.value;
    const other = ['400', '404'].reduce((sum, status) => sum + moved(before, m, REQS, { listener: 'coverart', route: 'other', method: 'GET', status }), 0);
    assert.equal(other, odd.length);
    assert.equal(moved(before, m, REQS, req('coverart', 'other', 'OPTIONS', 200)), 1, 'OPTIONS * (answered asynchronously before routing) is counted');
    assert.equal(moved(before, m, REQS, req('coverart', '/healthz', 'GET', 200)), 2);
    assert.equal(moved(before, m, REQS, req('coverart', '/readyz', 'GET', 200)), 1);
    const allowed = new Set<string>(COVER_ART_ROUTES);
    for (const sample of m.samples.filter((x) => x.labels.listener === 'coverart')) {
      assert.ok(allowed.has(sample.labels.route ?? ''), `route label ${sample.labels.route}`);
    }
    const labelText = JSON.stringify(m.samples.map((x) => x.labels));
    assert.doesNotMatch(labelText, /nonsense|RELEASE|%zz|3e7a0000/, 'nothing of the URLs made it into a label');
  });

  it('counts auth requests by route template (not by URL) and unknown pages as `other`', async () => {
    const before = await scrape(s.server.metricsAddress);
    const token = [
      (await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'authorization_code', code: 'nope' } })).status,
      (await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'password' } })).status,
      (await request(`${s.authBase}/oauth2/token`, { form: { grant_type: 'password' } })).status,
    ];
    assert.deepEqual(token, [400, 401, 401]);
    assert.equal((await request(`${s.authBase}/user/nonsense-someone`)).status, 404);
    assert.equal((await request(`${s.authBase}/nonsense-page`)).status, 404);
    assert.equal((await request(`${s.authBase}/.well-known/oauth-authorization-server`)).status, 200);
    assert.equal((await request(`${s.authBase}/readyz`)).status, 200);
    const bad = await rawHttps(s.authBase, 'GET /%zz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    assert.equal(bad, 400);
    const after = (await pollUntil(() => scrape(s.server.metricsAddress), (m) => moved(before, m, REQS, req('auth', 'other', 'GET', 400)) === 1)).value;
    assert.equal(moved(before, after, REQS, req('auth', '/oauth2/token', 'POST', 400)), 1);
    assert.equal(moved(before, after, REQS, req('auth', '/oauth2/token', 'POST', 401)), 2);
    assert.equal(moved(before, after, REQS, req('auth', 'other', 'GET', 400)), 1, 'a malformed URL Fastify refuses itself is counted');
    assert.equal(moved(before, after, REQS, req('auth', '/user/:name', 'GET', 404)), 1);
    assert.equal(moved(before, after, REQS, req('auth', 'other', 'GET', 404)), 1);
    assert.equal(moved(before, after, REQS, req('auth', '/.well-known/oauth-authorization-server', 'GET', 200)), 1);
    assert.equal(moved(before, after, REQS, req('auth', '/readyz', 'GET', 200)), 1, 'probes answered before routing have their route');
    assert.equal(moved(before, after, `${DUR}_count`, dur('auth', '/oauth2/token', 'POST')), 3);
    assert.doesNotMatch(JSON.stringify(after.samples.map((x) => x.labels)), /nonsense/);
  });

  it('reports uploads made by `sleeve art add` in another process while the server runs', async () => {
    const before = await scrape(s.server.metricsAddress);
    const uploads = valueOf(before, 'sleeve_uploads_total');
    const bytes = valueOf(before, 'sleeve_upload_bytes_total');
    const images = valueOf(before, 'sleeve_images');
    const releases = valueOf(before, 'sleeve_releases');
    // What the before hook added: one release, one image of imageBytes.length bytes.
    assert.equal(uploads, 1);
    assert.equal(bytes, imageBytes.length);
    assert.equal(images, 1);
    assert.equal(releases, 1);

    const second = await makeJpeg(120, 80);
    const file = path.join(t.dir, 'back.jpg');
    await writeFile(file, second);
    const added = await cliOk(t.env, ['--json', 'art', 'add', R, file, '--type', 'Back']);
    const after = (await pollUntil(() => scrape(s.server.metricsAddress), (m) => valueOf(m, 'sleeve_uploads_total') === 2)).value;
    assert.equal(valueOf(after, 'sleeve_uploads_total'), 2);
    assert.equal(valueOf(after, 'sleeve_upload_bytes_total'), imageBytes.length + second.length);
    assert.equal(valueOf(after, 'sleeve_images'), 2);
    assert.ok((valueOf(after, 'sleeve_catalogue_changes_total') ?? 0) > (valueOf(before, 'sleeve_catalogue_changes_total') ?? 0));
    assert.ok((valueOf(after, 'sleeve_database_metrics_age_seconds') ?? 99) < 5);

    // A removal counts too, and a failed upload (bad file) counts nothing.
    await cliOk(t.env, ['art', 'remove', R, added.id]);
    await writeFile(path.join(t.dir, 'bad.jpg'), 'not an image');
    const bad = await cliOk(t.env, ['art', 'add', R, path.join(t.dir, 'bad.jpg')]).catch((err: Error) => err);
    assert.ok(bad instanceof Error, 'the bad upload failed');
    const last = (await pollUntil(() => scrape(s.server.metricsAddress), (m) => valueOf(m, 'sleeve_image_removals_total') === 1)).value;
    assert.equal(valueOf(last, 'sleeve_image_removals_total'), 1);
    assert.equal(valueOf(last, 'sleeve_images'), 1);
    assert.equal(valueOf(last, 'sleeve_uploads_total'), 2);
    // No import yet: its counters are there, at 0, and nothing about a last run.
    assert.equal(valueOf(last, 'sleeve_import_runs_total', { result: 'succeeded' }), 0);
    assert.equal(valueOf(last, 'sleeve_import_running'), 0);
    assert.equal(last.types.has('sleeve_import_last_success_timestamp_seconds'), false);
  });

  it('counts releases through add and merge, and `art reindex` corrects counts a bulk writer left behind', async () => {
    const [a, b] = ['3e7a0000-0000-4000-8000-0000000000b1', '3e7a0000-0000-4000-8000-0000000000b2'];
    await cliInProcess(t.env, ['release', 'add', a, '--release-group', G]);
    await cliInProcess(t.env, ['release', 'add', b, '--release-group', G]);
    // Values are read at most once a second: poll for the expected count.
    const releases = async () => valueOf(await scrape(s.server.metricsAddress), 'sleeve_releases');
    assert.equal((await pollUntil(releases, (n) => n === 3)).value, 3);
    await cliInProcess(t.env, ['release', 'merge', a, b]);
    assert.equal((await pollUntil(releases, (n) => n === 2)).value, 2);
    // A writer that bypasses the catalogue functions (as a bulk import may) leaves the counts behind...
    const db = s.server.runtime.database.db;
    await db.insertInto('release').values({ gid: '3e7a0000-0000-4000-8000-0000000000b3', release_group: 1, name: '' }).execute();
    clock.advance(1100);
    assert.equal(await releases(), 2);
    // ...until a full reindex recounts.
    await cliInProcess(t.env, ['art', 'reindex']);
    assert.equal((await pollUntil(releases, (n) => n === 3)).value, 3);
    const m = await scrape(s.server.metricsAddress);
    assert.equal(valueOf(m, 'sleeve_images'), 1);
  });
});

describe(`metrics of sleeve import musicbrainz (${DIALECT})`, () => {
  it('sleeve_import_running is 1 while an import holds its lock and 0 once it is killed, though its run is still recorded as running', async () => {
    const t = await makeTestEnv();
    const s = await startLoggedServer(t);
    let run: ReturnType<typeof spawnCli> | undefined;
    try {
      const dump = await generateDump(path.join(t.dir, 'dump'), { releases: 5000, images: 10000 });
      // Small chunks: the import is still staging when it is stopped.
      const importing = spawnCli(t.env, ['import', 'musicbrainz', dump.dir, '--batch-rows', '100']);
      run = importing;
      let seen = '';
      await new Promise<void>((resolve, reject) => {
        importing.child.stderr?.on('data', (c: Buffer) => {
          seen += c.toString();
          if (/mbdump\//.test(seen)) resolve();
        });
        importing.done.then((r) => reject(new Error(`the import ended first: exit ${r.code}\n${r.stderr}`)), reject);
      });
      run.child.kill('SIGSTOP');
      const running = async () => valueOf(await scrape(s.server.metricsAddress), 'sleeve_import_running');
      assert.equal((await pollUntil(running, (v) => v === 1)).value, 1);
      run.child.kill('SIGKILL');
      assert.equal((await run.done).signal, 'SIGKILL');
      assert.equal((await pollUntil(running, (v) => v === 0)).value, 0);
      const rows = await s.server.runtime.database.db.selectFrom('import_run').select('status').execute();
      assert.deepEqual(
        rows.map((r) => r.status),
        ['running'],
        'the killed run is marked interrupted only by the next import',
      );
    } finally {
      run?.child.kill('SIGKILL');
      await s.server.close();
      await t.cleanup();
    }
  });

  it('reports runs by result, the last success and its rows, and the catalogue recounted, while the server runs', async () => {
    const t = await makeTestEnv();
    const s = await startLoggedServer(t);
    try {
      // One image uploaded here first: the import keeps it, and the recount includes it.
      await cliInProcess(t.env, ['release', 'add', R, '--release-group', G]);
      const file = path.join(t.dir, 'local.jpg');
      await writeFile(file, await makeJpeg(64, 64));
      await cliInProcess(t.env, ['art', 'add', R, file, '--type', 'Front']);
      const dump = await generateDump(path.join(t.dir, 'dump'), { releases: 40, images: 60 });
      const started = Date.now();
      const summary = await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', dump.dir]);
      const db = s.server.runtime.database.db;
      const count = async (table: 'release' | 'cover_art') =>
        Number((await db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
      const [releases, images] = [await count('release'), await count('cover_art')];
      assert.ok(releases > 40 && images > 60, `${releases} releases, ${images} images`);
      const m = (await pollUntil(() => scrape(s.server.metricsAddress), (x) => valueOf(x, 'sleeve_import_runs_total', { result: 'succeeded' }) === 1)).value;
      assert.equal(valueOf(m, 'sleeve_import_runs_total', { result: 'succeeded' }), 1);
      assert.equal(valueOf(m, 'sleeve_import_runs_total', { result: 'failed' }), 0);
      assert.equal(valueOf(m, 'sleeve_import_running'), 0);
      assert.equal(valueOf(m, 'sleeve_import_last_success_rows_read'), summary.rows_read);
      const at = valueOf(m, 'sleeve_import_last_success_timestamp_seconds') ?? 0;
      assert.ok(at * 1000 >= started - 1000 && at * 1000 <= Date.now() + 1000, `finished at ${at}`);
      assert.ok((valueOf(m, 'sleeve_import_last_duration_seconds') ?? -1) >= 0);
      assert.equal(valueOf(m, 'sleeve_releases'), releases);
      assert.equal(valueOf(m, 'sleeve_images'), images);
      // Imported images are not uploads.
      assert.equal(valueOf(m, 'sleeve_uploads_total'), 1);
    } finally {
      await s.server.close();
      await t.cleanup();
    }
  });
});

describe(`metrics with a rate limit (${DIALECT})`, () => {
  let t: TestEnv;
  let s: LoggedServer;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RATE_LIMIT: '4/1h' });
    s = await startLoggedServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('counts refusals under their route, as 503s and in sleeve_rate_limited_total', async () => {
    const before = await scrape(s.server.metricsAddress);
    const statuses: number[] = [];
    for (let i = 0; i < 7; i++) {
      const res = await get(`${s.base}/release/${UNKNOWN}/front`);
      statuses.push(res.status);
      assert.match(res.headers.get('x-request-id') ?? '', /./, 'refusals carry a request id too');
    }
    assert.deepEqual(statuses, [404, 404, 404, 404, 503, 503, 503]);
    // The metrics listener is not rate limited.
    const after = await scrape(s.server.metricsAddress);
    assert.equal(moved(before, after, 'sleeve_rate_limited_total', {}), 3);
    assert.equal(moved(before, after, REQS, req('coverart', '/release/:mbid/:image', 'GET', 503)), 3);
    assert.equal(moved(before, after, REQS, req('coverart', '/release/:mbid/:image', 'GET', 404)), 4);
    assert.equal(moved(before, after, `${DUR}_count`, dur('coverart', '/release/:mbid/:image', 'GET')), 7);
  });
});

describe(`metrics with a rate limit shared through Redis (${DIALECT})`, { skip: redisUnavailable() ?? false }, () => {
  let t: TestEnv;
  let s: LoggedServer;
  let redis: PrivateRedis;

  before(async () => {
    redis = await startRedis();
    t = await makeTestEnv({ SLEEVE_RATE_LIMIT: '3/1h', SLEEVE_REDIS_URL: redis.url, SLEEVE_LOG_LEVEL: 'debug' });
    s = await startLoggedServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
    await redis?.destroy();
  });

  it('counts requests decided asynchronously (routed, replayed and refused) once each, with their ids', async () => {
    const before = await scrape(s.server.metricsAddress);
    const ids: string[] = [];
    const statuses: number[] = [];
    for (let i = 0; i < 5; i++) {
      const res = await get(`${s.base}/release/${UNKNOWN}/front`);
      statuses.push(res.status);
      ids.push(res.headers.get('x-request-id') ?? '');
    }
    assert.deepEqual(statuses, [404, 404, 404, 503, 503]);
    for (const id of ids) assert.match(id, /^[0-9a-f]{5}-[0-9a-z]+$/);
    const after = await scrape(s.server.metricsAddress);
    assert.equal(moved(before, after, REQS, req('coverart', '/release/:mbid/:image', 'GET', 404)), 3);
    assert.equal(moved(before, after, REQS, req('coverart', '/release/:mbid/:image', 'GET', 503)), 2);
    assert.equal(moved(before, after, 'sleeve_rate_limited_total', {}), 2);
    assert.equal(moved(before, after, 'sleeve_response_cache_total', { result: 'miss' }), 1);
    assert.equal(moved(before, after, 'sleeve_response_cache_total', { result: 'hit' }), 2);
    // The one that went on to Fastify after Redis answered is logged as a routed request, with its id.
    const routed = (await pollUntil(async () => s.logs().find((l) => l.reqId === ids[0]), (l) => l !== undefined)).value;
    assert.equal(routed?.msg, 'request');
    assert.equal(routed?.status, 404);
  });
});

/** Sends a raw request over TLS (self-signed accepted); resolves to the status code. */
function rawHttps(base: string, request: string): Promise<number> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => socket.write(request));
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => (data += c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Number(data.split(' ')[1])));
  });
}

/** Whether something listens on 127.0.0.1:port (we cannot bind it). */
function taken(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', () => resolve(true));
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(false)));
  });
}

describe(`SLEEVE_METRICS_LISTEN=off (${DIALECT})`, () => {
  it('starts no metrics listener', async () => {
    const t = await makeTestEnv({ SLEEVE_METRICS_LISTEN: 'off', SLEEVE_LOG_LEVEL: 'debug' });
    const log: string[] = [];
    const logStream = new Writable({
      write(chunk: Buffer, _enc, done) {
        log.push(...chunk.toString().split('\n').filter(Boolean));
        done();
      },
    });
    try {
      const takenBefore = await taken(9464);
      const server = await serve(loadConfig(t.env), { only: 'coverart', logStream });
      try {
        assert.equal(server.metricsAddress, undefined);
        // Not on the default port either (unless something else held it already).
        if (!takenBefore) assert.equal(await taken(9464), false);
        // The listener still answers, with request ids.
        const res = await get(`${server.coverArtAddress}/robots.txt`);
        assert.equal(res.status, 200);
        const id = res.headers.get('x-request-id') ?? '';
        assert.match(id, /^[0-9a-f]{5}-[0-9a-z]+$/);
        // Nothing counts requests, but the access log still has each one.
        const lines = (await pollUntil(async () => log.map((l) => JSON.parse(l) as Record<string, unknown>), (ls) => ls.some((l) => l.reqId === id))).value;
        const line = lines.find((l) => l.reqId === id && l.msg === 'request');
        assert.equal(line?.status, 200);
        assert.equal(line?.url, '/robots.txt');
      } finally {
        await server.close();
      }
    } finally {
      await t.cleanup();
    }
  });
});

describe(`database-held metrics with a stuck database (${DIALECT})`, { skip: DIALECT === 'sqlite' ? 'SQLite reads are synchronous and in WAL mode never wait for a writer' : false }, () => {
  it('a scrape waits about a second at most, then answers with the last values read and their age', async () => {
    const t = await makeTestEnv();
    // Real time (the scrape's wait is a real timeout), moved on past the values' one-second age.
    const clock = new ShiftedClock();
    const s = await startLoggedServer(t, {}, clock);
    const admin = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
    await admin.connect();
    try {
      const first = await scrape(s.server.metricsAddress);
      assert.equal(valueOf(first, 'sleeve_releases'), 0);
      const failures = valueOf(first, 'sleeve_database_metrics_failures_total') ?? -1;
      // Nobody can read the counters now.
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE counter IN ACCESS EXCLUSIVE MODE');
      clock.advance(1200);
      const started = Date.now();
      const stuck = await scrape(s.server.metricsAddress);
      const ms = Date.now() - started;
      // It waited on the database and gave up (the values are the last ones read, failures + 1, below).
      assert.ok(ms < 3000, `answered after ${ms} ms`);
      assert.equal(valueOf(stuck, 'sleeve_releases'), 0, 'the last values read');
      assert.ok((valueOf(stuck, 'sleeve_database_metrics_age_seconds') ?? 0) >= 1.2);
      assert.equal(valueOf(stuck, 'sleeve_database_metrics_failures_total'), failures + 1);
      // The HTTP metrics are answered all the same.
      assert.ok(stuck.types.has('sleeve_http_requests_total'));
      await admin.query('COMMIT');
      const fresh = await pollUntil(() => scrape(s.server.metricsAddress), (m) => (valueOf(m, 'sleeve_database_metrics_age_seconds') ?? 99) < 1, 5000);
      assert.ok((valueOf(fresh.value, 'sleeve_database_metrics_age_seconds') ?? 99) < 1);
    } finally {
      await admin.query('ROLLBACK').catch(() => {});
      await admin.end();
      await s.server.close();
      await t.cleanup();
    }
  });

  it('counts a request whose client left before the answer as 499', async () => {
    const t = await makeTestEnv();
    const s = await startLoggedServer(t);
    const admin = new pg.Client({ connectionString: t.env.SLEEVE_DATABASE_URL });
    await admin.connect();
    try {
      const before = await scrape(s.server.metricsAddress);
      await admin.query('BEGIN');
      await admin.query('LOCK TABLE release IN ACCESS EXCLUSIVE MODE');
      // The lookup waits for the lock; the client gives up meanwhile.
      await assert.rejects(fetch(`${s.base}/release/${UNKNOWN}/front`, { signal: AbortSignal.timeout(300) }));
      const gone = await pollUntil(
        () => scrape(s.server.metricsAddress),
        (m) => moved(before, m, REQS, req('coverart', '/release/:mbid/:image', 'GET', 499)) === 1,
      );
      assert.equal(moved(before, gone.value, REQS, req('coverart', '/release/:mbid/:image', 'GET', 499)), 1);
      await admin.query('COMMIT');
      // The lookup then finishes for nobody: still counted once. Once the server's queries are
      // done (PostgreSQL shows none of its sessions active), a request after it is counted: two.
      await pollUntil(
        async () => Number((await admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND pid <> pg_backend_pid()")).rows[0].n),
        (n) => n === 0,
        5000,
        10,
      );
      assert.equal((await fetch(`${s.base}/release/${UNKNOWN}/front`)).status, 404);
      const after = await pollUntil(
        () => scrape(s.server.metricsAddress),
        (m) => moved(before, m, `${DUR}_count`, dur('coverart', '/release/:mbid/:image', 'GET')) >= 2,
      );
      assert.equal(moved(before, after.value, `${DUR}_count`, dur('coverart', '/release/:mbid/:image', 'GET')), 2, 'the abandoned request once, the next one once');
      assert.equal(moved(before, after.value, REQS, req('coverart', '/release/:mbid/:image', 'GET', 499)), 1);
    } finally {
      await admin.query('ROLLBACK').catch(() => {});
      await admin.end();
      await s.server.close();
      await t.cleanup();
    }
  });
});

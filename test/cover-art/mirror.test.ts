/*
 * `sleeve mirror images` after `sleeve import musicbrainz`, against a fake archive.org-like
 * upstream in this process: files land in the store (then served by /download/ with no upstream
 * request), checked against the md5 of the item's `_files.xml`; failures are reported by reason
 * and leave nothing stored; a rerun skips what is there; an interrupted run carries on.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { loadConfig } from '../../src/config/load.js';
import { serve } from '../../src/serve.js';
import { cliOk, DIALECT, freePort, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { startS3, type S3TestServer } from '../helpers/s3.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { spawnCli } from './cli-support.js';

const TS = '2012-01-26 00:54:05.519372+00';
const G1 = '5b0a1f00-0000-4000-8000-000000000011';
const R1 = '7e1ea5e0-0000-4000-8000-000000000011';
/** The original only upstream: its thumbnails are made here. */
const R2 = '7e1ea5e0-0000-4000-8000-000000000012';
/** Faults: a wrong md5 (301), nothing upstream (302), always 500 (303). */
const R3 = '7e1ea5e0-0000-4000-8000-000000000013';
/** No images. */
const R4 = '7e1ea5e0-0000-4000-8000-000000000014';
/** For the interrupted run: 501 is slow. */
const R5 = '7e1ea5e0-0000-4000-8000-000000000015';
const UNKNOWN = '7e1ea5e0-0000-4000-8000-0000000000ff';
/** A release added to sleeve by hand (`sleeve release add`), never imported: nothing upstream to mirror. */
const LOCAL = '7e1ea5e0-0000-4000-8000-0000000000ee';
const SIZES = [250, 500, 1200] as const;

function release(id: number, gid: string): Value[] {
  return [id, gid, `Release ${id}`, 1, 1, 1, null, 120, 28, null, '', 0, -1, TS];
}

function image(id: number, releaseId: number, ordering: number, mime = 'image/jpeg'): Value[] {
  return [id, releaseId, '', 5000 + id, ordering, TS, 0, mime, 1000, 100, 200, 300];
}

const orig = (m: string, id: number, suffix = 'jpg') => `mbid-${m}/mbid-${m}-${id}.${suffix}`;
const thumb = (m: string, id: number, size: number) => `mbid-${m}/mbid-${m}-${id}_thumb${size}.jpg`;

const IMAGES: [number, number, string][] = [
  [101, 1, 'image/jpeg'],
  [102, 1, 'image/png'],
  [201, 2, 'image/jpeg'],
  [301, 3, 'image/jpeg'],
  [302, 3, 'image/jpeg'],
  [303, 3, 'image/jpeg'],
  [501, 5, 'image/jpeg'],
  [502, 5, 'image/jpeg'],
];

const SUMMARY_KEYS = ['bytes', 'failed', 'failed_total', 'failures', 'fetched', 'files', 'interrupted', 'releases', 'seconds', 'skipped', 'unverified'];
const REASONS = ['busy', 'checksum', 'invalid', 'not_found', 'timeout', 'too_large', 'upstream_error'];

async function writeTestDump(t: TestEnv): Promise<string> {
  return writeDump(path.join(t.dir, 'dump'), {
    release_group: [[1, G1, 'Group', 1, 1, '', 0, TS]],
    release: [release(1, R1), release(2, R2), release(3, R3), release(4, R4), release(5, R5)],
    'cover_art_archive.cover_art': IMAGES.map(([id, r, mime], i) => image(id, r, i + 1, mime)),
    'cover_art_archive.cover_art_type': IMAGES.map(([id]) => [id, 1] as Value[]),
  });
}

describe(`sleeve mirror images (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  const files = new Map<string, Buffer>();
  const stored = (key: string) => path.join(t.dir, 'files', key);
  const mirror = (...args: string[]) => runCli(t.env, ['--json', 'mirror', 'images', ...args]);
  const summaryOf = (stdout: string) => JSON.parse(stdout) as Record<string, any>;
  const tempFiles = async (): Promise<string[]> => {
    const dir = path.join(t.dir, 'files', '.tmp');
    if (!existsSync(dir)) return [];
    const out: string[] = [];
    for (const sub of await readdir(dir)) out.push(...(await readdir(path.join(dir, sub))));
    return out;
  };

  before(async () => {
    up = await startUpstream();
    const jpeg = await makeJpeg(320, 240, 80);
    const serveAll = async (m: string, id: number, suffix = 'jpg') => {
      const original = suffix === 'png' ? await makePng(300, 200) : jpeg;
      files.set(orig(m, id, suffix), original);
      up.put(orig(m, id, suffix), original, suffix === 'png' ? 'image/png' : 'image/jpeg');
      for (const size of SIZES) {
        const bytes = await makeJpeg(size, size, 70 + Math.round(size / 100));
        files.set(thumb(m, id, size), bytes);
        up.put(thumb(m, id, size), bytes);
      }
    };
    await serveAll(R1, 101);
    await serveAll(R1, 102, 'png');
    up.put(orig(R2, 201), jpeg);
    await serveAll(R3, 301);
    up.fault(orig(R3, 301), { kind: 'wrong-md5' });
    up.put(orig(R3, 303), jpeg);
    up.fault(orig(R3, 303), { kind: 'fail-then-serve', status: 500, times: 1_000_000 });
    await serveAll(R5, 501);
    await serveAll(R5, 502);

    t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url, SLEEVE_UPSTREAM_TIMEOUT_MS: '5000' });
    await cliOk(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(t)]);
  });

  after(async () => {
    await up?.close();
    await t?.cleanup();
  });

  it('needs SLEEVE_UPSTREAM_URL, releases or --all (not both), known imported releases and sizes', async () => {
    await cliOk(t.env, ['release', 'add', LOCAL, '--release-group', '7e1ea5e0-0000-4000-8000-0000000000ed']);
    const { SLEEVE_UPSTREAM_URL: _, ...without } = t.env;
    const none = await runCli(without, ['--json', 'mirror', 'images', R1]);
    assert.equal(none.code, 2);
    assert.equal(JSON.parse(none.stdout).error.code, 'CONFIG');
    assert.match(none.stderr, /SLEEVE_UPSTREAM_URL is not set/);
    for (const [args, pattern] of [
      [[], /RELEASE_MBID\.\.\. \| --all/],
      [[R1, '--all'], /not both/],
      [[UNKNOWN], new RegExp(`no such release or event: ${UNKNOWN}; nothing was fetched$`, 'm')],
      // Never "mirrored 1 releases (0 files)" and exit 0: the release has nothing upstream.
      [[LOCAL], new RegExp(`not imported from MusicBrainz \\(nothing upstream to mirror\\): ${LOCAL}; nothing was fetched`)],
      // Known and unknown together: every wrong one named, nothing fetched for the good one either.
      [[R1, LOCAL, UNKNOWN], new RegExp(`no such release or event: ${UNKNOWN}; not imported from MusicBrainz \\(nothing upstream to mirror\\): ${LOCAL}; nothing`)],
      [[R1, '--sizes', '250,300'], /--sizes takes 250, 500, 1200 and original/],
      [[R1, '--concurrency', '0'], /--concurrency must be a whole number/],
      [[R1, '--rate', 'fast'], /--rate must be a number/],
    ] as [string[], RegExp][]) {
      const r = await mirror(...args);
      assert.equal(r.code, 2, args.join(' '));
      assert.match(r.stderr, pattern);
    }
    assert.equal(up.total(), 0, 'nothing was asked of the upstream');
  });

  it('mirrors the chosen sizes of named releases; /download/ then serves them from the store', async () => {
    const r = await mirror(R1, '--sizes', 'original,250', '--concurrency', '3', '--rate', '1000');
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.deepEqual(Object.keys(s).sort(), SUMMARY_KEYS);
    assert.deepEqual(Object.keys(s.failed).sort(), REASONS);
    const keys = [orig(R1, 101), thumb(R1, 101, 250), orig(R1, 102, 'png'), thumb(R1, 102, 250)];
    const bytes = keys.reduce((sum, k) => sum + (files.get(k) as Buffer).length, 0);
    assert.deepEqual(
      { releases: s.releases, files: s.files, fetched: s.fetched, skipped: s.skipped, failed_total: s.failed_total, unverified: s.unverified, bytes: s.bytes, interrupted: s.interrupted },
      { releases: 1, files: 4, fetched: 4, skipped: 0, failed_total: 0, unverified: 0, bytes, interrupted: false },
    );
    assert.equal(typeof s.seconds, 'number');
    for (const k of keys) assert.deepEqual(await readFile(stored(k)), files.get(k), k);
    assert.equal(existsSync(stored(thumb(R1, 101, 500))), false, 'only the sizes asked for');
    // The listing then describes the mirrored files (docs/interface.md, "Additive fields").
    const listing = JSON.parse((await readFile(stored(`mbid-${R1}/index.json`))).toString('utf8')) as { images: { id: string; size?: number; thumbnail_dimensions?: Record<string, unknown> }[] };
    assert.deepEqual(
      listing.images.map((i) => [i.id, i.size, Object.keys(i.thumbnail_dimensions ?? {})]),
      [
        ['101', (files.get(orig(R1, 101)) as Buffer).length, ['250']],
        ['102', (files.get(orig(R1, 102, 'png')) as Buffer).length, ['250']],
      ],
    );
    assert.equal(up.count(`mbid-${R1}/mbid-${R1}_files.xml`), 1, "one _files.xml per release");

    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const server = await serve(loadConfig({ ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_BASE_URL: base }), { only: 'coverart' });
    try {
      const requests = up.total();
      for (const k of keys) {
        const res = await fetch(`${base}/download/${k}`);
        assert.equal(res.status, 200, k);
        assert.deepEqual(Buffer.from(await res.arrayBuffer()), files.get(k));
      }
      assert.equal(up.total(), requests, 'served from the store, no upstream request');
    } finally {
      await server.close();
    }
  });

  it('skips everything on a rerun (nothing fetched, no image asked of the upstream)', async () => {
    const requests = up.total();
    const r = await mirror(R1, '--sizes', '250,original');
    assert.equal(r.code, 0, r.stderr);
    const s = summaryOf(r.stdout);
    assert.equal(s.fetched, 0);
    assert.equal(s.skipped, 4);
    assert.equal(up.total(), requests, 'not even _files.xml when nothing is missing');
  });

  it('stops cleanly on SIGINT (exit 130, no partial file) and a rerun carries on', async () => {
    const slow = orig(R5, 501);
    up.fault(slow, { kind: 'slow-body', ms: 60_000 });
    const { child, done } = spawnCli(t.env, ['mirror', 'images', R5, '--sizes', 'original']);
    // The slow file's download has started (half its body sent): interrupt it mid-file.
    const started = await pollUntil(async () => up.count(slow), (n) => n > 0, 10_000);
    assert.equal(started.value, 1);
    child.kill('SIGINT');
    const r = await done;
    assert.equal(r.code, 130, r.stderr);
    assert.match(r.stderr, /stopped by SIGINT.*Run the same command again/s);
    assert.equal(existsSync(stored(slow)), false, 'nothing of the abandoned download is stored');
    assert.deepEqual(await tempFiles(), []);

    up.fault(slow, undefined);
    const again = await mirror(R5, '--sizes', 'original');
    assert.equal(again.code, 0, again.stderr);
    const s = summaryOf(again.stdout);
    assert.equal(s.fetched + s.skipped, 2);
    assert.ok(s.fetched >= 1);
    assert.deepEqual(await readFile(stored(slow)), files.get(slow));
    assert.deepEqual(await readFile(stored(orig(R5, 502))), files.get(orig(R5, 502)));
  });

  it('mirrors --all: failures reported by reason and not stored, thumbnails the upstream lacks made here', async () => {
    const r = await mirror('--all', '--concurrency', '16');
    assert.equal(r.code, 1, 'a file failed');
    assert.doesNotMatch(r.stderr, /MaxListenersExceededWarning/, 'one abort listener per GET in flight is not a leak');
    const s = summaryOf(r.stdout);
    assert.deepEqual(
      { releases: s.releases, files: s.files, fetched: s.fetched, skipped: s.skipped, failed_total: s.failed_total, unverified: s.unverified },
      // R1: 4 left of 8; R2: 4 (3 thumbnails made here, no md5 for them); R3: 3 of 12; R5: 6 left of 8.
      { releases: 4, files: 32, fetched: 17, skipped: 6, failed_total: 9, unverified: 3 },
    );
    assert.deepEqual(s.failed, { busy: 0, checksum: 1, invalid: 0, not_found: 4, timeout: 0, too_large: 0, upstream_error: 4 });
    const byKey = Object.fromEntries((s.failures as { key: string; reason: string; message: string }[]).map((f) => [f.key, f]));
    assert.equal(byKey[orig(R3, 301)]?.reason, 'checksum');
    assert.match(byKey[orig(R3, 301)]?.message ?? '', /_files\.xml says 0123456789abcdef0123456789abcdef/);
    assert.equal(byKey[orig(R3, 302)]?.reason, 'not_found');
    assert.equal(byKey[orig(R3, 303)]?.reason, 'upstream_error');
    assert.match(byKey[orig(R3, 303)]?.message ?? '', /answered 500/);
    assert.equal(existsSync(stored(orig(R3, 301))), false, 'the mismatched file is not stored');
    assert.equal(existsSync(stored(orig(R3, 302))), false);
    assert.equal(existsSync(stored(orig(R3, 303))), false);
    assert.deepEqual(await readFile(stored(thumb(R3, 301, 500))), files.get(thumb(R3, 301, 500)));
    for (const size of SIZES) assert.ok(existsSync(stored(thumb(R2, 201, size))), `R2 ${size} made here`);
    assert.equal(existsSync(path.join(t.dir, 'files', `mbid-${R4}`)), false);
    assert.deepEqual(await tempFiles(), []);

    const human = await runCli(t.env, ['mirror', 'images', '--all']);
    assert.equal(human.code, 1);
    assert.match(human.stdout, /0 fetched .*23 already in the store, 9 failed \(4 not_found, 1 checksum, 4 upstream_error\)/);
    assert.match(human.stdout, new RegExp(`checksum: ${orig(R3, 301)}: `));
    assert.equal(human.stderr, '', 'no progress noise when quick and not on a terminal');
  });
});

describe(`sleeve mirror images into an S3 bucket (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s3: S3TestServer;

  before(async () => {
    up = await startUpstream();
    s3 = await startS3();
    up.put(orig(R2, 201), await makeJpeg(600, 400, 80));
    t = await makeTestEnv({ ...s3.env, SLEEVE_UPSTREAM_URL: up.url });
    await cliOk(t.env, ['--json', 'import', 'musicbrainz', await writeTestDump(t)]);
  });

  after(async () => {
    await up?.close();
    await s3?.close();
    await t?.cleanup();
  });

  it('stores the files in the bucket, and a rerun skips them', async () => {
    const first = await runCli(t.env, ['--json', 'mirror', 'images', R2, '--sizes', 'original,500']);
    assert.equal(first.code, 0, first.stderr);
    assert.deepEqual([JSON.parse(first.stdout).fetched, JSON.parse(first.stdout).unverified], [2, 1]);
    // index.json too: rewritten to describe the mirrored files.
    assert.deepEqual(await s3.listKeys(`mbid-${R2}/`), [`mbid-${R2}/index.json`, orig(R2, 201), thumb(R2, 201, 500)]);
    const again = await runCli(t.env, ['--json', 'mirror', 'images', R2, '--sizes', 'original,500']);
    assert.deepEqual([JSON.parse(again.stdout).fetched, JSON.parse(again.stdout).skipped], [0, 2]);
    assert.equal(up.count(orig(R2, 201)), 1);
  });

  it('fetches without checksums from an upstream without _files.xml, counting them unverified', async () => {
    up.filesXml(false);
    up.put(orig(R1, 101), await makeJpeg(200, 100, 80));
    up.put(orig(R1, 102, 'png'), await makePng(100, 100), 'image/png');
    const r = await runCli(t.env, ['--json', 'mirror', 'images', R1, '--sizes', 'original']);
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual([JSON.parse(r.stdout).fetched, JSON.parse(r.stdout).unverified], [2, 2]);
    assert.equal(up.count(`mbid-${R1}/mbid-${R1}_files.xml`), 1);
    assert.deepEqual(await s3.listKeys(`mbid-${R1}/`), [`mbid-${R1}/index.json`, orig(R1, 101), orig(R1, 102, 'png')]);
  });

  it("checks the original's md5 when it makes a thumbnail the upstream lacks", async () => {
    up.filesXml(true);
    up.put(orig(R3, 301), await makeJpeg(300, 300, 80));
    up.fault(orig(R3, 301), { kind: 'wrong-md5' });
    const r = await runCli(t.env, ['--json', 'mirror', 'images', R3, '--sizes', '250']);
    assert.equal(r.code, 1);
    const s = JSON.parse(r.stdout);
    assert.equal(s.fetched, 0);
    assert.deepEqual([s.failed.checksum, s.failed.not_found, s.failed_total], [1, 2, 3]);
    const failure = (s.failures as { key: string; reason: string; message: string }[]).find((f) => f.reason === 'checksum');
    assert.equal(failure?.key, thumb(R3, 301, 250));
    assert.match(failure?.message ?? '', /_files\.xml says/);
    assert.deepEqual(await s3.listKeys(`mbid-${R3}/`), [], 'neither the original nor a thumbnail made of it');
  });
});

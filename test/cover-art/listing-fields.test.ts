/*
 * Listings that describe the images (docs/interface.md, "Image entry"): width, height (as
 * displayed), size, mime_type and thumbnail_dimensions, present once sleeve has the file (an
 * upload, pull-through, `sleeve art measure`), absent before; SLEEVE_LISTING_FIELDS=caa writes the
 * real indexer's bytes; an existing client (python3-musicbrainzngs) reads the new listings. Against
 * `sleeve serve` in its own process with its response and file caches on, through HTTP and the CLI.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir } from 'node:fs/promises';
import https from 'node:https';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, runCli, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { readIndex, readIndexBytes, writeInput } from './cli-support.js';

const TS = '2012-01-26 00:54:05.519372+00';
/** Imported: R1 (fetched through later) in G1, R2 (its file copied in, then measured) in G2. */
const G1 = '5b0a1f00-0000-4000-8000-0000000000a1';
const G2 = '5b0a1f00-0000-4000-8000-0000000000a2';
const R1 = '7e1ea5e0-0000-4000-8000-0000000000a1';
const R2 = '7e1ea5e0-0000-4000-8000-0000000000a2';
/** Made here: R3 in G3, with uploaded images. */
const G3 = '5b0a1f00-0000-4000-8000-0000000000a3';
const R3 = '7e1ea5e0-0000-4000-8000-0000000000a3';
const UNKNOWN = '7e1ea5e0-0000-4000-8000-0000000000ff';
const ADDED = ['width', 'height', 'size', 'mime_type', 'thumbnail_dimensions'];
/** The system's Python, where Debian's python3-musicbrainzngs is installed. */
const PYTHON = '/usr/bin/python3';

const orig = (m: string, id: number) => `mbid-${m}/mbid-${m}-${id}.jpg`;
const thumb = (m: string, id: number, size: number) => `mbid-${m}/mbid-${m}-${id}_thumb${size}.jpg`;

function python(script: string, args: string[], stdin = ''): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(PYTHON, ['-c', script, ...args], { timeout: 30_000 }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
    child.stdin?.end(stdin);
  });
}

/** The real indexer's serialization (Python's json.dumps with sort_keys), of the value given. */
function pythonDumps(value: unknown): Promise<string> {
  return python('import json, sys; sys.stdout.write(json.dumps(json.load(sys.stdin), sort_keys=True))', [], JSON.stringify(value));
}

/** A page of the website (the auth listener, with its generated self-signed certificate). */
function page(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { rejectUnauthorized: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

async function listing(base: string, path_: string): Promise<any> {
  const res = await fetch(`${base}${path_}`, { headers: { accept: 'application/json' } });
  assert.equal(res.status, 200, path_);
  return res.json();
}

describe(`listings that describe the images (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s: ServeProcess;
  const images: Record<string, Buffer> = {};

  before(async () => {
    up = await startUpstream();
    // 640×480 stored, EXIF orientation 6: displayed 480×640.
    images.rotated = await sharp(await makeJpeg(640, 480, 80)).withMetadata({ orientation: 6 }).jpeg().toBuffer();
    images.r1thumb = await makeJpeg(188, 250, 80);
    images.r2 = await makeJpeg(300, 200, 80);
    up.put(orig(R1, 101), images.rotated);
    up.put(thumb(R1, 101, 250), images.r1thumb);
    t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url });
    const row = (id: number, gid: string, group: number): Value[] => [id, gid, `Release ${id}`, 1, group, 1, null, 120, 28, null, '', 0, -1, TS];
    // The dump's filesize (1000) is the real archive's number for a file sleeve does not have: not shown.
    const image = (id: number, release: number): Value[] => [id, release, '', 5000 + id, 1, TS, 0, 'image/jpeg', 1000, 100, 200, 300];
    const dump = await writeDump(path.join(t.dir, 'dump'), {
      release_group: [
        [1, G1, 'Group One', 1, 1, '', 0, TS],
        [2, G2, 'Group Two', 1, 1, '', 0, TS],
      ],
      release: [row(1, R1, 1), row(2, R2, 2)],
      'cover_art_archive.cover_art': [image(101, 1), image(201, 2)],
      'cover_art_archive.cover_art_type': [
        [101, 1],
        [201, 1],
      ],
    });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', dump]);
    await cliInProcess(t.env, ['release', 'add', R3, '--release-group', G3, '--title', 'Made here']);
    s = await startServe(t.env);
  });

  after(async () => {
    await s?.stop();
    await up?.close();
    await t?.cleanup();
  });

  it('an upload carries the fields: as displayed after EXIF orientation, thumbnails never upscaled; the write API, index.json and the group listing agree', async () => {
    const rotated = await cliInProcess(t.env, ['--json', 'art', 'add', R3, await writeInput(t, 'rotated.jpg', images.rotated), '--type', 'Front']);
    const small = await makePng(200, 100);
    const added = await cliInProcess(t.env, ['--json', 'art', 'add', R3, await writeInput(t, 'small.png', small), '--type', 'Back']);
    assert.equal(rotated.width, 480);
    assert.equal(rotated.height, 640);
    assert.equal(rotated.size, images.rotated.length);
    assert.equal(rotated.mime_type, 'image/jpeg');
    assert.deepEqual(rotated.thumbnail_dimensions, { '250': { width: 188, height: 250 }, '500': { width: 375, height: 500 }, '1200': { width: 480, height: 640 } });
    assert.deepEqual(
      [added.width, added.height, added.size, added.mime_type, added.thumbnail_dimensions],
      [200, 100, small.length, 'image/png', { '250': { width: 200, height: 100 }, '500': { width: 200, height: 100 }, '1200': { width: 200, height: 100 } }],
    );
    const index = await listing(s.base, `/release/${R3}/`);
    assert.deepEqual(index.images, [rotated, added]);
    const group = await listing(s.base, `/release-group/${G3}/`);
    assert.deepEqual(group.images, [rotated, added]);
    // The website's gallery shows the image as displayed (the stored JPEG is 640×480).
    const gallery = await page(`${s.authBase}/release/${R3}/cover-art`);
    assert.equal(gallery.status, 200);
    assert.match(gallery.body, /480 × 640 px, \d+\.\d kB/);
    assert.doesNotMatch(gallery.body, /640 × 480 px/);
    // The thumbnails really are those sizes.
    const t250 = await sharp(Buffer.from(await (await fetch(`${s.base}/release/${R3}/front-250`)).arrayBuffer())).metadata();
    assert.deepEqual([t250.width, t250.height], [188, 250]);
  });

  it('an imported image sleeve never had shows none of them; pull-through fills them as its files arrive', async () => {
    const before_ = await listing(s.base, `/release/${R1}/`);
    assert.deepEqual(ADDED.filter((k) => k in before_.images[0]), []);
    assert.equal((await listing(s.base, `/release-group/${G1}/`)).images[0].width, undefined);
    assert.equal((await fetch(`${s.base}/release/${R1}/front`)).status, 200);
    // The server empties its caches at its next look at the catalogue mark (SLEEVE_CHANGE_POLL_MS).
    const withOriginal = (await pollUntil(() => listing(s.base, `/release/${R1}/`), (l) => l.images[0].width !== undefined, 10_000)).value;
    assert.deepEqual(
      ADDED.map((k) => withOriginal.images[0][k]),
      [480, 640, images.rotated.length, 'image/jpeg', undefined],
    );
    assert.equal((await fetch(`${s.base}/release/${R1}/front-250`)).status, 200);
    const dims = { '250': { width: 188, height: 250 } };
    const withThumb = (await pollUntil(() => listing(s.base, `/release/${R1}/`), (l) => l.images[0].thumbnail_dimensions !== undefined, 10_000)).value;
    assert.deepEqual(withThumb.images[0].thumbnail_dimensions, dims);
    assert.deepEqual((await pollUntil(() => listing(s.base, `/release-group/${G1}/`), (l) => l.images[0].thumbnail_dimensions !== undefined, 10_000)).value.images[0].thumbnail_dimensions, dims);
  });

  it('sleeve art measure fills them from the stored files, and the running server answers the new listing at once', async () => {
    // Served (and so cached) before: the listing without the fields.
    assert.equal((await listing(s.base, `/release/${R2}/`)).images[0].width, undefined);
    assert.equal((await listing(s.base, `/release-group/${G2}/`)).images[0].width, undefined);
    // The operator copies the original into the store (as from an rsync of the archive).
    const file = path.join(t.dir, 'files', orig(R2, 201));
    await mkdir(path.dirname(file), { recursive: true });
    await copyFile(await writeInput(t, 'r2.jpg', images.r2), file);
    const r = await runCli(t.env, ['art', 'measure', R2]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, `release ${R2}: measured 1 of 1 image(s); index.json rewritten\n`);
    const expected = [300, 200, images.r2.length, 'image/jpeg', undefined];
    const index = await listing(s.base, `/release/${R2}/`);
    assert.deepEqual(ADDED.map((k) => index.images[0][k]), expected);
    const viaFile = await listing(s.base, `/download/mbid-${R2}/index.json`);
    assert.deepEqual(ADDED.map((k) => viaFile.images[0][k]), expected);
    const group = await listing(s.base, `/release-group/${G2}/`);
    assert.deepEqual(ADDED.map((k) => group.images[0][k]), expected);
    // Again: nothing changes, nothing is rewritten.
    const again = await cliInProcess(t.env, ['--json', 'art', 'measure', R2]);
    assert.deepEqual(again.releases, [{ release: R2, images: 1, measured: 1, missing: 0, changed: false, errors: [] }]);
  });

  it('sleeve art measure refuses an unknown or malformed MBID in one line, changing nothing', async () => {
    const before_ = await readIndexBytes(t, R3);
    const unknown = await runCli(t.env, ['art', 'measure', R3, UNKNOWN]);
    assert.notEqual(unknown.code, 0);
    assert.equal(unknown.stderr.trim().split('\n').length, 1, unknown.stderr);
    assert.match(unknown.stderr, new RegExp(`no release ${UNKNOWN}`));
    const bad = await runCli(t.env, ['art', 'measure', 'not-an-mbid']);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /"not-an-mbid" is not a valid MBID/);
    assert.deepEqual(await readIndexBytes(t, R3), before_);
  });

  it('python3-musicbrainzngs reads the new listing as it reads the real one', async () => {
    const host = new URL(s.base).host;
    const script = [
      'import json, sys, musicbrainzngs',
      'musicbrainzngs.set_useragent("sleeve-test", "1")',
      'musicbrainzngs.set_caa_hostname(sys.argv[1])',
      'listing = musicbrainzngs.get_image_list(sys.argv[2])',
      'print(json.dumps([[i["id"], i["front"], i["thumbnails"]["250"], i["width"], i["height"], i["thumbnail_dimensions"]["250"]] for i in listing["images"]]))',
    ].join('\n');
    const out = JSON.parse(await python(script, [host, R3]));
    const index = await readIndex(t, R3);
    assert.deepEqual(
      out,
      index.images.map((i: any) => [i.id, i.front, i.thumbnails['250'], i.width, i.height, i.thumbnail_dimensions['250']]),
    );
    assert.equal(out.length, 2);
  });

  it('SLEEVE_LISTING_FIELDS=caa writes the real indexer\'s listing byte for byte: the default\'s without the added fields', async () => {
    const full = await readIndex(t, R3);
    assert.ok(ADDED.every((k) => k in full.images[0]));
    const r = await runCli({ ...t.env, SLEEVE_LISTING_FIELDS: 'caa' }, ['art', 'reindex', R3]);
    assert.equal(r.code, 0, r.stderr);
    const caa = (await readIndexBytes(t, R3))?.toString('utf8') ?? '';
    const today = { ...full, images: full.images.map((i: Record<string, unknown>) => Object.fromEntries(Object.entries(i).filter(([k]) => !ADDED.includes(k)))) };
    assert.equal(caa, await pythonDumps(today));
    assert.deepEqual(Object.keys(JSON.parse(caa).images[0]).sort(), ['approved', 'back', 'comment', 'edit', 'front', 'id', 'image', 'thumbnails', 'types']);
    // And back to the default.
    await cliInProcess(t.env, ['art', 'reindex', R3]);
    assert.deepEqual(await readIndex(t, R3), full);
  });
});

/*
 * Thumbnail sizes and formats on demand (docs/file-serving.md, "Sizes and formats made on
 * demand"): SLEEVE_THUMBNAIL_SIZES and SLEEVE_THUMBNAIL_FORMATS through HTTP against `sleeve
 * serve` in its own process (response and file caches on, the fast lane on), with real images
 * made and checked by sharp; the default answers beside it from a second process on the same
 * catalogue; pull-through; an interrupted resize; and a pull-through fetch of one release that
 * leaves another release's cached answers alone.
 */
import assert from 'node:assert/strict';
import { readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { loadConfig } from '../../src/config/load.js';
import { openDatabase } from '../../src/db/connect.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';
import { startServe, type ServeProcess } from '../helpers/serve-process.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { filesRoot, writeInput } from './cli-support.js';

const TS = '2012-01-26 00:54:05.519372+00';
/** Imported (files on the upstream only): R1 in G1, with a JPEG (101), another (103) and a PDF (102). */
const G1 = '5b0a1f00-0000-4000-8000-0000000000b1';
const R1 = '7e1ea5e0-0000-4000-8000-0000000000b1';
/** Made here: R2 with the awkward images, R3 in G3 (whose cached answers must stay). */
const R2 = '7e1ea5e0-0000-4000-8000-0000000000b2';
const G2 = '5b0a1f00-0000-4000-8000-0000000000b2';
const R3 = '7e1ea5e0-0000-4000-8000-0000000000b3';
const G3 = '5b0a1f00-0000-4000-8000-0000000000b3';

const SIZES = '100,250,500,600,1200,2000';
const key = (m: string, id: number | string, tail: string) => `mbid-${m}/mbid-${m}-${id}${tail}`;

async function get(url: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, { headers, redirect: 'manual' });
}

async function bytesOf(res: Response): Promise<Buffer> {
  return Buffer.from(await res.arrayBuffer());
}

/** An animated GIF of three frames, each `w`×`h`, the first 40 px wider in content than the others' colours. */
async function animatedGif(w: number, h: number): Promise<Buffer> {
  const frames = await Promise.all([0, 1, 2].map((i) => sharp({ create: { width: w, height: h, channels: 3, background: { r: 80 * i, g: 30, b: 200 - 60 * i } } }).png().toBuffer()));
  return sharp(frames, { join: { animated: true } }).gif({ loop: 0, delay: [100, 100, 100] }).toBuffer();
}

async function metric(metrics: string, name: string): Promise<number> {
  const text = await (await fetch(`${metrics}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(name));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe(`thumbnail sizes and formats on demand (${DIALECT})`, () => {
  let t: TestEnv;
  let up: FakeUpstream;
  let s: ServeProcess;
  let plain: ServeProcess;
  let metrics: string;
  const ids: Record<string, number> = {};
  const originals: Record<string, Buffer> = {};

  before(async () => {
    up = await startUpstream();
    originals.r1 = await makeJpeg(900, 600, 80);
    originals.r103 = await makeJpeg(800, 400, 80);
    up.put(key(R1, 101, '.jpg'), originals.r1);
    up.put(key(R1, 101, '_thumb250.jpg'), await makeJpeg(250, 167, 80));
    up.put(key(R1, 103, '.jpg'), originals.r103);
    t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url, SLEEVE_THUMBNAIL_SIZES: SIZES, SLEEVE_THUMBNAIL_FORMATS: 'jpeg,webp,avif' });
    const release = (id: number, gid: string): Value[] => [id, gid, `Release ${id}`, 1, id, 1, null, 120, 28, null, '', 0, -1, TS];
    const image = (id: number, mime: string, ordering: number): Value[] => [id, 1, '', 5000 + id, ordering, TS, 0, mime, 1000, 100, 200, 300];
    const dump = await writeDump(path.join(t.dir, 'dump'), {
      release_group: [[1, G1, 'Group One', 1, 1, '', 0, TS]],
      release: [release(1, R1)],
      'cover_art_archive.cover_art': [image(101, 'image/jpeg', 1), image(102, 'application/pdf', 2), image(103, 'image/jpeg', 3)],
      'cover_art_archive.cover_art_type': [
        [101, 1],
        [102, 2],
      ],
    });
    await cliInProcess(t.env, ['--json', 'import', 'musicbrainz', dump]);
    await cliInProcess(t.env, ['release', 'add', R2, '--release-group', G2, '--title', 'Awkward images']);
    await cliInProcess(t.env, ['release', 'add', R3, '--release-group', G3, '--title', 'Left alone']);
    // 1600×1200 stored with EXIF orientation 6: displayed 1200×1600.
    originals.rotated = await sharp(await makeJpeg(1600, 1200, 80)).withMetadata({ orientation: 6 }).jpeg().toBuffer();
    originals.cmyk = await sharp(await makeJpeg(700, 500, 90)).toColourspace('cmyk').jpeg().toBuffer();
    originals.png16 = await sharp(await makePng(640, 480)).toColourspace('rgb16').png().toBuffer();
    originals.gif = await animatedGif(300, 200);
    const add = async (name: string, release: string, bytes: Buffer, type: string) =>
      (ids[name] = Number((await cliInProcess(t.env, ['--json', 'art', 'add', release, await writeInput(t, name, bytes), '--type', type])).id));
    await add('rotated.jpg', R2, originals.rotated, 'Front');
    await add('cmyk.jpg', R2, originals.cmyk, 'Back');
    await add('png16.png', R2, originals.png16, 'Booklet');
    await add('anim.gif', R2, originals.gif, 'Medium');
    await add('small.jpg', R3, await makeJpeg(300, 300, 80), 'Front');
    const port = await freePort();
    metrics = `http://127.0.0.1:${port}`;
    s = await startServe({ ...t.env, SLEEVE_METRICS_LISTEN: `127.0.0.1:${port}` });
    // The same catalogue under the default settings: the interface's answers exactly.
    const defaults = Object.fromEntries(Object.entries(t.env).filter(([k]) => k !== 'SLEEVE_THUMBNAIL_SIZES' && k !== 'SLEEVE_THUMBNAIL_FORMATS'));
    plain = await startServe(defaults);
  });

  after(async () => {
    await plain?.stop();
    await s?.stop();
    await up?.close();
    await t?.cleanup();
  });

  it('an added size is answered like the interface sizes, made once from the original, never upscaled, then served as a stored file', async () => {
    for (const path_ of [`/release/${R2}/front-600`, `/release/${R2}/${ids['rotated.jpg']}-600`, `/release/${R2}/front-600.jpg`]) {
      const res = await get(`${s.base}${path_}`);
      assert.equal(res.status, 307, path_);
      assert.equal(res.headers.get('location'), `${s.base}/download/${key(R2, ids['rotated.jpg'] as number, '_thumb600.jpg')}`, path_);
    }
    const made = await metric(metrics, 'sleeve_thumbnails_made_total{result="made"}');
    // Eight at once: one resize, eight identical answers.
    const target = `${s.base}/download/${key(R2, ids['rotated.jpg'] as number, '_thumb600.jpg')}`;
    const answers = await Promise.all(Array.from({ length: 8 }, () => get(target)));
    const bodies = await Promise.all(answers.map(bytesOf));
    for (const [i, res] of answers.entries()) {
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.equal(res.headers.get('cache-control'), 'public, max-age=31536000, immutable');
      assert.ok(bodies[i]?.equals(bodies[0] as Buffer));
    }
    assert.equal(await metric(metrics, 'sleeve_thumbnails_made_total{result="made"}'), made + 1);
    // EXIF orientation applied: displayed 1200×1600, so 450×600.
    const meta = await sharp(bodies[0]).metadata();
    assert.deepEqual([meta.format, meta.width, meta.height], ['jpeg', 450, 600]);
    // Stored, and the next answers come from the store (the same bytes, nothing made again).
    assert.ok((await readFile(path.join(filesRoot(t), key(R2, ids['rotated.jpg'] as number, '_thumb600.jpg')))).equals(bodies[0] as Buffer));
    assert.ok((await bytesOf(await get(target))).equals(bodies[0] as Buffer));
    assert.equal(await metric(metrics, 'sleeve_thumbnails_made_total{result="made"}'), made + 1);
    // 2000 of a 1200×1600 original: the original's size, never upscaled.
    const big = await sharp(await bytesOf(await fetch(`${s.base}/release/${R2}/front-2000`))).metadata();
    assert.deepEqual([big.width, big.height], [1200, 1600]);
    // The listing names the made thumbnail's real dimensions once it is rewritten (soon after:
    // cover-art/listings/listing-rewrites.ts), and the formats.
    const entryOf = (index: any) => index.images.find((i: { id: string }) => i.id === String(ids['rotated.jpg']));
    const { value: index } = await pollUntil(
      async (): Promise<any> => (await fetch(`${s.base}/download/mbid-${R2}/index.json`)).json(),
      (l) => entryOf(l).thumbnail_dimensions['600'] !== undefined,
      10_000,
      50,
    );
    const entry = entryOf(index);
    assert.deepEqual(entry.thumbnail_dimensions['600'], { width: 450, height: 600 });
    assert.deepEqual(entry.thumbnail_formats, ['jpeg', 'webp', 'avif']);
  });

  it('thumbnails made one after another and two at once, their originals read into memory kept from earlier resizes, are each exactly what sharp makes of its own original', async () => {
    const originalOf: Record<string, Buffer> = { 'png16.png': originals.png16 as Buffer, 'cmyk.jpg': originals.cmyk as Buffer, 'rotated.jpg': originals.rotated as Buffer, 'anim.gif': originals.gif as Buffer };
    // What derivatives.ts runs, with sharp alone, for a WebP of at most 2000 px.
    const expected = (name: string) =>
      sharp(originalOf[name]).rotate().resize(2000, 2000, { fit: 'inside', withoutEnlargement: true }).flatten({ background: '#ffffff' }).toColourspace('srgb').webp({ quality: 80 }).toBuffer();
    const made = (name: string) => get(`${s.base}/download/${key(R2, ids[name] as number, '_thumb2000.webp')}`);
    // The larger original first: the smaller one is then read into memory that held the larger.
    const oneByOne = ['png16.png', 'cmyk.jpg'].sort((a, b) => (originalOf[b] as Buffer).length - (originalOf[a] as Buffer).length);
    for (const name of oneByOne) {
      const res = await made(name);
      assert.equal(res.status, 200, name);
      assert.ok((await bytesOf(res)).equals(await expected(name)), name);
    }
    // Two at once (the two resizes a process runs together), each read into memory of its own.
    const together = ['rotated.jpg', 'anim.gif'];
    const answers = await Promise.all(together.map(made));
    for (const [i, name] of together.entries()) {
      const res = answers[i] as Response;
      assert.equal(res.status, 200, name);
      assert.ok((await bytesOf(res)).equals(await expected(name)), name);
    }
  });

  it('sizes not allowed, front-0 and front-99999 keep the interface answers; the default process answers exactly as the interface does', async () => {
    const original = `${s.base}/download/${key(R2, ids['rotated.jpg'] as number, '.jpg')}`;
    for (const name of ['front-0', 'front-99999', 'front-700', 'front-6000', 'front-0600']) {
      const res = await get(`${s.base}/release/${R2}/${name}`);
      assert.equal(res.status, 307, name);
      assert.equal(res.headers.get('location'), original, name);
      assert.equal(res.headers.get('vary'), null, name);
    }
    // The interface's prefix rule stays: -2500 is 250 (2500 is not allowed).
    assert.equal((await get(`${s.base}/release/${R2}/front-2500`)).headers.get('location'), `${s.base}/download/${key(R2, ids['rotated.jpg'] as number, '_thumb250.jpg')}`);
    // Defaults: 600 is not a size, .webp names nothing, and no answer varies.
    const base = plain.base;
    for (const [name, tail] of [
      ['front-600', '.jpg'],
      ['front-600.webp', '.jpg'],
      ['front-250', '_thumb250.jpg'],
      ['front-250.webp', '_thumb250.jpg'],
    ] as const) {
      const res = await get(`${base}/release/${R2}/${name}`, { accept: 'image/avif,image/webp,*/*' });
      assert.equal(res.status, 307);
      assert.equal(res.headers.get('location'), `${base}/download/${key(R2, ids['rotated.jpg'] as number, tail)}`, name);
      assert.equal(res.headers.get('vary'), null, name);
    }
    // A file of a size or format the defaults do not make: a 404, never made.
    assert.equal((await get(`${base}/download/${key(R2, ids['cmyk.jpg'] as number, '_thumb600.jpg')}`)).status, 404);
    assert.equal((await get(`${base}/download/${key(R2, ids['cmyk.jpg'] as number, '_thumb250.webp')}`)).status, 404);
    assert.equal((await get(`${s.base}/download/${key(R2, ids['cmyk.jpg'] as number, '_thumb700.jpg')}`)).status, 404);
  });

  it('Accept chooses WebP or AVIF at the redirect (q-values honoured, q=0 refuses), with Vary: Accept; a format named in the path needs none', async () => {
    const id = ids['cmyk.jpg'] as number;
    const where = (tail: string) => `${s.base}/download/${key(R2, id, tail)}`;
    const cases: [string | undefined, string][] = [
      [undefined, '_thumb500.jpg'],
      ['image/avif,image/webp,image/apng,image/*,*/*;q=0.8', '_thumb500.avif'],
      ['image/webp,*/*', '_thumb500.webp'],
      ['image/avif;q=0,image/webp,*/*;q=0.8', '_thumb500.webp'],
      ['image/avif;q=0', '_thumb500.jpg'],
      ['image/avif;q=0.5,image/jpeg', '_thumb500.jpg'],
      ['image/jpeg;q=0.4,image/webp;q=0.9', '_thumb500.webp'],
      ['application/json', '_thumb500.jpg'],
    ];
    // Twice: the first answer is made by the routes, the second replayed from the cache (the fast lane).
    for (let round = 0; round < 2; round++) {
      for (const [accept, tail] of cases) {
        const res = await get(`${s.base}/release/${R2}/back-500`, accept === undefined ? {} : { accept });
        assert.equal(res.status, 307);
        assert.equal(res.headers.get('location'), where(tail), `${accept} (round ${round})`);
        assert.equal(res.headers.get('vary'), 'Accept');
      }
    }
    const named = await get(`${s.base}/release/${R2}/back-500.webp`, { accept: 'image/avif' });
    assert.equal(named.headers.get('location'), where('_thumb500.webp'));
    assert.equal(named.headers.get('vary'), null);
    // The files: real WebP and AVIF, 8-bit sRGB from a CMYK JPEG.
    for (const [tail, format, type] of [
      ['_thumb500.webp', 'webp', 'image/webp'],
      ['_thumb500.avif', 'heif', 'image/avif'],
    ] as const) {
      const res = await get(where(tail));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), type);
      const meta = await sharp(await bytesOf(res)).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height, meta.space, meta.depth], [format, 500, 357, 'srgb', 'uchar']);
    }
  });

  it('a 16-bit PNG and an animated GIF make 8-bit thumbnails (the first frame); a PDF has none, and is never negotiated', async () => {
    const png = await sharp(await bytesOf(await fetch(`${s.base}/release/${R2}/${ids['png16.png']}-600`))).metadata();
    assert.deepEqual([png.format, png.width, png.height, png.depth, png.space], ['jpeg', 600, 450, 'uchar', 'srgb']);
    const gifRes = await fetch(`${s.base}/release/${R2}/${ids['anim.gif']}-100`, { headers: { accept: 'image/webp' } });
    assert.equal(gifRes.headers.get('content-type'), 'image/webp');
    const gifBytes = await bytesOf(gifRes);
    const gif = await sharp(gifBytes).metadata();
    assert.deepEqual([gif.format, gif.width, gif.height, gif.pages ?? 1], ['webp', 100, 67, 1]);
    // The first frame's colour (r 0, g 30, b 200), not a later one's.
    const { data } = await sharp(gifBytes).raw().toBuffer({ resolveWithObject: true });
    assert.ok(Math.abs((data[0] as number) - 0) < 16 && Math.abs((data[2] as number) - 200) < 16, `first pixel ${data[0]},${data[1]},${data[2]}`);
    // The PDF: the thumbnail redirect as today, no Vary, and no file made.
    const pdf = await get(`${s.base}/release/${R1}/102-600`, { accept: 'image/avif,image/webp' });
    assert.equal(pdf.headers.get('location'), `${s.base}/download/${key(R1, 102, '_thumb600.jpg')}`);
    assert.equal(pdf.headers.get('vary'), null);
    assert.equal((await get(pdf.headers.get('location') as string)).status, 404);
  });

  it('pull-through: a size the upstream lacks is made here from the original fetched through', async () => {
    const res = await fetch(`${s.base}/release/${R1}/103-600`);
    assert.equal(res.status, 200);
    const meta = await sharp(await bytesOf(res)).metadata();
    assert.deepEqual([meta.width, meta.height], [600, 300]);
    assert.equal(up.count(key(R1, 103, '.jpg')), 1);
    assert.equal(up.count(key(R1, 103, '_thumb600.jpg')), 0);
  });

  it("a pull-through fetch refreshes that release's listings only: another release's cached answers stay", async () => {
    const groupOf3 = async (): Promise<any> => (await fetch(`${s.base}/release-group/${G3}/`, { headers: { accept: 'application/json' } })).json();
    const index3 = async () => bytesOf(await fetch(`${s.base}/download/mbid-${R3}/index.json`));
    const group1 = async (): Promise<any> => (await fetch(`${s.base}/release-group/${G1}/`, { headers: { accept: 'application/json' } })).json();
    // Cached: answered twice.
    const g3 = await groupOf3();
    assert.deepEqual(await groupOf3(), g3);
    const i3 = await index3();
    assert.ok((await index3()).equals(i3));
    const before1 = (await group1()).images.find((i: { id: string }) => i.id === '101');
    assert.equal(before1.width, undefined);
    // Behind sleeve's back: R3's row and its index.json file change (no catalogue change published).
    const handle = await openDatabase(loadConfig(t.env).database, { poolSize: 1 });
    try {
      await handle.db.updateTable('cover_art').set({ comment: 'changed behind its back' }).where('id', '=', ids['small.jpg'] as number).execute();
    } finally {
      await handle.close();
    }
    await writeFile(path.join(filesRoot(t), `mbid-${R3}`, 'index.json'), '{"tampered": true}');
    // R1's original fetched through: R1's listings gain its measures.
    assert.equal((await get(`${s.base}/download/${key(R1, 101, '.jpg')}`)).status, 200);
    const { value } = await pollUntil(group1, (g) => g.images.find((i: { id: string }) => i.id === '101').width === 900, 10_000, 100);
    assert.equal(value.images.find((i: { id: string }) => i.id === '101').height, 600);
    // index.json is rewritten soon after the row (cover-art/listings/listing-rewrites.ts).
    const index1 = async (): Promise<any> => (await fetch(`${s.base}/download/mbid-${R1}/index.json`)).json();
    const { value: listed } = await pollUntil(index1, (l) => l.images.find((i: { id: string }) => i.id === '101').width === 900, 10_000, 50);
    assert.equal(listed.images.find((i: { id: string }) => i.id === '101').width, 900);
    // R3's answers are still the cached ones.
    assert.deepEqual(await groupOf3(), g3);
    assert.ok((await index3()).equals(i3));
  });

  it('resizes and waiting files are bounded (503 with Retry-After beyond, stored files still answered); interrupted resizes leave no file that is served', async () => {
    // A process whose resizes stop once made, before they are stored (the failpoint): two at once, 32 waiting.
    const stopped = await startServe({ ...t.env, SLEEVE_TEST_FAILPOINT: 'derivative-made' });
    const folder = path.join(filesRoot(t), `mbid-${R2}`);
    const present = new Set(await readdir(folder));
    const keys: string[] = [];
    for (const id of [ids['rotated.jpg'], ids['cmyk.jpg'], ids['png16.png'], ids['anim.gif']] as number[]) {
      for (const tail of ['_thumb100.jpg', '_thumb600.jpg', '_thumb100.webp', '_thumb250.webp', '_thumb600.webp', '_thumb100.avif', '_thumb250.avif', '_thumb600.avif', '_thumb2000.jpg', '_thumb1200.webp']) {
        const k = key(R2, id, tail);
        if (!present.has(k.slice(k.indexOf('/') + 1))) keys.push(k);
      }
    }
    assert.ok(keys.length >= 36, `${keys.length} files not made yet`);
    const stops = () => stopped.stderr().split('\n').filter((l) => l.includes('failpoint derivative-made')).length;
    let answers: Response[] = [];
    try {
      const first = keys.slice(0, 2).map((k) => get(`${stopped.base}/download/${k}`).catch(() => undefined));
      await pollUntil(async () => stops(), (n) => n === 2, 30_000, 50);
      // 32 wait; the rest are refused at once.
      const rest = keys.slice(2).map((k) => get(`${stopped.base}/download/${k}`).catch(() => undefined));
      const refused = keys.length - 2 - 32;
      const settled: Response[] = [];
      for (const p of rest) void p.then((r) => r !== undefined && settled.push(r));
      await pollUntil(async () => settled.length, (n) => n >= refused, 30_000, 50);
      answers = settled;
      // A stored file is still answered meanwhile.
      assert.equal((await get(`${stopped.base}/download/${key(R2, ids['cmyk.jpg'] as number, '_thumb250.jpg')}`)).status, 200);
      assert.equal(settled.length, refused);
      void Promise.all(first);
    } finally {
      stopped.child.kill('SIGKILL');
      await stopped.exited;
    }
    for (const r of answers) {
      assert.equal(r.status, 503);
      assert.equal(r.headers.get('retry-after'), '2');
    }
    // Killed mid-resize: nothing stored under any of those names (nor half-written beside them).
    const after_ = await readdir(folder);
    for (const k of keys) assert.ok(!after_.includes(k.slice(k.indexOf('/') + 1)), k);
    assert.equal((await get(`${plain.base}/download/${keys[0]}`)).status, 404);
    // Asked again (one at a time), each is made.
    for (const k of keys) {
      const res = await get(`${s.base}/download/${k}`);
      assert.equal(res.status, 200, k);
      assert.match(res.headers.get('content-type') ?? '', /^image\/(jpeg|webp|avif)$/);
    }
    const meta = await sharp(await bytesOf(await get(`${s.base}/download/${key(R2, ids['cmyk.jpg'] as number, '_thumb100.jpg')}`))).metadata();
    assert.deepEqual([meta.width, meta.height], [100, 71]);
  });
});

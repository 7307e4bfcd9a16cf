/*
 * Events imported from a dump, with SLEEVE_UPSTREAM_URL (docs/mirroring.md): their files are
 * fetched through from an archive.org-like upstream (items `mbid-{event}`, a fake one in this
 * process) when first asked for, measured into the event's listing, and `sleeve mirror images`
 * fetches them in bulk, named or with --all, checked against the item's `_files.xml`.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { writeDump, type Value } from '../../datagen/mbdump.js';
import { cliInProcess, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { dimensions, makeJpeg, makePng } from '../helpers/images.js';
import { startUpstream, type FakeUpstream } from '../helpers/upstream.js';
import { query } from '../import/support.js';

const TS = '2012-01-26 00:54:05.519372+00';
const R1 = '7e1ea5e0-0000-4000-8000-0000000000e1';
/** Two images upstream with every thumbnail: a JPEG Poster and a PNG. */
const EV1 = 'e3e3e3e3-0000-4000-8000-000000000001';
/** One image, its original only upstream: thumbnails are made here. */
const EV2 = 'e3e3e3e3-0000-4000-8000-000000000002';
/** Added here (`sleeve event add`): nothing upstream to mirror. */
const LOCAL = 'e3e3e3e3-0000-4000-8000-0000000000ee';
const SIZES = [250, 500, 1200] as const;

const orig = (m: string, id: number, suffix = 'jpg') => `mbid-${m}/mbid-${m}-${id}.${suffix}`;
const thumb = (m: string, id: number, size: number) => `mbid-${m}/mbid-${m}-${id}_thumb${size}.jpg`;

function event(id: number, gid: string): Value[] {
  return [id, gid, `Event ${id}`, 2020, 1, 1, null, null, null, null, 1, 'f', null, '', 0, TS, 'f'];
}

function art(id: number, eventId: number, ordering: number, mime: string): Value[] {
  return [id, eventId, '', 7000 + id, ordering, TS, 0, mime, 1000, 100, 200, 300];
}

async function writeEventDump(dir: string): Promise<string> {
  return writeDump(dir, {
    release_group: [[1, '5b0a1f00-0000-4000-8000-0000000000e1', 'Group', 1, 1, '', 0, TS]],
    release: [[1, R1, 'Release', 1, 1, 1, null, 120, 28, null, '', 0, -1, TS]],
    event: [event(1, EV1), event(2, EV2)],
    'event_art_archive.event_art': [art(801, 1, 1, 'image/jpeg'), art(802, 1, 2, 'image/png'), art(901, 2, 1, 'image/jpeg')],
    'event_art_archive.event_art_type': [
      [801, 1],
      [901, 1],
    ],
  });
}

describe(`events: pull-through and sleeve mirror images (${DIALECT})`, () => {
  let up: FakeUpstream;
  const files = new Map<string, Buffer>();

  before(async () => {
    up = await startUpstream();
    const put = (key: string, bytes: Buffer, type = 'image/jpeg') => {
      files.set(key, bytes);
      up.put(key, bytes, type);
    };
    put(orig(EV1, 801), (await makeJpeg(400, 300, 80)) as Buffer);
    put(orig(EV1, 802, 'png'), (await makePng(300, 200)) as Buffer, 'image/png');
    for (const id of [801, 802]) for (const size of SIZES) put(thumb(EV1, id, size), (await makeJpeg(size, size, 70 + Math.round(size / 100))) as Buffer);
    put(orig(EV2, 901), (await makeJpeg(1600, 900, 80)) as Buffer);
  });

  after(async () => {
    await up?.close();
  });

  describe('pull-through', () => {
    let t: TestEnv;
    let s: RunningServer;

    before(async () => {
      t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0', SLEEVE_UPSTREAM_URL: up.url, SLEEVE_UPSTREAM_TIMEOUT_MS: '5000' });
      await cliInProcess(t.env, ['import', 'musicbrainz', await writeEventDump(path.join(t.dir, 'dump'))]);
      s = await startServer(t);
    });

    after(async () => {
      await s?.server.close();
      await t?.cleanup();
    });

    it("fetches an event's original through, stores it, and measures it into the event's listing", async () => {
      const res = await fetch(`${s.base}/event/${EV1}/front`);
      assert.equal(res.status, 200);
      assert.equal(res.url, `${s.base}/download/${orig(EV1, 801)}`);
      assert.deepEqual(Buffer.from(await res.arrayBuffer()), files.get(orig(EV1, 801)));
      assert.deepEqual(await readFile(path.join(t.dir, 'files', orig(EV1, 801))), files.get(orig(EV1, 801)));
      const [row] = await query(t, 'SELECT width, height, stored_size FROM event_art WHERE id = 801');
      assert.deepEqual([row?.width, row?.height, Number(row?.stored_size)], [400, 300, files.get(orig(EV1, 801))?.length]);
      const listing = (await (await fetch(`${s.base}/download/mbid-${EV1}/index.json`)).json()) as { event: string; images: { id: string; width?: number }[] };
      assert.equal(listing.event, `https://musicbrainz.org/event/${EV1}`);
      assert.deepEqual(
        listing.images.map((i) => [i.id, i.width]),
        [
          ['801', 400],
          ['802', undefined],
        ],
      );
      // Stored: asked again, the upstream is not.
      const before = up.count(orig(EV1, 801));
      assert.equal((await fetch(`${s.base}/event/${EV1}/801`)).status, 200);
      assert.equal(up.count(orig(EV1, 801)), before);
    });

    it('fetches a thumbnail through, and makes one the upstream lacks from the original', async () => {
      const upstreamThumb = await fetch(`${s.base}/event/${EV1}/802-500`);
      assert.equal(upstreamThumb.status, 200);
      assert.deepEqual(Buffer.from(await upstreamThumb.arrayBuffer()), files.get(thumb(EV1, 802, 500)));
      const made = await fetch(`${s.base}/event/${EV2}/front-250`);
      assert.equal(made.status, 200);
      assert.equal(made.headers.get('content-type'), 'image/jpeg');
      assert.equal((await dimensions(Buffer.from(await made.arrayBuffer()))).width, 250);
      assert.ok(existsSync(path.join(t.dir, 'files', thumb(EV2, 901, 250))));
    });

    it('never asks the upstream for what the catalogue does not name', async () => {
      const total = up.total();
      assert.equal((await fetch(`${s.base}/download/${orig(EV1, 803)}`)).status, 404);
      assert.equal((await fetch(`${s.base}/download/${orig(EV1, 802)}`)).status, 404, 'the catalogue says PNG');
      assert.equal(up.total(), total);
    });
  });

  describe('sleeve mirror images', () => {
    let t: TestEnv;
    const mirror = (...args: string[]) => runCli(t.env, ['--json', 'mirror', 'images', ...args]);

    before(async () => {
      t = await makeTestEnv({ SLEEVE_UPSTREAM_URL: up.url, SLEEVE_UPSTREAM_TIMEOUT_MS: '5000' });
      await cliInProcess(t.env, ['import', 'musicbrainz', await writeEventDump(path.join(t.dir, 'dump'))]);
      await cliInProcess(t.env, ['event', 'add', LOCAL]);
    });

    after(async () => {
      await t?.cleanup();
    });

    it('refuses an event added here, naming it; nothing is fetched', async () => {
      const total = up.total();
      const r = await mirror(EV1, LOCAL);
      assert.equal(r.code, 2, r.stderr);
      assert.match(r.stderr, new RegExp(`not imported from MusicBrainz \\(nothing upstream to mirror\\): ${LOCAL}; nothing was fetched`));
      assert.equal(up.total(), total);
    });

    it('mirrors a named event, each file checked against its md5', async () => {
      const r = await mirror(EV1);
      assert.equal(r.code, 0, r.stderr);
      const s = JSON.parse(r.stdout);
      assert.deepEqual([s.releases, s.events, s.files, s.fetched, s.failed_total, s.unverified], [0, 1, 8, 8, 0, 0]);
      for (const [key, bytes] of files) if (key.startsWith(`mbid-${EV1}/`)) assert.deepEqual(await readFile(path.join(t.dir, 'files', key)), bytes, key);
      const human = await runCli(t.env, ['mirror', 'images', EV1]);
      assert.match(human.stdout, /^mirrored 0 releases and 1 events \(8 files\) in [\d.]+ s: 0 fetched \(0\.0 MB\), 8 already in the store, 0 failed\n/);
    });

    it('--all mirrors every imported event too; thumbnails the upstream lacks are made here', async () => {
      const r = await mirror('--all');
      assert.equal(r.code, 0, r.stderr);
      const s = JSON.parse(r.stdout);
      // The release has no images: only the two events.
      assert.deepEqual([s.releases, s.events, s.files, s.fetched, s.skipped, s.failed_total], [0, 2, 12, 4, 8, 0]);
      for (const size of SIZES) assert.equal((await dimensions(await readFile(path.join(t.dir, 'files', thumb(EV2, 901, size))))).width, size);
      // Measured into the events' listings after the run, as releases' are.
      const [row] = await query(t, 'SELECT width, height, thumbnail_dimensions FROM event_art WHERE id = 901');
      assert.deepEqual([row?.width, row?.height], [1600, 900]);
      assert.deepEqual(Object.keys(JSON.parse(String(row?.thumbnail_dimensions))).sort(), ['1200', '250', '500']);
    });

    it('art measure and art reindex take an event’s MBID', async () => {
      const measured = await runCli(t.env, ['art', 'measure', EV1]);
      assert.equal(measured.code, 0, measured.stderr);
      assert.equal(measured.stdout, `event ${EV1}: measured 2 of 2 image(s); index.json unchanged\n`);
      const index = path.join(t.dir, 'files', `mbid-${EV1}`, 'index.json');
      await rm(index, { force: true });
      assert.deepEqual(await cliInProcess(t.env, ['--json', 'art', 'reindex', EV1]), { event: EV1 });
      const listing = JSON.parse(await readFile(index, 'utf8'));
      assert.deepEqual(
        listing.images.map((i: { id: string; width: number; front: boolean }) => [i.id, i.width, i.front]),
        [
          ['801', 400, true],
          ['802', 300, false],
        ],
      );
    });
  });
});

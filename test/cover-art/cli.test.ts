/*
 * The `sleeve` command line, black box: the real binary, the files it leaves in the
 * storage directory, and what the cover art API then answers.
 */
import assert from 'node:assert/strict';
import { readdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { cliOk, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeGif, makeJpeg, makePng } from '../helpers/images.js';
import {
  assertRefused,
  dbImageIds,
  fetchState,
  folderFiles,
  formulaId,
  newMbid,
  readIndex,
  readIndexBytes,
  releaseFolder,
  writeInput,
} from './cli-support.js';

type Dims = [number, number];

interface ThumbCase {
  name: string;
  make: () => Promise<Buffer>;
  suffix: 'jpg' | 'png' | 'gif';
  /** [width, height] of the 250, 500 and 1200 thumbnails. */
  thumbs: [Dims, Dims, Dims];
  stdin?: boolean;
}

const CASES: ThumbCase[] = [
  { name: 'landscape JPEG 2000×1000', make: () => makeJpeg(2000, 1000), suffix: 'jpg', thumbs: [[250, 125], [500, 250], [1200, 600]] },
  { name: 'portrait JPEG 1000×2000', make: () => makeJpeg(1000, 2000), suffix: 'jpg', thumbs: [[125, 250], [250, 500], [600, 1200]] },
  { name: 'small JPEG 200×100 (never upscaled)', make: () => makeJpeg(200, 100), suffix: 'jpg', thumbs: [[200, 100], [200, 100], [200, 100]] },
  { name: 'JPEG 400×320 (only the 250 shrinks)', make: () => makeJpeg(400, 320), suffix: 'jpg', thumbs: [[250, 200], [400, 320], [400, 320]] },
  { name: 'PNG with alpha 600×300', make: () => makePng(600, 300, true), suffix: 'png', thumbs: [[250, 125], [500, 250], [600, 300]] },
  { name: 'GIF 300×150', make: () => makeGif(300, 150), suffix: 'gif', thumbs: [[250, 125], [300, 150], [300, 150]] },
  {
    name: 'JPEG 400×200 with EXIF orientation 6 (shown 200×400)',
    make: async () => sharp(await makeJpeg(400, 200)).withMetadata({ orientation: 6 }).jpeg().toBuffer(),
    suffix: 'jpg',
    thumbs: [[125, 250], [200, 400], [200, 400]],
  },
  { name: 'PNG 1500×1000 read from stdin (FILE -)', make: () => makePng(1500, 1000), suffix: 'png', thumbs: [[250, 167], [500, 333], [1200, 800]], stdin: true },
];

const SIZES = [250, 500, 1200] as const;

describe(`sleeve CLI: commands, output and stored files (${DIALECT})`, () => {
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

  describe('art add: originals, thumbnails, ids and index.json', () => {
    const release = newMbid();
    const group = newMbid();
    const added: { id: string; entry: any; original: Buffer; c: ThumbCase }[] = [];

    before(async () => {
      await cliOk(t.env, ['release', 'add', release, '--release-group', group, '--title', 'Thumbs']);
    });

    for (const [n, c] of CASES.entries()) {
      it(`${c.name}: stores the original byte for byte and exact JPEG thumbnails`, async () => {
        const original = await c.make();
        const isFront = n === 0;
        const args = ['--json', 'art', 'add', release, c.stdin === true ? '-' : await writeInput(t, `case${n}.${c.suffix}`, original)];
        if (isFront) args.push('--type', 'Front', '--comment', 'the cover', '--edit', '42', '--approved');
        const beforeMs = Date.now();
        const entry = await cliOk(t.env, args, c.stdin === true ? { stdin: original } : {});
        const afterMs = Date.now();

        // The id: the interface's formula at upload time, and above every earlier id.
        assert.match(entry.id, /^\d+$/);
        const id = Number(entry.id);
        assert.ok(id >= formulaId(beforeMs) && id <= formulaId(afterMs), `id ${id} not within [${formulaId(beforeMs)}, ${formulaId(afterMs)}]`);
        const previous = added.at(-1);
        if (previous !== undefined) assert.ok(id > Number(previous.id), `id ${id} not above the previous ${previous.id}`);

        // The files, in archive.org's layout.
        const stem = `mbid-${release}-${id}`;
        const files = await folderFiles(t, release);
        for (const name of [`${stem}.${c.suffix}`, `${stem}_thumb250.jpg`, `${stem}_thumb500.jpg`, `${stem}_thumb1200.jpg`]) {
          assert.ok(files.includes(name), `${name} missing from ${files.join(', ')}`);
        }
        assert.deepEqual(await readFile(path.join(releaseFolder(t, release), `${stem}.${c.suffix}`)), original);
        for (const [i, size] of SIZES.entries()) {
          const bytes = await readFile(path.join(releaseFolder(t, release), `${stem}_thumb${size}.jpg`));
          const meta = await sharp(bytes).metadata();
          assert.equal(meta.format, 'jpeg', `thumb${size} format`);
          assert.deepEqual([meta.width, meta.height], c.thumbs[i], `thumb${size} dimensions`);
          assert.equal(meta.hasAlpha, false, `thumb${size} has no alpha`);
          assert.equal(meta.orientation, undefined, `thumb${size} carries no EXIF orientation`);
        }

        // The entry printed is the one in the listing, and the listing names every image so far, in upload order.
        const index = await readIndex(t, release);
        const listed = index.images.find((i: any) => i.id === entry.id);
        assert.deepEqual(entry, listed);
        added.push({ id: entry.id, entry, original, c });
        assert.deepEqual(
          index.images.map((i: any) => i.id),
          added.map((a) => a.id),
        );
        const prefix = `${s.base}/release/${release}/${id}`;
        assert.equal(entry.image, `${prefix}.${c.suffix}`);
        assert.deepEqual(entry.thumbnails, {
          '1200': `${prefix}-1200.jpg`,
          '250': `${prefix}-250.jpg`,
          '500': `${prefix}-500.jpg`,
          large: `${prefix}-500.jpg`,
          small: `${prefix}-250.jpg`,
        });
        if (isFront) {
          assert.deepEqual(
            { types: entry.types, comment: entry.comment, edit: entry.edit, approved: entry.approved, front: entry.front, back: entry.back },
            { types: ['Front'], comment: 'the cover', edit: 42, approved: true, front: true, back: false },
          );
        } else {
          assert.deepEqual(
            // Without --edit, the listing's edit is the id of the sleeve edit that added it (above MusicBrainz's ids); the operator's additions are approved.
            { types: entry.types, comment: entry.comment, edit: entry.edit > 1_000_000_000 ? 'sleeve' : entry.edit, approved: entry.approved, front: entry.front },
            { types: [], comment: '', edit: 'sleeve', approved: true, front: false },
          );
        }
      });
    }

    it('serves the stored original and thumbnails over HTTP, and the index.json equals the listing built from the database', async () => {
      assert.equal(added.length, CASES.length);
      for (const a of [added[0], added[5]]) {
        assert.ok(a !== undefined);
        const original = await fetch(`${s.base}/release/${release}/${a.id}`);
        assert.equal(original.status, 200);
        assert.deepEqual(Buffer.from(await original.arrayBuffer()), a.original);
        const thumb = await fetch(`${s.base}/release/${release}/${a.id}-500`);
        assert.equal(thumb.status, 200);
        assert.equal(thumb.headers.get('content-type'), 'image/jpeg');
        assert.deepEqual(
          Buffer.from(await thumb.arrayBuffer()),
          await readFile(path.join(releaseFolder(t, release), `mbid-${release}-${a.id}_thumb500.jpg`)),
        );
      }
      // The release is its group's only one with a front: the group listing is built from the database.
      const group_ = await fetchState(`${s.base}/release-group/${group}/`);
      assert.equal(group_.status, 200);
      assert.equal((await readIndexBytes(t, release))?.toString('utf8'), group_.body);
      assert.deepEqual(await dbImageIds(t, release), added.map((a) => a.id));
      // And the release listing redirects to that very file.
      const listing = await fetch(`${s.base}/release/${release}/`);
      assert.equal(listing.status, 200);
      assert.equal(await listing.text(), group_.body);
    });

    it('prints a human summary without --json', async () => {
      const file = await writeInput(t, 'human.jpg', await makeJpeg(300, 300));
      const out: string = await cliOk(t.env, ['art', 'add', release, file, '--type', 'back', '--type', 'Spine']);
      const m = /^added image (\d+) \(Back, Spine\) on release ([0-9a-f-]{36})\n {2}(\S+)\n$/.exec(out);
      assert.ok(m !== null, `unexpected output: ${JSON.stringify(out)}`);
      assert.equal(m[2], release);
      assert.equal(m[3], `${s.base}/release/${release}/${m[1]}.jpg`);
      const index = await readIndex(t, release);
      assert.equal(index.images.length, CASES.length + 1);
      const last = index.images.at(-1);
      assert.equal(last.id, m[1]);
      assert.deepEqual([last.types, last.back], [['Back', 'Spine'], true]);
      // Untyped images still print as such.
      const plain: string = await cliOk(t.env, ['art', 'add', release, file]);
      assert.match(plain, /^added image \d+ \(no type\) on release /);
    });
  });

  describe('art edit, reorder, remove and reindex rewrite index.json', () => {
    const release = newMbid();
    const group = newMbid();
    let ids: string[] = [];

    before(async () => {
      await cliOk(t.env, ['release', 'add', release, '--release-group', group]);
      const file = await writeInput(t, 'edit.jpg', await makeJpeg(320, 240));
      ids = [];
      for (const type of ['Front', 'Back', 'Booklet']) ids.push((await cliOk(t.env, ['--json', 'art', 'add', release, file, '--type', type])).id);
    });

    it('art edit --json changes types, comment and approval, and the listing follows', async () => {
      const [, second = '', third = ''] = ids;
      const before_ = await readIndexBytes(t, release);
      const entry = await cliOk(t.env, ['--json', 'art', 'edit', release, third, '--type', 'Front', '--type', 'Medium', '--comment', 'Ünïcode & "quotes"', '--approved']);
      assert.deepEqual(
        { id: entry.id, types: entry.types, comment: entry.comment, approved: entry.approved, front: entry.front },
        { id: third, types: ['Front', 'Medium'], comment: 'Ünïcode & "quotes"', approved: true, front: false },
      );
      const after_ = await readIndexBytes(t, release);
      assert.notDeepEqual(after_, before_);
      // Python's json.dumps: non-ASCII written as \u escapes.
      assert.ok(after_?.toString('utf8').includes('\\u00dcn\\u00efcode & \\"quotes\\"'));
      const index = await readIndex(t, release);
      assert.deepEqual(index.images[2], entry);
      // Only the edited entry changed.
      assert.deepEqual(index.images.map((i: any) => i.comment), ['', '', 'Ünïcode & "quotes"']);

      const unapproved = await cliOk(t.env, ['--json', 'art', 'edit', release, second, '--unapproved', '--comment', '']);
      assert.equal(unapproved.approved, false);
      const types = await cliOk(t.env, ['--json', 'art', 'edit', release, second, '--type', 'Tray']);
      assert.deepEqual([types.types, types.back], [['Tray'], false]);
      assert.deepEqual((await readIndex(t, release)).images[1], types);

      const human: string = await cliOk(t.env, ['art', 'edit', release, second, '--approved']);
      assert.equal(human, `edited image ${second} (Tray) on release ${release}\n  ${s.base}/release/${release}/${second}.jpg\n`);
      assert.equal((await readIndex(t, release)).images[1].approved, true);
    });

    it('art reorder --json puts the images in the given order', async () => {
      const reversed = [...ids].reverse();
      const out = await cliOk(t.env, ['--json', 'art', 'reorder', release, ...reversed]);
      assert.deepEqual(out, { release, order: reversed });
      const index = await readIndex(t, release);
      assert.deepEqual(index.images.map((i: any) => i.id), reversed);
      // The third image (now first) carries Front as well: front is the lowest ordering with the type.
      assert.deepEqual(index.images.map((i: any) => i.front), [true, false, false]);
      const human: string = await cliOk(t.env, ['art', 'reorder', release, ...ids]);
      assert.equal(human, `new order: ${ids.join(' ')}\n`);
      assert.deepEqual((await readIndex(t, release)).images.map((i: any) => i.id), ids);
      assert.deepEqual((await readIndex(t, release)).images.map((i: any) => i.front), [true, false, false]);
    });

    it('art remove --json drops the row, the listing entry and every file of the image', async () => {
      const [first = '', second = '', third = ''] = ids;
      const out = await cliOk(t.env, ['--json', 'art', 'remove', release, second]);
      assert.deepEqual(out, { removed: second, release });
      const index = await readIndex(t, release);
      assert.deepEqual(index.images.map((i: any) => i.id), [first, third]);
      const files = await folderFiles(t, release);
      assert.equal(files.filter((f) => f.includes(`-${second}`)).length, 0, `files of ${second} left: ${files.join(', ')}`);
      assert.equal(files.filter((f) => f.includes(`-${first}`)).length, 4);
      assert.equal((await fetchState(`${s.base}/release/${release}/${second}`)).status, 404);
      assert.deepEqual(await dbImageIds(t, release), [first, third]);

      // Orderings stay 1..n: a new image lands last, and reorder accepts exactly the two left.
      const human: string = await cliOk(t.env, ['art', 'remove', release, first]);
      assert.equal(human, `removed image ${first} from release ${release}\n`);
      assert.deepEqual((await readIndex(t, release)).images.map((i: any) => i.id), [third]);
      ids = [third];
    });

    it('art reindex recreates a deleted index.json and fixes a tampered one', async () => {
      const good = await readIndexBytes(t, release);
      assert.ok(good !== undefined);
      await rm(path.join(releaseFolder(t, release), 'index.json'));
      const out = await cliOk(t.env, ['--json', 'art', 'reindex', release]);
      assert.deepEqual(out, { releases: 1, orphansRemoved: 0 });
      assert.deepEqual(await readIndexBytes(t, release), good);

      await writeFile(path.join(releaseFolder(t, release), 'index.json'), '{"images": [{"id": "1", "image": "gone.jpg"}], "release": "x"}');
      const all = await cliOk(t.env, ['--json', 'art', 'reindex']);
      assert.ok(all.releases >= 2, `reindex of every release with images: ${JSON.stringify(all)}`);
      assert.equal(all.orphansRemoved, 0);
      assert.deepEqual(await readIndexBytes(t, release), good);

      await writeFile(path.join(releaseFolder(t, release), 'index.json'), 'garbage');
      const human: string = await cliOk(t.env, ['art', 'reindex', release.toUpperCase()]);
      assert.equal(human, 'rewrote index.json of 1 release(s); removed 0 orphaned file(s)\n');
      assert.deepEqual(await readIndexBytes(t, release), good);
    });

    it('art reindex removes files named with a second spelling of an id (an older pull-through made them), and only those', async () => {
      const [id = ''] = ids;
      const folder = releaseFolder(t, release);
      const before = await folderFiles(t, release);
      const jpeg = await readFile(path.join(folder, `mbid-${release}-${id}_thumb250.jpg`));
      const strays = [`mbid-${release}-0${id}_thumb250.jpg`, `mbid-${release}-00${id}.jpg`, `mbid-${release}-9007199254740993_thumb500.jpg`];
      for (const name of strays) await writeFile(path.join(folder, name), jpeg);
      for (const name of strays) assert.equal((await fetchState(`${s.base}/download/mbid-${release}/${name}`)).status, 404, name);
      const out = await cliOk(t.env, ['--json', 'art', 'reindex', release]);
      assert.deepEqual(out, { releases: 1, orphansRemoved: strays.length });
      assert.deepEqual(await folderFiles(t, release), before);
    });
  });

  describe('release add, release merge, release-group set-cover', () => {
    it('release add --json lower-cases the MBIDs; human output names both', async () => {
      const release = newMbid();
      const group = newMbid();
      const out = await cliOk(t.env, ['--json', 'release', 'add', release.toUpperCase(), '--release-group', group.toUpperCase(), '--date', '1999-12']);
      assert.deepEqual(out, { release, release_group: group });
      const other = newMbid();
      const human: string = await cliOk(t.env, ['release', 'add', other, '--release-group', group, '--title', 'Other', '--date', '2000']);
      assert.equal(human, `added release ${other} in release group ${group}\n`);
      // A release without images has no listing yet.
      assert.equal((await fetchState(`${s.base}/release/${release}/`)).status, 404);
    });

    it('release merge --json moves the images and files; the old MBID then resolves to the new release', async () => {
      const group = newMbid();
      const old = newMbid();
      const into = newMbid();
      await cliOk(t.env, ['release', 'add', old, '--release-group', group]);
      await cliOk(t.env, ['release', 'add', into, '--release-group', group]);
      const oldBytes = await makeJpeg(640, 480);
      const intoId = (await cliOk(t.env, ['--json', 'art', 'add', into, await writeInput(t, 'into.jpg', await makeJpeg(500, 500)), '--type', 'Front'])).id;
      const oldIds: string[] = [];
      for (const type of ['Front', 'Back']) oldIds.push((await cliOk(t.env, ['--json', 'art', 'add', old, await writeInput(t, 'old.jpg', oldBytes), '--type', type])).id);
      const oldThumb = await readFile(path.join(releaseFolder(t, old), `mbid-${old}-${oldIds[0]}_thumb250.jpg`));

      const out = await cliOk(t.env, ['--json', 'release', 'merge', old, into]);
      assert.deepEqual(out, { merged: old, into, moved: oldIds });

      assert.deepEqual(await folderFiles(t, old), [], 'the old folder is gone');
      const index = await readIndex(t, into);
      assert.deepEqual(index.images.map((i: any) => i.id), [intoId, ...oldIds]);
      assert.equal(index.release, `https://musicbrainz.org/release/${into}`);
      assert.ok(index.images.every((i: any) => i.image.startsWith(`${s.base}/release/${into}/`)));
      for (const id of oldIds) {
        assert.deepEqual(await readFile(path.join(releaseFolder(t, into), `mbid-${into}-${id}.jpg`)), oldBytes);
      }
      assert.deepEqual(await readFile(path.join(releaseFolder(t, into), `mbid-${into}-${oldIds[0]}_thumb250.jpg`)), oldThumb);
      assert.equal((await folderFiles(t, into)).length, 1 + 3 * 4);

      const listing = await fetchState(`${s.base}/release/${old}/`);
      assert.equal(listing.status, 307);
      assert.equal(listing.location, `${s.base}/download/mbid-${into}/index.json`);
      const moved = await fetchState(`${s.base}/release/${old}/${oldIds[1]}`);
      assert.equal(moved.location, `${s.base}/download/mbid-${into}/mbid-${into}-${oldIds[1]}.jpg`);
      // The old MBID now names the merged release for every command too.
      const edited = await cliOk(t.env, ['--json', 'art', 'edit', old, oldIds[1] as string, '--comment', 'moved']);
      assert.equal(edited.comment, 'moved');
      assert.equal((await readIndex(t, into)).images[2].comment, 'moved');

      const third = newMbid();
      await cliOk(t.env, ['release', 'add', third, '--release-group', group]);
      const human: string = await cliOk(t.env, ['release', 'merge', third.toUpperCase(), into]);
      assert.equal(human, `merged release ${third} into ${into} (0 images moved)\n`);
    });

    it('release-group set-cover --json changes which release the group listing shows', async () => {
      const group = newMbid();
      const early = newMbid();
      const late = newMbid();
      await cliOk(t.env, ['release', 'add', early, '--release-group', group, '--date', '1990']);
      await cliOk(t.env, ['release', 'add', late, '--release-group', group, '--date', '2010-05-06']);
      const file = await writeInput(t, 'cover.jpg', await makeJpeg(260, 260));
      await cliOk(t.env, ['art', 'add', early, file, '--type', 'Front']);
      await cliOk(t.env, ['art', 'add', late, file, '--type', 'Front']);
      const shown = async () => JSON.parse((await fetchState(`${s.base}/release-group/${group}/`)).body).release;
      assert.equal(await shown(), `https://musicbrainz.org/release/${early}`);

      const out = await cliOk(t.env, ['--json', 'release-group', 'set-cover', group, late]);
      assert.deepEqual(out, { release_group: group, release: late });
      assert.equal(await shown(), `https://musicbrainz.org/release/${late}`);
      const human: string = await cliOk(t.env, ['release-group', 'set-cover', group.toUpperCase(), early]);
      assert.equal(human, `release group ${group} now takes its cover art from release ${early}\n`);
      assert.equal(await shown(), `https://musicbrainz.org/release/${early}`);
    });
  });

  describe('demo and migrate', () => {
    it('demo --json loads the demo catalogue once, with listings and thumbnails', async () => {
      const out = await cliOk(t.env, ['--json', 'demo']);
      assert.equal(out.added.length, 3);
      const [first] = out.added as string[];
      assert.ok(first !== undefined);
      const index = await readIndex(t, first);
      assert.equal(index.images.length, 3);
      assert.deepEqual(index.images.map((i: any) => i.types), [['Front'], ['Back'], ['Booklet']]);
      const front = await fetch(`${s.base}/release/${first}/front-250`);
      assert.equal(front.status, 200);
      assert.deepEqual(
        await sharp(Buffer.from(await front.arrayBuffer())).metadata().then((m) => [m.format, m.width, m.height]),
        ['jpeg', 250, 250],
      );
      assert.deepEqual(await cliOk(t.env, ['--json', 'demo']), { added: [] });
      assert.equal(await cliOk(t.env, ['demo']), 'the demo catalogue is already loaded\n');
    });

    it('migrate --json names the migrations applied to a new database, then none', async () => {
      const fresh = await makeTestEnv({}, { migrated: false });
      try {
        const first = await cliOk(fresh.env, ['--json', 'migrate']);
        assert.ok(first.applied.length >= 1);
        for (const name of first.applied) assert.match(name, /^\d{8}T\d{4}_[a-z_]+$/);
        assert.ok(first.applied.some((name: string) => name.endsWith('_cover_art')));
        assert.deepEqual([...first.applied].sort(), first.applied, 'applied in order');
        assert.deepEqual(await cliOk(fresh.env, ['migrate', '--json']), { applied: [] });
        assert.equal(await cliOk(fresh.env, ['migrate']), 'the database is up to date\n');
      } finally {
        await fresh.cleanup();
      }
    });
  });
});

describe('sleeve CLI: usage errors', () => {
  const M = '11111111-1111-4111-8111-111111111111';
  const usage: [string, string[], RegExp][] = [
    ['no command', [], /usage: sleeve/],
    ['an unknown command', ['frobnicate'], /unknown command: frobnicate/],
    ['an unknown sub-command', ['art', 'paint'], /unknown command: art paint/],
    ['release add without MBID', ['release', 'add'], /usage: sleeve release add MBID/],
    ['release add without --release-group', ['release', 'add', M], /--release-group RG_MBID is required/],
    ['an unknown flag', ['art', 'add', M, 'f.jpg', '--bogus'], /unknown option --bogus for sleeve art add/],
    ['a flag without its value', ['art', 'add', M, 'f.jpg', '--comment'], /--comment/],
    ['too many arguments', ['art', 'remove', M, '1', '2'], /usage: sleeve art remove RELEASE_MBID IMAGE_ID/],
    ['art edit with nothing to change', ['art', 'edit', M, '1'], /nothing to change/],
    ['art edit --approved --unapproved', ['art', 'edit', M, '1', '--approved', '--unapproved'], /contradict/],
    ['art add --edit not a number', ['art', 'add', M, 'f.jpg', '--edit', 'x'], /--edit must be a whole number/],
    ['serve --only nonsense', ['serve', '--only', 'both'], /--only must be coverart or auth/],
  ];

  let t: TestEnv;
  before(async () => {
    // A data directory that must stay empty: a usage error opens nothing.
    t = await makeTestEnv({}, { migrated: false });
  });
  after(async () => t?.cleanup());

  // With --json too for these (each run costs a process start).
  const withJson = new Set(['no command', 'an unknown command', 'release add without --release-group', 'an unknown flag']);

  for (const [name, args, pattern] of usage) {
    it(`${name}: exit 2 and a message on stderr${withJson.has(name) ? ', with --json an error object on stdout' : ''}`, async () => {
      const plain = await runCli(t.env, args);
      assertRefused(plain, pattern);
      assert.equal(plain.stdout, '', `nothing on stdout: ${plain.stdout}`);
      if (withJson.has(name)) {
        const json = await runCli(t.env, [...args, '--json']);
        assertRefused(json, pattern);
        const parsed = JSON.parse(json.stdout);
        assert.deepEqual(Object.keys(parsed), ['error']);
        assert.match(parsed.error.code, /^(USAGE|INVALID_INPUT)$/);
        assert.ok(parsed.error.message.length > 0);
      }
      assert.deepEqual(await readdir(t.dir), [], 'a usage error creates nothing in the data directory');
    });
  }

  it('--help prints the usage on stdout and exits 0', async () => {
    const r = await runCli(t.env, ['--help']);
    assert.equal(r.code, 0);
    for (const command of ['serve', 'migrate', 'demo', 'release add', 'release merge', 'release-group set-cover', 'art add', 'art edit', 'art remove', 'art reorder', 'art reindex']) {
      assert.ok(r.stdout.includes(`  ${command}`), `usage lists ${command}`);
    }
  });
});

/*
 * Bad input to the CLI: a non-zero exit, a clear message on stderr, and everything as
 * before: the storage tree (with file hashes), every index.json byte, the database rows
 * and what the API answers.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { cliOk, DIALECT, makeTestEnv, runCli, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeGif, makeJpeg, makePng, makeWebp } from '../helpers/images.js';
import { assertRefused, newMbid, pngBomb, readIndex, snapshot, writeInput, type Snapshot } from './cli-support.js';

interface BadCase {
  name: string;
  /** The command line, given the fixture paths and ids. */
  args: () => Promise<string[]>;
  message: RegExp | (() => RegExp);
  env?: () => Record<string, string>;
  stdin?: () => Promise<Buffer>;
}

describe(`sleeve CLI: bad input changes nothing (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const release = newMbid();
  const group = newMbid();
  const other = newMbid();
  const otherGroup = newMbid();
  const unknown = newMbid();
  let ids: string[] = [];
  let baseline: Snapshot;
  let jpeg: Buffer;
  let png: Buffer;

  const input = async (name: string, bytes: Buffer | string | (() => Promise<Buffer>)) =>
    writeInput(t, name, typeof bytes === 'function' ? await bytes() : bytes);
  const state = () => snapshot(t, [release, other], s.base, [group, otherGroup]);

  before(async () => {
    t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0' });
    s = await startServer(t);
    jpeg = await makeJpeg(900, 600);
    png = await makePng(400, 300);
    await cliOk(t.env, ['release', 'add', release, '--release-group', group, '--title', 'Target']);
    await cliOk(t.env, ['release', 'add', other, '--release-group', otherGroup]);
    ids = [];
    ids.push((await cliOk(t.env, ['--json', 'art', 'add', release, await input('front.jpg', jpeg), '--type', 'Front', '--comment', 'front'])).id);
    ids.push((await cliOk(t.env, ['--json', 'art', 'add', release, await input('back.png', png), '--type', 'Back'])).id);
    baseline = await state();
    // The baseline is meaningful: two images, their files, a listing and a group listing.
    assert.equal((await readIndex(t, release)).images.length, 2);
    assert.equal(Object.keys(baseline.tree).filter((k) => k.startsWith(`mbid-${release}/`) && !k.endsWith('/')).length, 9);
    assert.equal((baseline.http[`/release-group/${group}/`] as { status: number }).status, 200);
    assert.equal(baseline.db.cover_art?.length, 2);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  const cases: BadCase[] = [
    // Uploads that are not images sleeve takes.
    { name: 'a text file', args: async () => ['art', 'add', release, await input('notes.jpg', 'hello, not an image\n')], message: /not an image sleeve can read: it accepts JPEG, PNG and GIF/ },
    {
      name: 'a truncated JPEG',
      args: async () => ['art', 'add', release, await input('cut.jpg', jpeg.subarray(0, Math.floor(jpeg.length * 0.6)))],
      message: /could not be decoded \(truncated or corrupt\)/,
    },
    {
      name: 'a truncated PNG',
      args: async () => ['art', 'add', release, await input('cut.png', png.subarray(0, Math.floor(png.length * 0.6)))],
      message: /could not be decoded \(truncated or corrupt\)/,
    },
    {
      name: 'a truncated GIF',
      args: async () => {
        const gif = await makeGif(300, 200);
        return ['art', 'add', release, await input('cut.gif', gif.subarray(0, Math.floor(gif.length * 0.5)))];
      },
      message: /could not be decoded \(truncated or corrupt\)|not an image sleeve can read/,
    },
    { name: 'a WebP image', args: async () => ['art', 'add', release, await input('img.webp', () => makeWebp(300, 200))], message: /unsupported image format webp: sleeve accepts JPEG, PNG and GIF/ },
    {
      name: 'a PDF',
      args: async () => ['art', 'add', release, await input('booklet.pdf', '%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n')],
      message: /PDF files are not supported yet: sleeve accepts JPEG, PNG and GIF/,
    },
    {
      name: 'an SVG image',
      args: async () => ['art', 'add', release, await input('img.svg', '<svg xmlns="http://www.w3.org/2000/svg" width="300" height="300"><rect width="300" height="300" fill="red"/></svg>')],
      message: /unsupported image format svg/,
    },

    // Limits.
    {
      name: 'a file one byte over SLEEVE_UPLOAD_MAX_BYTES',
      args: async () => ['art', 'add', release, await input('big.jpg', jpeg)],
      env: () => ({ SLEEVE_UPLOAD_MAX_BYTES: String(jpeg.length - 1) }),
      message: /big\.jpg is \d+ bytes, over the limit of \d+ bytes \(SLEEVE_UPLOAD_MAX_BYTES\)/,
    },
    {
      name: 'stdin over SLEEVE_UPLOAD_MAX_BYTES',
      args: async () => ['art', 'add', release, '-'],
      stdin: async () => jpeg,
      env: () => ({ SLEEVE_UPLOAD_MAX_BYTES: '1000' }),
      message: /exceeds the limit of 1000 bytes \(SLEEVE_UPLOAD_MAX_BYTES\)/,
    },
    {
      name: 'an image one pixel over SLEEVE_UPLOAD_MAX_PIXELS',
      args: async () => ['art', 'add', release, await input('101x50.png', () => makePng(101, 50))],
      env: () => ({ SLEEVE_UPLOAD_MAX_PIXELS: '5000' }),
      message: /image of 101×50 pixels exceeds the limit of 5000 pixels \(SLEEVE_UPLOAD_MAX_PIXELS\)/,
    },
    {
      name: 'a decompression bomb (20000×20000 PNG in a few kB) under the default pixel limit',
      args: async () => {
        const bomb = pngBomb(20000);
        assert.ok(bomb.length < 200_000, `the bomb is small (${bomb.length} bytes)`);
        const meta = await sharp(bomb, { limitInputPixels: false }).metadata();
        assert.deepEqual([meta.format, meta.width, meta.height], ['png', 20000, 20000]);
        return ['art', 'add', release, await input('bomb.png', bomb)];
      },
      message: /image of 20000×20000 pixels exceeds the limit of 100000000 pixels \(SLEEVE_UPLOAD_MAX_PIXELS\)/,
    },

    // Bad names and ids.
    { name: 'an unknown art type', args: async () => ['art', 'add', release, await input('ok.jpg', jpeg), '--type', 'Front', '--type', 'Frnt'], message: /unknown art type "Frnt"; known types: Front, Back, Booklet/ },
    { name: 'art edit with an unknown art type', args: async () => ['art', 'edit', release, ids[0] as string, '--type', 'Cover'], message: /unknown art type "Cover"/ },
    { name: 'an --edit over 2147483647', args: async () => ['art', 'add', release, await input('ok.jpg', jpeg), '--edit', '9999999999'], message: /edit must be a whole number from 0 to 999999999/ },
    { name: "an --edit in sleeve's own range", args: async () => ['art', 'add', release, await input('ok.jpg', jpeg), '--edit', '1000000001'], message: /edit ids are sleeve's own/ },
    { name: 'art add to a malformed MBID', args: async () => ['art', 'add', 'not-a-uuid', await input('ok.jpg', jpeg)], message: /release "not-a-uuid" is not a valid MBID/ },
    { name: 'art add to an unknown release', args: async () => ['art', 'add', unknown, await input('ok.jpg', jpeg)], message: new RegExp(`no release ${unknown}; add it first`) },
    { name: 'art add of a missing file', args: async () => ['art', 'add', release, path.join(t.dir, 'nope.jpg')], message: /cannot read .*nope\.jpg: no such file/ },
    { name: 'art edit of an unknown image id', args: async () => ['art', 'edit', release, '123456', '--comment', 'x'], message: /cover image with id 123456 not found on release/ },
    { name: 'art edit of an image of another release', args: async () => ['art', 'edit', other, ids[0] as string, '--comment', 'x'], message: /cover image with id \d+ not found on release/ },
    { name: 'art edit of an id that is not a number', args: async () => ['art', 'edit', release, 'front', '--comment', 'x'], message: /image id "front" must be a number/ },
    { name: 'art remove of an unknown image id', args: async () => ['art', 'remove', release, '99'], message: /cover image with id 99 not found/ },
    // One spelling per id: the listing's (no leading zeros).
    { name: 'art edit of an id with a leading zero', args: async () => ['art', 'edit', release, `0${ids[0]}`, '--comment', 'x'], message: /image id "0\d+" must be a number as the listing writes it \(digits, no leading zero\)/ },
    { name: 'art remove of an id with leading zeros', args: async () => ['art', 'remove', release, `00${ids[0]}`], message: /image id "00\d+" must be a number as the listing writes it/ },
    { name: 'art reorder naming an id with a leading zero', args: async () => ['art', 'reorder', release, ids[1] as string, `0${ids[0]}`], message: /image id "0\d+" must be a number as the listing writes it/ },
    { name: 'art remove on an unknown release', args: async () => ['art', 'remove', unknown, ids[0] as string], message: /no release / },
    { name: 'art reorder not naming every image', args: async () => ['art', 'reorder', release, ids[1] as string], message: () => new RegExp(`every image of the release must be named; missing: ${ids[0]}$`, 'm') },
    { name: 'art reorder naming an image twice', args: async () => ['art', 'reorder', release, ids[1] as string, ids[1] as string, ids[0] as string], message: /named more than once/ },
    { name: 'art reorder naming an unknown image', args: async () => ['art', 'reorder', release, ids[1] as string, ids[0] as string, '42'], message: /cover image with id 42 not found/ },
    { name: 'art reindex of an unknown release', args: async () => ['art', 'reindex', unknown], message: /no release / },
    { name: 'release add of an existing release', args: async () => ['release', 'add', release.toUpperCase(), '--release-group', group], message: /already exists/ },
    { name: 'release add with an impossible date', args: async () => ['release', 'add', newMbid(), '--release-group', group, '--date', '2001-02-29'], message: /must be YYYY, YYYY-MM or YYYY-MM-DD/ },
    { name: 'release merge into itself', args: async () => ['release', 'merge', release, release.toUpperCase()], message: /cannot be merged into itself/ },
    { name: 'release merge of an unknown release', args: async () => ['release', 'merge', unknown, release], message: /no release / },
    { name: 'release-group set-cover with a release of another group', args: async () => ['release-group', 'set-cover', group, other], message: /is not in release group/ },
    { name: 'release-group set-cover of an unknown group', args: async () => ['release-group', 'set-cover', unknown, release], message: /no release group / },
  ];

  for (const c of cases) {
    it(`${c.name}: exit 2, a clear message, and nothing changed`, async () => {
      const args = await c.args();
      const r = await runCli({ ...t.env, ...c.env?.() }, args, c.stdin === undefined ? {} : { stdin: await c.stdin() });
      assertRefused(r, typeof c.message === 'function' ? c.message() : c.message);
      assert.equal(r.stdout, '');
      assert.deepEqual(await state(), baseline);
    });
  }

  it('--json: the error is an object on stdout, the message on stderr, and nothing changed', async () => {
    const r = await runCli(t.env, ['art', 'add', release, await input('json.webp', () => makeWebp(50, 50)), '--json']);
    assertRefused(r, /unsupported image format webp/);
    assert.deepEqual(JSON.parse(r.stdout), { error: { code: 'INVALID_INPUT', message: 'unsupported image format webp: sleeve accepts JPEG, PNG and GIF images' } });
    const missing = await runCli(t.env, ['--json', 'art', 'remove', release, '77']);
    assertRefused(missing, /not found/);
    assert.equal(JSON.parse(missing.stdout).error.code, 'NOT_FOUND');
    assert.deepEqual(await state(), baseline);
  });

  // Last: these change the catalogue.
  it('the limits are inclusive: a file of exactly SLEEVE_UPLOAD_MAX_BYTES and an image of exactly SLEEVE_UPLOAD_MAX_PIXELS are taken', async () => {
    const exact = await input('exact.jpg', jpeg);
    const byBytes = await cliOk({ ...t.env, SLEEVE_UPLOAD_MAX_BYTES: String(jpeg.length) }, ['--json', 'art', 'add', release, exact]);
    const byPixels = await cliOk({ ...t.env, SLEEVE_UPLOAD_MAX_PIXELS: '5000' }, ['--json', 'art', 'add', release, await input('100x50.png', () => makePng(100, 50))]);
    const index = await readIndex(t, release);
    assert.deepEqual(index.images.map((i: any) => i.id), [...ids, byBytes.id, byPixels.id]);
  });
});

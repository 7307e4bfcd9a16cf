/*
 * Which release represents a release group, in coverartarchive.org's order: the
 * editor-chosen one (release-group set-cover) if it has a front, then releases whose front
 * is not Raw/Unedited, then the earliest date (year, month, day; a missing part ranks last).
 * Each step changes the catalogue through the CLI and polls the running server.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg, makePng } from '../helpers/images.js';

const MB = 'https://mb.example.org';
const G = 'c0ffee00-0000-4000-8000-0000000000aa';
/** Releases of G by name, with their dates; added in an order unlike the ranking. */
const RELEASES: [name: string, mbid: string, date: string | undefined][] = [
  ['nodate', 'c0ffee00-0000-4000-8000-000000000001', undefined],
  ['raw1990', 'c0ffee00-0000-4000-8000-000000000002', '1990'],
  ['y2000', 'c0ffee00-0000-4000-8000-000000000003', '2000'],
  ['m2000_05', 'c0ffee00-0000-4000-8000-000000000004', '2000-05'],
  ['d2000_05_02', 'c0ffee00-0000-4000-8000-000000000005', '2000-05-02'],
  ['d2000_05_01', 'c0ffee00-0000-4000-8000-000000000006', '2000-05-01'],
  ['backonly1980', 'c0ffee00-0000-4000-8000-000000000007', '1980'],
];
const mbid = (name: string) => (RELEASES.find((r) => r[0] === name) as [string, string, string | undefined])[1];

describe(`release-group choice order over HTTP (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  /** The image id of each release's only image. */
  const image: Record<string, string> = {};
  const suffix: Record<string, string> = {};
  let lastEtag: string | undefined;

  const get = (p: string, init: RequestInit = {}) => fetch(`${s.base}${p}`, { redirect: 'manual', ...init });
  const frontOf = (name: string) => `${s.base}/download/mbid-${mbid(name)}/mbid-${mbid(name)}-${image[name]}.${suffix[name]}`;

  /**
   * Polls (3 s at most each) until the group's front, its thumbnail and its listing all
   * name `name`'s image: each cached answer is dropped once the server sees the change.
   */
  async function expectChosen(name: string, listingChanged = true): Promise<void> {
    const m = mbid(name);
    const soon = async (p: string, want: string) => {
      const { value, ms } = await pollUntil(
        async () => {
          const res = await get(p);
          await res.arrayBuffer();
          return `${res.status} ${res.headers.get('location')}`;
        },
        (v) => v === want,
      );
      assert.equal(value, want, `${p} after ${ms} ms`);
    };
    await soon(`/release-group/${G}/front`, `307 ${frontOf(name)}`);
    await soon(`/release-group/${G}/front-250`, `307 ${s.base}/download/mbid-${m}/mbid-${m}-${image[name]}_thumb250.jpg`);
    const { value: listing, ms } = await pollUntil(
      async () => {
        const res = await get(`/release-group/${G}/`);
        return { res, text: await res.text() };
      },
      (v) => v.res.status === 200 && JSON.parse(v.text).release === `${MB}/release/${m}`,
    );
    assert.equal(listing.res.status, 200, `after ${ms} ms`);
    const text = listing.text;
    const body = JSON.parse(text);
    assert.equal(body.release, `${MB}/release/${m}`, `after ${ms} ms`);
    assert.deepEqual(
      body.images.map((i: any) => i.id),
      [image[name]],
    );
    // The listing is the chosen release's index.json, byte for byte.
    assert.equal(await (await fetch(`${s.base}/download/mbid-${m}/index.json`)).text(), text);
    const etag = listing.res.headers.get('etag') as string;
    if (lastEtag !== undefined && !listingChanged) assert.equal(etag, lastEtag, 'the same listing keeps its ETag');
    if (lastEtag !== undefined && listingChanged) {
      assert.notEqual(etag, lastEtag, 'a different listing has a different ETag');
      const stale = await get(`/release-group/${G}/`, { headers: { 'if-none-match': lastEtag } });
      assert.equal(stale.status, 200);
      assert.equal(await stale.text(), text);
    }
    const fresh = await get(`/release-group/${G}/`, { headers: { 'if-none-match': etag } });
    assert.equal(fresh.status, 304);
    lastEtag = etag;
  }

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t, { SLEEVE_MUSICBRAINZ_URL: MB });
    for (const [name, m, date] of RELEASES) {
      await cliInProcess(t.env, ['release', 'add', m, '--release-group', G, ...(date === undefined ? [] : ['--date', date])]);
      const isPng = name === 'y2000' || name === 'raw1990';
      const file = path.join(t.dir, `${name}.${isPng ? 'png' : 'jpg'}`);
      await writeFile(file, isPng ? await makePng(120, 90) : await makeJpeg(120, 90));
      const types = name === 'backonly1980' ? ['Back'] : name === 'raw1990' ? ['Front', 'Raw/Unedited'] : ['Front'];
      const entry = await cliInProcess(t.env, ['--json', 'art', 'add', m, file, ...types.flatMap((x) => ['--type', x])]);
      image[name] = entry.id;
      suffix[name] = isPng ? 'png' : 'jpg';
    }
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('earliest full date first: the day decides between two releases of the same month', async () => {
    await expectChosen('d2000_05_01');
  });

  it('a release without a day ranks after one with a day in the same month', async () => {
    await cliInProcess(t.env, ['art', 'remove', mbid('d2000_05_01'), image.d2000_05_01 as string]);
    await expectChosen('d2000_05_02');
  });

  it('a release without a month ranks after one with a month in the same year', async () => {
    await cliInProcess(t.env, ['art', 'remove', mbid('d2000_05_02'), image.d2000_05_02 as string]);
    await expectChosen('m2000_05');
  });

  it('a release without a date ranks after every dated one', async () => {
    await cliInProcess(t.env, ['art', 'remove', mbid('m2000_05'), image.m2000_05 as string]);
    await expectChosen('y2000');
  });

  it('a front typed Raw/Unedited goes after all others, even after an undated release', async () => {
    await cliInProcess(t.env, ['art', 'remove', mbid('y2000'), image.y2000 as string]);
    await expectChosen('nodate');
  });

  it('an editor-chosen release without a front image is passed over', async () => {
    await cliInProcess(t.env, ['release-group', 'set-cover', G, mbid('backonly1980')]);
    // Nothing the answer depends on changed; asked once the server's caches follow the change.
    await s.server.refreshCaches();
    await expectChosen('nodate', false);
  });

  it('the editor-chosen release comes first, even when its front is Raw/Unedited', async () => {
    await cliInProcess(t.env, ['release-group', 'set-cover', G, mbid('raw1990')]);
    await expectChosen('raw1990');
  });

  it('when the chosen release loses its front, the others are ranked again', async () => {
    await cliInProcess(t.env, ['art', 'edit', mbid('raw1990'), image.raw1990 as string, '--type', 'Back']);
    await expectChosen('nodate');
  });

  it('with no front left in the group, the listing and the front are 404', async () => {
    await cliInProcess(t.env, ['art', 'remove', mbid('nodate'), image.nodate as string]);
    const { value, ms } = await pollUntil(
      async () => {
        const res = await get(`/release-group/${G}/front`);
        return { status: res.status, body: await res.text() };
      },
      (v) => v.status === 404,
    );
    const page = `<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n<p>No cover art found for release group ${G}</p>\n`;
    assert.equal(value.status, 404, `after ${ms} ms`);
    assert.equal(value.body, page);
    const listing = await get(`/release-group/${G}/`);
    assert.equal(listing.status, 404);
    assert.equal(await listing.text(), page);
    const back = await get(`/release-group/${G}/back`);
    assert.equal(back.status, 404, 'the group is looked at before the filename');
    await back.arrayBuffer();
  });

  it('a Raw/Unedited front still represents the group when it is the only front', async () => {
    await cliInProcess(t.env, ['release-group', 'set-cover', G, mbid('nodate')]);
    await cliInProcess(t.env, ['art', 'edit', mbid('raw1990'), image.raw1990 as string, '--type', 'Raw/Unedited', '--type', 'Front']);
    lastEtag = undefined;
    await expectChosen('raw1990');
  });
});

/*
 * Black-box tests of the cover art API over HTTP: data goes in through the real CLI,
 * requests go to a real in-process server (fetch without following redirects, or raw
 * sockets for what fetch cannot send). Expected values come from the interface
 * (docs/interface.md), from sleeve's decisions where it goes beyond it (docs/decisions.md,
 * "Cover art API" and "Listings"), and from how coverartarchive.org answers where the
 * interface is silent (its messages, error page, filename rules and index.json bytes), not
 * from the code.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, rawHttp, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { dimensions, makeGif, makeJpeg, makePng } from '../helpers/images.js';

const MB = 'https://mb.example.org';
/** R1: five images of three formats, reordered so the primary front and back are not the first added. */
const R1 = 'abcdef01-2345-4678-9abc-def012345671';
/** R2: same group as R1, no images. */
const R2 = 'abcdef01-2345-4678-9abc-def012345672';
/** R3: a Back image only, alone in G2. */
const R3 = 'abcdef01-2345-4678-9abc-def012345673';
/** OLD (a Front image, alone in G4) is merged into INTO (a Back image, in G3). */
const OLD = 'abcdef01-2345-4678-9abc-def0123456a0';
const INTO = 'abcdef01-2345-4678-9abc-def0123456b0';
const G1 = 'fedcba98-7654-4321-8fed-cba987654321';
const G2 = 'fedcba98-7654-4321-8fed-cba987654322';
const G3 = 'fedcba98-7654-4321-8fed-cba987654323';
const G4 = 'fedcba98-7654-4321-8fed-cba987654324';
const UNKNOWN = '00000000-0000-4000-8000-000000000000';

const TEXT = 'text/plain; charset=utf-8';
const HTML = 'text/html; charset=utf-8';
const ALLOW = 'GET, HEAD, OPTIONS';
const NAMES: Record<number, string> = {
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  501: 'Not Implemented',
};
const BAD_REQUEST = 'The browser (or proxy) sent a request that this server could not understand.';
const NOT_IMPLEMENTED = 'The server does not support the action requested by the browser.';
/** A comment that needs every kind of escape Python's json.dumps makes (quotes, backslash, non-ASCII, astral). */
const ODD_COMMENT = 'Ünïcødé "q" \\ ✓ 🎵';
const ODD_COMMENT_JSON = String.raw`"\u00dcn\u00efc\u00f8d\u00e9 \"q\" \\ \u2713 \ud83c\udfb5"`;

/** The five-line HTML error page coverartarchive.org answers errors with; `text` is already HTML-escaped. */
function page(status: number, text: string): string {
  const name = NAMES[status];
  return `<!doctype html>\n<html lang=en>\n<title>${status} ${name}</title>\n<h1>${name}</h1>\n<p>${text}</p>\n`;
}

describe(`cover art API over HTTP (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  /** Image ids by name: a1..a5 on R1, b1 on R3, mo on OLD (moved to INTO), mi on INTO. */
  const id: Record<string, string> = {};
  const bytes: Record<string, Buffer> = {};

  const url = (p: string) => `${s.base}${p}`;
  const dl = (m: string, rest: string) => `${s.base}/download/mbid-${m}/mbid-${m}-${rest}`;
  const get = (p: string, init: RequestInit = {}) => fetch(url(p), { redirect: 'manual', ...init });

  async function expectRedirect(p: string, location: string, init: RequestInit = {}): Promise<Response> {
    const res = await get(p, init);
    const body = await res.text();
    assert.equal(res.status, 307, `${p}: ${body}`);
    assert.equal(res.headers.get('location'), location, p);
    assert.equal(body, `See: ${location}\n`, p);
    assert.equal(res.headers.get('content-type'), TEXT, p);
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(body)), p);
    assert.equal(res.headers.get('access-control-allow-origin'), '*', p);
    return res;
  }

  async function expectError(p: string, status: number, escapedText: string, init: RequestInit = {}): Promise<Response> {
    const res = await get(p, init);
    const body = await res.text();
    assert.equal(res.status, status, `${p}: ${body}`);
    assert.equal(res.headers.get('content-type'), HTML, p);
    assert.equal(body, page(status, escapedText), p);
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(body)), p);
    assert.equal(res.headers.get('access-control-allow-origin'), '*', p);
    return res;
  }

  /** One entry in the byte format of the current MusicBrainz indexer's index.json (sorted keys, `", "` and `": "`), written out by hand. */
  function entry(m: string, e: { id: string; suffix: string; approved: boolean; back: boolean; comment: string; edit: number; front: boolean; types: string }): string {
    const p = `${s.base}/release/${m}/${e.id}`;
    return (
      `{"approved": ${e.approved}, "back": ${e.back}, "comment": ${e.comment}, "edit": ${e.edit}, "front": ${e.front}, ` +
      `"id": "${e.id}", "image": "${p}.${e.suffix}", ` +
      `"thumbnails": {"1200": "${p}-1200.jpg", "250": "${p}-250.jpg", "500": "${p}-500.jpg", "large": "${p}-500.jpg", "small": "${p}-250.jpg"}, ` +
      `"types": ${e.types}}`
    );
  }

  function expectedR1(): string {
    const images = [
      entry(R1, { id: id.a3 as string, suffix: 'gif', approved: true, back: false, comment: ODD_COMMENT_JSON, edit: 103, front: true, types: '["Front"]' }),
      entry(R1, { id: id.a2 as string, suffix: 'png', approved: false, back: true, comment: '""', edit: 102, front: false, types: '["Back"]' }),
      entry(R1, { id: id.a1 as string, suffix: 'jpg', approved: true, back: false, comment: '"first front"', edit: 101, front: false, types: '["Front", "Booklet"]' }),
      entry(R1, { id: id.a4 as string, suffix: 'jpg', approved: true, back: false, comment: '""', edit: 0, front: false, types: '["Back", "Spine"]' }),
      entry(R1, { id: id.a5 as string, suffix: 'jpg', approved: false, back: false, comment: '""', edit: 0, front: false, types: '[]' }),
    ];
    return `{"images": [${images.join(', ')}], "release": "${MB}/release/${R1}"}`;
  }

  async function addImage(release: string, name: string, image: Buffer, ext: string, args: string[]): Promise<void> {
    const file = path.join(t.dir, `${name}.${ext}`);
    await writeFile(file, image);
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', release, file, ...args]);
    assert.match(entry.id, /^[0-9]+$/);
    id[name] = entry.id;
    bytes[name] = image;
  }

  before(async () => {
    // SLEEVE_LISTING_FIELDS=caa: the listings are checked against the real indexer's bytes written
    // out by hand (entry()), the output of sleeve before its additive fields (listing-fields.test.ts).
    t = await makeTestEnv({ SLEEVE_LISTING_FIELDS: 'caa' });
    s = await startServer(t, { SLEEVE_MUSICBRAINZ_URL: MB });
    const [jpeg1, png2, gif3, jpeg4, jpeg5, png6, jpeg7, png8] = await Promise.all([
      makeJpeg(400, 300),
      makePng(300, 300),
      makeGif(200, 150),
      makeJpeg(320, 240),
      makeJpeg(240, 320),
      makePng(260, 200),
      makeJpeg(360, 360),
      makePng(280, 280, true),
    ]);
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', G1, '--date', '2001-02-03']);
    await cliInProcess(t.env, ['release', 'add', R2, '--release-group', G1, '--date', '1999']);
    await cliInProcess(t.env, ['release', 'add', R3, '--release-group', G2]);
    await cliInProcess(t.env, ['release', 'add', OLD, '--release-group', G4, '--date', '2010']);
    await cliInProcess(t.env, ['release', 'add', INTO, '--release-group', G3, '--date', '2011']);
    await addImage(R1, 'a1', jpeg1 as Buffer, 'jpg', ['--type', 'Front', '--type', 'Booklet', '--approved', '--edit', '101', '--comment', 'first front']);
    await addImage(R1, 'a2', png2 as Buffer, 'png', ['--type', 'Back', '--edit', '102', '--unapproved']);
    await addImage(R1, 'a3', gif3 as Buffer, 'gif', ['--type', 'Front', '--approved', '--edit', '103', '--comment', ODD_COMMENT]);
    await addImage(R1, 'a4', jpeg4 as Buffer, 'jpg', ['--type', 'Back', '--type', 'Spine', '--approved', '--edit', '0']);
    await addImage(R1, 'a5', jpeg5 as Buffer, 'jpg', ['--unapproved', '--edit', '0']);
    // Listing order a3 a2 a1 a4 a5: front = a3 (GIF, added third), back = a2 (PNG, unapproved).
    await cliInProcess(t.env, ['art', 'reorder', R1, id.a3 as string, id.a2 as string, id.a1 as string, id.a4 as string, id.a5 as string]);
    await addImage(R3, 'b1', png6 as Buffer, 'png', ['--type', 'Back', '--approved']);
    await addImage(OLD, 'mo', jpeg7 as Buffer, 'jpg', ['--type', 'Front', '--approved', '--edit', '7']);
    await addImage(INTO, 'mi', png8 as Buffer, 'png', ['--type', 'Back', '--approved', '--edit', '8']);
    await cliInProcess(t.env, ['release', 'merge', OLD, INTO]);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  describe('redirects to images', () => {
    it('front, back and image ids redirect to the original in the archive layout, with the real suffix', async () => {
      const front = await expectRedirect(`/release/${R1}/front`, dl(R1, `${id.a3}.gif`));
      assert.equal(front.headers.get('cache-control'), 'public, max-age=60');
      const back = await expectRedirect(`/release/${R1}/back`, dl(R1, `${id.a2}.png`));
      assert.equal(back.headers.get('cache-control'), 'public, max-age=60');
      const byId = await expectRedirect(`/release/${R1}/${id.a1}`, dl(R1, `${id.a1}.jpg`));
      assert.equal(byId.headers.get('cache-control'), 'public, max-age=86400');
      await expectRedirect(`/release/${R1}/${id.a5}`, dl(R1, `${id.a5}.jpg`));
      await expectRedirect(`/release/${R3}/back`, dl(R3, `${id.b1}.png`));
    });

    it('the extension asked for is ignored: a PNG asked as .jpg redirects to .png, a GIF front asked as .jpg to .gif', async () => {
      await expectRedirect(`/release/${R1}/${id.a2}.jpg`, dl(R1, `${id.a2}.png`));
      await expectRedirect(`/release/${R1}/${id.a3}.png`, dl(R1, `${id.a3}.gif`));
      await expectRedirect(`/release/${R1}/${id.a1}.gif`, dl(R1, `${id.a1}.jpg`));
      await expectRedirect(`/release/${R1}/front.jpg`, dl(R1, `${id.a3}.gif`));
      await expectRedirect(`/release/${R1}/back.jpg`, dl(R1, `${id.a2}.png`));
    });

    it('thumbnails of front, back and ids redirect to _thumb{250,500,1200}.jpg whatever the original format', async () => {
      for (const size of [250, 500, 1200]) {
        await expectRedirect(`/release/${R1}/front-${size}`, dl(R1, `${id.a3}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/front-${size}.jpg`, dl(R1, `${id.a3}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/back-${size}`, dl(R1, `${id.a2}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/back-${size}.png`, dl(R1, `${id.a2}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/${id.a1}-${size}`, dl(R1, `${id.a1}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/${id.a2}-${size}.jpg`, dl(R1, `${id.a2}_thumb${size}.jpg`));
        await expectRedirect(`/release/${R1}/${id.a3}-${size}.gif`, dl(R1, `${id.a3}_thumb${size}.jpg`));
      }
    });

    it('every redirect target exists: originals byte for byte with their type, thumbnails as JPEGs of their size', async () => {
      const types: Record<string, string> = { a1: 'image/jpeg', a2: 'image/png', a3: 'image/gif', a4: 'image/jpeg', a5: 'image/jpeg' };
      for (const [name, type] of Object.entries(types)) {
        const loc = (await get(`/release/${R1}/${id[name]}`)).headers.get('location') as string;
        const file = await fetch(loc);
        assert.equal(file.status, 200, loc);
        assert.equal(file.headers.get('content-type'), type, loc);
        assert.deepEqual(Buffer.from(await file.arrayBuffer()), bytes[name], loc);
      }
      // a1 is 400×300: the 250 thumbnail keeps the aspect, the larger ones never upscale.
      const expected: Record<number, [number, number]> = { 250: [250, 188], 500: [400, 300], 1200: [400, 300] };
      for (const size of [250, 500, 1200]) {
        const loc = (await get(`/release/${R1}/${id.a1}-${size}`)).headers.get('location') as string;
        const file = await fetch(loc);
        assert.equal(file.status, 200, loc);
        assert.equal(file.headers.get('content-type'), 'image/jpeg', loc);
        const dims = await dimensions(Buffer.from(await file.arrayBuffer()));
        assert.equal(dims.format, 'jpeg');
        assert.ok(Math.max(dims.width ?? 0, dims.height ?? 0) <= size, `${loc}: ${JSON.stringify(dims)}`);
        assert.equal(dims.width, expected[size]?.[0], loc);
      }
      const frontThumb = (await get(`/release/${R1}/front-250`)).headers.get('location') as string;
      const gifThumb = await fetch(frontThumb);
      assert.equal(gifThumb.status, 200);
      assert.equal((await dimensions(Buffer.from(await gifThumb.arrayBuffer()))).format, 'jpeg');
    });

    it('front and back match by prefix; the size is the start of the text after the last dash (as coverartarchive.org reads filenames)', async () => {
      const front = dl(R1, `${id.a3}.gif`);
      const thumb = (n: string, size: number) => dl(R1, `${id[n]}_thumb${size}.jpg`);
      const cases: [string, string][] = [
        ['front.png', front],
        ['frontal', front],
        ['frontx', front],
        ['front-250.png', thumb('a3', 250)],
        ['front-250x', thumb('a3', 250)],
        ['front-2500', thumb('a3', 250)],
        ['front-5000.jpg', thumb('a3', 500)],
        ['back-12000', thumb('a2', 1200)],
        ['backside-500', thumb('a2', 500)],
        ['front-small', front],
        ['front-large', front],
        ['front-abc', front],
        ['front-100', front],
        [`${id.a1}-250-500`, thumb('a1', 500)],
        [`${id.a1}-500-250.jpg`, thumb('a1', 250)],
        [`${id.a1}-250-x.jpg`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}-1200-`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}-small`, dl(R1, `${id.a1}.jpg`)],
        [`00${id.a1}`, dl(R1, `${id.a1}.jpg`)],
        [`000${id.a2}-500.png`, thumb('a2', 500)],
        [`${id.a1}x`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}.`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}.foo`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}%20`, dl(R1, `${id.a1}.jpg`)],
        [`${id.a1}_thumb250.jpg`, dl(R1, `${id.a1}.jpg`)],
      ];
      for (const [filename, location] of cases) await expectRedirect(`/release/${R1}/${filename}`, location);
    });

    it('extra path segments, repeated slashes, a trailing slash, percent-encoding and query strings do not matter', async () => {
      const front = dl(R1, `${id.a3}.gif`);
      for (const p of [
        `/release/${R1}/front/extra`,
        `/release/${R1}/front/extra/more.jpg`,
        `/release/${R1}/front/`,
        `//release/${R1}/front`,
        `/release//${R1}/front`,
        `/release/${R1}//front`,
        `//release//${R1}//front//`,
        `/release/${R1}/front?x=1&y=2`,
        `/release/${R1}/front?`,
        `/release/${R1}/%66ront`,
        `/%72elease/${R1}/front`,
        `/release/${R1.replace('a', '%61')}/front`,
      ]) {
        await expectRedirect(p, front);
      }
      await expectRedirect(`/release/${R1}/%66ront-250?size=500`, dl(R1, `${id.a3}_thumb250.jpg`));
      await expectRedirect(`/release/${R1}/${id.a1}?format=png`, dl(R1, `${id.a1}.jpg`));
      // fetch would normalize a dot segment away; send it as it is.
      const raw = await rawHttp(s.base, `GET /release/./${R1}/./front HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(raw.status, 307, raw.body.toString());
      assert.equal(raw.headers.location, front);
      assert.equal(raw.headers['access-control-allow-origin'], '*');
    });

    it('upper- and mixed-case MBIDs are accepted and written lower-case (decision; coverartarchive.org answers 400)', async () => {
      const upper = R1.toUpperCase();
      const mixed = 'ABCdef01-2345-4678-9ABC-def012345671';
      await expectRedirect(`/release/${upper}/front`, dl(R1, `${id.a3}.gif`));
      await expectRedirect(`/release/${mixed}/back-500`, dl(R1, `${id.a2}_thumb500.jpg`));
      await expectRedirect(`/release/${upper}/${id.a1}.jpg`, dl(R1, `${id.a1}.jpg`));
      await expectRedirect(`/release/${upper}/`, `${s.base}/download/mbid-${R1}/index.json`);
      await expectRedirect(`/release-group/${G1.toUpperCase()}/front-1200`, dl(R1, `${id.a3}_thumb1200.jpg`));
      const listing = await get(`/release-group/${G1.toUpperCase()}/`);
      assert.equal(listing.status, 200);
      assert.equal(((await listing.json()) as any).release, `${MB}/release/${R1}`);
      await expectError(`/release/${R2.toUpperCase()}/front`, 404, `No front cover image found for release with identifier ${R2}`);
    });

    it('plain HTTP/1.0 GET works', async () => {
      const raw = await rawHttp(s.base, `GET /release/${R1}/front-500 HTTP/1.0\r\n\r\n`);
      assert.equal(raw.status, 307);
      const location = dl(R1, `${id.a3}_thumb500.jpg`);
      assert.equal(raw.headers.location, location);
      assert.equal(raw.body.toString(), `See: ${location}\n`);
    });

    it('redirects point under SLEEVE_IMAGE_BASE_URL when it is set (archive.org as the image host)', async () => {
      const port = await freePort();
      const other: Server = await serve(
        loadConfig({ ...t.env, SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`, SLEEVE_IMAGE_BASE_URL: 'https://archive.org/download' }),
        { only: 'coverart' },
      );
      try {
        const ia = `https://archive.org/download/mbid-${R1}`;
        for (const [p, location] of [
          [`/release/${R1}/front`, `${ia}/mbid-${R1}-${id.a3}.gif`],
          [`/release/${R1}/${id.a2}-250`, `${ia}/mbid-${R1}-${id.a2}_thumb250.jpg`],
          [`/release/${R1}/`, `${ia}/index.json`],
          [`/release-group/${G1}/front`, `${ia}/mbid-${R1}-${id.a3}.gif`],
        ] as const) {
          const res = await fetch(`http://127.0.0.1:${port}${p}`, { redirect: 'manual' });
          assert.equal(res.status, 307, p);
          assert.equal(res.headers.get('location'), location, p);
          assert.equal(await res.text(), `See: ${location}\n`);
        }
      } finally {
        await other.close();
      }
    });
  });

  describe('errors: exact messages in the five-line HTML page', () => {
    it('400 invalid MBID specified (wrong length, %0A, braces, no dashes, non-hex, suffixes)', async () => {
      for (const bad of [
        R1.slice(0, 35),
        `${R1}0`,
        `0${R1}`,
        `${R1}%0A`,
        `%0A${R1.slice(1)}`,
        `%7B${R1}%7D`,
        R1.replace(/-/g, ''),
        `${R1.slice(0, 35)}g`,
        `${R1}.json`,
        `urn:uuid:${R1}`,
        'nope',
      ]) {
        await expectError(`/release/${bad}/front`, 400, 'invalid MBID specified');
        await expectError(`/release/${bad}/`, 400, 'invalid MBID specified');
        await expectError(`/release-group/${bad}/front`, 400, 'invalid MBID specified');
      }
      await expectError(`/release/${R1}%0A`, 400, 'invalid MBID specified');
      await expectError(`/release-group/${G1.slice(0, 35)}`, 400, 'invalid MBID specified');
    });

    it('400 no MBID specified', async () => {
      for (const p of ['/release', '/release/', '//release//', '/release-group', '/release-group/', '/release?x=1']) {
        await expectError(p, 400, 'no MBID specified');
      }
    });

    it('400 for entities other than release and release-group (case-sensitive)', async () => {
      for (const p of [`/artist/${R1}/`, `/RELEASE/${R1}/front`, `/Release-Group/${G1}/`, '/favicon.ico', '/index.html', '/main.css', '/releases']) {
        await expectError(p, 400, 'Only the following entities are supported: release, release-group');
      }
    });

    it('400 "does not not contain a valid cover image id" for names neither front, back nor digits', async () => {
      for (const x of ['foo', '-250', '-1001', 'FRONT', 'Front.jpg', 'BACK-250', 'index.json', `mbid-${R1}-${id.a1}.jpg`, 'x1001']) {
        await expectError(`/release/${R1}/${x}`, 400, `${x} does not not contain a valid cover image id`);
      }
      // The name is HTML-escaped in the page.
      await expectError(`/release/${R1}/%3Cb%3E%26x`, 400, '&lt;b&gt;&amp;x does not not contain a valid cover image id');
      await expectError(`/release/${R1}/%22it's%22`, 400, '&quot;it&#39;s&quot; does not not contain a valid cover image id');
    });

    it('404 "cover image with id N not found": other releases\' ids, unknown ids, leading zeros dropped', async () => {
      await expectError(`/release/${R1}/${id.b1}`, 404, `cover image with id ${id.b1} not found`);
      await expectError(`/release/${R3}/${id.a1}-250.jpg`, 404, `cover image with id ${id.a1} not found`);
      await expectError(`/release/${R1}/444444444.jpg`, 404, 'cover image with id 444444444 not found');
      await expectError(`/release/${R1}/000444444444`, 404, 'cover image with id 444444444 not found');
      await expectError(`/release/${R1}/0000`, 404, 'cover image with id 0 not found');
      await expectError(`/release/${R1}/1-2`, 404, 'cover image with id 1 not found');
      await expectError(`/release/${R1}/99999999999999999999`, 404, 'cover image with id 99999999999999999999 not found');
      await expectError(`/release/${R2}/1234`, 404, 'cover image with id 1234 not found');
      await expectError(`/release/${UNKNOWN}/${id.a1}`, 404, `cover image with id ${id.a1} not found`);
    });

    it('404 for front or back that was not chosen, and for unknown releases alike', async () => {
      await expectError(`/release/${R2}/front`, 404, `No front cover image found for release with identifier ${R2}`);
      await expectError(`/release/${R2}/back-250`, 404, `No back cover image found for release with identifier ${R2}`);
      await expectError(`/release/${R3}/front.jpg`, 404, `No front cover image found for release with identifier ${R3}`);
      await expectError(`/release/${UNKNOWN}/front`, 404, `No front cover image found for release with identifier ${UNKNOWN}`);
      await expectError(`/release/${UNKNOWN}/backside`, 404, `No back cover image found for release with identifier ${UNKNOWN}`);
    });

    it('404 "No cover art found for release" for the listing of a release without images or unknown', async () => {
      await expectError(`/release/${R2}/`, 404, `No cover art found for release ${R2}`);
      await expectError(`/release/${R2}`, 404, `No cover art found for release ${R2}`);
      await expectError(`/release/${UNKNOWN}/`, 404, `No cover art found for release ${UNKNOWN}`);
    });

    it('404 "No cover art found for release group" when no release of the group has a front, before the filename is looked at', async () => {
      for (const g of [G2, UNKNOWN]) {
        for (const rest of ['', '/', '/front', '/front-250', '/back', '/1234', '/foo']) {
          await expectError(`/release-group/${g}${rest}`, 404, `No cover art found for release group ${g}`);
        }
      }
    });

    it('400 "{x} not supported for release groups." as unescaped text/plain without a newline', async () => {
      for (const [raw, shown] of [
        ['back', 'back'],
        ['back-250', 'back-250'],
        [id.a3 as string, id.a3 as string],
        [`${id.a3}.gif`, `${id.a3}.gif`],
        ['Front', 'Front'],
        ['%3Cb%3E', '<b>'],
      ]) {
        const res = await get(`/release-group/${G1}/${raw}`);
        const body = await res.text();
        assert.equal(res.status, 400, raw);
        assert.equal(res.headers.get('content-type'), TEXT);
        assert.equal(body, `${shown} not supported for release groups.`);
        assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(body)));
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
      }
    });

    it('the root, robots.txt and /api answer as the real service does', async () => {
      const root = await get('/');
      assert.equal(root.status, 200);
      assert.equal(root.headers.get('content-type'), HTML);
      assert.match(await root.text(), /<title>Cover Art Archive<\/title>/);
      assert.equal(root.headers.get('access-control-allow-origin'), '*');
      const robots = await get('/robots.txt');
      assert.equal(robots.status, 200);
      assert.equal(robots.headers.get('content-type'), TEXT);
      assert.equal(await robots.text(), 'User-agent: *\nAllow: /');
      for (const p of ['/api', '/api/anything']) {
        const api = await get(p);
        assert.equal(api.status, 301);
        assert.equal(api.headers.get('location'), 'https://musicbrainz.org/doc/Cover_Art_Archive/API');
        assert.equal(await api.text(), 'See: https://musicbrainz.org/doc/Cover_Art_Archive/API\n');
        assert.equal(api.headers.get('access-control-allow-origin'), '*');
      }
    });
  });

  describe("methods, Accept and OPTIONS (the interface's 405, 406 and 501; OPTIONS as documented, with coverartarchive.org's syntax checks)", () => {
    it('POST, PUT, DELETE and PATCH on release endpoints and the group front answer 405 with Allow', async () => {
      const paths = [
        `/release/${R1}/front`,
        `/release/${R1}/back-250`,
        `/release/${R1}/${id.a1}`,
        `/release/${R1}/${id.a1}-500.jpg`,
        `/release/${R1}/`,
        `/release/${R1}`,
        `/release/${UNKNOWN}/front`,
        `/release-group/${G1}/front`,
        `/release-group/${G1}/front-250`,
      ];
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
        for (const p of paths) {
          const res = await expectError(p, 405, 'The method is not allowed for the requested URL.', { method });
          assert.equal(res.headers.get('allow'), ALLOW, `${method} ${p}`);
        }
      }
      // A body of any type changes nothing, and nothing was changed.
      const res = await expectError(`/release/${R1}/front`, 405, 'The method is not allowed for the requested URL.', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"front": 1}',
      });
      assert.equal(res.headers.get('allow'), ALLOW);
      await expectRedirect(`/release/${R1}/front`, dl(R1, `${id.a3}.gif`));
    });

    it('those methods on the release-group listing answer 501', async () => {
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
        for (const p of [`/release-group/${G1}/`, `/release-group/${G1}`, `/release-group/${UNKNOWN}/`]) {
          await expectError(p, 501, NOT_IMPLEMENTED, { method });
        }
      }
    });

    it('methods no route names (TRACE, SEARCH, PROPFIND) get the same 405 or 501, not a 404', async () => {
      for (const method of ['TRACE', 'SEARCH', 'PROPFIND']) {
        for (const [target, status] of [
          [`/release/${R1}/front`, 405],
          [`/release/${R1}/${id.a1}-250`, 405],
          [`/release/${R1}/`, 405],
          [`/release-group/${G1}/front`, 405],
          [`/release-group/${G1}/`, 501],
        ] as const) {
          const raw = await rawHttp(s.base, `${method} ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
          assert.equal(raw.status, status, `${method} ${target}: ${raw.body.toString()}`);
          assert.equal(raw.headers['content-type'], HTML);
          assert.equal(raw.body.toString(), page(status, status === 405 ? 'The method is not allowed for the requested URL.' : NOT_IMPLEMENTED));
          assert.equal(raw.headers['access-control-allow-origin'], '*');
          if (status === 405) assert.equal(raw.headers.allow, ALLOW);
        }
      }
    });

    it('a bad MBID is still a 400 whatever the method', async () => {
      await expectError(`/release/${R1.slice(1)}/front`, 400, 'invalid MBID specified', { method: 'POST' });
      await expectError('/release-group/nope/', 400, 'invalid MBID specified', { method: 'DELETE' });
    });

    it('the release listing answers 406 when Accept allows no JSON', async () => {
      const notAcceptable =
        'The resource identified by the request is only capable of generating response entities which have content characteristics not acceptable according to the accept headers sent in the request.';
      for (const accept of ['text/html', 'application/xml', 'image/png', 'text/html, application/xhtml+xml', 'application/json;q=0, */*;q=0.5', 'text/*']) {
        await expectError(`/release/${R1}/`, 406, notAcceptable, { headers: { accept } });
        await expectError(`/release/${R1}`, 406, notAcceptable, { headers: { accept } });
      }
    });

    it('but redirects for */*, application/*, application/json, a browser\'s usual Accept, an empty one or none', async () => {
      const index = `${s.base}/download/mbid-${R1}/index.json`;
      for (const accept of [
        '*/*',
        'application/*',
        'application/json',
        'Application/JSON; charset=utf-8',
        'text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,*/*;q=0.8',
        'text/html, application/json;q=0.1',
        '',
      ]) {
        const res = await expectRedirect(`/release/${R1}/`, index, { headers: { accept } });
        assert.equal(res.headers.get('cache-control'), 'public, max-age=60');
      }
      const raw = await rawHttp(s.base, `GET /release/${R1}/ HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      assert.equal(raw.status, 307);
      assert.equal(raw.headers.location, index);
    });

    it('a cached listing is not replayed to a request whose Accept excludes JSON, nor the 406 to one that allows it', async () => {
      const p = `/release/${R1}/?accept-cache`;
      const index = `${s.base}/download/mbid-${R1}/index.json`;
      await expectRedirect(p, index);
      await expectRedirect(p, index);
      const html = await get(p, { headers: { accept: 'text/html' } });
      assert.equal(html.status, 406);
      assert.equal(html.headers.get('access-control-allow-origin'), '*');
      await expectRedirect(p, index, { headers: { accept: 'application/json' } });
      const q = `/release/${R2}/?accept-cache`;
      assert.equal((await get(q)).status, 404);
      assert.equal((await get(q, { headers: { accept: 'application/xml' } })).status, 406);
    });

    it('Accept does not matter for image redirects or the release-group listing', async () => {
      await expectRedirect(`/release/${R1}/front`, dl(R1, `${id.a3}.gif`), { headers: { accept: 'text/html' } });
      await expectRedirect(`/release/${R1}/${id.a1}`, dl(R1, `${id.a1}.jpg`), { headers: { accept: 'application/xml' } });
      const rg = await get(`/release-group/${G1}/`, { headers: { accept: 'text/html' } });
      assert.equal(rg.status, 200);
      assert.equal(rg.headers.get('content-type'), 'application/json');
    });

    it('OPTIONS answers 200, empty, with Allow, for any well-formed resource, whether it exists or not', async () => {
      for (const p of [
        `/release/${R1}/`,
        `/release/${R1}`,
        `/release/${R1}/front`,
        `/release/${R1}/back`,
        `/release/${R1}/front-250.jpg`,
        `/release/${R1}/${id.a1}-1200.png`,
        `/release/${R1}/${id.a1}`,
        `/release/${R2}/front`,
        `/release/${UNKNOWN}/9999`,
        `/release/${R1.toUpperCase()}/back-500`,
        `/release-group/${G1}/`,
        `/release-group/${G1}/front`,
        `/release-group/${G1}/back`,
        `/release-group/${G1}/1001`,
        `/release-group/${UNKNOWN}/front`,
        '/',
        '/*',
      ]) {
        const res = await get(p, { method: 'OPTIONS' });
        assert.equal(res.status, 200, p);
        assert.equal(await res.text(), '', p);
        assert.equal(res.headers.get('allow'), ALLOW, p);
        assert.equal(res.headers.get('content-type'), TEXT, p);
        assert.equal(res.headers.get('content-length'), '0', p);
        assert.equal(res.headers.get('access-control-allow-origin'), '*', p);
      }
      // A CORS preflight gets the same plain answer.
      const pre = await get(`/release/${R1}/front`, { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'GET' } });
      assert.equal(pre.status, 200);
      assert.equal(pre.headers.get('allow'), ALLOW);
      assert.equal(pre.headers.get('access-control-allow-origin'), '*');
    });

    it('OPTIONS * in asterisk form answers 200 with Allow', async () => {
      const raw = await rawHttp(s.base, 'OPTIONS * HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
      assert.equal(raw.status, 200);
      assert.equal(raw.headers.allow, ALLOW);
      assert.equal(raw.headers['content-length'], '0');
      assert.equal(raw.headers['access-control-allow-origin'], '*');
      assert.equal(raw.body.length, 0);
    });

    it('OPTIONS checks the syntax more strictly than GET and answers 400 (as coverartarchive.org does)', async () => {
      for (const x of ['front-small', 'frontx', 'foo', 'front-100', '-250', 'front-back-500', '1200-front', 'FRONT', 'front-2500']) {
        await expectError(`/release/${R1}/${x}`, 400, BAD_REQUEST, { method: 'OPTIONS' });
      }
      await expectError('/*/x', 400, BAD_REQUEST, { method: 'OPTIONS' });
      await expectError('/release/nope/front', 400, 'invalid MBID specified', { method: 'OPTIONS' });
      await expectError(`/release/${R1}%0A/front`, 400, 'invalid MBID specified', { method: 'OPTIONS' });
      await expectError('/release/', 400, 'no MBID specified', { method: 'OPTIONS' });
      await expectError('/release-group', 400, 'no MBID specified', { method: 'OPTIONS' });
      for (const p of [`/artist/${R1}/`, '/robots.txt', '/*foo', '/api']) {
        await expectError(p, 400, 'Only the following entities are supported: release, release-group', { method: 'OPTIONS' });
      }
    });

    it('OPTIONS over HTTP/1.0 answers 501, while GET over HTTP/1.0 works', async () => {
      for (const target of [`/release/${R1}/front`, '*', '/*foo', '/']) {
        const raw = await rawHttp(s.base, `OPTIONS ${target} HTTP/1.0\r\n\r\n`);
        assert.equal(raw.status, 501, target);
        assert.equal(raw.headers['content-type'], HTML);
        assert.equal(raw.body.toString(), page(501, NOT_IMPLEMENTED));
        assert.equal(raw.headers['access-control-allow-origin'], '*');
      }
    });
  });

  describe('HEAD', () => {
    // x-request-id differs per request, as the date does.
    const ignored = new Set(['date', 'connection', 'keep-alive', 'x-request-id']);
    const headersOf = (res: Response) => Object.fromEntries([...res.headers].filter(([k]) => !ignored.has(k)));

    it('gives the same status and headers as GET and no body, cached or not', async () => {
      const cases = [
        `/release/${R1}/front`,
        `/release/${R1}/${id.a2}-250.jpg`,
        `/release/${R1}/`,
        `/release/${R2}/front`,
        `/release/${R1}/foo`,
        `/release/${UNKNOWN}/`,
        `/release-group/${G1}/`,
        `/release-group/${G1}/back`,
        `/release-group/${G2}/front`,
        '/robots.txt',
      ];
      for (const [i, c] of cases.entries()) {
        const p = `${c}${c.includes('?') ? '&' : '?'}head=${i}`;
        const first = await get(p, { method: 'HEAD' });
        assert.equal(await first.text(), '', p);
        const full = await get(p);
        const body = Buffer.from(await full.arrayBuffer());
        const again = await get(p, { method: 'HEAD' });
        assert.equal(await again.text(), '', p);
        assert.equal(first.status, full.status, p);
        assert.equal(again.status, full.status, p);
        assert.deepEqual(headersOf(first), headersOf(full), p);
        assert.deepEqual(headersOf(again), headersOf(full), p);
        assert.equal(full.headers.get('content-length'), String(body.length), p);
        assert.equal(first.headers.get('access-control-allow-origin'), '*', p);
      }
    });

    it('HEAD of the release-group listing carries the ETag and honours If-None-Match', async () => {
      const full = await get(`/release-group/${G1}/`);
      const etag = full.headers.get('etag') as string;
      assert.ok(etag);
      const head = await get(`/release-group/${G1}/`, { method: 'HEAD' });
      assert.equal(head.headers.get('etag'), etag);
      const cond = await get(`/release-group/${G1}/`, { method: 'HEAD', headers: { 'if-none-match': etag } });
      assert.equal(cond.status, 304);
    });
  });

  describe('release listing (index.json)', () => {
    it('/release/{mbid}/ and /release/{mbid} redirect to index.json, whose text is exactly the listing', async () => {
      const index = `${s.base}/download/mbid-${R1}/index.json`;
      await expectRedirect(`/release/${R1}/`, index);
      await expectRedirect(`/release/${R1}`, index);
      const file = await fetch(index);
      assert.equal(file.status, 200);
      assert.match(file.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(file.headers.get('access-control-allow-origin'), '*');
      assert.equal(await file.text(), expectedR1());
    });

    it('the listing parses as the interface describes it', async () => {
      const listing: any = await (await fetch(`${s.base}/download/mbid-${R1}/index.json`)).json();
      assert.deepEqual(Object.keys(listing), ['images', 'release']);
      for (const image of listing.images) {
        assert.equal(typeof image.id, 'string');
        assert.match(image.id, /^[0-9]+$/);
        assert.deepEqual(Object.keys(image.thumbnails), ['250', '500', '1200', 'large', 'small']); // integer-like keys enumerate first in JS
        assert.equal(image.thumbnails.small, image.thumbnails['250']);
        assert.equal(image.thumbnails.large, image.thumbnails['500']);
      }
      assert.equal(listing.images.filter((i: any) => i.front).length, 1);
      assert.equal(listing.images.filter((i: any) => i.back).length, 1);
      assert.equal(listing.images[0].comment, ODD_COMMENT);
    });

    it('the URLs in the listing lead, through the API, to the images it names', async () => {
      const listing: any = await (await fetch(`${s.base}/download/mbid-${R1}/index.json`)).json();
      for (const image of listing.images) {
        const res = await get(new URL(image.image).pathname);
        assert.equal(res.status, 307);
        const file = await fetch(res.headers.get('location') as string);
        assert.equal(file.status, 200);
        const small = await get(new URL(image.thumbnails['250']).pathname);
        assert.equal(small.headers.get('location'), dl(R1, `${image.id}_thumb250.jpg`));
      }
    });

    it('the release-group listing answers 200 with the chosen release\'s listing in the same bytes', async () => {
      for (const p of [`/release-group/${G1}/`, `/release-group/${G1}`]) {
        const res = await get(p);
        assert.equal(res.status, 200, p);
        assert.equal(res.headers.get('content-type'), 'application/json');
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
        assert.match(res.headers.get('etag') ?? '', /^"[^"]+"$/);
        assert.equal(res.headers.get('cache-control'), 'public, no-cache');
        const body = await res.text();
        assert.equal(body, expectedR1());
        assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(body)));
      }
      await expectRedirect(`/release-group/${G1}/front`, dl(R1, `${id.a3}.gif`));
      await expectRedirect(`/release-group/${G1}/front.jpg`, dl(R1, `${id.a3}.gif`));
      await expectRedirect(`/release-group/${G1}/frontx`, dl(R1, `${id.a3}.gif`));
      for (const size of [250, 500, 1200]) {
        await expectRedirect(`/release-group/${G1}/front-${size}`, dl(R1, `${id.a3}_thumb${size}.jpg`));
        await expectRedirect(`/release-group/${G1}/front-${size}.jpg`, dl(R1, `${id.a3}_thumb${size}.jpg`));
      }
    });

    it('the release-group listing answers 304 to a matching If-None-Match, from the routes and from the cache', async () => {
      const first = await get(`/release-group/${G1}/`);
      const etag = first.headers.get('etag') as string;
      await first.text();
      // A new query string is a new cache entry: the first conditional request is computed, the second replayed.
      for (const p of [`/release-group/${G1}/?inm=1`, `/release-group/${G1}/?inm=1`]) {
        for (const inm of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
          const res = await get(p, { headers: { 'if-none-match': inm } });
          assert.equal(res.status, 304, `${p} ${inm}`);
          assert.equal(await res.text(), '');
          assert.equal(res.headers.get('etag'), etag);
          assert.equal(res.headers.get('access-control-allow-origin'), '*');
        }
        const other = await get(p, { headers: { 'if-none-match': '"something-else"' } });
        assert.equal(other.status, 200);
        assert.equal(await other.text(), expectedR1());
      }
    });
  });

  describe('merged releases (release merge OLD INTO)', () => {
    it('the old MBID resolves to the new one: redirects go into the new MBID\'s folder', async () => {
      await expectRedirect(`/release/${OLD}/front`, dl(INTO, `${id.mo}.jpg`));
      await expectRedirect(`/release/${OLD}/front-250`, dl(INTO, `${id.mo}_thumb250.jpg`));
      await expectRedirect(`/release/${OLD}/back`, dl(INTO, `${id.mi}.png`));
      await expectRedirect(`/release/${OLD}/${id.mo}.jpg`, dl(INTO, `${id.mo}.jpg`));
      await expectRedirect(`/release/${OLD}/${id.mi}-1200`, dl(INTO, `${id.mi}_thumb1200.jpg`));
      await expectRedirect(`/release/${OLD.toUpperCase()}/front`, dl(INTO, `${id.mo}.jpg`));
      await expectRedirect(`/release/${OLD}/`, `${s.base}/download/mbid-${INTO}/index.json`);
      await expectRedirect(`/release/${INTO}/front`, dl(INTO, `${id.mo}.jpg`));
      await expectRedirect(`/release-group/${G3}/front`, dl(INTO, `${id.mo}.jpg`));
    });

    it('the moved files exist in the new folder and no longer in the old one', async () => {
      const original = await fetch(dl(INTO, `${id.mo}.jpg`));
      assert.equal(original.status, 200);
      assert.deepEqual(Buffer.from(await original.arrayBuffer()), bytes.mo);
      for (const size of [250, 500, 1200]) {
        const thumb = await fetch(dl(INTO, `${id.mo}_thumb${size}.jpg`));
        assert.equal(thumb.status, 200, String(size));
        assert.equal(thumb.headers.get('content-type'), 'image/jpeg');
        await thumb.arrayBuffer();
      }
      for (const rest of [`${id.mo}.jpg`, `${id.mo}_thumb250.jpg`]) {
        const gone = await fetch(dl(OLD, rest));
        assert.equal(gone.status, 404, rest);
        await gone.arrayBuffer();
      }
      const oldIndex = await fetch(`${s.base}/download/mbid-${OLD}/index.json`);
      assert.equal(oldIndex.status, 404);
      await oldIndex.arrayBuffer();
    });

    it('the new release\'s listing names the moved image under the new MBID, after its own images', async () => {
      const mi = entry(INTO, { id: id.mi as string, suffix: 'png', approved: true, back: true, comment: '""', edit: 8, front: false, types: '["Back"]' });
      const mo = entry(INTO, { id: id.mo as string, suffix: 'jpg', approved: true, back: false, comment: '""', edit: 7, front: true, types: '["Front"]' });
      const expected = `{"images": [${mi}, ${mo}], "release": "${MB}/release/${INTO}"}`;
      assert.equal(await (await fetch(`${s.base}/download/mbid-${INTO}/index.json`)).text(), expected);
      const rg = await get(`/release-group/${G3}/`);
      assert.equal(rg.status, 200);
      assert.equal(await rg.text(), expected);
    });

    it('404 messages name the MBID as requested; the emptied old group has no cover art', async () => {
      await expectError(`/release/${OLD}/444444444`, 404, 'cover image with id 444444444 not found');
      await expectError(`/release-group/${G4}/`, 404, `No cover art found for release group ${G4}`);
      await expectError(`/release-group/${G4}/front`, 404, `No cover art found for release group ${G4}`);
    });
  });
});

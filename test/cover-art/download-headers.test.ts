/*
 * Every answer of the file server under /download/ tells browsers not to treat the file as a
 * page (issue 32): `Content-Security-Policy: sandbox` and `X-Content-Type-Options: nosniff`,
 * whichever way it is answered (the fast lane or node:http; from the file cache or the store,
 * read whole or streamed; 200, 206, 304, 416, HEAD, 404, 405). An uploaded original is stored
 * as uploaded, so a GIF that is also an HTML page is served as it came.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeGif, makePng } from '../helpers/images.js';

const R1 = '0e5f1c2d-3a4b-4c5d-8e6f-7a8b9c0d1e2f';
const GROUP = '1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b';
const UNKNOWN = 'ddddeeee-ffff-4000-8111-222233334444';
const HTML = '<html><script>alert(document.domain)</script></html>';

/** A real GIF with an HTML page in a comment extension, just before its trailer. */
async function polyglotGif(): Promise<Buffer> {
  const gif = await makeGif(40, 30);
  assert.equal(gif[gif.length - 1], 0x3b, 'a GIF ends with its trailer');
  const text = Buffer.from(HTML, 'latin1');
  return Buffer.concat([gif.subarray(0, gif.length - 1), Buffer.from([0x21, 0xfe, text.length]), text, Buffer.from([0x00, 0x3b])]);
}

for (const lane of ['on', 'off']) {
  describe(`/download/ answers say sandbox and nosniff, fast lane ${lane} (${DIALECT})`, () => {
    let t: TestEnv;
    let s: RunningServer;
    let gif: string;
    let gifBytes: Buffer;
    let large: string;
    const index = `/download/mbid-${R1}/index.json`;

    before(async () => {
      t = await makeTestEnv({ SLEEVE_RESPONSE_CACHE: '0', SLEEVE_FAST_LANE: lane });
      s = await startServer(t);
      await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP]);
      gifBytes = await polyglotGif();
      const gifFile = path.join(t.dir, 'page.gif');
      await writeFile(gifFile, gifBytes);
      const a = await cliInProcess(t.env, ['--json', 'art', 'add', R1, gifFile, '--type', 'Front']);
      gif = `/download/mbid-${R1}/mbid-${R1}-${a.id as string}.gif`;
      // Larger than the file server reads whole (256 KiB): streamed from the store.
      const png = await makePng(600, 600);
      assert.ok(png.length > 256 * 1024, `${png.length} bytes`);
      const pngFile = path.join(t.dir, 'large.png');
      await writeFile(pngFile, png);
      const b = await cliInProcess(t.env, ['--json', 'art', 'add', R1, pngFile, '--type', 'Back']);
      large = `/download/mbid-${R1}/mbid-${R1}-${b.id as string}.png`;
      await s.server.refreshCaches();
    });

    after(async () => {
      await s?.server.close();
      await t?.cleanup();
    });

    const ask = async (target: string, init: RequestInit = {}): Promise<{ status: number; headers: Headers; body: Buffer }> => {
      const res = await fetch(`${s.base}${target}`, init);
      return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
    };

    it('serves the polyglot as uploaded, as image/gif, with both headers', async () => {
      const res = await ask(gif);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'image/gif');
      assert.ok(res.body.equals(gifBytes), 'stored and served as uploaded');
      assert.ok(res.body.includes(HTML), 'the page is in the file');
      assert.equal(res.headers.get('content-security-policy'), 'sandbox');
      assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
    });

    it('says so on every kind of answer, cached or not, read whole or streamed', async () => {
      const etag = (await ask(gif)).headers.get('etag') as string;
      const largeEtag = (await ask(large)).headers.get('etag') as string;
      const cases: [string, string, RequestInit, number][] = [
        ['200 (from the cache)', gif, {}, 200],
        ['200 again', gif, {}, 200],
        ['HEAD', gif, { method: 'HEAD' }, 200],
        ['206', gif, { headers: { range: 'bytes=0-9' } }, 206],
        ['304', gif, { headers: { 'if-none-match': etag } }, 304],
        ['304 by date', gif, { headers: { 'if-modified-since': new Date(Date.now() + 86_400_000).toUTCString() } }, 304],
        ['416', gif, { headers: { range: 'bytes=99999999-' } }, 416],
        ['index.json', index, {}, 200],
        ['streamed 200', large, {}, 200],
        ['streamed HEAD', large, { method: 'HEAD' }, 200],
        ['streamed 206', large, { headers: { range: 'bytes=100-199' } }, 206],
        ['streamed 304', large, { headers: { 'if-none-match': largeEtag } }, 304],
        ['streamed 416', large, { headers: { range: 'bytes=99999999-' } }, 416],
        ['404 of an unknown file', `/download/mbid-${UNKNOWN}/mbid-${UNKNOWN}-1.jpg`, {}, 404],
        ['404 of a name outside the layout', `/download/mbid-${R1}/page.html`, {}, 404],
        ['HEAD 404', `/download/mbid-${R1}/page.html`, { method: 'HEAD' }, 404],
        ['405', gif, { method: 'POST', body: 'x' }, 405],
      ];
      for (const [name, target, init, status] of cases) {
        const res = await ask(target, init);
        assert.equal(res.status, status, name);
        assert.equal(res.headers.get('content-security-policy'), 'sandbox', name);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff', name);
      }
    });
  });
}

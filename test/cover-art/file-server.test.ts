import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, pollUntil, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeGif, makeJpeg, makePng } from '../helpers/images.js';

const R1 = '3a1f0c2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b';
const R2 = '7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f';
const R3 = 'b0c1d2e3-f4a5-4b6c-8d7e-9f0a1b2c3d4e';
const MISSING = 'ddddeeee-ffff-4000-8111-222233334444';
const GROUP = 'e1e2e3e4-e5e6-4e7e-8e9e-eaebecedeeef';
const IMMUTABLE = 'public, max-age=31536000, immutable';
const MARKER = 'SLEEVE-PLANTED-SECRET-7f3a9c';

interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** Everything the server sent. */
  raw: Buffer;
}

/**
 * Sends bytes as they are on a fresh connection (nothing normalises the path) and
 * reads until the server closes; `Connection: close` is the caller's to send.
 */
function rawExchange(port: number, request: string | Buffer, timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no end of response within ${timeoutMs} ms; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 200))}`));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    // A server may close before it has read everything sent (a huge request): keep what it answered.
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const raw = Buffer.concat(chunks);
      try {
        resolve(parseResponse(raw));
      } catch (err) {
        reject(err);
      }
    });
    // Not end(): a client that half-closes may see its request abandoned; Connection: close ends it.
    socket.write(request);
  });
}

function parseResponse(raw: Buffer): RawResponse {
  const end = raw.indexOf('\r\n\r\n');
  if (end === -1) throw new Error(`not an HTTP response: ${JSON.stringify(raw.toString('latin1').slice(0, 200))}`);
  const [statusLine = '', ...lines] = raw.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine);
  if (m === null) throw new Error(`bad status line ${JSON.stringify(statusLine)}`);
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const i = line.indexOf(':');
    const name = line.slice(0, i).trim().toLowerCase();
    const value = line.slice(i + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  let body = raw.subarray(end + 4);
  if (headers['transfer-encoding']?.toLowerCase() === 'chunked') body = dechunk(body);
  return { status: Number(m[1]), headers, body, raw };
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol === -1) break;
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

function rawRequest(port: number, method: string, target: string, headers: Record<string, string> = {}): Promise<RawResponse> {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`)];
  return rawExchange(port, `${lines.join('\r\n')}\r\n\r\n`);
}

function headersOf(res: Response): Record<string, string> {
  const out: Record<string, string> = {};
  res.headers.forEach((v, k) => {
    // x-request-id differs per request, as the date does.
    if (!['date', 'connection', 'keep-alive', 'x-request-id'].includes(k)) out[k] = v;
  });
  return out;
}

async function bytesOf(res: Response): Promise<Buffer> {
  return Buffer.from(await res.arrayBuffer());
}

/** How many file descriptors this process (which runs the server) holds. */
function openFds(): number {
  return readdirSync('/dev/fd').length;
}

describe(`the built-in file server under /download/ (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  let port: number;
  const originals: Record<'jpg' | 'png' | 'gif', { id: string; bytes: Buffer; url: string; thumbs: string[] }> = {} as never;
  let r2Id: string;
  let r3Id: string;
  let dbFile: string;

  const download = (key: string) => `${s.base}/download/${key}`;
  const original = (mbid: string, id: string, suffix: string) => `mbid-${mbid}/mbid-${mbid}-${id}.${suffix}`;
  const thumb = (mbid: string, id: string, size: number) => `mbid-${mbid}/mbid-${mbid}-${id}_thumb${size}.jpg`;

  async function addArt(mbid: string, name: string, bytes: Buffer, ...flags: string[]): Promise<string> {
    const file = path.join(t.dir, name);
    await writeFile(file, bytes);
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', mbid, file, '--approved', ...flags]);
    assert.match(entry.id, /^\d+$/);
    return entry.id as string;
  }

  before(async () => {
    t = await makeTestEnv();
    s = await startServer(t);
    port = Number(new URL(s.base).port);
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'Files']);
    await cliInProcess(t.env, ['release', 'add', R2, '--release-group', GROUP, '--title', 'Other']);
    await cliInProcess(t.env, ['release', 'add', R3, '--release-group', GROUP, '--title', 'Changing']);
    const made = { jpg: await makeJpeg(900, 700), png: await makePng(320, 240, true), gif: await makeGif(200, 150) };
    for (const suffix of ['jpg', 'png', 'gif'] as const) {
      const bytes = made[suffix];
      const id = await addArt(R1, `cover.${suffix}`, bytes, ...(suffix === 'jpg' ? ['--type', 'Front'] : []));
      originals[suffix] = { id, bytes, url: download(original(R1, id, suffix)), thumbs: [250, 500, 1200].map((n) => download(thumb(R1, id, n))) };
    }
    r2Id = await addArt(R2, 'other.jpg', await makeJpeg(300, 300), '--type', 'Front');
    r3Id = await addArt(R3, 'changing.jpg', await makeJpeg(320, 320), '--type', 'Front', '--comment', 'before');

    // Things that must never be served: files beside the storage root and stray files inside it.
    await writeFile(path.join(t.dir, 'secret.txt'), MARKER);
    await writeFile(path.join(t.dir, 'files', 'notes.txt'), MARKER);
    await writeFile(path.join(t.dir, 'files', `mbid-${R1}`, '.tmp-0123456789abcdef'), MARKER);
    await writeFile(path.join(t.dir, 'files', `mbid-${R1}`, 'readme.txt'), MARKER);
    await mkdir(path.join(t.dir, 'files', `mbid-${MISSING}`));
    await writeFile(path.join(t.dir, 'files', `mbid-${MISSING}`, 'index.json.bak'), MARKER);
    // On the PostgreSQL pass there is no SQLite file: plant one so the same paths are tried.
    dbFile = path.join(t.dir, 'sleeve.db');
    if (DIALECT === 'postgres') await writeFile(dbFile, `SQLite format 3\0${MARKER}`);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  describe('what it serves', () => {
    it('is where the API redirects', async () => {
      const res = await fetch(`${s.base}/release/${R1}/front`, { redirect: 'manual' });
      assert.equal(res.status, 307);
      assert.equal(res.headers.get('location'), originals.jpg.url);
      const big = await fetch(`${s.base}/release/${R1}/${originals.png.id}-1200.jpg`, { redirect: 'manual' });
      assert.equal(big.headers.get('location'), originals.png.thumbs[2]);
    });

    for (const [suffix, type] of [
      ['jpg', 'image/jpeg'],
      ['png', 'image/png'],
      ['gif', 'image/gif'],
    ] as const) {
      it(`serves a ${suffix} original byte for byte as ${type}`, async () => {
        const res = await fetch(originals[suffix].url);
        assert.equal(res.status, 200);
        assert.equal(res.headers.get('content-type'), type);
        assert.equal(res.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(res.headers.get('content-length'), String(originals[suffix].bytes.length));
        assert.deepEqual(await bytesOf(res), originals[suffix].bytes);
      });

      it(`serves the thumbnails of a ${suffix} as image/jpeg`, async () => {
        for (const url of originals[suffix].thumbs) {
          const res = await fetch(url);
          assert.equal(res.status, 200, url);
          assert.equal(res.headers.get('content-type'), 'image/jpeg', url);
          const body = await bytesOf(res);
          assert.equal(res.headers.get('content-length'), String(body.length));
          assert.deepEqual([...body.subarray(0, 3)], [0xff, 0xd8, 0xff], `${url} is a JPEG`);
        }
      });
    }

    it('serves index.json as application/json with the release listing', async () => {
      const res = await fetch(download(`mbid-${R1}/index.json`));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'application/json');
      const body = await bytesOf(res);
      assert.equal(res.headers.get('content-length'), String(body.length));
      const listing = JSON.parse(body.toString('utf8'));
      assert.equal(listing.release, `https://musicbrainz.org/release/${R1}`);
      assert.deepEqual(
        listing.images.map((i: { id: string }) => i.id),
        [originals.jpg.id, originals.png.id, originals.gif.id],
      );
    });

    it('ignores a query string', async () => {
      const res = await fetch(`${download(`mbid-${R1}/index.json`)}?../../sleeve.db`);
      assert.equal(res.status, 200);
      assert.equal(JSON.parse(await res.text()).release, `https://musicbrainz.org/release/${R1}`);
    });

    it('says 404 for files of the layout that do not exist', async () => {
      for (const key of [
        `mbid-${MISSING}/index.json`,
        original(R1, '1', 'jpg'),
        original(R1, originals.jpg.id, 'png'),
        original(R1, originals.png.id, 'pdf'),
        thumb(R1, '99999999999', 250),
      ]) {
        const res = await fetch(download(key));
        assert.equal(res.status, 404, key);
        assert.equal(res.headers.get('access-control-allow-origin'), '*', key);
        await res.arrayBuffer();
      }
    });

    it('sends Access-Control-Allow-Origin: * on every answer', async () => {
      const answers = [
        await fetch(originals.gif.url),
        await fetch(originals.gif.url, { headers: { range: 'bytes=0-9' } }),
        await fetch(originals.gif.url, { headers: { range: 'bytes=999999-' } }),
        await fetch(download(`mbid-${R1}/index.json`)),
        await fetch(download(`mbid-${R1}/index.json`), { method: 'HEAD' }),
        await fetch(download(`mbid-${MISSING}/index.json`)),
        await fetch(originals.gif.url, { method: 'POST' }),
      ];
      const etag = answers[0]?.headers.get('etag') as string;
      answers.push(await fetch(originals.gif.url, { headers: { 'if-none-match': etag } }));
      assert.deepEqual(
        answers.map((r) => r.status),
        [200, 206, 416, 200, 200, 404, 405, 304],
      );
      for (const r of answers) {
        assert.equal(r.headers.get('access-control-allow-origin'), '*', `status ${r.status}`);
        await r.arrayBuffer();
      }
    });
  });

  describe('validators and conditional requests', () => {
    it('sends a strong ETag and a Last-Modified date', async () => {
      for (const url of [originals.jpg.url, originals.png.thumbs[0] as string, download(`mbid-${R1}/index.json`)]) {
        const res = await fetch(url);
        await res.arrayBuffer();
        assert.match(res.headers.get('etag') ?? '', /^"[\x21\x23-\x7e]+"$/, url);
        const lastModified = Date.parse(res.headers.get('last-modified') ?? '');
        assert.ok(lastModified <= Date.now() && lastModified > Date.now() - 3600_000, url);
        const again = await fetch(url, { method: 'HEAD' });
        assert.equal(again.headers.get('etag'), res.headers.get('etag'), 'the ETag is stable');
      }
    });

    it('answers a matching If-None-Match with 304 and no body, keeping the validators and cache headers', async () => {
      for (const url of [originals.jpg.url, originals.gif.thumbs[1] as string, download(`mbid-${R1}/index.json`)]) {
        const full = await fetch(url);
        await full.arrayBuffer();
        const etag = full.headers.get('etag') as string;
        const res = await fetch(url, { headers: { 'if-none-match': etag } });
        assert.equal(res.status, 304, url);
        assert.equal((await bytesOf(res)).length, 0);
        assert.equal(res.headers.get('etag'), etag);
        assert.equal(res.headers.get('cache-control'), full.headers.get('cache-control'));
        assert.equal(res.headers.get('last-modified'), full.headers.get('last-modified'));
      }
    });

    it('a 304 carries no body on the wire', async () => {
      const etag = (await fetch(originals.jpg.url, { method: 'HEAD' })).headers.get('etag') as string;
      const res = await rawRequest(port, 'GET', new URL(originals.jpg.url).pathname, { 'If-None-Match': etag });
      assert.equal(res.status, 304);
      assert.equal(res.body.length, 0);
    });

    it('matches an ETag in a list, a weak form of it and *', async () => {
      const etag = (await fetch(originals.png.url, { method: 'HEAD' })).headers.get('etag') as string;
      for (const inm of [`"nope", ${etag}`, `${etag},"nope"`, `W/${etag}`, `"a", W/${etag}, "b"`, '*']) {
        const res = await fetch(originals.png.url, { headers: { 'if-none-match': inm } });
        assert.equal(res.status, 304, inm);
        await res.arrayBuffer();
      }
    });

    it('sends the whole file when no ETag matches', async () => {
      const etag = (await fetch(originals.png.url, { method: 'HEAD' })).headers.get('etag') as string;
      for (const inm of ['"nope"', `"x${etag.slice(1)}`, '"a", "b"', etag.slice(1, -1)]) {
        const res = await fetch(originals.png.url, { headers: { 'if-none-match': inm } });
        assert.equal(res.status, 200, inm);
        assert.deepEqual(await bytesOf(res), originals.png.bytes);
      }
    });

    it('answers If-Modified-Since at or after Last-Modified with 304, earlier or unreadable with 200', async () => {
      const head = await fetch(originals.gif.url, { method: 'HEAD' });
      const lastModified = head.headers.get('last-modified') as string;
      const ims = async (value: string, extra: Record<string, string> = {}) => {
        const res = await fetch(originals.gif.url, { headers: { 'if-modified-since': value, ...extra } });
        await res.arrayBuffer();
        return res.status;
      };
      assert.equal(await ims(lastModified), 304);
      assert.equal(await ims(new Date().toUTCString()), 304);
      assert.equal(await ims(new Date(Date.parse(lastModified) - 3600_000).toUTCString()), 200);
      assert.equal(await ims('Thu, 01 Jan 1970 00:00:00 GMT'), 200);
      assert.equal(await ims('not a date'), 200);
      // If-None-Match decides when both are sent.
      assert.equal(await ims(lastModified, { 'if-none-match': '"nope"' }), 200);
    });

    it('caches images for a year as immutable', async () => {
      for (const url of [originals.jpg.url, originals.png.url, originals.gif.url, ...originals.jpg.thumbs, ...originals.gif.thumbs]) {
        const res = await fetch(url, { method: 'HEAD' });
        assert.equal(res.headers.get('cache-control'), IMMUTABLE, url);
      }
    });

    it('has index.json revalidated, as it changes', async () => {
      const res = await fetch(download(`mbid-${R1}/index.json`), { method: 'HEAD' });
      const cc = res.headers.get('cache-control') ?? '';
      assert.doesNotMatch(cc, /immutable/);
      assert.match(cc, /no-cache|max-age=0|must-revalidate/);
      assert.doesNotMatch(cc, /max-age=[1-9]/);
    });

    it('gives index.json a new ETag and body after a change through the CLI; the images keep theirs', async () => {
      const indexUrl = download(`mbid-${R3}/index.json`);
      const imageUrl = download(original(R3, r3Id, 'jpg'));
      const first = await fetch(indexUrl);
      const etag1 = first.headers.get('etag') as string;
      assert.equal(JSON.parse(await first.text()).images[0].comment, 'before');
      const imageEtag = (await fetch(imageUrl, { method: 'HEAD' })).headers.get('etag');

      // index.json is answered from memory, so a change shows once the server has seen it (as in
      // the response cache: within SLEEVE_CHANGE_POLL_MS here), not the moment the command ends.
      const changedFrom = async (etag: string | null) => {
        const { value } = await pollUntil(async () => (await fetch(indexUrl, { method: 'HEAD' })).headers.get('etag'), (v) => v !== etag, 3000);
        assert.notEqual(value, etag, 'the change shows within 3 s');
      };
      await cliInProcess(t.env, ['art', 'edit', R3, r3Id, '--comment', 'after']);
      await changedFrom(etag1);
      const second = await fetch(indexUrl, { headers: { 'if-none-match': etag1 } });
      assert.equal(second.status, 200, 'the old ETag no longer matches');
      const etag2 = second.headers.get('etag') as string;
      assert.notEqual(etag2, etag1);
      assert.equal(JSON.parse(await second.text()).images[0].comment, 'after');
      assert.equal((await fetch(indexUrl, { headers: { 'if-none-match': etag2 } })).status, 304);
      assert.equal((await fetch(imageUrl, { method: 'HEAD' })).headers.get('etag'), imageEtag, 'the image file was not rewritten');

      const added = await addArt(R3, 'second.jpg', await makeJpeg(200, 200));
      await changedFrom(etag2);
      const third = await fetch(indexUrl, { headers: { 'if-none-match': etag2 } });
      assert.equal(third.status, 200);
      assert.notEqual(third.headers.get('etag'), etag2);
      assert.equal(JSON.parse(await third.text()).images.length, 2);

      const etag3 = third.headers.get('etag');
      await cliInProcess(t.env, ['art', 'remove', R3, added]);
      await changedFrom(etag3);
      const fourth = await fetch(indexUrl);
      assert.equal(JSON.parse(await fourth.text()).images.length, 1);
      for (const key of [original(R3, added, 'jpg'), thumb(R3, added, 250), thumb(R3, added, 500), thumb(R3, added, 1200)]) {
        const gone = await fetch(download(key));
        assert.equal(gone.status, 404, `${key} of the removed image`);
        await gone.arrayBuffer();
      }
    });
  });

  describe('HEAD', () => {
    for (const [what, key] of [
      ['an original', () => original(R1, originals.png.id, 'png')],
      ['a thumbnail', () => thumb(R1, originals.gif.id, 500)],
      ['index.json', () => `mbid-${R1}/index.json`],
    ] as const) {
      it(`answers HEAD for ${what} with the headers of GET and no body`, async () => {
        const get = await fetch(download(key()));
        const body = await bytesOf(get);
        const head = await fetch(download(key()), { method: 'HEAD' });
        assert.equal(head.status, 200);
        assert.deepEqual(headersOf(head), headersOf(get));
        assert.equal(head.headers.get('content-length'), String(body.length));
        const onWire = await rawRequest(port, 'HEAD', `/download/${key()}`);
        assert.equal(onWire.status, 200);
        assert.equal(onWire.headers['content-length'], String(body.length));
        assert.equal(onWire.body.length, 0, 'nothing after the headers');
      });
    }

    it('answers HEAD with a range as GET would, without the bytes', async () => {
      const onWire = await rawRequest(port, 'HEAD', new URL(originals.jpg.url).pathname, { Range: 'bytes=0-99' });
      assert.equal(onWire.status, 206);
      assert.equal(onWire.headers['content-range'], `bytes 0-99/${originals.jpg.bytes.length}`);
      assert.equal(onWire.headers['content-length'], '100');
      assert.equal(onWire.body.length, 0);
    });

    it('answers HEAD for a missing file with 404 and no body', async () => {
      const onWire = await rawRequest(port, 'HEAD', `/download/mbid-${MISSING}/index.json`);
      assert.equal(onWire.status, 404);
      assert.equal(onWire.body.length, 0);
    });
  });

  describe('ranges', () => {
    const range = async (value: string, extra: Record<string, string> = {}) => {
      const res = await fetch(originals.jpg.url, { headers: { range: value, ...extra } });
      return { res, body: await bytesOf(res) };
    };
    const size = () => originals.jpg.bytes.length;

    it('advertises byte ranges', async () => {
      const res = await fetch(originals.jpg.url, { method: 'HEAD' });
      assert.equal(res.headers.get('accept-ranges'), 'bytes');
    });

    it('answers bytes=0-99 with 206, Content-Range and exactly those bytes', async () => {
      const { res, body } = await range('bytes=0-99');
      assert.equal(res.status, 206);
      assert.equal(res.headers.get('content-range'), `bytes 0-99/${size()}`);
      assert.equal(res.headers.get('content-length'), '100');
      assert.equal(res.headers.get('content-type'), 'image/jpeg');
      assert.equal(res.headers.get('cache-control'), IMMUTABLE);
      assert.ok(res.headers.get('etag'));
      assert.deepEqual(body, originals.jpg.bytes.subarray(0, 100));
    });

    it('answers a suffix range bytes=-100 with the last 100 bytes', async () => {
      const { res, body } = await range('bytes=-100');
      assert.equal(res.status, 206);
      assert.equal(res.headers.get('content-range'), `bytes ${size() - 100}-${size() - 1}/${size()}`);
      assert.equal(res.headers.get('content-length'), '100');
      assert.deepEqual(body, originals.jpg.bytes.subarray(size() - 100));
    });

    it('answers an open range bytes=100- with the rest of the file', async () => {
      const { res, body } = await range('bytes=100-');
      assert.equal(res.status, 206);
      assert.equal(res.headers.get('content-range'), `bytes 100-${size() - 1}/${size()}`);
      assert.equal(res.headers.get('content-length'), String(size() - 100));
      assert.deepEqual(body, originals.jpg.bytes.subarray(100));
    });

    it('answers single bytes and clamps a range past the end', async () => {
      const first = await range('bytes=0-0');
      assert.equal(first.res.status, 206);
      assert.deepEqual(first.body, originals.jpg.bytes.subarray(0, 1));
      const last = await range(`bytes=${size() - 1}-${size() - 1}`);
      assert.equal(last.res.status, 206);
      assert.deepEqual(last.body, originals.jpg.bytes.subarray(size() - 1));
      const past = await range(`bytes=10-${size() + 5000}`);
      assert.equal(past.res.status, 206);
      assert.equal(past.res.headers.get('content-range'), `bytes 10-${size() - 1}/${size()}`);
      assert.deepEqual(past.body, originals.jpg.bytes.subarray(10));
      const longSuffix = await range(`bytes=-${size() + 5000}`);
      assert.equal(longSuffix.res.status, 206);
      assert.equal(longSuffix.res.headers.get('content-range'), `bytes 0-${size() - 1}/${size()}`);
      assert.deepEqual(longSuffix.body, originals.jpg.bytes);
    });

    it('answers an unsatisfiable range with 416 and Content-Range: bytes */size', async () => {
      for (const value of [`bytes=${size()}-`, `bytes=${size() + 10}-${size() + 20}`, 'bytes=-0']) {
        const { res, body } = await range(value);
        assert.equal(res.status, 416, value);
        assert.equal(res.headers.get('content-range'), `bytes */${size()}`, value);
        assert.ok(!(body[0] === 0xff && body[1] === 0xd8), 'no image bytes in a 416');
      }
    });

    it('answers several ranges, other units and malformed ranges with the whole file', async () => {
      for (const value of ['bytes=0-1,5-6', 'bytes=0-99, 200-299', 'lines=0-5', 'bytes=abc', 'bytes=5-2', 'bytes=-', 'bytes=1-2-3']) {
        const { res, body } = await range(value);
        assert.equal(res.status, 200, value);
        assert.equal(res.headers.get('content-range'), null, value);
        assert.equal(res.headers.get('content-length'), String(size()), value);
        assert.deepEqual(body, originals.jpg.bytes, value);
      }
    });

    it('honours If-Range only when it carries the current strong ETag', async () => {
      const head = await fetch(originals.jpg.url, { method: 'HEAD' });
      const etag = head.headers.get('etag') as string;
      const lastModified = head.headers.get('last-modified') as string;
      const match = await range('bytes=0-99', { 'if-range': etag });
      assert.equal(match.res.status, 206);
      assert.equal(match.body.length, 100);
      for (const ifRange of ['"other"', `W/${etag}`, new Date(Date.parse(lastModified) - 86_400_000).toUTCString()]) {
        const { res, body } = await range('bytes=0-99', { 'if-range': ifRange });
        assert.equal(res.status, 200, ifRange);
        assert.equal(res.headers.get('content-range'), null, ifRange);
        assert.deepEqual(body, originals.jpg.bytes, ifRange);
      }
    });

    it('answers a range with a matching If-None-Match with 304', async () => {
      const etag = (await fetch(originals.jpg.url, { method: 'HEAD' })).headers.get('etag') as string;
      const { res, body } = await range('bytes=0-99', { 'if-none-match': etag });
      assert.equal(res.status, 304);
      assert.equal(body.length, 0);
    });

    it('serves ranges of index.json too', async () => {
      const full = await bytesOf(await fetch(download(`mbid-${R1}/index.json`)));
      const res = await fetch(download(`mbid-${R1}/index.json`), { headers: { range: 'bytes=0-9' } });
      assert.equal(res.status, 206);
      assert.equal(res.headers.get('content-range'), `bytes 0-9/${full.length}`);
      assert.deepEqual(await bytesOf(res), full.subarray(0, 10));
    });
  });

  describe('methods', () => {
    for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
      it(`answers ${method} with 405 and Allow, and changes nothing`, async () => {
        const res = await fetch(originals.png.url, {
          method,
          headers: { 'content-type': 'application/octet-stream' },
          body: method === 'DELETE' ? undefined : Buffer.from('overwrite attempt'),
        });
        assert.equal(res.status, 405);
        assert.match(res.headers.get('allow') ?? '', /\bGET\b/);
        assert.match(res.headers.get('allow') ?? '', /\bHEAD\b/);
        assert.equal(res.headers.get('access-control-allow-origin'), '*');
        await res.arrayBuffer();
        const after = await fetch(originals.png.url);
        assert.equal(after.status, 200);
        assert.deepEqual(await bytesOf(after), originals.png.bytes);
      });
    }

    it('answers POST to index.json and to a missing file with 405', async () => {
      for (const url of [download(`mbid-${R1}/index.json`), download(`mbid-${MISSING}/index.json`)]) {
        const res = await fetch(url, { method: 'POST', body: '{}' });
        assert.equal(res.status, 405, url);
        await res.arrayBuffer();
      }
    });
  });

  describe('hostile paths: a 4xx, never a 5xx, never a byte from outside the files of the layout', () => {
    const r1Folder = `mbid-${R1}`;
    const hostile = (): [string, string][] => [
      ['dot segments', '/download/../../etc/passwd'],
      ['dot segments to the database', '/download/../sleeve.db'],
      ['dot segments to a planted file', '/download/../secret.txt'],
      ['dot segments inside a folder', `/download/${r1Folder}/../../sleeve.db`],
      ['dot segments inside a folder to a planted file', `/download/${r1Folder}/../../secret.txt`],
      ['a dot segment to the root', `/download/${r1Folder}/../notes.txt`],
      ['deep dot segments', `/download/${r1Folder}/${'../'.repeat(12)}etc/passwd`],
      ['single dot segments', `/download/./${r1Folder}/./index.json`],
      ['a dot segment after a file', `/download/${original(R1, originals.jpg.id, 'jpg')}/..`],
      ['encoded dots', '/download/%2e%2e/%2e%2e/etc/passwd'],
      ['encoded dots to the database', '/download/%2e%2e/sleeve.db'],
      ['upper-case encoded dots', `/download/${r1Folder}/%2E%2E/%2E%2E/secret.txt`],
      ['encoded dots and slashes', '/download/%2e%2e%2f%2e%2e%2fsleeve.db'],
      ['encoded slash after dots', '/download/..%2Fsleeve.db'],
      ['encoded slash after dots, lower case', '/download/..%2fsecret.txt'],
      ['encoded slash inside a folder', `/download/${r1Folder}%2F..%2F..%2Fsleeve.db`],
      ['encoded backslash', '/download/..%5csleeve.db'],
      ['encoded backslashes inside a folder', `/download/${r1Folder}%5c..%5c..%5csecret.txt`],
      ['a raw backslash', `/download/${r1Folder}\\..\\..\\secret.txt`],
      ['double encoding', '/download/%252e%252e/%252e%252e/sleeve.db'],
      ['an encoded NUL', `/download/${r1Folder}/index.json%00`],
      ['an encoded NUL before a suffix', `/download/${r1Folder}/index.json%00.jpg`],
      ['an encoded NUL alone', '/download/%00'],
      ['a NUL after dot segments', '/download/../sleeve.db%00.jpg'],
      ['overlong UTF-8 dots', '/download/%c0%ae%c0%ae/%c0%ae%c0%ae/sleeve.db'],
      ['overlong UTF-8 slash', '/download/..%c0%afsleeve.db'],
      ['three-byte overlong dots', '/download/%e0%80%ae%e0%80%ae/secret.txt'],
      ['invalid UTF-8', '/download/%ff%fe/index.json'],
      ['a broken escape', '/download/%zz/index.json'],
      ['a truncated escape', `/download/${r1Folder}/index.json%`],
      ['full-width dots', '/download/%ef%bc%8e%ef%bc%8e/sleeve.db'],
      ['a 10 kB name', `/download/${'a'.repeat(10_000)}`],
      ['10 kB of dot segments', `/download/${r1Folder}/${'../'.repeat(3_400)}sleeve.db`],
      ['10 kB of encoded dot segments', `/download/${'%2e%2e%2f'.repeat(1_100)}secret.txt`],
      ['a double slash in front', '/download//etc/passwd'],
      ['a double slash in the middle', `/download/${r1Folder}//index.json`],
      ['a double slash before the prefix', `//download/${r1Folder}/../../secret.txt`],
      ['many slashes', '/download////////sleeve.db'],
      ['an absolute path', '/download//' + dbFile.replace(/^\//, '')],
      ['an absolute-form target', 'http://127.0.0.1/download/../sleeve.db'],
      ['the database by name', '/download/sleeve.db'],
      ['the data directory name', '/download/files/notes.txt'],
      ['a stray file in the storage root', '/download/notes.txt'],
      ['a stray file in a release folder', `/download/${r1Folder}/readme.txt`],
      ['a temporary file', `/download/${r1Folder}/.tmp-0123456789abcdef`],
      ['a folder', `/download/${r1Folder}`],
      ['a folder with a slash', `/download/${r1Folder}/`],
      ['the root', '/download/'],
      ['index.json of a missing release', `/download/mbid-${MISSING}/index.json`],
      ['a stray file in the folder of a missing release', `/download/mbid-${MISSING}/index.json.bak`],
      ['an image in the folder of another release', `/download/mbid-${R2}/${original(R1, originals.jpg.id, 'jpg').split('/')[1]}`],
      ['another release image in this folder', `/download/${r1Folder}/mbid-${R2}-${r2Id}.jpg`],
      ['a thumbnail in the folder of another release', `/download/mbid-${R2}/mbid-${R1}-${originals.jpg.id}_thumb250.jpg`],
      ['an upper-case MBID', `/download/mbid-${R1.toUpperCase()}/index.json`],
      ['an unknown thumbnail size', `/download/${r1Folder}/mbid-${R1}-${originals.jpg.id}_thumb100.jpg`],
      ['a thumbnail of another suffix', `/download/${r1Folder}/mbid-${R1}-${originals.jpg.id}_thumb250.png`],
      ['a file with a trailing dot', `/download/${r1Folder}/index.json.`],
      ['a path parameter', `/download/${r1Folder}/index.json;.jpg`],
      ['an id of twenty digits', `/download/${r1Folder}/mbid-${R1}-${'9'.repeat(20)}.jpg`],
    ];

    it('refuses every hostile path on the wire', async () => {
      const failures: string[] = [];
      for (const [what, target] of hostile()) {
        for (const method of ['GET', 'HEAD']) {
          let res: RawResponse;
          try {
            res = await rawRequest(port, method, target);
          } catch (err) {
            failures.push(`${method} ${what}: ${(err as Error).message}`);
            continue;
          }
          const text = res.raw.toString('latin1');
          if (res.status < 400 || res.status > 499) failures.push(`${method} ${what} (${target.slice(0, 80)}): status ${res.status}`);
          if (text.includes(MARKER) || text.includes('SQLite format 3') || text.includes('root:x:0')) {
            failures.push(`${method} ${what}: a file from outside the layout leaked`);
          }
        }
      }
      assert.deepEqual(failures, []);
    });

    it('refuses an encoded slash that would name a real file', async () => {
      for (const target of [`/download/mbid-${R1}%2Findex.json`, `/download/mbid-${R1}%2fmbid-${R1}-${originals.jpg.id}.jpg`]) {
        const res = await rawRequest(port, 'GET', target);
        assert.ok(res.status >= 400 && res.status < 500, `${target}: ${res.status}`);
      }
    });

    it('refuses a request line too long for the server with a 4xx', async () => {
      const res = await rawRequest(port, 'GET', `/download/${'../'.repeat(12_000)}sleeve.db`);
      assert.ok(res.status >= 400 && res.status < 500, `status ${res.status}`);
    });

    it('refuses raw control bytes in the path', async () => {
      for (const target of [`/download/${r1Folder}/index.json\0`, `/download/..\x01/sleeve.db`, `/download/${r1Folder}/index.json\x7f`]) {
        const res = await rawExchange(port, `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
        assert.ok(res.status >= 400 && res.status < 500, `${JSON.stringify(target)}: ${res.status}`);
        assert.ok(!res.raw.toString('latin1').includes(MARKER));
      }
    });

    it('refuses hostile paths through fetch too', async () => {
      for (const p of ['/download/%2e%2e/%2e%2e/secret.txt', '/download/..%2fsecret.txt', '/download/%00', `/download/${'x'.repeat(10_000)}`]) {
        const res = await fetch(`${s.base}${p}`);
        const text = await res.text();
        assert.ok(res.status >= 400 && res.status < 500, `${p}: ${res.status}`);
        assert.ok(!text.includes(MARKER), p);
      }
    });

    it('leaves the planted files where they were and keeps serving', async () => {
      assert.equal(await readFile(path.join(t.dir, 'secret.txt'), 'utf8'), MARKER);
      assert.ok((await readFile(dbFile)).subarray(0, 15).equals(Buffer.from('SQLite format 3')));
      const res = await fetch(originals.jpg.url);
      assert.equal(res.status, 200);
      assert.deepEqual(await bytesOf(res), originals.jpg.bytes);
    });
  });

  describe('resources', () => {
    it('closes the file behind every download', async () => {
      // A file left open shows either as a growing descriptor count or, once the
      // garbage collector has closed it, as Node's warning about doing so.
      const collected: string[] = [];
      const onWarning = (w: Error) => {
        if (/garbage collection/.test(w.message)) collected.push(w.message);
      };
      process.on('warning', onWarning);
      try {
        const warm = await fetch(originals.jpg.url);
        await warm.arrayBuffer();
        const before = openFds();
        for (let i = 0; i < 100; i++) {
          const res = await fetch(i % 2 === 0 ? originals.jpg.url : (originals.png.thumbs[0] as string), { headers: i % 3 === 0 ? { range: 'bytes=10-500' } : {} });
          await res.arrayBuffer();
        }
        // Descriptors close as the answers' streams end: until they have, or 2 s.
        const { value: leaked } = await pollUntil(async () => openFds() - before, (n) => n < 10, 2000, 10);
        assert.ok(leaked < 10, `${leaked} file descriptors left open after 100 downloads`);
        assert.deepEqual(collected, [], 'no file was left for the garbage collector to close');
      } finally {
        process.off('warning', onWarning);
      }
    });
  });
});

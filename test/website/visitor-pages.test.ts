/*
 * The gallery's front door: visitor pages answered before routing on the HTTPS listener, with
 * the headers the router's answer carries, gzip when asked, never for a signed-in viewer, and
 * emptied by every change (a change on the website at once, one made elsewhere with the
 * catalogue watch); plus the cache's own rules (bounds, age, generation, Accept-Encoding).
 */
import assert from 'node:assert/strict';
import type { IncomingMessage, ServerResponse } from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { addArt } from '../../src/cover-art/index.js';
import { VisitorPages } from '../../src/website/visitor-pages.js';
import { addUser, type Browser } from '../helpers/auth.js';
import { DIALECT, makeTestEnv, pollUntil, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { signIn } from '../auth/support.js';
import { countOf, scrape } from '../metrics/support.js';
import { art, release, startSite, type Site } from './page-support.js';

interface Got {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

function get(url: string, headers: Record<string, string> = {}): Promise<Got> {
  return new Promise((resolve, reject) => {
    https
      .get(url, { headers, rejectUnauthorized: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      })
      .on('error', reject);
  });
}

/** The headers that differ per answer (or per connection) left out. */
function stable(h: Got['headers']): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(h)) if (!['date', 'x-request-id', 'connection', 'keep-alive'].includes(k)) out[k] = v;
  return out;
}

/** Writes `requests` on one TLS connection and reads `count` answers (each with its Content-Length's body). */
function tlsAnswers(base: string, requests: string, count: number): Promise<{ head: string; body: Buffer }[]> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: url.hostname, port: Number(url.port), rejectUnauthorized: false }, () => socket.write(requests));
    let raw = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`fewer than ${count} answers: ${raw.toString('latin1').slice(0, 200)}`));
    }, 10_000);
    socket.on('error', reject);
    socket.on('data', (c: Buffer) => {
      raw = Buffer.concat([raw, c]);
      const out: { head: string; body: Buffer }[] = [];
      let at = 0;
      while (out.length < count) {
        const end = raw.indexOf('\r\n\r\n', at);
        if (end === -1) return;
        const head = raw.subarray(at, end).toString('latin1');
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1] ?? 0);
        if (end + 4 + length > raw.length) return;
        out.push({ head, body: raw.subarray(end + 4, end + 4 + length) });
        at = end + 4 + length;
      }
      clearTimeout(timer);
      socket.destroy();
      resolve(out);
    });
  });
}

describe('Accept-Encoding and the visitor page cache', () => {
  const page = Buffer.from('<!doctype html><p>a page · with non-ASCII</p>');
  const headers = { 'content-type': 'text/html; charset=utf-8' };
  /** Answers a request for `url` from `pages`; the route, status, headers and body written. */
  const ask = (pages: VisitorPages, url: string, reqHeaders: Record<string, string> = {}) => {
    let head: { status: number; list: string[] } | undefined;
    let body: string | Buffer | undefined;
    const res = {
      writeHead: (status: number, list: string[]) => {
        head = { status, list: [...list] };
      },
      end: (b: string | Buffer) => {
        body = b;
      },
    } as unknown as ServerResponse;
    const route = pages.answer({ url, headers: reqHeaders } as IncomingMessage, res, 'rid-1');
    return { route, head, body };
  };

  it('answers gzipped when Accept-Encoding names gzip or *, unless its q is 0', () => {
    const pages = new VisitorPages({ now: () => 0 });
    pages.follow();
    pages.keep('/p', '/r', headers, page, pages.generation);
    const gzipped = (acceptEncoding: string | undefined): boolean => {
      const answer = ask(pages, '/p', acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding });
      assert.equal(answer.route, '/r');
      const list = answer.head?.list ?? [];
      const zipped = list.includes('content-encoding');
      assert.deepEqual(zipped ? gunzipSync(answer.body as Buffer) : Buffer.from(answer.body as string), page);
      return zipped;
    };
    assert.equal(gzipped(undefined), false);
    assert.equal(gzipped(''), false);
    assert.equal(gzipped('gzip, deflate, br'), true);
    assert.equal(gzipped('br;q=1.0, GZIP;q=0.5'), true);
    assert.equal(gzipped('gzip;q=0'), false);
    assert.equal(gzipped('gzip;q=0, *'), false);
    assert.equal(gzipped('*'), true);
    assert.equal(gzipped('*;q=0'), false);
    assert.equal(gzipped('br, identity'), false);
  });

  it('keeps nothing until it follows the catalogue, nor a page made before a change, nor a target with a query', () => {
    let now = 1000;
    const pages = new VisitorPages({ now: () => now });
    pages.keep('/p', '/r', headers, page, pages.generation);
    assert.equal(pages.size, 0, 'not following: nothing kept');
    pages.follow();
    const before = pages.generation;
    pages.clear();
    pages.keep('/p', '/r', headers, page, before);
    assert.equal(pages.size, 0, 'made before the change');
    pages.keep('/p?x=1', '/r', headers, page, pages.generation);
    assert.equal(pages.size, 0, 'query string');
    pages.keep('/p', '/r', headers, page, pages.generation);
    assert.equal(pages.size, 1);
    const plain = ask(pages, '/p');
    assert.equal(plain.route, '/r');
    assert.equal(plain.head?.status, 200);
    assert.equal(String(plain.body), page.toString('utf8'));
    const list = plain.head?.list ?? [];
    const named = (n: string) => list[list.indexOf(n) + 1];
    assert.equal(named('content-length'), String(page.length), 'bytes, not characters');
    assert.equal(named('vary'), 'accept-encoding');
    assert.equal(named('x-request-id'), 'rid-1');
    assert.equal(list.indexOf('content-encoding'), -1);
    const zipped = ask(pages, '/p', { 'accept-encoding': 'gzip' });
    assert.equal(zipped.head?.list[zipped.head.list.indexOf('content-encoding') + 1], 'gzip');
    assert.deepEqual(gunzipSync(zipped.body as Buffer), page);
    assert.equal(ask(pages, '/p', { cookie: 'a=b; __Host-sleeve-session=xyz' }).route, undefined, 'a session: the router decides');
    assert.equal(ask(pages, '/p', { 'content-length': '3' }).route, undefined, 'a body: the router decides');
    assert.equal(ask(pages, '/p', { cookie: '__Host-sleeve-csrf=abc' }).route, '/r', 'other cookies do not matter');
    assert.equal(ask(pages, '/other').route, undefined);
    now += 999;
    assert.equal(ask(pages, '/p').route, '/r');
    now += 1;
    assert.equal(ask(pages, '/p').route, undefined, 'too old');
    assert.equal(pages.size, 0, 'and dropped');
  });

  it('is bounded in entries and bytes, the oldest going first', () => {
    const pages = new VisitorPages({ now: () => 0 }, { maxEntries: 2, maxBytes: 1_000_000, maxAgeMs: 1000 });
    pages.follow();
    for (const p of ['/a', '/b', '/c']) pages.keep(p, '/r', headers, page, pages.generation);
    assert.equal(pages.size, 2);
    assert.equal(ask(pages, '/a').route, undefined, 'the oldest went');
    assert.equal(ask(pages, '/c').route, '/r');
    const small = new VisitorPages({ now: () => 0 }, { maxEntries: 100, maxBytes: 3000, maxAgeMs: 1000 });
    small.follow();
    small.keep('/big', '/r', headers, Buffer.alloc(4000, 'x'), small.generation);
    assert.equal(small.size, 0, 'larger than the whole cache');
  });
});

describe(`the gallery's front door (${DIALECT})`, () => {
  let t: TestEnv;
  let site: Site;
  let alice: Browser;

  before(async () => {
    t = await makeTestEnv();
    site = await startSite(t);
    await addUser(t, 'alice');
    alice = await signIn(site.base, 'alice');
  });

  after(async () => {
    await site?.server.close();
    await t?.cleanup();
  });

  it('answers a visitor the same page with the same headers as the router, gzipped when asked', async () => {
    const { mbid, group } = await release(site, { title: 'Front door' });
    await art(site, mbid, { types: ['Front'], comment: 'first' });
    const url = `${site.base}/release/${mbid}/cover-art`;
    const routed = await get(url);
    assert.equal(routed.status, 200);
    const door = await get(url);
    assert.equal(door.status, 200);
    assert.deepEqual(door.body, routed.body);
    assert.deepEqual(stable(door.headers), stable(routed.headers));
    assert.equal(door.headers['strict-transport-security'], 'max-age=31536000');
    assert.match(String(door.headers['content-security-policy']), /^default-src 'none'/);
    assert.equal(door.headers['x-frame-options'], 'DENY');
    assert.equal(door.headers['cache-control'], 'no-store');
    assert.match(String(door.headers['x-request-id']), /\S/);
    const zipped = await get(url, { 'accept-encoding': 'gzip, br' });
    assert.equal(zipped.headers['content-encoding'], 'gzip');
    assert.equal(zipped.headers.vary, 'accept-encoding');
    assert.ok(zipped.body.length < routed.body.length / 2, `gzip: ${zipped.body.length} of ${routed.body.length} bytes`);
    assert.deepEqual(gunzipSync(zipped.body), routed.body);
    const groupUrl = `${site.base}/release-group/${group}/cover-art`;
    assert.deepEqual((await get(groupUrl)).body, (await get(groupUrl)).body);
    // HEAD and other spellings still go through the router.
    assert.equal((await get(`${url}?x=1`)).status, 200);
  });

  it('answers it in the fast lane over TLS with the bytes node:http sends, and leaves a request with a header twice to node:http', async () => {
    const { mbid } = await release(site, { title: 'Lane' });
    await art(site, mbid, { types: ['Front'], comment: 'lane' });
    const target = `/release/${mbid}/cover-art`;
    await get(`${site.base}${target}`);
    const plain = `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n`;
    // The same page, through node:http's front door: a header twice keeps a request (and its connection) out of the lane.
    const forwarded = `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\nX-Note: a\r\nX-Note: b\r\n\r\n`;
    const before = await scrape(site.server.metricsAddress);
    const viaLane = await tlsAnswers(site.base, plain + plain, 2);
    const middle = await scrape(site.server.metricsAddress);
    const viaNode = await tlsAnswers(site.base, forwarded + plain, 2);
    const after = await scrape(site.server.metricsAddress);
    assert.equal(countOf(middle, 'sleeve_http_fast_lane_total') - countOf(before, 'sleeve_http_fast_lane_total'), 2, 'both in the lane');
    assert.equal(countOf(after, 'sleeve_http_fast_lane_total') - countOf(middle, 'sleeve_http_fast_lane_total'), 0, 'neither after the one the lane does not take');
    for (const [a, b] of [[viaLane[0], viaNode[1]], [viaLane[1], viaNode[0]]] as const) {
      assert.ok(a !== undefined && b !== undefined);
      assert.equal(a.head.replace(/\r\n(date|x-request-id): [^\r]*/gi, ''), b.head.replace(/\r\n(date|x-request-id): [^\r]*/gi, ''));
      assert.ok(a.body.equals(b.body));
      assert.match(a.head, /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(a.head, /\r\ncontent-encoding: gzip\r\n/);
    }
  });

  it('never answers a signed-in editor from it, and shows a change made on the website to the next visitor', async () => {
    const { mbid } = await release(site);
    const first = await art(site, mbid, { types: ['Front'], comment: 'before' });
    const url = `${site.base}/release/${mbid}/cover-art`;
    await get(url);
    assert.ok((await get(url)).body.includes('before'));
    const mine = await alice.fetch(url);
    assert.ok(mine.body.includes('alice'), 'the editor gets their own page');
    assert.ok(mine.body.includes(`/release/${mbid}/edit-cover-art/${first}`));
    const form = await alice.fetch(`${site.base}/release/${mbid}/edit-cover-art/${first}`);
    const value = (name: string) => new RegExp(`name="${name}" value="([^"]*)"`).exec(form.body)?.[1] ?? '';
    const fields: [string, string][] = [['csrf_token', value('csrf_token')], ['state', value('state')], ['type', 'Front'], ['comment', 'after']];
    const saved = await alice.fetch(`${site.base}/release/${mbid}/edit-cover-art/${first}`, { form: fields });
    assert.equal(saved.status, 303, saved.body.slice(0, 300));
    const next = await get(url);
    const routed = await get(`${url}?routed`);
    assert.ok(routed.body.includes('<dd>after</dd>'), 'the router shows the change');
    assert.ok(next.body.includes('<dd>after</dd>'), 'at once, without waiting for a poll');
    assert.ok(!next.body.includes('alice'));
  });

  it('follows a change made elsewhere through the catalogue watch', async () => {
    const { mbid } = await release(site);
    await art(site, mbid, { types: ['Front'] });
    const url = `${site.base}/release/${mbid}/cover-art`;
    await get(url);
    assert.equal((await get(url)).body.toString().split('<li class="art"').length - 1, 1);
    await addArt(site.server.runtime.coverArt, { release: mbid, bytes: await makeJpeg(200, 200), types: ['Back'], comment: 'added elsewhere', approved: true });
    const { value } = await pollUntil(
      async () => (await get(url)).body.toString(),
      (body) => body.includes('added elsewhere'),
    );
    assert.ok(value.includes('added elsewhere'));
  });
});

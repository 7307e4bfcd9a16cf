import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { discard, RedirectRefused, upstreamGet } from '../../src/cover-art/upstream/upstream-http.js';

/*
 * The upstream GETs of the pull-through and the bulk mirror (node:http with keep-alive):
 * redirects followed as archive.org sends them, and bounded; the connection used again.
 */

describe('upstreamGet', () => {
  let server: http.Server;
  let base: string;
  const sockets = new Set<unknown>();

  before(async () => {
    server = http.createServer((req, res) => {
      sockets.add(req.socket);
      const url = new URL(req.url ?? '/', 'http://x');
      const hops = Number(url.searchParams.get('hops') ?? 0);
      if (url.pathname === '/loop' || (url.pathname === '/hop' && hops > 0)) {
        const next = url.pathname === '/loop' ? '/loop' : `/hop?hops=${hops - 1}`;
        res.writeHead(302, { location: next, 'content-length': '0' });
        res.end();
      } else if (url.pathname === '/ftp') {
        res.writeHead(301, { location: 'ftp://example.org/file', 'content-length': '0' });
        res.end();
      } else {
        const body = `at ${url.pathname}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(body.length), 'x-seen': req.headers['user-agent'] ?? '' });
        res.end(body);
      }
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  async function text(res: Awaited<ReturnType<typeof upstreamGet>>): Promise<string> {
    let out = '';
    for await (const chunk of res.body) out += String(chunk);
    return out;
  }

  it('follows relative redirects (up to 3) with the same headers, and keeps the connection', async () => {
    sockets.clear();
    const res = await upstreamGet(`${base}/hop?hops=3`, { 'user-agent': 'test agent' }, new AbortController().signal);
    assert.equal(res.status, 200);
    assert.equal(res.header('x-seen'), 'test agent');
    assert.equal(await text(res), 'at /hop');
    assert.equal(sockets.size, 1, 'four requests on one kept-alive connection');
  });

  it('refuses a fourth redirect and a redirect to another scheme', async () => {
    await assert.rejects(upstreamGet(`${base}/hop?hops=4`, {}, new AbortController().signal), (err: unknown) => err instanceof RedirectRefused && /more than 3 redirects/.test(err.message));
    await assert.rejects(upstreamGet(`${base}/loop`, {}, new AbortController().signal), RedirectRefused);
    await assert.rejects(upstreamGet(`${base}/ftp`, {}, new AbortController().signal), /a redirect to ftp: \(only https and http are followed/);
  });

  it('stops on the signal, and discards a small body so the connection serves the next request', async () => {
    const stop = new AbortController();
    stop.abort();
    await assert.rejects(upstreamGet(`${base}/x`, {}, stop.signal), { name: 'AbortError' });
    sockets.clear();
    const first = await upstreamGet(`${base}/a`, {}, new AbortController().signal);
    assert.equal(discard(first), true, 'a small body is read to its end');
    await new Promise((resolve) => first.body.on('end', resolve));
    const second = await upstreamGet(`${base}/b`, {}, new AbortController().signal);
    assert.equal(await text(second), 'at /b');
    assert.equal(sockets.size, 1);
  });
});

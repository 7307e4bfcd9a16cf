/*
 * Behind proxies (SLEEVE_TRUST_PROXY): the client's address is the right-most untrusted
 * address of X-Forwarded-For, all its header lines joined in order, and the protocol is the
 * right-most X-Forwarded-Proto value, the one the trusted peer set; from an untrusted peer
 * both headers are ignored. Seen through HTTP: the rate limit and the access log of the cover
 * art listener, the access log and the HTTPS-only check of the auth listener.
 */
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { DIALECT, makeTestEnv, pollUntil, type TestEnv } from './helpers/env.js';
import { startLoggedServer, type LoggedServer } from './metrics/support.js';

const UNKNOWN = 'ddddeeee-ffff-4000-8111-222233334444';
/** The trusted proxy is 127.0.0.1; a client connecting from 127.0.0.2 is not trusted. */
const UNTRUSTED = '127.0.0.2';

interface Answer {
  status: number;
  requestId: string;
  body: string;
}

/**
 * One request sent verbatim (`Connection: close` added) from `localAddress`, over TLS or
 * plain TCP, with each header of `headers` on a line of its own, in order.
 */
function send(url: string, method: string, path: string, headers: [string, string][], localAddress = '127.0.0.1'): Promise<Answer> {
  const u = new URL(url);
  const text = `${method} ${path} HTTP/1.1\r\nHost: x\r\n${headers.map(([k, v]) => `${k}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`;
  return new Promise((resolve, reject) => {
    const options = { host: u.hostname, port: Number(u.port), localAddress };
    const socket: Socket =
      u.protocol === 'https:'
        ? tlsConnect({ ...options, rejectUnauthorized: false }, () => socket.write(text))
        : connect(options, () => socket.write(text));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const raw = Buffer.concat(chunks).toString('latin1');
      const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
      resolve({
        status: Number(/^HTTP\/1\.1 (\d{3})/.exec(raw)?.[1] ?? 0),
        requestId: /\r\nx-request-id: *([^\r]*)/i.exec(head)?.[1] ?? '',
        body: raw.slice(head.length + 4),
      });
    });
  });
}

describe(`proxy headers (${DIALECT})`, () => {
  let t: TestEnv;
  let s: LoggedServer;

  before(async () => {
    t = await makeTestEnv({ SLEEVE_LOG_LEVEL: 'debug', SLEEVE_TRUST_PROXY: '127.0.0.1', SLEEVE_RATE_LIMIT: '2/1h' });
    s = await startLoggedServer(t);
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  /** The client address the access log gives the request with this id. */
  async function loggedClient(requestId: string): Promise<unknown> {
    const found = await pollUntil(async () => s.logs().find((l) => l.reqId === requestId && l.msg === 'request'), (l) => l !== undefined);
    assert.ok(found.value, `an access log line for ${requestId}`);
    return found.value.client;
  }

  describe('X-Forwarded-For on the cover art listener (the rate limit: 2 per hour per client)', () => {
    const lookup = (headers: [string, string][], from?: string) => send(s.base, 'GET', `/release/${UNKNOWN}/`, headers, from);

    it('counts the right-most untrusted address, not what the client wrote further left', async () => {
      const spoofed: [string, string][] = [['X-Forwarded-For', '198.51.100.1, 203.0.113.7']];
      assert.equal((await lookup(spoofed)).status, 404);
      assert.equal((await lookup(spoofed)).status, 404);
      assert.equal((await lookup([['X-Forwarded-For', '203.0.113.7']])).status, 503, 'the real client has used its budget');
      assert.equal((await lookup([['X-Forwarded-For', '198.51.100.1']])).status, 404, 'the address written by the client was never counted');
    });

    it('counts an IPv6 client by its /64: any address of it shares one budget, the log keeps the address', async () => {
      const first = await lookup([['X-Forwarded-For', '[2001:db8:7:7::1]:443']]);
      assert.equal(first.status, 404);
      assert.equal(await loggedClient(first.requestId), '2001:db8:7:7::1');
      assert.equal((await lookup([['X-Forwarded-For', '2001:db8:7:7:aaaa::2']])).status, 404);
      assert.equal((await lookup([['X-Forwarded-For', '2001:db8:7:7:ffff:ffff:ffff:ffff']])).status, 503, 'the /64 has used its budget');
      assert.equal((await lookup([['X-Forwarded-For', '2001:db8:7:8::1']])).status, 404, 'the next /64 has its own');
    });

    it('joins several header lines in order and skips trusted hops from the right', async () => {
      const lines: [string, string][] = [
        ['X-Forwarded-For', '198.51.100.2'],
        ['X-Forwarded-For', '203.0.113.8, 127.0.0.1'],
        ['X-Forwarded-For', '127.0.0.1'],
      ];
      const first = await lookup(lines);
      assert.equal(first.status, 404);
      assert.equal(await loggedClient(first.requestId), '203.0.113.8');
      assert.equal((await lookup(lines)).status, 404);
      assert.equal((await lookup([['X-Forwarded-For', '203.0.113.8']])).status, 503);
      assert.equal((await lookup([['X-Forwarded-For', '198.51.100.2']])).status, 404);
    });

    it('reads addresses with ports, and stops at an entry that is no address', async () => {
      const withPort = await lookup([['X-Forwarded-For', '203.0.113.9:5555']]);
      assert.equal(await loggedClient(withPort.requestId), '203.0.113.9');
      const v6 = await lookup([['X-Forwarded-For', '[2001:db8::9]:443']]);
      assert.equal(await loggedClient(v6.requestId), '2001:db8::9');
      // `unknown` from further out: the client is the proxy that passed it on.
      const unknown = await lookup([['X-Forwarded-For', 'unknown, 127.0.0.1']]);
      assert.equal(await loggedClient(unknown.requestId), '127.0.0.1');
    });

    it('ignores X-Forwarded-For from a peer that is not trusted', async () => {
      const first = await lookup([['X-Forwarded-For', '203.0.113.10']], UNTRUSTED);
      assert.equal(await loggedClient(first.requestId), UNTRUSTED);
      assert.equal((await lookup([['X-Forwarded-For', '203.0.113.11']], UNTRUSTED)).status, 404);
      assert.equal((await lookup([['X-Forwarded-For', '203.0.113.12']], UNTRUSTED)).status, 503, 'one budget for the untrusted peer, whatever it claims');
      assert.equal((await lookup([['X-Forwarded-For', '203.0.113.10']])).status, 404, 'the address it claimed was never counted');
    });
  });

  describe('on the auth listener', () => {
    /** Plain HTTP to the auth port: accepted only when a trusted peer says the client used HTTPS. */
    const plain = (headers: [string, string][], from?: string) => send(s.authBase.replace('https:', 'http:'), 'GET', '/oauth2/no-such-endpoint', headers, from);
    const HTTPS_ONLY = /only HTTPS is allowed/;

    it('believes the right-most X-Forwarded-Proto of a trusted peer: two lines https then http are plain HTTP', async () => {
      const refused = await plain([
        ['X-Forwarded-Proto', 'https'],
        ['X-Forwarded-Proto', 'http'],
      ]);
      assert.equal(refused.status, 400);
      assert.match(refused.body, HTTPS_ONLY);
      const oneLine = await plain([['X-Forwarded-Proto', 'https, http']]);
      assert.equal(oneLine.status, 400);
      assert.match(oneLine.body, HTTPS_ONLY);
      const trailingEmpty = await plain([['X-Forwarded-Proto', 'https,']]);
      assert.equal(trailingEmpty.status, 400, 'an empty right-most value is not https');
    });

    it('accepts plain HTTP a trusted peer says came over HTTPS', async () => {
      for (const headers of [[['X-Forwarded-Proto', 'https']], [['X-Forwarded-Proto', 'HTTPS']], [['X-Forwarded-Proto', 'http'], ['X-Forwarded-Proto', 'https']]] as [string, string][][]) {
        const res = await plain(headers);
        assert.equal(res.status, 404, JSON.stringify(headers));
        assert.doesNotMatch(res.body, HTTPS_ONLY);
      }
    });

    it('refuses X-Forwarded-Proto: https from a peer that is not trusted', async () => {
      const res = await plain([['X-Forwarded-Proto', 'https']], UNTRUSTED);
      assert.equal(res.status, 400);
      assert.match(res.body, HTTPS_ONLY);
    });

    it('takes the client address from X-Forwarded-For the same way', async () => {
      const res = await send(s.authBase, 'GET', '/oauth2/no-such-endpoint', [
        ['X-Forwarded-For', '198.51.100.3'],
        ['X-Forwarded-For', '203.0.113.13, 127.0.0.1'],
      ]);
      assert.equal(res.status, 404);
      assert.equal(await loggedClient(res.requestId), '203.0.113.13');
      const untrusted = await send(s.authBase, 'GET', '/oauth2/no-such-endpoint', [['X-Forwarded-For', '203.0.113.14']], UNTRUSTED);
      assert.equal(await loggedClient(untrusted.requestId), UNTRUSTED);
    });
  });
});

/*
 * A malformed request pipelined after valid ones, with another valid one after it, all in one
 * write (issue 32): both listeners answer it the same way whether the fast lane reads the
 * connection first (SLEEVE_FAST_LANE=on) or node:http reads it all (off), byte for byte but
 * for Date and X-Request-Id: every request before the malformed one answered, in order, then
 * the error, then the connection closed, the request after it never read.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import tls from 'node:tls';
import { loadConfig } from '../src/config/load.js';
import { serve, type Server } from '../src/serve.js';
import { cliInProcess, DIALECT, freePort, makeTestEnv, type TestEnv } from './helpers/env.js';
import { makeJpeg } from './helpers/images.js';

const R1 = '2b3c4d5e-6f70-4a81-9b2c-3d4e5f6a7b8c';
const GROUP = '3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f';

interface Running {
  server: Server;
  coverArt: number;
  auth: number;
}

/** Everything the server sends on one connection to `data` (one write), until it closes. */
function exchange(port: number, secure: boolean, data: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = secure ? tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false }, () => socket.write(data)) : connect(port, '127.0.0.1', () => socket.write(data));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`not closed within 10 s; got ${JSON.stringify(Buffer.concat(chunks).toString('latin1').slice(0, 300))}`));
    }, 10_000);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(Buffer.concat(chunks).toString('latin1'));
    });
  });
}

/** The answers without what differs per request or per second. */
function stable(raw: string): string {
  return raw.replace(/\r\n(date|x-request-id): [^\r]*/gi, '');
}

/** The status of each answer in `raw`. */
function statuses(raw: string): number[] {
  return [...raw.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
}

/** A server on `t`'s data with the fast lane `lane`; both servers say the same base URLs, so their answers can be the same bytes. */
async function start(t: TestEnv, lane: string, urls: Record<string, string>): Promise<Running> {
  const [coverArt, auth] = [await freePort(), await freePort()];
  const env = { ...t.env, ...urls, SLEEVE_FAST_LANE: lane, SLEEVE_COVERART_LISTEN: `127.0.0.1:${coverArt}`, SLEEVE_AUTH_LISTEN: `127.0.0.1:${auth}` };
  return { server: await serve(loadConfig(env), {}), coverArt, auth };
}

const get = (target: string): string => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;

/** Requests node:http's parser refuses. */
const MALFORMED: [string, string][] = [
  ['a request line with junk after the version', 'GET / HTTP/1.1 junk\r\nHost: 127.0.0.1\r\n\r\n'],
  ['a header line without a colon', 'GET / HTTP/1.1\r\nHost 127.0.0.1\r\n\r\n'],
  ['a NUL in the method', 'GE\0T / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
  ['a space in the target', 'GET /a b HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'],
];

describe(`a malformed request between pipelined ones, fast lane on and off (${DIALECT})`, () => {
  let t: TestEnv;
  let on: Running;
  let off: Running;
  let thumb: string;
  let front: string;
  let token: string;

  before(async () => {
    t = await makeTestEnv();
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'Pipelined']);
    const file = path.join(t.dir, 'front.jpg');
    await writeFile(file, await makeJpeg(400, 300));
    const { id } = (await cliInProcess(t.env, ['--json', 'art', 'add', R1, file, '--type', 'Front', '--approved'])) as { id: string };
    thumb = `/download/mbid-${R1}/mbid-${R1}-${id}_thumb250.jpg`;
    const urls = { SLEEVE_BASE_URL: 'http://127.0.0.1:8080', SLEEVE_AUTH_URL: 'https://127.0.0.1:8443' };
    [on, off] = [await start(t, 'on', urls), await start(t, 'off', urls)];
    front = `/release/${R1}/front`;
    const body = 'grant_type=authorization_code&code=nope&client_id=nobody&client_secret=nothing&redirect_uri=https%3A%2F%2Fapp.example%2Fcb';
    token = `POST /oauth2/token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
  });

  after(async () => {
    await on?.server.close();
    await off?.server.close();
    await t?.cleanup();
  });

  /** Asks both servers (`secure`: the auth listener) and checks their answers alike and as `expected`. */
  async function alike(secure: boolean, first: string[], malformed: string, expected: number[]): Promise<void> {
    const data = `${first.join('')}${malformed}${first[0] as string}`;
    const what = JSON.stringify(data.slice(0, 120));
    const a = await exchange(secure ? on.auth : on.coverArt, secure, data);
    const b = await exchange(secure ? off.auth : off.coverArt, secure, data);
    assert.deepEqual(statuses(a), expected, `lane on: ${what}`);
    // Compared whole, reported by status (the bodies are images).
    assert.ok(stable(a) === stable(b), `lane on and off alike: ${what}: on ${JSON.stringify(statuses(a))} (${a.length} bytes), off ${JSON.stringify(statuses(b))} (${b.length} bytes)`);
  }

  it('cover art listener, a malformed chunked body: the answers before it, then 400 at once (its own request never ends)', async () => {
    const chunked = `POST /release/${R1}/front HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n`;
    await alike(false, [get(thumb), chunked], '', [200, 400]);
  });

  for (const [name, malformed] of MALFORMED) {
    it(`cover art listener, ${name}: the file and the cached answer before it, then 400, then closed`, async () => {
      // Warm: the file cache and the response cache hold what the lane answers.
      for (const r of [on, off]) for (const target of [thumb, front]) await fetch(`http://127.0.0.1:${r.coverArt}${target}`, { redirect: 'manual' }).then((res) => res.arrayBuffer());
      await alike(false, [get(thumb), get(front)], malformed, [200, 307, 400]);
    });

    it(`cover art listener, ${name}: an answer made asynchronously (not cached) before it, then 400, then closed`, async () => {
      // A query string of its own each time: a miss of the response cache, answered through Fastify.
      const miss = () => `/release/${R1}/front?${Math.random()}`;
      await alike(false, [get(miss())], malformed, [307, 400]);
    });

    it(`auth listener, ${name}: the token endpoint's answer before it (made asynchronously), then 400, then closed`, async () => {
      await alike(true, [token], malformed, [401, 400]);
      await alike(true, [token, token], malformed, [401, 401, 400]);
    });
  }
});

/*
 * The fast lane (SLEEVE_FAST_LANE, src/edge/fast-lane.ts): the cover art listener answers plain
 * GETs and HEADs of files and cached answers from the socket, and gives every other request,
 * with the rest of its connection, to node:http. Raw TCP through the public listener: the
 * lane's answers are byte for byte node:http's (Date and X-Request-Id aside); pipelined
 * requests that mix both, heads cut in two, bodies, malformed heads, clients that stop reading
 * or reset, the keep-alive timeout and the server's close all behave as they do without it.
 */
import assert from 'node:assert/strict';
import { closeSync, openSync, readFileSync, readSync, rmSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer as createHttpServer } from 'node:http';
import { tmpdir } from 'node:os';
import { connect, createServer as createTcpServer, type Socket } from 'node:net';
import path from 'node:path';
import { Duplex } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, freePort, makeTestEnv, pollUntil, type TestEnv } from './helpers/env.js';
import { waitFor, within } from './helpers/wait.js';
import { makeJpeg } from './helpers/images.js';
import { countOf, scrape } from './metrics/support.js';
import { loadConfig } from '../src/config/load.js';
import { serve, type Server } from '../src/serve.js';
import { installFastLane, LaneReply, type LaneAnswer } from '../src/edge/fast-lane.js';
import type { ConnectionLimits } from '../src/config/load.js';

const R1 = '5f1a2b3c-4d5e-4f60-8a7b-9c0d1e2f3a4b';
const GROUP = '6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d';
const UNKNOWN = 'ddddeeee-ffff-4000-8111-222233334444';
const KEEPALIVE_MS = 600;
const LATE_MS = 2000;

interface Answer {
  head: string;
  status: number;
  headers: [string, string][];
  body: Buffer;
}

/** A head without what differs per request or per second. */
function stable(a: Answer): string {
  return a.head
    .split('\r\n')
    .filter((l) => !/^(date|x-request-id):/i.test(l))
    .join('\n');
}

function tcp(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** Writes each of `parts` (a pause between them) and reads until `count` answers are in, or the server closes. */
async function exchange(port: number, parts: (string | Buffer)[], count: number, opts: { headOnly?: boolean[]; stepwise?: boolean } = {}): Promise<{ answers: Answer[]; closed: boolean }> {
  const socket = await tcp(port);
  const chunks: Buffer[] = [];
  let closed = false;
  const done = new Promise<void>((resolve) => {
    const check = (): void => {
      const raw = Buffer.concat(chunks);
      if (closed || countComplete(raw, opts.headOnly) >= count) resolve();
    };
    socket.on('data', (c: Buffer) => {
      chunks.push(c);
      check();
    });
    socket.on('close', () => {
      closed = true;
      check();
    });
    socket.on('error', () => {});
  });
  for (const [i, part] of parts.entries()) {
    // Stepwise: each part once the one before is answered; else a moment apart.
    if (i > 0 && opts.stepwise === true) while (countComplete(Buffer.concat(chunks), opts.headOnly) < i && !closed) await new Promise((r) => setTimeout(r, 5));
    else if (i > 0) await new Promise((r) => setTimeout(r, 30));
    socket.write(part);
  }
  await within(done, 10_000, `fewer than ${count} answers`).catch((err: Error) => {
    throw new Error(`${err.message}: ${Buffer.concat(chunks).toString('latin1').slice(0, 300)}`);
  });
  const raw = Buffer.concat(chunks);
  socket.destroy();
  return { answers: splitAnswers(raw, opts.headOnly), closed };
}

/** Answers whose heads and bodies are all in `raw` (HEAD answers, by position, have no body). */
function countComplete(raw: Buffer, headOnly: boolean[] = []): number {
  try {
    return splitAnswers(raw, headOnly).length;
  } catch {
    return 0;
  }
}

function splitAnswers(raw: Buffer, headOnly: boolean[] = []): Answer[] {
  const out: Answer[] = [];
  let at = 0;
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end === -1) break;
    const head = raw.subarray(at, end).toString('latin1');
    const [statusLine = '', ...lines] = head.split('\r\n');
    const headers = lines.map((l): [string, string] => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]);
    const status = Number(statusLine.split(' ')[1]);
    const length = headOnly[out.length] === true || status === 304 ? 0 : Number(headers.find(([n]) => n.toLowerCase() === 'content-length')?.[1] ?? 0);
    if (end + 4 + length > raw.length) break;
    out.push({ head, status, headers, body: raw.subarray(end + 4, end + 4 + length) });
    at = end + 4 + length;
  }
  return out;
}

const get = (target: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}\r\n`;
/** A request the lane never takes (OPTIONS): what follows it on its connection is node:http's. */
const TO_NODE = `OPTIONS /release/${UNKNOWN}/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`;

describe(`the fast lane (${DIALECT})`, () => {
  let t: TestEnv;
  let server: Server;
  let port: number;
  let thumb: string;
  let large: string;
  let original: string;
  let originalBytes: Buffer;
  let index: string;
  const front = `/release/${R1}/front`;

  before(async () => {
    t = await makeTestEnv();
    port = await freePort();
    Object.assign(t.env, {
      SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`,
      SLEEVE_BASE_URL: `http://127.0.0.1:${port}`,
      SLEEVE_KEEPALIVE_TIMEOUT_MS: String(KEEPALIVE_MS),
    });
    server = await serve(loadConfig(t.env), { only: 'coverart' });
    await cliInProcess(t.env, ['release', 'add', R1, '--release-group', GROUP, '--title', 'Lane']);
    const file = path.join(t.dir, 'cover.jpg');
    originalBytes = await makeJpeg(1400, 1000);
    await writeFile(file, originalBytes);
    const entry = await cliInProcess(t.env, ['--json', 'art', 'add', R1, file, '--approved', '--type', 'Front']);
    const dir = `/download/mbid-${R1}`;
    original = `${dir}/mbid-${R1}-${entry.id as string}.jpg`;
    thumb = `${dir}/mbid-${R1}-${entry.id as string}_thumb250.jpg`;
    large = `${dir}/mbid-${R1}-${entry.id as string}_thumb1200.jpg`;
    index = `${dir}/index.json`;
    await server.refreshCaches();
  });

  after(async () => {
    await server?.close();
    await t?.cleanup();
  });

  it('answers files, cached answers, 304s, ranges, HEADs and 404s as node:http does, and counts them', async () => {
    const requests = [
      get(thumb),
      get(thumb, 'Range: bytes=0-99\r\n'),
      `HEAD ${index} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      // Not a file of the layout: the lane's own 404.
      get(`/download/mbid-${R1}/nothing.jpg`),
      get(front),
      get(front),
      get(original),
    ];
    const headOnly = requests.map((r) => r.startsWith('HEAD '));
    // Warm the caches (the file cache keeps a file from its first use; the response cache fills on a miss).
    await exchange(port, [TO_NODE, ...requests], requests.length + 1, { headOnly: [false, ...headOnly] });
    const etag = (await exchange(port, [get(thumb)], 1)).answers[0]?.headers.find(([n]) => n === 'etag')?.[1];
    assert.ok(etag !== undefined);
    requests.push(get(thumb, `If-None-Match: ${etag}\r\n`));
    headOnly.push(false);

    const before = await scrape(server.metricsAddress);
    const lane = await exchange(port, [requests.join('')], requests.length, { headOnly });
    const after = await scrape(server.metricsAddress);
    const node = await exchange(port, [TO_NODE + requests.join('')], requests.length + 1, { headOnly: [false, ...headOnly] });
    const viaNode = node.answers.slice(1);
    assert.equal(lane.answers.length, requests.length);
    assert.deepEqual(
      lane.answers.map((a) => a.status),
      [200, 206, 200, 404, 307, 307, 200, 304],
    );
    for (let i = 0; i < requests.length; i++) {
      const [a, b] = [lane.answers[i] as Answer, viaNode[i] as Answer];
      assert.equal(stable(a), stable(b), `the same head for ${JSON.stringify(requests[i]?.split('\r\n')[0])}`);
      assert.ok(a.body.equals(b.body), `the same body for ${JSON.stringify(requests[i]?.split('\r\n')[0])}`);
      assert.match(a.head, /\r\nDate: [A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT\r\n/);
      assert.match(a.head, /\r\nx-request-id: [\w-]+\r\n/);
    }
    assert.ok((lane.answers[6] as Answer).body.equals(originalBytes), 'the original, whole');
    // Every one of them answered in the lane, and counted like any other request.
    assert.equal(countOf(after, 'sleeve_http_fast_lane_total') - countOf(before, 'sleeve_http_fast_lane_total'), requests.length);
    const moved = (labels: Record<string, string>): number => countOf(after, 'sleeve_http_requests_total', labels) - countOf(before, 'sleeve_http_requests_total', labels);
    assert.equal(moved({ listener: 'coverart', route: '/release/:mbid/:image', method: 'GET', status: '307' }), 2);
  });

  it('gives node:http the rest of a connection at the first request it does not take, in order and without losing a byte', async () => {
    const before = await scrape(server.metricsAddress);
    const { answers } = await exchange(
      port,
      [
        get(thumb) + TO_NODE + get(thumb) + `GET ${thumb} HTTP/1.1\r\nHo`,
        // The rest of a head cut in two, then a request with a body the lane would not frame.
        `st: 127.0.0.1\r\n\r\n` + `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nGET /` + get(front),
      ],
      6,
    );
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200, 307],
    );
    const after = await scrape(server.metricsAddress);
    // Only the first was the lane's: from the OPTIONS on, node:http read the connection.
    assert.equal(countOf(after, 'sleeve_http_fast_lane_total') - countOf(before, 'sleeve_http_fast_lane_total'), 1);
  });

  it("leaves node:http's answers to malformed or unusual heads unchanged", async () => {
    const odd = [
      `GET ${thumb} HTTP/1.1\nHost: 127.0.0.1\n\n`,
      `GET ${thumb} HTTP/1.1\r\nHost : 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Folded: a\r\n b\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: other\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nhost: other\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHOST: 127.0.0.1\r\nHost: other\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nX-No-Colon\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\n: x\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost:\t 127.0.0.1 \t\r\nX-Empty:\r\nX-Blank: \t \r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nhost: 127.0.0.1\r\nIF-NONE-MATCH: "x"\r\nrange: bytes=0-9\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nAccept: */*\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`,
      `GET ${thumb} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nProxy-Connection: close\r\n\r\n${get(thumb)}`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\n__proto__: x\r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(9000)}\r\n\r\n`,
      `GET http://127.0.0.1${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `BREW ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `get ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET  ${thumb} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb}  HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.1 \r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb} HTTP/1.10\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb}\tx HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET ${thumb}\x7f HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `GET HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
      `HEAD ${thumb} http/1.1\r\nHost: 127.0.0.1\r\n\r\n`,
    ];
    for (const request of odd) {
      const viaLane = await exchange(port, [request], 1);
      const viaNode = await exchange(port, [TO_NODE, request], 2, { stepwise: true });
      const [a, b] = [viaLane.answers[0], viaNode.answers[1]];
      const what = JSON.stringify(request.slice(0, 80));
      assert.ok(a !== undefined && b !== undefined, `answered both ways: ${what}: ${viaLane.answers.length} / ${viaNode.answers.length} answers, ${JSON.stringify(viaNode.answers.map((x) => x.head.split('\r\n')[0]))}`);
      assert.equal(stable(a), stable(b), what);
      assert.ok(a.body.equals(b.body), what);
      assert.equal(viaLane.closed, viaNode.closed, `closed or not alike: ${what}`);
    }
  });

  it('takes heads whose header names are in any case and whose values are blank or padded with blanks', async () => {
    const heads = [
      `GET ${thumb} HTTP/1.1\r\nHost:\t 127.0.0.1 \t\r\nX-Empty:\r\nX-Blank: \t \r\n\r\n`,
      `GET ${thumb} HTTP/1.1\r\nhost: 127.0.0.1\r\nUSER-AGENT: t\r\nAccept-Encoding: identity\r\nx-request-id: abc\r\n\r\n`,
    ];
    for (const head of heads) {
      const before = await scrape(server.metricsAddress);
      const { answers } = await exchange(port, [head], 1);
      const after = await scrape(server.metricsAddress);
      assert.equal(answers[0]?.status, 200, head);
      assert.equal(countOf(after, 'sleeve_http_fast_lane_total') - countOf(before, 'sleeve_http_fast_lane_total'), 1, `answered by the lane: ${JSON.stringify(head)}`);
    }
  });

  it('stops reading a client that does not read, and answers everything once it does', async () => {
    const socket = await tcp(port);
    const n = 400;
    const before = countOf(await scrape(server.metricsAddress), 'sleeve_http_fast_lane_total');
    // ~1.2 MB of answers (and the 1.2 MB original at the end) to a client reading nothing yet.
    socket.write(get(thumb).repeat(n) + get(original));
    // Until the lane has answered into a read of them (it answers a read's requests at once, up to where the client stops it).
    await waitFor(async () => countOf(await scrape(server.metricsAddress), 'sleeve_http_fast_lane_total') > before, { what: 'the lane to answer' });
    const chunks: Buffer[] = [];
    const all = new Promise<Answer[]>((resolve) => {
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        const got = splitAnswers(Buffer.concat(chunks));
        if (got.length === n + 1) resolve(got);
      });
    });
    const answers = await all;
    socket.destroy();
    assert.ok(answers.slice(0, n).every((a) => a.status === 200 && a.body.length === (answers[0] as Answer).body.length));
    assert.ok((answers[n] as Answer).body.equals(originalBytes));
  });

  it("keeps what a client that does not read has sent its own while other connections are read", async () => {
    const socket = await tcp(port);
    const n = 40;
    const one = (await exchange(port, [get(large)], 1)).answers[0] as Answer;
    const before = countOf(await scrape(server.metricsAddress), 'sleeve_http_fast_lane_total');
    // More answers than the socket takes at once: the lane stops with most requests unanswered.
    socket.write(get(large).repeat(n) + get(thumb));
    await waitFor(async () => countOf(await scrape(server.metricsAddress), 'sleeve_http_fast_lane_total') > before, { what: 'the lane to answer' });
    // Meanwhile other connections' requests are read, into the memory the lane reads every
    // plain connection into: what the first left unanswered must still be its own requests.
    const other = await exchange(port, [get(index, `X-Pad: ${'b'.repeat(500)}\r\n`).repeat(100) + get(`/download/mbid-${UNKNOWN}/index.json`)], 101);
    assert.deepEqual(
      other.answers.map((a) => a.status),
      [...Array<number>(100).fill(200), 404],
    );
    const chunks: Buffer[] = [];
    const answers = await new Promise<Answer[]>((resolve, reject) => {
      const late = setTimeout(() => reject(new Error(`${splitAnswers(Buffer.concat(chunks)).length} of ${n + 1} answers in 10 s`)), 10_000);
      socket.on('data', (c: Buffer) => {
        chunks.push(c);
        const got = splitAnswers(Buffer.concat(chunks));
        if (got.length < n + 1) return;
        clearTimeout(late);
        resolve(got);
      });
    });
    socket.destroy();
    assert.ok(one.body.length > 16 * 1024);
    assert.ok(answers.slice(0, n).every((a) => a.status === 200 && a.body.equals(one.body)));
    assert.equal((answers[n] as Answer).status, 200);
    assert.ok((answers[n] as Answer).body.length < one.body.length);
  });

  it('lives through clients that reset with answers unread, and keeps serving', async () => {
    for (let i = 0; i < 20; i++) {
      const socket = await tcp(port);
      socket.on('error', () => {});
      socket.write(get(original).repeat(3));
      await new Promise((r) => setTimeout(r, 5));
      socket.resetAndDestroy();
    }
    const { answers } = await exchange(port, [get(thumb)], 1);
    assert.equal(answers[0]?.status, 200);
  });

  for (const [what, request] of [
    ['after its answers', () => get(thumb).repeat(2)],
    ['having asked nothing', () => ''],
  ] as const) {
    it(`ends a connection whose client has finished sending (FIN) ${what}, as node:http does`, async () => {
      const socket = await tcp(port);
      const start = performance.now();
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - start)));
      socket.end(request());
      const ms = await closed;
      assert.equal(splitAnswers(Buffer.concat(chunks)).length, request() === '' ? 0 : 2);
      // Long before the keep-alive (600 ms) or header (30 s) timeout.
      assert.ok(ms < KEEPALIVE_MS / 2, `ended after ${ms.toFixed(0)} ms`);
    });
  }

  it('closes a connection left idle after its answer at the keep-alive timeout', async () => {
    const socket = await tcp(port);
    const start = performance.now();
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    const closed = new Promise<number>((resolve) => socket.on('close', () => resolve(performance.now() - start)));
    socket.write(get(thumb));
    const ms = await closed;
    assert.match(data, /^HTTP\/1\.1 200 /);
    // node:http keeps an idle connection 1 s past the Keep-Alive it announces; the lane too (the
    // timer it sets is checked below, "gives a client whose answers wait unread ...": no lower
    // bound on the wall clock here).
    assert.ok(ms < KEEPALIVE_MS + 1000 + LATE_MS, `closed after ${ms.toFixed(0)} ms`);
  });

  it('closes its idle connections when the server closes, at once', async () => {
    const t2 = await makeTestEnv();
    const port2 = await freePort();
    Object.assign(t2.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port2}`, SLEEVE_BASE_URL: `http://127.0.0.1:${port2}` });
    const s2 = await serve(loadConfig(t2.env), { only: 'coverart' });
    try {
      const socket = await tcp(port2);
      const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
      socket.on('error', () => {});
      socket.write(get('/download/nothing.jpg'));
      await new Promise((r) => socket.once('data', r));
      const start = performance.now();
      await s2.close();
      await closed;
      // The keep-alive timeout is 65 s here: the close did not wait for it.
      assert.ok(performance.now() - start < 5000);
    } finally {
      await t2.cleanup();
    }
  });

  for (const [what, extra] of [
    ['SLEEVE_FAST_LANE=off', { SLEEVE_FAST_LANE: 'off' }],
    ['a rate limit', { SLEEVE_RATE_LIMIT: '1000/10s' }],
  ] as const) {
    it(`stands aside with ${what}: node:http reads every request`, async () => {
      const t2 = await makeTestEnv();
      const port2 = await freePort();
      Object.assign(t2.env, { SLEEVE_COVERART_LISTEN: `127.0.0.1:${port2}`, SLEEVE_BASE_URL: `http://127.0.0.1:${port2}`, ...extra });
      const s2 = await serve(loadConfig(t2.env), { only: 'coverart' });
      try {
        const { answers } = await exchange(port2, [get('/download/nothing.jpg').repeat(3)], 3);
        assert.deepEqual(
          answers.map((a) => a.status),
          [404, 404, 404],
        );
        const m = await scrape(s2.metricsAddress);
        assert.equal(countOf(m, 'sleeve_http_fast_lane_total'), 0);
        assert.equal(countOf(m, 'sleeve_http_requests_total', { listener: 'coverart', route: '/download/*', method: 'GET', status: '404' }), 3);
      } finally {
        await s2.close();
        await t2.cleanup();
      }
    });
  }
});

describe("the lane's reads", () => {
  const LIMITS: ConnectionLimits = { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000, maxConnections: 10 };

  /** What each connection receives, as text, until it holds `text`. */
  async function until(client: Socket, received: { text: string }, text: string): Promise<void> {
    await pollUntil(async () => received.text, (t) => t.includes(text), 3000, 5);
    assert.ok(received.text.includes(text), `${client.remotePort}: ${received.text}`);
  }

  function receiving(client: Socket): { text: string } {
    const received = { text: '' };
    client.on('data', (c: Buffer) => (received.text += c.toString('latin1')));
    return received;
  }

  it("go into one shared buffer on this Node (no 'data' events); after the hand-off node:http gets each read as a copy", async () => {
    const dataListeners: number[] = [];
    /** The chunks node:http's socket gave after the hand-off, each with its text when it came. */
    const handedOn: [Buffer, string][] = [];
    let held = false;
    const server = createHttpServer((req, res) => {
      held = true;
      req.socket.on('data', (c: Buffer) => handedOn.push([c, c.toString('latin1')]));
      const body: Buffer[] = [];
      req.on('data', (c: Buffer) => body.push(c));
      req.on('end', () => res.end(`node got ${Buffer.concat(body).toString()}`));
    });
    installFastLane(server, {
      connections: LIMITS,
      answer: (req, reply) => {
        // Read by the lane's onread callback into its buffer, the socket has no 'data' listener.
        dataListeners.push(req.socket.listenerCount('data'));
        reply.writeHead(200, ['content-length', '4']);
        reply.end('lane');
        return true;
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    const a = await tcp(port);
    const b = await tcp(port);
    try {
      const fromA = receiving(a);
      const fromB = receiving(b);
      a.write(get('/first'));
      await until(a, fromA, 'lane');
      // Not the lane's (it reads no POST here): the connection is node:http's from this request on.
      a.write('POST /held HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n');
      await pollUntil(async () => held, (h) => h, 3000, 5);
      a.write('ABCDEFGHIJ');
      await until(a, fromA, 'node got ABCDEFGHIJ');
      // Another connection's read, into the lane's buffer from its start: what node:http was given must not change with it.
      b.write(get(`/${'z'.repeat(40)}`));
      await until(b, fromB, 'lane');
      assert.deepEqual(dataListeners, [0, 0], "this Node's net.Socket keeps `onread` where the lane looks for it");
      assert.ok(handedOn.length >= 1);
      for (const [chunk, text] of handedOn) assert.equal(chunk.toString('latin1'), text, 'a read handed to node:http is its own copy');
      assert.equal(handedOn.map(([, text]) => text).join(''), 'ABCDEFGHIJ');
    } finally {
      a.destroy();
      b.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('leave a connection handed on with bytes already read (put back in its stream) to its stream, where the lane reads them', async () => {
    const urls: string[] = [];
    const dataListeners: number[] = [];
    const server = createHttpServer((_req, res) => res.end('node'));
    installFastLane(server, {
      connections: LIMITS,
      answer: (req, reply) => {
        urls.push(req.url);
        dataListeners.push(req.socket.listenerCount('data'));
        reply.writeHead(200, ['content-length', '4']);
        reply.end('lane');
        return true;
      },
    });
    // In front of the lane, what reads the first bytes itself and puts them back before handing the connection on, as the auth listener's protocol sniffer does (src/auth/app.ts).
    const [lane] = server.listeners('connection') as ((socket: Socket) => void)[];
    server.removeAllListeners('connection');
    let handedOn = false;
    server.on('connection', (socket: Socket) => {
      socket.once('data', (first: Buffer) => {
        socket.pause();
        socket.unshift(first);
        lane?.call(server, socket);
        handedOn = true;
        process.nextTick(() => socket.resume());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = await tcp((server.address() as { port: number }).port);
    try {
      const received = receiving(client);
      client.write(get('/put-back'));
      await until(client, received, 'lane');
      assert.equal(handedOn, true);
      assert.deepEqual(urls, ['/put-back']);
      assert.deepEqual(dataListeners, [1], 'read from its stream, not the shared buffer');
      // Later reads of that connection go on the same way.
      client.write(get('/later'));
      await pollUntil(async () => urls.length, (n) => n === 2, 3000, 5);
      assert.deepEqual(urls, ['/put-back', '/later']);
    } finally {
      client.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });
});

describe('LaneReply', () => {
  /** A connection whose writes are taken by the system `ms` later, as a slow client's are. */
  function slowSocket(ms: number): Socket {
    // Destroyed, it drops the writes it holds (their timers would keep the test file alive).
    const held = new Set<NodeJS.Timeout>();
    const stream = new Duplex({
      read() {},
      write(_chunk, _encoding, cb) {
        const timer = setTimeout(() => {
          held.delete(timer);
          cb();
        }, ms);
        held.add(timer);
      },
      destroy(err, cb) {
        for (const timer of held) clearTimeout(timer);
        cb(err);
      },
    });
    return stream as unknown as Socket;
  }

  it('calls back once each answer has left memory, under the high-water mark too, and leaves no listeners', async () => {
    const socket = slowSocket(5);
    const done: number[] = [];
    for (let i = 0; i < 20; i++) {
      const reply = new LaneReply(socket, 'GET', 'Connection: keep-alive\r\n\r\n');
      reply.writeHead(200, ['content-length', '10000']);
      reply.end(Buffer.alloc(10_000));
      assert.ok(reply.writableLength > 0, 'the answer waits in memory');
      reply.once('close', () => done.push(i));
    }
    await pollUntil(
      async () => done.length,
      (n) => n === 20,
      5000,
      10,
    );
    assert.deepEqual(
      done,
      Array.from({ length: 20 }, (_, i) => i),
    );
    assert.equal(socket.listenerCount('close'), 0);
    assert.equal(socket.listenerCount('drain'), 0);
  });

  it('writes a short answer as one chunk, and never into memory a socket still holds', async () => {
    // Each write is held for a while, as a slow client's: an answer made later in a reused buffer would change the earlier ones.
    const chunks: Buffer[] = [];
    const stream = new Duplex({
      read() {},
      write(chunk: Buffer, _encoding, cb) {
        chunks.push(chunk);
        setTimeout(cb, 5);
      },
    });
    const socket = stream as unknown as Socket;
    const expected: Buffer[] = [];
    for (let i = 0; i < 20; i++) {
      const reply = new LaneReply(socket, 'GET', 'Connection: keep-alive\r\n\r\n');
      const body = Buffer.alloc(9000 + i, i);
      reply.writeHead(200, ['content-length', String(body.length), 'x-n', String(i)]);
      const head = Buffer.from((reply as unknown as { head: string }).head, 'latin1');
      reply.end(i % 2 === 0 ? body : body.toString('latin1'));
      expected.push(Buffer.concat([head, i % 2 === 0 ? body : Buffer.from(body.toString('latin1'), 'utf8')]));
    }
    await waitFor(() => chunks.length >= 20, { what: '20 chunks' });
    assert.equal(chunks.length, 20, 'one chunk per answer');
    for (let i = 0; i < 20; i++) assert.ok((chunks[i] as Buffer).equals(expected[i] as Buffer), `answer ${i} as written`);
  });

  /** A connected pair of real TCP sockets: the accepted one, and the client. */
  async function socketPair(): Promise<{ socket: Socket; client: Socket }> {
    const listener = createTcpServer();
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const accepted = new Promise<Socket>((resolve) => listener.once('connection', resolve));
    const client = await tcp((listener.address() as { port: number }).port);
    const socket = await accepted;
    // Stops accepting; its callback would wait for this connection to close.
    listener.close();
    after(() => {
      client.destroy();
      socket.destroy();
    });
    return { socket, client };
  }

  /** Writes answers of `bodies` through LaneReplys on `socket`; returns the bytes they make, in order. */
  function answer(socket: Socket, bodies: Buffer[]): Buffer {
    const out: Buffer[] = [];
    for (const [i, body] of bodies.entries()) {
      const reply = new LaneReply(socket, 'GET', 'Connection: keep-alive\r\n\r\n');
      reply.writeHead(200, ['content-length', String(body.length), 'x-n', String(i)]);
      out.push(Buffer.from((reply as unknown as { head: string }).head, 'latin1'), body);
      reply.end(body);
    }
    return Buffer.concat(out);
  }

  async function receive(client: Socket, length: number): Promise<Buffer> {
    const received: Buffer[] = [];
    let got = 0;
    client.on('data', (c: Buffer) => {
      received.push(c);
      got += c.length;
    });
    client.resume();
    await pollUntil(
      async () => got,
      (n) => n >= length,
      10_000,
      5,
    );
    return Buffer.concat(received);
  }

  it('writes a short answer straight to the connection when nothing of it waits in memory', async () => {
    const { socket, client } = await socketPair();
    const expected = answer(socket, [Buffer.alloc(9000, 1), Buffer.alloc(12_000, 2)]);
    assert.ok((await receive(client, expected.length)).equals(expected));
    // Not through the socket's stream, which counts what passes through it.
    assert.equal(socket.writableLength, 0);
    assert.equal(socket.bytesWritten, 0);
  });

  it('writes what the connection cannot take at once after what it took, in order, and the answers after that too', async () => {
    const { socket, client } = await socketPair();
    client.pause();
    // ~20 MB to a client reading nothing yet: more than the system takes.
    const bodies = Array.from({ length: 1600 }, (_, i) => Buffer.alloc(9000 + (i % 7) * 1000, i % 251));
    const expected = answer(socket, bodies);
    // Written at the end of the turn: part went straight to the system, the rest waits in the stream, behind it.
    await new Promise(setImmediate);
    assert.ok(socket.bytesWritten > 0 && socket.writableLength > 0, `${socket.bytesWritten} bytes through the stream`);
    assert.ok(socket.bytesWritten < expected.length);
    const more = answer(socket, [Buffer.alloc(5000, 7)]);
    // Another connection's answers fill the batch again: what waits for the first is its own copy.
    const other = await socketPair();
    const otherExpected = answer(other.socket, Array.from({ length: 80 }, (_, i) => Buffer.alloc(12_000, 200 - i)));
    await new Promise(setImmediate);
    assert.ok((await receive(other.client, otherExpected.length)).equals(otherExpected));
    const received = await receive(client, expected.length + more.length);
    assert.equal(received.length, expected.length + more.length);
    assert.ok(received.equals(Buffer.concat([expected, more])));
  });

  /** What the system holds for `client` to read now (its descriptor read on this thread; nothing: an empty buffer). */
  function readNow(client: Socket): Buffer {
    const fd = (client as unknown as { _handle: { fd: number } })._handle.fd;
    const buf = Buffer.alloc(1 << 20);
    try {
      return buf.subarray(0, readSync(fd, buf, 0, buf.length, null));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EAGAIN') return Buffer.alloc(0);
      throw err;
    }
  }

  it("writes a turn's answers at its end, each connection's in order, and none before", async () => {
    const a = await socketPair();
    const b = await socketPair();
    a.client.pause();
    b.client.pause();
    const expectedA = [answer(a.socket, [Buffer.alloc(3000, 1)])];
    const expectedB = answer(b.socket, [Buffer.alloc(4000, 2), Buffer.from('second')]);
    expectedA.push(answer(a.socket, [Buffer.alloc(100, 3)]));
    // Nothing has reached either client within the turn.
    assert.equal(readNow(a.client).length, 0);
    assert.equal(readNow(b.client).length, 0);
    await new Promise(setImmediate);
    // All of it once the turn is over, without a further turn, in order.
    assert.ok(readNow(a.client).equals(Buffer.concat(expectedA)));
    assert.ok(readNow(b.client).equals(expectedB));
    assert.equal(a.socket.bytesWritten + b.socket.bytesWritten, 0, 'straight to the descriptors');
  });

  it('drops an answer whose connection closed before the end of the turn, even where its descriptor is already reused', async () => {
    const gone = await socketPair();
    const kept = await socketPair();
    kept.client.pause();
    const fd = (gone.socket as unknown as { _handle: { fd: number } })._handle.fd;
    answer(gone.socket, [Buffer.alloc(2000, 4)]);
    const expected = answer(kept.socket, [Buffer.alloc(2000, 5)]);
    gone.socket.destroy();
    // The system gives the lowest free descriptor: files opened until one gets the closed connection's.
    const file = path.join(tmpdir(), `sleeve-lane-${process.pid}-${Date.now()}`);
    const opened: number[] = [];
    try {
      while (opened.length < 256 && opened.at(-1) !== fd) opened.push(openSync(file, 'w+'));
      assert.equal(opened.at(-1), fd, 'the descriptor is reused within the turn');
      await new Promise(setImmediate);
      assert.equal(readFileSync(file).length, 0, 'nothing written to the file now behind that descriptor');
      assert.ok(readNow(kept.client).equals(expected), "the other connection's answer is whole");
    } finally {
      for (const d of opened) closeSync(d);
      rmSync(file, { force: true });
    }
  });

  it('writes the answers of the turn before it closes connections that look idle', async () => {
    const server = createHttpServer();
    let served = 0;
    installFastLane(server, {
      connections: { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000, maxConnections: 10 },
      answer: (_req, reply) => {
        served++;
        reply.writeHead(200, ['content-length', '5', 'x-n', String(served)]);
        reply.end('hello');
        // The second answer's connection has been answered before: idle, but for the batch.
        if (served === 2) server.closeIdleConnections();
        return true;
      },
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    after(() => server.close());
    const client = await tcp((server.address() as { port: number }).port);
    const chunks: Buffer[] = [];
    client.on('data', (c: Buffer) => chunks.push(c));
    const closed = new Promise<void>((resolve) => client.on('close', () => resolve()));
    client.write(get('/a'));
    await pollUntil(
      async () => chunks.length,
      (n) => n > 0,
      5000,
      5,
    );
    client.write(get('/b'));
    await closed;
    // Both answers whole, then the close.
    assert.deepEqual(
      splitAnswers(Buffer.concat(chunks)).map((x) => [x.status, x.body.toString()]),
      [
        [200, 'hello'],
        [200, 'hello'],
      ],
    );
  });

  /** A node:http server (its own answers: `node:{url}`) with the lane in front, answering through `answer`; the lane's sockets as accepted. */
  async function laneServer(answer: LaneAnswer, limits: Partial<ConnectionLimits> = {}): Promise<{ port: number; sockets: Socket[] }> {
    const server = createHttpServer((req, res) => {
      const body = `node:${req.url as string}`;
      res.writeHead(200, { 'content-length': String(body.length) });
      res.end(body);
    });
    installFastLane(server, { answer, connections: { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 10_000, maxConnections: 50, ...limits } });
    const sockets: Socket[] = [];
    server.on('connection', (s: Socket) => sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    after(() => {
      server.closeAllConnections();
      server.close();
    });
    return { port: (server.address() as { port: number }).port, sockets };
  }

  /** A lane answer of `body` to every GET. */
  const answerWith =
    (body: Buffer | string): LaneAnswer =>
    (_req, reply) => {
      reply.writeHead(200, ['content-length', String(Buffer.byteLength(body))]);
      reply.end(body);
      return true;
    };

  /** Everything a connection to `port` receives for `requests` until it closes or `count` answers are whole. */
  async function answersTo(port: number, requests: string, count: number): Promise<{ bodies: string[]; closed: boolean }> {
    const client = await tcp(port);
    const chunks: Buffer[] = [];
    let closed = false;
    client.on('data', (c: Buffer) => chunks.push(c));
    client.on('error', () => {});
    client.on('close', () => (closed = true));
    client.write(requests);
    await pollUntil(
      async () => closed || splitAnswers(Buffer.concat(chunks)).length >= count,
      (done) => done,
      5000,
      5,
    );
    // A moment for a close that comes right after.
    await new Promise((r) => setTimeout(r, 50));
    client.destroy();
    return { bodies: splitAnswers(Buffer.concat(chunks)).map((a) => a.body.toString()), closed };
  }

  it("hands a connection to node:http only after the lane's answers of the turn", async () => {
    const { port } = await laneServer(answerWith('lane'));
    const { bodies } = await answersTo(port, get('/a') + `OPTIONS /b HTTP/1.1\r\nHost: x\r\n\r\n`, 2);
    assert.deepEqual(bodies, ['lane', 'node:/b']);
  });

  it("writes the turn's answers before a connection is destroyed: by an answer, or after a failed one", async () => {
    const destroying = await laneServer((req, reply) => {
      if (req.url === '/b') {
        reply.destroy();
        return true;
      }
      return answerWith('first')(req, reply);
    });
    assert.deepEqual(await answersTo(destroying.port, get('/a') + get('/b'), 2), { bodies: ['first'], closed: true });
    const failing = await laneServer((req, reply) => (req.url === '/b' ? Promise.reject(new Error('no answer')) : answerWith('first')(req, reply)));
    assert.deepEqual(await answersTo(failing.port, get('/a') + get('/b'), 2), { bodies: ['first'], closed: true });
  });

  it('stops a client that does not read its pipelined answers at its stream, as before the batch', async () => {
    const { port, sockets } = await laneServer(answerWith(Buffer.alloc(16_000, 9)));
    const client = await tcp(port);
    client.pause();
    // Until the system holds all it will for this client and answers wait in the stream.
    for (let i = 0; i < 400 && !(sockets[0]?.writableLength ?? 0); i++) {
      client.write(get('/f').repeat(16));
      await new Promise((r) => setTimeout(r, 10));
    }
    const socket = sockets[0] as Socket;
    assert.ok(socket.writableLength > 0, 'the system is full');
    // One read of 64 more: not all of them answered into memory (~1 MB), only up to the high-water mark or so.
    const written = client.bytesWritten + get('/f').length * 64;
    client.write(get('/f').repeat(64));
    // Until the lane has read them (and answered what it will, in that read) or stopped reading.
    await waitFor(() => socket.bytesRead >= written || socket.isPaused(), { what: 'the lane to read or stop' });
    assert.ok(socket.writableLength < 4 * socket.writableHighWaterMark, `${socket.writableLength} bytes held for a client that does not read`);
    client.destroy();
  });

  it('gives a client whose answers wait unread the request timeout, not the keep-alive one', async () => {
    // Keep-alive 0.3 s (idle connections go at 1.3 s), request timeout 10 s.
    const { port, sockets } = await laneServer(answerWith(Buffer.alloc(16_000, 3)), { keepAliveTimeoutMs: 300 });
    // A connection idle after its answer: the keep-alive timeout and the second node:http adds to it.
    const idle = await answersTo(port, get('/f'), 1);
    assert.equal(idle.bodies.length, 1);
    assert.equal(sockets[0]?.timeout, 1300, 'an idle connection: keep-alive + 1 s');
    sockets.splice(0);
    const client = await tcp(port);
    client.pause();
    let sent = 0;
    for (let i = 0; i < 400 && !(sockets[0]?.writableLength ?? 0); i++) {
      client.write(get('/f').repeat(16));
      sent += 16;
      await new Promise((r) => setTimeout(r, 10));
    }
    // The connection's timer is the request timeout's (10 s), not the keep-alive's (1.3 s).
    assert.equal(sockets[0]?.timeout, 10_000, 'the request timeout, not the keep-alive one');
    assert.equal(sockets[0]?.destroyed, false);
    const chunks: Buffer[] = [];
    client.on('data', (c: Buffer) => chunks.push(c));
    client.resume();
    const { value: got } = await pollUntil(
      async () => splitAnswers(Buffer.concat(chunks)),
      (answers) => answers.length >= sent,
      10_000,
      10,
    );
    assert.equal(got.length, sent);
    assert.ok(got.every((a) => a.body.length === 16_000 && a.body.every((b) => b === 3)));
  });

  it('makes the same head from header lines as from a list', () => {
    const heads: string[] = [];
    for (const lines of [false, true]) {
      const written: Buffer[] = [];
      const stream = new Duplex({
        read() {},
        write(chunk: Buffer, _encoding, cb) {
          written.push(chunk);
          cb();
        },
      });
      const reply = new LaneReply(stream as unknown as Socket, 'GET', 'Connection: keep-alive\r\n\r\n');
      if (lines) reply.writeHeadLines(200, 'etag: "a"\r\ncontent-length: 2\r\n');
      else reply.writeHead(200, ['etag', '"a"', 'content-length', '2']);
      reply.end('ok');
      // The Date line aside (the two may fall in different seconds).
      heads.push(Buffer.concat(written).toString('latin1').replace(/\r\nDate: [^\r]+\r\n/, '\r\nDate: -\r\n'));
    }
    assert.match(heads[0] as string, /^HTTP\/1\.1 200 OK\r\netag: "a"\r\ncontent-length: 2\r\nDate: -\r\nConnection: keep-alive\r\n\r\nok$/);
    assert.equal(heads[1], heads[0]);
  });

  it('calls back when the connection closes first', async () => {
    const socket = slowSocket(60_000);
    const reply = new LaneReply(socket, 'GET', 'Connection: keep-alive\r\n\r\n');
    reply.writeHead(200, ['content-length', '5']);
    reply.end('hello');
    let called = 0;
    reply.once('close', () => called++);
    socket.destroy();
    await pollUntil(
      async () => called,
      (n) => n > 0,
      2000,
      10,
    );
    await new Promise((r) => setTimeout(r, 20));
    assert.equal(called, 1, 'once, not twice');
  });
});

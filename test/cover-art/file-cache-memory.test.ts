/*
 * The file cache reads files into the memory of entries it pushed out (FileCache.alloc): an
 * answer still being written from an entry's memory must get the entry's bytes to the end,
 * however slowly its client reads, even when the entry is pushed out and another file is
 * read meanwhile.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { cliInProcess, DIALECT, makeTestEnv, startServer, type RunningServer, type TestEnv } from '../helpers/env.js';
import { makeJpeg } from '../helpers/images.js';
import { newMbid } from './cli-support.js';

/** Each file's size (all the same, so any file's read may land in any evicted entry's memory). */
const SIZE = 2 * 1024 * 1024;
/** Room for seven files (each costs its size and a little more); the largest file allowed is one (an eighth). */
const BUDGET = 8 * SIZE;
const FILES = 9;
/** Answers of a kept file sent ahead of the one under test on the slow connection: more than loopback's socket buffers take from a client that does not read. */
const AHEAD = 6;

/**
 * A client that sends `targets` pipelined on one connection (the last with Connection: close),
 * reads the first bytes of the answers, then stops reading until `resume`: the answers after
 * what the sockets' buffers took wait in the server's memory.
 */
function slowReader(port: number, targets: string[]): { started: Promise<void>; resume: () => Promise<Buffer> } {
  const socket: Socket = connect(port, '127.0.0.1');
  const chunks: Buffer[] = [];
  let first: () => void = () => {};
  const started = new Promise<void>((resolve) => (first = resolve));
  const ended = new Promise<Buffer>((resolve, reject) => {
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks)));
  });
  socket.on('data', (c: Buffer) => {
    chunks.push(c);
    if (chunks.length === 1) {
      socket.pause();
      first();
    }
  });
  socket.write(targets.map((t, i) => `GET ${t} HTTP/1.1\r\nHost: x\r\n${i === targets.length - 1 ? 'Connection: close\r\n' : ''}\r\n`).join(''));
  return {
    started,
    resume: () => {
      socket.resume();
      return ended;
    },
  };
}

/** The bodies of pipelined 200 answers with Content-Length, in order. */
function bodies(raw: Buffer): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < raw.length; ) {
    const end = raw.indexOf('\r\n\r\n', at);
    assert.ok(end !== -1, 'a whole head');
    const head = raw.subarray(at, end).toString('latin1');
    assert.match(head, /^HTTP\/1\.1 200 /);
    const length = Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]);
    out.push(raw.subarray(end + 4, end + 4 + length));
    at = end + 4 + length;
  }
  return out;
}

describe(`the file cache's reuse of evicted memory (${DIALECT})`, () => {
  let t: TestEnv;
  let s: RunningServer;
  const R = newMbid();
  const keys: string[] = [];
  const bytes: Buffer[] = [];

  before(async () => {
    t = await makeTestEnv();
    await cliInProcess(t.env, ['release', 'add', R, '--release-group', newMbid(), '--title', 'Slow readers']);
    const input = path.join(t.dir, 'in.jpg');
    await writeFile(input, await makeJpeg(64, 64));
    for (let i = 0; i < FILES; i++) {
      const { id } = (await cliInProcess(t.env, ['--json', 'art', 'add', R, input, '--approved'])) as { id: string };
      const key = `mbid-${R}/mbid-${R}-${id}.jpg`;
      // Same size, different bytes: any file's read may land in any evicted entry's memory.
      const body = randomBytes(SIZE);
      await writeFile(path.join(t.dir, 'files', key), body);
      keys.push(key);
      bytes.push(body);
    }
    s = await startServer(t, { SLEEVE_FILE_CACHE_BYTES: String(BUDGET) });
  });

  after(async () => {
    await s?.server.close();
    await t?.cleanup();
  });

  it('sends a slow client the bytes of the file it asked for while that entry is pushed out and its memory wanted', async () => {
    const port = Number(new URL(s.base).port);
    const get = async (key: string) => Buffer.from(await (await fetch(`${s.base}/download/${key}`)).arrayBuffer());
    const [ahead, slowFile] = keys as [string, string];
    assert.ok((await get(ahead)).equals(bytes[0] as Buffer), 'the file sent ahead, kept');
    // The second file is read and kept while its answer waits behind the others, unread.
    const slow = slowReader(port, [...Array<string>(AHEAD).fill(`/download/${ahead}`), `/download/${slowFile}`]);
    await slow.started;
    // Six more: the last pushes the second file out (the first, read since, gets a second chance).
    for (let i = 2; i < 8; i++) assert.ok((await get(keys[i] as string)).equals(bytes[i] as Buffer), `file ${i}`);
    // The ninth, read twice (a full cache lets a file in on its second read), is read into memory of the cache's.
    const last = keys[8] as string;
    assert.ok((await get(last)).equals(bytes[8] as Buffer), 'the ninth file');
    assert.ok((await get(last)).equals(bytes[8] as Buffer), 'the ninth file, kept');
    const got = bodies(await slow.resume());
    assert.equal(got.length, AHEAD + 1);
    for (const [i, body] of got.entries()) assert.ok(body.equals(bytes[i === AHEAD ? 1 : 0] as Buffer), `answer ${i} on the slow connection, byte for byte`);
    // Its memory is free again once that answer is done: later files are served right too.
    for (let i = 0; i < FILES; i++) assert.ok((await get(keys[i] as string)).equals(bytes[i] as Buffer), `file ${i} again`);
  });
});

/*
 * A fake upstream archive for the pull-through and mirror tests: an HTTP server on 127.0.0.1
 * serving an archive.org-like tree (`{prefix}/mbid-{m}/mbid-{m}-{id}.jpg`, `…_thumb250.jpg`,
 * and each item's `mbid-{m}_files.xml` listing the md5 of the bytes served) from memory, with
 * faults set per path, and a count of the requests each path received.
 */
import { createHash } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

export type Fault =
  /** Headers only after `ms` (the default: never within a test's timeout). */
  | { kind: 'slow-first-byte'; ms: number }
  /** Headers and half the body at once, the rest after `ms`. */
  | { kind: 'slow-body'; ms: number }
  /** The first `times` requests answer 500, later ones the file. */
  | { kind: 'fail-then-serve'; status: number; times: number }
  /** Content-Length of the whole file, half of it sent, then the connection cut. */
  | { kind: 'truncated' }
  /** The file with another Content-Type. */
  | { kind: 'content-type'; type: string }
  /** The connection cut before any answer. */
  | { kind: 'reset' }
  /** Sent without Content-Length (chunked), as a stream whose size is only known at its end. */
  | { kind: 'chunked' }
  /** The answer held back until release() is called (to gather concurrent requests). */
  | { kind: 'held' }
  /** The file served as it is, but its item's `_files.xml` gives another md5 for it. */
  | { kind: 'wrong-md5' }
  /** A 302 to `location` (the key must have been put, as for any fault). */
  | { kind: 'redirect'; location: string };

export interface FakeUpstream {
  /** `http://127.0.0.1:PORT/download`: SLEEVE_UPSTREAM_URL. */
  url: string;
  /** Serves `bytes` at `{url}/{key}` (with `type` as Content-Type, image/jpeg by default). */
  put(key: string, bytes: Buffer, type?: string): void;
  /** Sets the fault of a key (undefined: none). */
  fault(key: string, fault: Fault | undefined): void;
  /** Requests a key received (any answer). */
  count(key: string): number;
  /** Requests received in all. */
  total(): number;
  /** Every path asked for, in order. */
  paths: string[];
  /** Answers the requests held by a `held` fault. */
  release(): void;
  /** Whether items have a `_files.xml` (true at first). */
  filesXml(on: boolean): void;
  close(): Promise<void>;
}

export async function startUpstream(): Promise<FakeUpstream> {
  const files = new Map<string, { bytes: Buffer; type: string }>();
  const faults = new Map<string, Fault>();
  const counts = new Map<string, number>();
  const paths: string[] = [];
  const sockets = new Set<Socket>();
  let held: (() => void)[] = [];
  let withFilesXml = true;
  const prefix = '/download/';

  /** archive.org's `_files.xml` of an item: each file's name, md5 and size. */
  const filesXml = (folder: string): string => {
    const entries = [...files.entries()]
      .filter(([key]) => key.startsWith(`${folder}/`))
      .map(([key, file]) => {
        const md5 = faults.get(key)?.kind === 'wrong-md5' ? '0123456789abcdef0123456789abcdef' : createHash('md5').update(file.bytes).digest('hex');
        return `  <file name="${key.slice(folder.length + 1)}" source="original">\n    <md5>${md5}</md5>\n    <size>${file.bytes.length}</size>\n  </file>\n`;
      });
    return `<?xml version="1.0" encoding="UTF-8"?>\n<files>\n${entries.join('')}</files>\n`;
  };

  const send = (res: ServerResponse, file: { bytes: Buffer; type: string }) => {
    res.writeHead(200, { 'content-type': file.type, 'content-length': String(file.bytes.length) });
    res.end(file.bytes);
  };
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const url = req.url ?? '/';
    paths.push(url);
    const key = url.startsWith(prefix) ? url.slice(prefix.length) : url;
    const n = (counts.get(key) ?? 0) + 1;
    counts.set(key, n);
    const item = /^(mbid-[0-9a-f-]{36})\/\1_files\.xml$/.exec(key);
    if (item !== null && withFilesXml) return send(res, { bytes: Buffer.from(filesXml(item[1] as string)), type: 'text/xml' });
    const file = files.get(key);
    if (file === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('not found\n');
      return;
    }
    const fault = faults.get(key);
    switch (fault?.kind) {
      case undefined:
      case 'wrong-md5':
        return send(res, file);
      case 'slow-first-byte': {
        const timer = setTimeout(() => send(res, file), fault.ms);
        res.once('close', () => clearTimeout(timer));
        return;
      }
      case 'slow-body': {
        res.writeHead(200, { 'content-type': file.type, 'content-length': String(file.bytes.length) });
        const half = Math.floor(file.bytes.length / 2);
        res.write(file.bytes.subarray(0, half));
        const timer = setTimeout(() => res.end(file.bytes.subarray(half)), fault.ms);
        res.once('close', () => clearTimeout(timer));
        return;
      }
      case 'fail-then-serve':
        if (n <= fault.times) {
          res.writeHead(fault.status, { 'content-type': 'text/plain' });
          res.end('upstream trouble\n');
          return;
        }
        return send(res, file);
      case 'truncated':
        res.writeHead(200, { 'content-type': file.type, 'content-length': String(file.bytes.length) });
        res.write(file.bytes.subarray(0, Math.floor(file.bytes.length / 2)), () => setTimeout(() => res.socket?.destroy(), 20));
        return;
      case 'content-type':
        return send(res, { bytes: file.bytes, type: fault.type });
      case 'reset':
        req.socket.resetAndDestroy();
        return;
      case 'chunked':
        res.writeHead(200, { 'content-type': file.type });
        res.write(file.bytes.subarray(0, 1000));
        res.end(file.bytes.subarray(1000));
        return;
      case 'held':
        held.push(() => send(res, file));
        return;
      case 'redirect':
        res.writeHead(302, { location: fault.location, 'content-length': '0' });
        res.end();
        return;
    }
  };
  const server = http.createServer(handler);
  server.on('connection', (s: Socket) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no address');
  return {
    url: `http://127.0.0.1:${addr.port}/download`,
    put(key, bytes, type = 'image/jpeg') {
      files.set(key, { bytes, type });
    },
    fault(key, fault) {
      if (fault === undefined) faults.delete(key);
      else faults.set(key, fault);
    },
    count: (key) => counts.get(key) ?? 0,
    total: () => paths.length,
    paths,
    filesXml(on) {
      withFilesXml = on;
    },
    release() {
      const list = held;
      held = [];
      for (const f of list) f();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

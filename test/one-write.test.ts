/*
 * OneWriteResponse (src/edge/one-write.ts), the response class of every listener: end(body)
 * must send exactly what Node's own end(body) sends, framing included.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import https from 'node:https';
import { connect } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { loadTlsMaterial } from '../src/auth/tls.js';
import { OneWriteResponse } from '../src/edge/one-write.js';

/** The raw bytes of answers to `request` from a server of this response class and handler, Date header removed. */
async function answer(responseClass: typeof http.ServerResponse, handler: (req: IncomingMessage, res: ServerResponse) => void, request: string): Promise<string> {
  const server = http.createServer({ ServerResponse: responseClass }, handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  try {
    const raw = await new Promise<Buffer>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(request));
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('close', () => resolve(Buffer.concat(chunks)));
    });
    return raw.toString('latin1').replace(/^Date: .*\r\n/gm, '');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
}

const handlers: Record<string, (req: IncomingMessage, res: ServerResponse) => void> = {
  'writeHead then end(text)': (_req, res) => {
    res.writeHead(307, { location: '/x', 'content-length': '8' });
    res.end('See: /x\n');
  },
  'writeHead then end(Buffer)': (_req, res) => {
    res.writeHead(200, ['content-type', 'application/octet-stream']);
    res.end(Buffer.from([0, 1, 2, 255]));
  },
  'end(text) alone (Node sets Content-Length)': (_req, res) => {
    res.end('hello');
  },
  'end(text, encoding, callback)': (_req, res) => {
    res.setHeader('content-type', 'text/plain');
    res.writeHead(200);
    res.end('68656c6c6f', 'hex', () => undefined);
  },
  'write then end(text), chunked': (_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('part one, ');
    res.end('part two');
  },
  'a 304 with a body given': (_req, res) => {
    res.writeHead(304, { etag: '"x"' });
    res.end('ignored');
  },
  'end() with nothing': (_req, res) => {
    res.writeHead(204);
    res.end();
  },
};

for (const [name, handler] of Object.entries(handlers)) {
  test(`OneWriteResponse sends what ServerResponse sends: ${name}`, async () => {
    // Two requests pipelined on one connection, then a HEAD: the framing must let the client find each answer.
    const request = 'GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n';
    const expected = await answer(http.ServerResponse, handler, request);
    const actual = await answer(OneWriteResponse as typeof http.ServerResponse, handler, request);
    assert.equal(actual, expected);
    assert.equal(actual.split('HTTP/1.1 ').length - 1, 3, actual);
  });
}

test('OneWriteResponse over TLS: head, body and the end go to the socket in one write', async () => {
  // A TLS socket finishes its writes a tick later, so a write of the body then end() would
  // send end()'s empty chunk as a write of its own: one more system call per answer.
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'sleeve-one-write-'));
  const writes: number[] = [];
  try {
    const tls = await loadTlsMaterial({ dataDir, hostnames: ['127.0.0.1'] });
    const server = https.createServer({ cert: tls.cert, key: tls.key, ServerResponse: OneWriteResponse as typeof http.ServerResponse }, (_req, res) => {
      const socket = res.socket as unknown as { _write: (...a: unknown[]) => void; _writev: (...a: unknown[]) => void };
      const write = socket._write.bind(socket);
      const writev = socket._writev.bind(socket);
      let n = 0;
      socket._write = (...a) => {
        n++;
        write(...a);
      };
      socket._writev = (...a) => {
        n++;
        writev(...a);
      };
      res.on('finish', () => writes.push(n));
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '11' });
      res.end('{"a":"bcd"}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    try {
      const body = await new Promise<string>((resolve, reject) => {
        https
          .get({ host: '127.0.0.1', port, path: '/', rejectUnauthorized: false, agent: false }, (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (c: string) => (text += c));
            res.on('end', () => resolve(text));
          })
          .on('error', reject);
      });
      assert.equal(body, '{"a":"bcd"}');
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
    assert.deepEqual(writes, [1]);
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

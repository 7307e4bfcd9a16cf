/**
 * The ceiling of the files benchmark: how fast can a Node process answer GET /download/{key}
 * for one file held in memory, with nothing of sleeve in the way? Reads the file $BENCH_FILE
 * once and answers every request with it (the same headers as sleeve's 200, the Date header
 * included), the way $BENCH_SERVE says:
 *
 *   object    node:http, writeHead(200, {...}) then end(bytes): what a plain handler writes
 *   list      node:http, writeHead(200, [name, value, …]) from a list prepared once, then
 *             write(bytes) + uncork + end(): head and body in one writev (src/edge/one-write.ts)
 *   raw       node:net, no HTTP parser: each request's end (CRLF CRLF) found in the bytes read,
 *             one write of a head prepared once (the Date refreshed each second) and the body
 *             per request; the least a Node server can do per answer over a socket
 *
 * Listens on 127.0.0.1, any free port, and prints its URL.
 */
import { readFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';

const file = process.env.BENCH_FILE as string;
const mode = process.env.BENCH_SERVE ?? 'list';
const contentType = process.env.BENCH_TYPE ?? 'image/jpeg';
const bytes = readFileSync(file);
const lastModified = new Date().toUTCString();
const common = [
  'access-control-allow-origin',
  '*',
  'x-content-type-options',
  'nosniff',
  'etag',
  '"ceiling-0001"',
  'last-modified',
  lastModified,
  'cache-control',
  'public, max-age=31536000, immutable',
  'accept-ranges',
  'bytes',
  'content-type',
  contentType,
  'content-length',
  String(bytes.length),
];

function listen(server: net.Server): void {
  server.listen(0, '127.0.0.1', () => {
    const addr = server.address();
    const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
    process.stdout.write(`listening http://127.0.0.1:${port}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

if (mode === 'raw') {
  let head = Buffer.alloc(0);
  const makeHead = (): void => {
    const lines = ['HTTP/1.1 200 OK'];
    for (let i = 0; i < common.length; i += 2) lines.push(`${common[i]}: ${common[i + 1]}`);
    lines.push(`date: ${new Date().toUTCString()}`, 'connection: keep-alive', '', '');
    head = Buffer.from(lines.join('\r\n'));
  };
  makeHead();
  setInterval(makeHead, 1000).unref();
  listen(
    net.createServer({ noDelay: true }, (socket) => {
      let pending = '';
      socket.on('data', (chunk: Buffer) => {
        pending += chunk.toString('latin1');
        let n = 0;
        let at = pending.indexOf('\r\n\r\n');
        while (at !== -1) {
          n++;
          pending = pending.slice(at + 4);
          at = pending.indexOf('\r\n\r\n');
        }
        if (n === 0) return;
        const parts: Buffer[] = [];
        for (let i = 0; i < n; i++) parts.push(head, bytes);
        socket.write(n === 1 ? Buffer.concat(parts, head.length + bytes.length) : Buffer.concat(parts));
      });
      socket.on('error', () => socket.destroy());
    }),
  );
} else {
  const headers: Record<string, string> = {};
  for (let i = 0; i < common.length; i += 2) headers[common[i] as string] = common[i + 1] as string;
  listen(
    http.createServer(
      mode === 'object'
        ? (_req, res) => {
            res.writeHead(200, headers);
            res.end(bytes);
          }
        : (_req, res) => {
            res.writeHead(200, common);
            res.write(bytes);
            res.socket?.uncork();
            res.end();
          },
    ),
  );
}

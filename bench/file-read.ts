/**
 * The A/B of the files benchmark: a plain node:http server answering GET /download/{key}
 * from the directory $BENCH_ROOT, reading the file the way $BENCH_READ says, with the same
 * headers each way (type, length, an ETag and Last-Modified from the file's status):
 *
 *   stream    stat, then open + fstat + a read stream (the file server before session 4:
 *             head() then get(), six trips through libuv's thread pool per file)
 *   promises  fs/promises open + fstat + read of the whole file + close (four trips)
 *   sync      openSync + fstatSync + readSync + closeSync on the event loop's thread (none),
 *             what FsObjectStore.read does for files up to 256 KiB
 *
 * Listens on 127.0.0.1, any free port, and prints its URL.
 */
import { closeSync, fstatSync, openSync, readSync, type BigIntStats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { pipeline } from 'node:stream';

const root = process.env.BENCH_ROOT as string;
const mode = process.env.BENCH_READ ?? 'sync';

function headers(st: BigIntStats, size: number): Record<string, string> {
  return {
    'content-type': 'image/jpeg',
    'content-length': String(size),
    etag: `"${st.ino.toString(36)}-${st.size.toString(36)}-${st.mtimeNs.toString(36)}"`,
    'last-modified': new Date(Number(st.mtimeMs)).toUTCString(),
  };
}

async function answer(file: string, res: http.ServerResponse): Promise<void> {
  if (mode === 'stream') {
    await stat(file, { bigint: true });
    const fh = await open(file, 'r');
    const st = await fh.stat({ bigint: true });
    res.writeHead(200, headers(st, Number(st.size)));
    pipeline(fh.createReadStream(), res, () => {});
    return;
  }
  if (mode === 'promises') {
    const fh = await open(file, 'r');
    try {
      const st = await fh.stat({ bigint: true });
      const bytes = Buffer.allocUnsafeSlow(Number(st.size));
      await fh.read(bytes, 0, bytes.length, 0);
      res.writeHead(200, headers(st, bytes.length));
      res.end(bytes);
    } finally {
      await fh.close();
    }
    return;
  }
  const fd = openSync(file, 'r');
  try {
    const st = fstatSync(fd, { bigint: true });
    const bytes = Buffer.allocUnsafeSlow(Number(st.size));
    readSync(fd, bytes, 0, bytes.length, 0);
    res.writeHead(200, headers(st, bytes.length));
    res.end(bytes);
  } finally {
    closeSync(fd);
  }
}

const server = http.createServer((req, res) => {
  const key = (req.url ?? '/').slice('/download/'.length);
  answer(path.join(root, key), res).catch(() => {
    res.writeHead(404, { 'content-length': '0' });
    res.end();
  });
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`listening http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));

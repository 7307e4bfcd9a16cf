/**
 * The baseline every ratio is taken against: a bare node:http server answering every request with a
 * 307. Listens on 127.0.0.1, port $PORT or any free one, and prints its URL.
 *
 * With BENCH_RESPONSE set (JSON: {"headers": {...}, "body": "..."}), it answers with
 * that 307 instead: sleeve's own answer replayed by plain node:http, a reference that
 * separates the cost of what sleeve sends from the cost of sleeve's code.
 */
import http from 'node:http';

const replay = process.env.BENCH_RESPONSE === undefined ? undefined : (JSON.parse(process.env.BENCH_RESPONSE) as { headers: Record<string, string>; body: string });
const replayBody = replay === undefined ? undefined : Buffer.from(replay.body);

const server = http.createServer(
  replay === undefined
    ? (_req, res) => {
        res.writeHead(307, { Location: 'https://archive.example/caa/mbid-0/123-500.jpg' });
        res.end();
      }
    : (_req, res) => {
        res.writeHead(307, replay.headers);
        res.end(replayBody);
      },
);
server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`listening http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));

/**
 * The ceiling of the gallery benchmark: a bare node:https server answering every request with
 * one page from memory (the gallery page sleeve sent, headers and body as received), with the
 * same certificate. What it manages is the most any Node process on this core can do for that
 * page over TLS; sleeve's front door cannot beat it.
 *
 * BENCH_RESPONSE (JSON: {"status", "headers", "body"}) is the page; BENCH_TLS_DIR holds
 * self-signed-cert.pem and self-signed-key.pem. Listens on 127.0.0.1, any free port, and
 * prints its URL.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';

const page = JSON.parse(process.env.BENCH_RESPONSE ?? '{}') as { status: number; headers: Record<string, string>; body: string };
const body = Buffer.from(page.body);
const headers = { ...page.headers, 'content-length': String(body.length) };
const dir = process.env.BENCH_TLS_DIR ?? '.';

const server = https.createServer({ cert: readFileSync(path.join(dir, 'self-signed-cert.pem')), key: readFileSync(path.join(dir, 'self-signed-key.pem')) }, (_req, res) => {
  res.writeHead(page.status, headers);
  res.end(body);
});
server.listen(0, '127.0.0.1', () => {
  const addr = server.address();
  const port = typeof addr === 'object' && addr !== null ? addr.port : 0;
  process.stdout.write(`listening https://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));

/**
 * The mirror benchmark's upstream: an archive.org-layout server (node:http) answering every
 * `/download/mbid-{m}/mbid-{m}-{id}.jpg` of the items file with the same JPEG, at most RATE
 * images a second (a token bucket with a burst of a hundredth of a second's worth: an answer
 * waits only when the rate is used up), and each item's `_files.xml` (its md5s) unthrottled.
 * Usage: node mirror-upstream.js ITEMS.json IMAGE.jpg RATE; prints `upstream: http://…/download`.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import http from 'node:http';

const [itemsFile, imageFile, rateText] = process.argv.slice(2);
const items = new Map<string, number[]>(Object.entries(JSON.parse(readFileSync(itemsFile as string, 'utf8')) as Record<string, number[]>));
const image = readFileSync(imageFile as string);
const md5 = createHash('md5').update(image).digest('hex');
const rate = Number(rateText);
const burst = Math.max(1, rate / 100);
let tokens = burst;
let last = performance.now();
const queue: (() => void)[] = [];
let timer: NodeJS.Timeout | undefined;

function refill(): void {
  const now = performance.now();
  tokens = Math.min(burst, tokens + ((now - last) * rate) / 1000);
  last = now;
}

function drain(): void {
  timer = undefined;
  refill();
  while (queue.length > 0 && tokens >= 1) {
    tokens -= 1;
    (queue.shift() as () => void)();
  }
  if (queue.length > 0) timer = setTimeout(drain, Math.max(1, Math.ceil(((1 - tokens) * 1000) / rate)));
}

/** Runs `send` now if the rate allows, else once it does (in order). */
function paced(send: () => void): void {
  refill();
  if (queue.length === 0 && tokens >= 1) {
    tokens -= 1;
    send();
    return;
  }
  queue.push(send);
  if (timer === undefined) drain();
}

const ITEM = /^\/download\/mbid-([0-9a-f-]{36})\/mbid-\1(?:-(\d+)\.jpg|_files\.xml)$/;

const server = http.createServer((req, res) => {
  const m = ITEM.exec(req.url ?? '');
  const ids = m === null ? undefined : items.get(m[1] as string);
  if (m === null || ids === undefined || (m[2] !== undefined && !ids.includes(Number(m[2])))) {
    res.writeHead(404, { 'content-type': 'text/plain' });
    res.end('not found\n');
    return;
  }
  if (m[2] === undefined) {
    const files = ids.map((id) => `  <file name="mbid-${m[1]}-${id}.jpg" source="original">\n    <md5>${md5}</md5>\n    <size>${image.length}</size>\n  </file>\n`);
    const xml = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?>\n<files>\n${files.join('')}</files>\n`);
    res.writeHead(200, { 'content-type': 'text/xml', 'content-length': String(xml.length) });
    res.end(xml);
    return;
  }
  paced(() => {
    res.writeHead(200, { 'content-type': 'image/jpeg', 'content-length': String(image.length) });
    res.end(image);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => {
  const addr = server.address() as { port: number };
  process.stdout.write(`upstream: http://127.0.0.1:${addr.port}/download\n`);
});
process.on('SIGTERM', () => process.exit(0));

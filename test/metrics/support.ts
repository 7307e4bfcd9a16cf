/*
 * Helpers for the observability tests: a strict parser of the Prometheus text format
 * (every line must be a HELP, a TYPE or a sample), sample lookup, and an in-process
 * server whose JSON log lines are kept.
 */
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { loadConfig } from '../../src/config/load.js';
import { serve, type Server } from '../../src/serve.js';
import type { Clock } from '../../src/shared/clock.js';
import { freePort, type TestEnv } from '../helpers/env.js';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Scrape {
  samples: Sample[];
  /** TYPE of each family. */
  types: Map<string, string>;
  help: Map<string, string>;
}

/** The cover art listener's route labels (docs/observability.md, `sleeve_http_requests_total`), and `other`. */
export const COVER_ART_ROUTES: readonly string[] = [
  '/',
  '/robots.txt',
  '/api',
  '/release/:mbid/',
  '/release/:mbid/:image',
  '/release-group/:mbid/',
  '/release-group/:mbid/:image',
  '/download/*',
  '/healthz',
  '/readyz',
  'other',
];

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: -?\\d+)?$`);
const LABEL = /\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)/y;

/** A value as Prometheus reads it (Go's ParseFloat: NaN and Inf in any case; prom-client writes `Nan`). */
function parseValue(text: string, line: string): number {
  const lower = text.toLowerCase();
  if (lower === '+inf' || lower === 'inf') return Infinity;
  if (lower === '-inf') return -Infinity;
  if (lower === 'nan') return NaN;
  const v = Number(text);
  assert.ok(text !== '' && !Number.isNaN(v), `bad value in ${JSON.stringify(line)}`);
  return v;
}

function parseLabels(text: string, line: string): Record<string, string> {
  const out: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const start = LABEL.lastIndex;
    const m = LABEL.exec(text);
    assert.ok(m !== null && m.index === start, `bad labels in ${JSON.stringify(line)}`);
    const [, key = '', raw = ''] = m;
    assert.equal(out[key], undefined, `label ${key} twice in ${JSON.stringify(line)}`);
    out[key] = raw.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
  }
  return out;
}

/** Parses a whole scrape, failing on any line that is not valid text format. */
export function parseScrape(text: string): Scrape {
  assert.ok(text.endsWith('\n'), 'the text ends with a newline');
  const scrape: Scrape = { samples: [], types: new Map(), help: new Map() };
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('#')) {
      const m = new RegExp(`^# (HELP|TYPE) (${NAME}) (.*)$`).exec(line);
      assert.ok(m !== null, `bad comment line ${JSON.stringify(line)}`);
      const [, kind, name = '', rest = ''] = m;
      if (kind === 'TYPE') {
        assert.ok(['counter', 'gauge', 'histogram', 'summary', 'untyped'].includes(rest), `bad type in ${JSON.stringify(line)}`);
        assert.equal(scrape.types.has(name), false, `TYPE of ${name} given twice`);
        scrape.types.set(name, rest);
      } else scrape.help.set(name, rest);
      continue;
    }
    const m = SAMPLE.exec(line);
    assert.ok(m !== null, `bad sample line ${JSON.stringify(line)}`);
    const [, name = '', labels, value = ''] = m;
    scrape.samples.push({ name, labels: labels === undefined ? {} : parseLabels(labels, line), value: parseValue(value, line) });
  }
  // Every sample belongs to a family declared before it (histograms by their _bucket/_sum/_count).
  for (const s of scrape.samples) {
    const family = scrape.types.has(s.name) ? s.name : s.name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(scrape.types.has(family), `sample ${s.name} has no TYPE`);
  }
  return scrape;
}

/** The value of the sample with exactly these labels, or undefined. */
export function valueOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number | undefined {
  const want = Object.entries(labels).sort();
  const hit = scrape.samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === JSON.stringify(want));
  return hit?.value;
}

/** Like valueOf, 0 when the sample is absent (a series not yet seen). */
export function countOf(scrape: Scrape, name: string, labels: Record<string, string> = {}): number {
  return valueOf(scrape, name, labels) ?? 0;
}

export async function scrape(metricsAddress: string | undefined): Promise<Scrape> {
  assert.ok(metricsAddress !== undefined, 'the metrics listener is on');
  const res = await fetch(`${metricsAddress}/metrics`);
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  return parseScrape(await res.text());
}

export interface LoggedServer {
  server: Server;
  /** http://127.0.0.1:PORT of the cover art listener. */
  base: string;
  /** https://127.0.0.1:PORT of the auth listener. */
  authBase: string;
  /** The log lines so far, parsed. */
  logs(): Record<string, unknown>[];
  /** The raw log text so far. */
  logText(): string;
}

/** Both listeners and the metrics listener in this process, on free ports, with their JSON logs kept; on the system clock unless given one. */
export async function startLoggedServer(t: TestEnv, extra: Record<string, string> = {}, clock?: Clock): Promise<LoggedServer> {
  const port = await freePort();
  const authPort = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const authBase = `https://127.0.0.1:${authPort}`;
  Object.assign(t.env, {
    SLEEVE_COVERART_LISTEN: `127.0.0.1:${port}`,
    SLEEVE_AUTH_LISTEN: `127.0.0.1:${authPort}`,
    SLEEVE_BASE_URL: base,
    SLEEVE_AUTH_URL: authBase,
    ...extra,
  });
  const chunks: Buffer[] = [];
  const stream = new PassThrough();
  stream.on('data', (c: Buffer) => chunks.push(c));
  const server = await serve(loadConfig(t.env), { logStream: stream, clock });
  const logText = () => Buffer.concat(chunks).toString('utf8');
  return {
    server,
    base,
    authBase,
    logText,
    logs: () =>
      logText()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

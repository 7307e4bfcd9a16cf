#!/usr/bin/env node
// Runs the compiled test files: once on SQLite, then again on PostgreSQL when
// SLEEVE_TEST_POSTGRES_URL names a server (a new database per test file is made there).
import { once } from 'node:events';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { finished } from 'node:stream/promises';
import { inspect } from 'node:util';
import { run } from 'node:test';
import { spec } from 'node:test/reporters';
import slowestFiles from './slowest-files.mjs';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const filter = process.argv.slice(2);

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...collect(p));
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}

// SLEEVE_TEST_DIST: test another build output (e.g. tsc --outDir dist-x) than dist/.
const dist = path.resolve(root, process.env.SLEEVE_TEST_DIST || 'dist');
const testDir = path.join(dist, 'test');
// The filter looks at the path under test/ only: a checkout's own folder name never matches.
// tsc leaves the output of a test file that was renamed or removed: it is not run. Every build
// rewrites each output it makes, after the stamp scripts/build.mjs leaves is dated (a build
// output without a stamp is taken whole).
const stamp = statSync(path.join(dist, '.build-stamp'), { throwIfNoEntry: false })?.mtimeMs ?? 0;
const files = collect(testDir)
  .filter((f) => filter.length === 0 || filter.some((x) => path.relative(testDir, f).includes(x)))
  .filter((f) => statSync(f).mtimeMs >= stamp || void console.log(`not run: ${path.relative(root, f)} (older than the last build: its source was renamed or removed)`));
if (files.length === 0) {
  console.error('no test files found (did the build run?)');
  process.exit(1);
}

// A hang fails its own file instead of holding the run (docs/decisions.md, "Tests"). On Node 20
// --test-timeout bounds each test file's process as a whole (the runner's unit when every file is
// a process of its own). 10 minutes: far above any honest file; the longest took about 5.5
// minutes on a two-core machine at a load average near 30 (several suites beside it).
const FILE_TIMEOUT_MS = 600_000;

// Files run side by side: much of a test file's time is spent waiting on the processes and
// servers it starts (CLI commands, `sleeve serve`, s3rver, chromium), so two files per core keep
// the cores busy where one each left them idle more than half the time; more only makes every
// file slower. SLEEVE_TEST_CONCURRENCY overrides it.
const CONCURRENCY = Number(process.env.SLEEVE_TEST_CONCURRENCY) > 0 ? Number(process.env.SLEEVE_TEST_CONCURRENCY) : 2 * availableParallelism();

// The longest files start first (by the wall time each took in the last pass, which the
// slowest-files reporter keeps in the build output), so that no long file starts last and runs
// alone at the end of a pass. A fresh checkout (CI) has no last pass: test/times.json, a copy
// kept in the repository in seconds (`npm run test:times` refreshes it), stands in for the files
// the build output has no time of. Files timed in neither (new ones) go first: they may be long.
// Read again before each pass, so the PostgreSQL pass starts from the SQLite pass's times.
const TIMES = path.join(dist, '.test-times.json');
const SEED = path.join(root, 'test', 'times.json');
function readJson(file) {
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch {
    return {};
  }
}
function lastTimes() {
  const seed = Object.fromEntries(Object.entries(readJson(SEED)).map(([file, s]) => [file, s * 1000]));
  return { ...seed, ...readJson(TIMES) };
}
function longestFirst() {
  const times = lastTimes();
  const took = (f) => times[path.relative(testDir, f).split(path.sep).join('/')] ?? Infinity;
  files.sort((a, b) => took(b) - took(a) || (a < b ? -1 : 1));
}

const GUARD = new URL('./test-file-guard.mjs', import.meta.url).href;

// node:test's run() rather than `node --test`: on Node 20 the latter sorts the files by name.
async function pass(dialect) {
  console.log(`\n=== test pass: ${dialect} (${files.length} files, ${CONCURRENCY} at a time) ===\n`);
  // The test files' processes inherit this environment.
  process.env.SLEEVE_TEST_DB = dialect;
  process.env.SLEEVE_TEST_TIMES ??= TIMES;
  // A file's process that outlives its tests by 30 s fails it, saying what is left (scripts/test-file-guard.mjs).
  if (!(process.env.NODE_OPTIONS ?? '').includes(GUARD)) process.env.NODE_OPTIONS = `${process.env.NODE_OPTIONS ?? ''} --import ${GUARD}`.trim();
  longestFirst();
  const events = run({ files, concurrency: CONCURRENCY, timeout: FILE_TIMEOUT_MS });
  // Each reporter reads every event; spec as it goes, and with several files, at the end, where the time went.
  const reporters = [new spec()];
  if (files.length > 1) reporters.push(slowestFiles);
  const feeds = reporters.map(() => new PassThrough({ objectMode: true }));
  const outputs = feeds.map((feed, i) => feed.compose(reporters[i]));
  for (const output of outputs) output.pipe(process.stdout, { end: false });
  let failed = false;
  for await (const event of events) {
    if (event.type === 'test:fail') {
      failed = true;
      keepFailure(dialect, event.data);
    }
    for (const feed of feeds) if (!feed.write(event)) await once(feed, 'drain');
  }
  for (const feed of feeds) feed.end();
  await Promise.all(outputs.map((output) => finished(output)));
  return !failed;
}

// Every failure of the run, printed again after the last pass: a failure of the SQLite pass
// otherwise sits far up in the output, above the whole PostgreSQL pass, where a CI log's tail
// does not reach.
const failures = [];
function keepFailure(dialect, data) {
  const error = data.details?.error;
  // A suite fails when a test in it does: that test is kept already.
  if (error?.failureType === 'subtestsFailed') return;
  const cause = error?.cause ?? error;
  const lines = inspect(cause, { depth: 4, breakLength: 120 }).split('\n');
  // Node's own frames say nothing about the test.
  const text = lines.filter((line) => !/^\s+at (.*\bnode:|new Promise|Array\.map).*[^{]$/.test(line)).slice(0, 40).join('\n');
  failures.push(`[${dialect}] ${path.relative(root, data.file ?? '?')}: ${data.name}\n${text.replace(/^/gm, '    ')}`);
}

let ok = await pass('sqlite');
if (process.env.SLEEVE_TEST_POSTGRES_URL) ok = (await pass('postgres')) && ok;
else {
  console.log('\n*** PostgreSQL pass SKIPPED: SLEEVE_TEST_POSTGRES_URL is not set.');
  console.log('*** Set it (e.g. SLEEVE_TEST_POSTGRES_URL=postgres://127.0.0.1:5432/postgres) to run every suite on PostgreSQL too.\n');
}
if (failures.length > 0) console.log(`\n=== the run's failures (${failures.length}) ===\n\n${failures.join('\n\n')}\n`);
process.exit(ok ? 0 : 1);

#!/usr/bin/env node
// Runs the compiled test files: once on SQLite, then again on PostgreSQL when
// SLEEVE_TEST_POSTGRES_URL names a server (a new database per test file is made there).
import { spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';

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
const files = collect(testDir).filter((f) => filter.length === 0 || filter.some((x) => path.relative(testDir, f).includes(x)));
if (files.length === 0) {
  console.error('no test files found (did the build run?)');
  process.exit(1);
}

// A hang fails its own file instead of holding the run (docs/decisions.md, "Tests"). On Node 20
// --test-timeout bounds each test file's process as a whole (the runner's unit when every file is
// a process of its own). 10 minutes: far above any honest file; the longest took about 5.5
// minutes on a two-core machine at a load average near 30 (several suites beside it).
const FILE_TIMEOUT_MS = 600_000;

function pass(dialect) {
  console.log(`\n=== test pass: ${dialect} (${files.length} files) ===\n`);
  const reporters = ['--test-reporter=spec', '--test-reporter-destination=stdout'];
  // With several files, where the time went (at the end of the pass).
  if (files.length > 1) reporters.push(`--test-reporter=${path.join(root, 'scripts', 'slowest-files.mjs')}`, '--test-reporter-destination=stdout');
  const r = spawnSync(process.execPath, ['--test', '--test-concurrency=2', `--test-timeout=${FILE_TIMEOUT_MS}`, ...reporters, ...files], {
    stdio: 'inherit',
    env: { ...process.env, SLEEVE_TEST_DB: dialect },
  });
  return r.status === 0;
}

let ok = pass('sqlite');
if (process.env.SLEEVE_TEST_POSTGRES_URL) ok = pass('postgres') && ok;
else {
  console.log('\n*** PostgreSQL pass SKIPPED: SLEEVE_TEST_POSTGRES_URL is not set.');
  console.log('*** Set it (e.g. SLEEVE_TEST_POSTGRES_URL=postgres://127.0.0.1:5432/postgres) to run every suite on PostgreSQL too.\n');
}
process.exit(ok ? 0 : 1);

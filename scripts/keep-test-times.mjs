#!/usr/bin/env node
// Copies the last pass's wall time per test file (dist/.test-times.json, which npm test keeps)
// into test/times.json, whole seconds, sorted: the order a fresh checkout's first pass starts
// its files in (scripts/test.mjs, longest first). Run it after adding long test files.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
let last;
try {
  last = JSON.parse(readFileSync(path.join(root, 'dist', '.test-times.json'), 'utf8'));
} catch {
  console.error('keep-test-times: no dist/.test-times.json yet; run npm test first');
  process.exit(1);
}
const seconds = Object.fromEntries(
  Object.entries(last)
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([file, ms]) => [file, Math.max(1, Math.round(ms / 1000))]),
);
writeFileSync(path.join(root, 'test', 'times.json'), `${JSON.stringify(seconds, null, 1)}\n`);
console.log(`test/times.json: ${Object.keys(seconds).length} files`);

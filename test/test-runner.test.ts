/*
 * `npm test`'s runner (scripts/test.mjs) fails a test file whose process outlives its tests
 * (scripts/test-file-guard.mjs), naming what is left, and keeps the guard out of the processes
 * the file starts; after the last pass it prints every failure of the run again, with its error.
 * Run on a build output of its own: one file that leaves a timer, one that fails an assertion,
 * one that passes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT } from './helpers/env.js';

const LINGERS = `import { test } from 'node:test';
import { execFileSync } from 'node:child_process';
test('leaves a timer behind', () => {
  setInterval(() => {}, 600_000);
});
test('starts a process without the guard', () => {
  const options = execFileSync(process.execPath, ['-e', 'process.stdout.write(process.env.NODE_OPTIONS ?? "")'], { encoding: 'utf8' });
  if (options.includes('test-file-guard')) throw new Error('the guard reached a child process: ' + options);
});
`;
const FAILS = `import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
describe('a suite', () => {
  it('compares two numbers', () => {
    assert.equal(1 + 1, 3, 'one and one make three');
  });
});
`;
const CLEAN = `import { test } from 'node:test';
test('ends cleanly', () => {});
`;

describe("npm test's runner", () => {
  let dist: string;

  before(async () => {
    dist = await mkdtemp(path.join(tmpdir(), 'sleeve-runner-'));
    await mkdir(path.join(dist, 'test'));
    await writeFile(path.join(dist, 'test', 'lingers.test.js'), LINGERS);
    await writeFile(path.join(dist, 'test', 'fails.test.js'), FAILS);
    await writeFile(path.join(dist, 'test', 'clean.test.js'), CLEAN);
    // An earlier build's output: older than the stamp the last build left.
    await writeFile(path.join(dist, 'test', 'renamed.test.js'), FAILS);
    const built = new Date(Date.now() - 60_000);
    await writeFile(path.join(dist, '.build-stamp'), '');
    await utimes(path.join(dist, '.build-stamp'), built, built);
    await utimes(path.join(dist, 'test', 'renamed.test.js'), new Date(built.getTime() - 60_000), new Date(built.getTime() - 60_000));
  });

  after(async () => {
    await rm(dist, { recursive: true, force: true });
  });

  it('fails a file whose process outlives its tests, naming what is left; prints every failure again at the end; runs no stale output', async () => {
    // The runner's own environment, not this test file's (which runs under the same runner).
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !['NODE_OPTIONS', 'NODE_TEST_CONTEXT', 'SLEEVE_TEST_TIMES', 'SLEEVE_TEST_POSTGRES_URL'].includes(k)));
    const child = spawn(process.execPath, [path.join(ROOT, 'scripts', 'test.mjs')], {
      env: { ...env, SLEEVE_TEST_DIST: dist, SLEEVE_TEST_LINGER_MS: '300' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (out += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    assert.equal(code, 1, out);
    assert.match(out, /lingers\.test\.js: its tests ended 0\.3 s ago and its process still runs \([^)]*Timeout[^)]*\)/);
    assert.match(out, /✔ starts a process without the guard/);
    assert.match(out, /✔ ends cleanly/);
    assert.match(out, /ℹ pass 3\n/);
    assert.match(out, /✖ .*lingers\.test\.js/);
    assert.doesNotMatch(out, /✖ .*clean\.test\.js/);
    assert.match(out, /not run: .*renamed\.test\.js \(older than the last build: its source was renamed or removed\)/);
    assert.doesNotMatch(out, /✖ .*renamed\.test\.js/);
    // The failures again, last: the failing test itself (not its suite), with its error's message.
    const tail = out.slice(out.lastIndexOf("=== the run's failures"));
    assert.match(tail, /^=== the run's failures \(2\) ===/, out);
    assert.match(tail, /\[sqlite\] .*fails\.test\.js: compares two numbers\n.*one and one make three/);
    assert.match(tail, /\[sqlite\] .*lingers\.test\.js/);
    assert.doesNotMatch(tail, /: a suite\n/);
  });
});

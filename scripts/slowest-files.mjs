// A node:test reporter that prints, at the end of a pass, the test files that took longest
// (the sum of their top-level tests and suites), so a slower suite shows where it went; and any
// file whose process lived more than LINGER_MS longer than its tests (a timer or handle left
// behind keeps a file's process alive, and its worker slot busy, after its tests are done; the
// figure includes the process's start-up and its top-level before/after hooks: a few seconds, and
// for storage/s3-store, which starts s3rver at the top, 10–18 s at a load average of 10). With
// SLEEVE_TEST_TIMES=FILE (scripts/test.mjs sets it) it also keeps each file's wall time there.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const LINGER_MS = 10_000;

export default async function* slowestFiles(source) {
  const perFile = new Map();
  const wall = new Map();
  for await (const event of source) {
    const { data } = event;
    if ((event.type === 'test:pass' || event.type === 'test:fail') && data.nesting === 0 && data.file !== undefined && data.name !== data.file) {
      perFile.set(data.file, (perFile.get(data.file) ?? 0) + (data.details?.duration_ms ?? 0));
    }
    // The file's own entry: its process's whole life (Node 20 reports it as test:complete).
    if (event.type === 'test:complete' && data.nesting === 0 && data.file !== undefined && data.name === data.file) wall.set(data.file, data.details?.duration_ms ?? 0);
  }
  if (process.env.SLEEVE_TEST_TIMES) remember(process.env.SLEEVE_TEST_TIMES, wall);
  const rows = [...perFile].sort((a, b) => b[1] - a[1]).slice(0, 12);
  const total = [...perFile.values()].reduce((a, b) => a + b, 0);
  yield `\nslowest test files (of ${perFile.size}, ${(total / 1000).toFixed(0)} s summed over the files run side by side):\n`;
  for (const [file, ms] of rows) yield `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${path.relative(process.cwd(), file)}\n`;
  const lingering = [...wall].map(([file, ms]) => [file, ms, ms - (perFile.get(file) ?? 0)]).filter(([, , extra]) => extra > LINGER_MS).sort((a, b) => b[2] - a[2]);
  if (lingering.length > 0) {
    yield `\ntest files whose process outlived their tests by more than ${LINGER_MS / 1000} s (a timer or handle left behind?):\n`;
    for (const [file, ms, extra] of lingering) yield `  ${(extra / 1000).toFixed(1).padStart(7)} s  past ${(((ms - extra) / 1000).toFixed(1))} s of tests  ${path.relative(process.cwd(), file)}\n`;
  }
}

/**
 * Adds this pass's wall time per file (ms, by its path under test/) to the JSON object in
 * `where`: scripts/test.mjs starts the longest files first next time, so that a long file does
 * not start last and run alone at the end of a pass.
 */
function remember(where, wall) {
  let times = {};
  try {
    times = JSON.parse(readFileSync(where, 'utf8'));
  } catch {
    // None yet, or unreadable: start again.
  }
  for (const [file, ms] of wall) times[underTest(file)] = Math.round(ms);
  writeFileSync(where, `${JSON.stringify(times, null, 1)}\n`);
}

/** `auth/signin.test.js` for …/dist/test/auth/signin.test.js (the same for every build output). */
function underTest(file) {
  const parts = file.split(path.sep);
  return parts.slice(parts.lastIndexOf('test') + 1).join('/');
}

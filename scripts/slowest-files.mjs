// A node:test reporter that prints, at the end of a pass, the test files that took longest
// (the sum of their top-level tests and suites), so a slower suite shows where it went.
import path from 'node:path';

export default async function* slowestFiles(source) {
  const perFile = new Map();
  for await (const event of source) {
    if ((event.type === 'test:pass' || event.type === 'test:fail') && event.data.nesting === 0 && event.data.file !== undefined) {
      perFile.set(event.data.file, (perFile.get(event.data.file) ?? 0) + (event.data.details?.duration_ms ?? 0));
    }
  }
  const rows = [...perFile].sort((a, b) => b[1] - a[1]).slice(0, 12);
  const total = [...perFile.values()].reduce((a, b) => a + b, 0);
  yield `\nslowest test files (of ${perFile.size}, ${(total / 1000).toFixed(0)} s summed over both workers):\n`;
  for (const [file, ms] of rows) yield `  ${(ms / 1000).toFixed(1).padStart(7)} s  ${path.relative(process.cwd(), file)}\n`;
}

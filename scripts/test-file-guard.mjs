// Loaded (NODE_OPTIONS=--import, set by scripts/test.mjs) into each test file's process: once
// the file's tests are done, the process has LINGER_MS to exit by itself (the file's own
// top-level `after` hooks, registered after this one, run within it). A timer,
// server or child process left behind fails the file at that point, naming what still runs,
// instead of holding its worker slot until the 10-minute file bound (docs/decisions.md, "Tests").
// SLEEVE_TEST_LINGER_MS shortens it for the runner's own test.
const LINGER_MS = Number(process.env.SLEEVE_TEST_LINGER_MS) > 0 ? Number(process.env.SLEEVE_TEST_LINGER_MS) : 30_000;
const OPTION = `--import ${import.meta.url}`;

if (process.env.NODE_TEST_CONTEXT !== undefined && /\.test\.js$/.test(process.argv[1] ?? '')) {
  // What this file starts (sleeve, s3rver, chromium) is not a test file: it runs without the guard.
  process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? '').replace(OPTION, '').trim();
  const { after } = await import('node:test');
  after(() => {
    setTimeout(() => {
      const left = process.getActiveResourcesInfo().filter((r) => r !== 'TTYWrap');
      console.error(`# ${process.argv[1]}: its tests ended ${LINGER_MS / 1000} s ago and its process still runs (${left.join(', ')}): a timer, server or child process left behind`);
      process.exit(1);
    }, LINGER_MS).unref();
  });
}

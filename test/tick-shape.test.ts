/*
 * The CLI's first module keeps one nextTick entry alive (see src/edge/tick-shape.ts);
 * its effect on speed is measured by the benchmarks, this checks it is in place and harmless.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';

const EARLY = new URL('../src/cli/early.js', import.meta.url).href;
const TICK_SHAPE = new URL('../src/edge/tick-shape.js', import.meta.url).href;

test('the CLI holds one nextTick entry from its first module on, and leaves no async hook enabled', () => {
  const script = `
    import ${JSON.stringify(EARLY)};
    import { keepTickShape, tickShapeKept } from ${JSON.stringify(TICK_SHAPE)};
    import { createRequire } from 'node:module';
    const keptByEarly = tickShapeKept(); // early.js alone did it
    keepTickShape(); // a second call (serve makes one) changes nothing
    const hooks = createRequire(import.meta.url)('internal/async_hooks');
    const ran = await new Promise((resolve) => process.nextTick(() => resolve(true)));
    console.log(JSON.stringify({ keptByEarly, kept: tickShapeKept(), ran, initHooks: hooks.initHooksExist() }));
  `;
  const r = spawnSync(process.execPath, ['--expose-internals', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { keptByEarly: true, kept: true, ran: true, initHooks: false });
});

test('early.js is the first module the CLI entry imports (before anything else loads)', async () => {
  const entry = await readFile(new URL('../src/cli/index.js', import.meta.url), 'utf8');
  const first = /^import\s[^;]*;/m.exec(entry)?.[0];
  assert.equal(first, "import './early.js';");
});

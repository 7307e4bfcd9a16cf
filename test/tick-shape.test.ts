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
  // Node's own view of the entries (async_hooks' TickObject resources), each watched by a weak
  // reference: after full collections, the entries still alive are those something holds.
  const script = `
    import { createHook } from 'node:async_hooks';
    import { createRequire } from 'node:module';
    const entries = [];
    const watch = createHook({ init(_id, type, _trigger, resource) { if (type === 'TickObject') entries.push(new WeakRef(resource)); } });
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    async function held() {
      for (let i = 0; i < 3; i++) { await turn(); globalThis.gc(); }
      return entries.filter((e) => e.deref() !== undefined).length;
    }
    watch.enable();
    await import(${JSON.stringify(EARLY)});
    const watched = entries.length; // early.js alone made one
    const keptByEarly = await held();
    const { keepTickShape } = await import(${JSON.stringify(TICK_SHAPE)});
    keepTickShape(); // a second call (serve makes one) changes nothing
    for (let i = 0; i < 100; i++) await new Promise((resolve) => process.nextTick(resolve));
    const kept = await held();
    watch.disable();
    const hooks = createRequire(import.meta.url)('internal/async_hooks');
    console.log(JSON.stringify({ watched: watched > 0, keptByEarly, kept, later: entries.length > 100, initHooks: hooks.initHooksExist() }));
  `;
  const r = spawnSync(process.execPath, ['--expose-internals', '--expose-gc', '--input-type=module', '-e', script], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), { watched: true, keptByEarly: 1, kept: 1, later: true, initHooks: false });
});

test('early.js is the first module the CLI entry imports (before anything else loads)', async () => {
  const entry = await readFile(new URL('../src/cli/index.js', import.meta.url), 'utf8');
  const first = /^import\s[^;]*;/m.exec(entry)?.[0];
  assert.equal(first, "import './early.js';");
});

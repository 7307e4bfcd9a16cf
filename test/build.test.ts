/*
 * The build script (scripts/build.mjs): `npm start`, `npm test` and `npm run bench` build first
 * only when an input changed since the last build, checked with --check on a checkout of its
 * own, whose file times are set here.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ROOT } from './helpers/env.js';

const SCRIPT = path.join(ROOT, 'scripts', 'build.mjs');

function check(root: string): { code: number | null; out: string } {
  const r = spawnSync(process.execPath, [SCRIPT, '--check', '--root', root], { encoding: 'utf8' });
  return { code: r.status, out: r.stdout };
}

describe('npm start, npm test and npm run bench build only when a source changed', () => {
  let root: string;
  /** An hour ago: the last build started then; every input is older. */
  const built = new Date(Date.now() - 3_600_000);
  const older = new Date(built.getTime() - 60_000);
  const inputs = ['package.json', 'package-lock.json', 'tsconfig.json', 'src/cli/main.ts', 'test/a.test.ts', 'scripts/bundle.mjs'];
  const folders = ['src', 'src/cli', 'test', 'scripts'];

  before(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'sleeve-build-check-'));
    for (const file of [...inputs, 'dist/bundle/index.js', 'dist/src/serve.js', 'dist/.build-stamp']) {
      await mkdir(path.dirname(path.join(root, file)), { recursive: true });
      await writeFile(path.join(root, file), '');
    }
    for (const p of [...inputs, ...folders]) await utimes(path.join(root, p), older, older);
    await utimes(path.join(root, 'dist/.build-stamp'), built, built);
  });
  after(async () => rm(root, { recursive: true, force: true }));

  it('is up to date when every input is older than the last build', () => {
    assert.deepEqual(check(root), { code: 0, out: 'up to date\n' });
  });

  it('builds when a file changed, a file was added or removed, or an output or the stamp is missing', async () => {
    const later = new Date(built.getTime() + 1000);
    await utimes(path.join(root, 'src/cli/main.ts'), later, later);
    assert.deepEqual(check(root), { code: 1, out: `build needed: ${path.join('src', 'cli', 'main.ts')} changed since the last build\n` });
    await utimes(path.join(root, 'src/cli/main.ts'), older, older);

    await utimes(path.join(root, 'package-lock.json'), later, later);
    assert.equal(check(root).out, 'build needed: package-lock.json changed since the last build\n');
    await utimes(path.join(root, 'package-lock.json'), older, older);
    assert.equal(check(root).code, 0);

    // A removed file leaves nothing to compare: its folder's time moved.
    await rm(path.join(root, 'test/a.test.ts'));
    assert.equal(check(root).out, 'build needed: test changed since the last build\n');
    await utimes(path.join(root, 'test'), older, older);
    assert.equal(check(root).code, 0);

    const serve = path.join(root, 'dist/src/serve.js');
    const kept = await readFile(serve);
    await rm(serve);
    assert.deepEqual(check(root), { code: 1, out: 'build needed: dist/src/serve.js is missing\n' });
    await writeFile(serve, kept);
    await rm(path.join(root, 'dist/.build-stamp'));
    assert.deepEqual(check(root), { code: 1, out: 'build needed: no build made by this script yet\n' });
  });

  it('leaves no stamp when a build fails, so the next check builds again', async () => {
    await writeFile(path.join(root, 'dist/.build-stamp'), '');
    await utimes(path.join(root, 'dist/.build-stamp'), built, built);
    assert.equal(check(root).code, 0);
    // This checkout has no node_modules: its tsc cannot start.
    const r = spawnSync(process.execPath, [SCRIPT, '--root', root], { encoding: 'utf8' });
    assert.notEqual(r.status, 0, r.stderr);
    assert.deepEqual(check(root), { code: 1, out: 'build needed: no build made by this script yet\n' });
  });

  it('is what npm start, npm test and npm run bench run first, and what npm run build runs', async () => {
    const pkg = JSON.parse(await readFile(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    for (const first of ['prestart', 'pretest', 'prebench']) assert.equal(pkg.scripts[first], 'node scripts/build.mjs --if-changed', first);
    assert.equal(pkg.scripts.build, 'node scripts/build.mjs');
  });
});

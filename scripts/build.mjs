#!/usr/bin/env node
// The build (tsc → dist/, then scripts/bundle.mjs bundles the CLI into dist/bundle/), and the
// check `npm start`, `npm test` and `npm run bench` run first: build only when some input changed
// since the last build. A build with nothing changed took 15 s of a 25 s start, and `npm test`
// right after `npm ci` (whose prepare builds) built the same tree twice. Inputs: every file and
// folder under what tsc compiles (src, test, bench, datagen, scripts; a folder's time moves when
// a file in it is added, removed or renamed), and tsconfig.json, package.json, package-lock.json.
// Every build this script makes leaves the stamp dist/.build-stamp, dated when the build started,
// so a file saved while it ran is newer and builds again next time.
//
//   node scripts/build.mjs                    build (npm run build)
//   node scripts/build.mjs --if-changed       build when needed (prestart, pretest, prebench)
//   node scripts/build.mjs --check            only say: exit 0 when up to date, 1 when not
//   --root DIR                                another checkout than this script's
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const rootAt = args.indexOf('--root');
const root = rootAt === -1 ? path.resolve(path.dirname(new URL(import.meta.url).pathname), '..') : path.resolve(args[rootAt + 1] ?? '.');
const checkOnly = args.includes('--check');
const ifChanged = checkOnly || args.includes('--if-changed');

const FOLDERS = ['src', 'test', 'bench', 'datagen', 'scripts'];
const FILES = ['tsconfig.json', 'package.json', 'package-lock.json'];
/** What a build leaves that the servers and the CLI run. */
const OUTPUTS = ['dist/bundle/index.js', 'dist/src/serve.js'];
const STAMP = path.join(root, 'dist', '.build-stamp');

/** The first input newer than `since` (ms), or undefined. */
function newerInput(since) {
  for (const name of FILES) {
    const file = path.join(root, name);
    if (existsSync(file) && statSync(file).mtimeMs > since) return name;
  }
  const walk = (dir) => {
    if (statSync(dir).mtimeMs > since) return dir;
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) {
        const found = walk(p);
        if (found !== undefined) return found;
      } else if (statSync(p).mtimeMs > since) return p;
    }
    return undefined;
  };
  for (const name of FOLDERS) {
    const dir = path.join(root, name);
    if (!existsSync(dir)) continue;
    const found = walk(dir);
    if (found !== undefined) return path.relative(root, found);
  }
  return undefined;
}

/** Why a build is needed, or undefined when the last one is current. */
function reason() {
  const missing = OUTPUTS.find((o) => !existsSync(path.join(root, o)));
  if (missing !== undefined) return `${missing} is missing`;
  if (!existsSync(STAMP)) return 'no build made by this script yet';
  const changed = newerInput(statSync(STAMP).mtimeMs);
  return changed === undefined ? undefined : `${changed} changed since the last build`;
}

const why = ifChanged ? reason() : 'asked for';
if (checkOnly) {
  process.stdout.write(why === undefined ? 'up to date\n' : `build needed: ${why}\n`);
  process.exit(why === undefined ? 0 : 1);
}
if (why === undefined) {
  process.stderr.write('sleeve: the build is up to date (dist/ is newer than every source file); skipping it\n');
  process.exit(0);
}
const started = new Date();
// A build that fails leaves no stamp: the next check builds again.
rmSync(STAMP, { force: true });
for (const step of [
  [path.join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', root],
  [path.join(root, 'scripts', 'bundle.mjs'), path.join(root, 'dist')],
]) {
  const r = spawnSync(process.execPath, step, { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
closeSync(openSync(STAMP, 'w'));
utimesSync(STAMP, started, started);

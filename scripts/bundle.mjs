#!/usr/bin/env node
// Bundles the compiled CLI (dist/src/cli/index.js) into dist/bundle/ with esbuild, so a
// command starts in a few dozen milliseconds instead of resolving hundreds of ES modules.
// Native and heavy packages stay outside and load only when a command needs them
// (dynamic imports become separate chunks). The servers themselves are not bundled (see below).
//
// Kysely is made one module of its own, dist/node_modules/kysely/ (SINGLE_FILE below), which
// both the CLI bundle and the unbundled servers (dist/src) load: one copy per process.
import { build } from 'esbuild';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dist = path.resolve(root, process.argv[2] ?? 'dist');

// Chunk names carry content hashes: start from an empty folder so old ones do not pile up.
rmSync(path.join(dist, 'bundle'), { recursive: true, force: true });

// Packages loaded as one ES module each from dist/node_modules/NAME/ (node resolves a bare
// import from dist/src or dist/bundle there before the checkout's node_modules). Kysely's own
// build is 262 ES modules: loaded by `serve` beside the copy the CLI bundle inlined, it was two
// copies of kysely and ~3 MiB of the JavaScript heap in every server (docs/decisions.md, "Server
// memory: one copy of each module"). Its exports are kept whole (no tree shaking across them).
const SINGLE_FILE = ['kysely'];
for (const name of SINGLE_FILE) {
  const from = path.join(root, 'node_modules', name);
  const pkg = JSON.parse(readFileSync(path.join(from, 'package.json'), 'utf8'));
  const to = path.join(dist, 'node_modules', name);
  rmSync(to, { recursive: true, force: true });
  mkdirSync(to, { recursive: true });
  await build({
    entryPoints: [path.join(from, pkg.exports['.'].import)],
    outfile: path.join(to, 'index.js'),
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  writeFileSync(path.join(to, 'package.json'), `${JSON.stringify({ name, version: pkg.version, license: pkg.license, type: 'module', exports: { '.': './index.js' } }, null, 2)}\n`);
}

await build({
  entryPoints: [path.join(dist, 'src', 'cli', 'index.js')],
  outdir: path.join(dist, 'bundle'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: [...SINGLE_FILE, 'better-sqlite3', 'sharp', 'pg', 'pg-copy-streams', 'fastify', 'selfsigned', '@aws-sdk/client-s3', 'ioredis', 'prom-client'],
  // Bundled CommonJS code may call require(); give the ES module one.
  banner: { js: "import { createRequire as __sleeveCreateRequire } from 'node:module'; const require = __sleeveCreateRequire(import.meta.url);" },
  sourcemap: 'linked',
  logLevel: 'warning',
  plugins: [
    {
      // `serve` runs the plain tsc output (dist/src/serve.js), not a bundled copy: measured,
      // V8 runs the request hot path about 15 % slower inside the bundle. Start-up time only
      // matters for the short commands.
      name: 'serve-unbundled',
      setup(b) {
        b.onResolve({ filter: /^\.\.\/serve\.js$/ }, () => ({ path: '../src/serve.js', external: true }));
      },
    },
  ],
});

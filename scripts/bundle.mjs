#!/usr/bin/env node
// Bundles the compiled CLI (dist/src/cli/index.js) into dist/bundle/ with esbuild, so a
// command starts in a few dozen milliseconds instead of resolving hundreds of ES modules.
// Native and heavy packages stay outside and load only when a command needs them
// (dynamic imports become separate chunks). The servers themselves are not bundled (see below).
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const dist = path.resolve(root, process.argv[2] ?? 'dist');

// Chunk names carry content hashes: start from an empty folder so old ones do not pile up.
rmSync(path.join(dist, 'bundle'), { recursive: true, force: true });

await build({
  entryPoints: [path.join(dist, 'src', 'cli', 'index.js')],
  outdir: path.join(dist, 'bundle'),
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['better-sqlite3', 'sharp', 'pg', 'pg-copy-streams', 'fastify', 'selfsigned', '@aws-sdk/client-s3', 'ioredis', 'prom-client'],
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

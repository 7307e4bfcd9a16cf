import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** The build output this file was compiled into (dist/, dist-bench/ …): it holds bench/ and src/. */
export const DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The repository: the build output's parent when it holds package.json, else the working directory. */
export const ROOT = existsSync(path.join(DIST, '..', 'package.json')) ? path.resolve(DIST, '..') : process.cwd();

/** sleeve's CLI in the same build: the bundle bin/sleeve.js runs, or the plain tsc output when there is none. */
export const SLEEVE_CLI = existsSync(path.join(DIST, 'bundle', 'index.js')) ? path.join(DIST, 'bundle', 'index.js') : path.join(DIST, 'src', 'cli', 'index.js');

/** A compiled bench script (bare 307 server, plain sharp script …). */
export function benchScript(name: string): string {
  return path.join(DIST, 'bench', name);
}

/** bench/.work/: built catalogues and other things kept between runs (gitignored). */
export function workDir(...parts: string[]): string {
  const dir = path.join(ROOT, 'bench', '.work', ...parts);
  mkdirSync(dir, { recursive: true });
  return dir;
}

/*
 * The documents cite each other, and the code cites them, by name. A section renamed or moved
 * leaves a citation pointing at nothing; these checks read the files themselves (no server):
 * every citation in the code of a section of docs/ (the file's name, a comma, the section's
 * title in double quotes; an entry of docs/decisions.md) names a heading there, every such citation of bench/RESULTS.md
 * (or RESULTS-archive.md) a heading there, and every relative link of README.md and docs/*.md a
 * file of the repository and, with `#anchor`, a heading of it; and the configuration reference
 * lists every setting src/config knows.
 */
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { VARIABLES } from '../src/config/load.js';
import { ROOT } from './helpers/env.js';

/** Where code that cites the documents lives. */
const CODE_DIRS = ['src', 'test', 'bench', 'scripts', 'deploy', 'datagen', 'bin'];
const CODE_FILES = ['eslint.config.js', 'package.json'];
const CODE_SUFFIX = /\.(ts|mjs|js|conf|json)$/;

function walk(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (CODE_SUFFIX.test(name)) out.push(p);
  }
  return out;
}

/** A file's text with comment leaders dropped and lines joined, so a name quoted across two comment lines reads as one. */
function joinedText(file: string): string {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => line.replace(/^\s*(\/\/+|\*+|#+)?\s?/, ''))
    .join(' ');
}

/** The headings of a Markdown file, outside indented code blocks, without their `#`s. */
const headingsOf = new Map<string, string[]>();
function headings(file: string): string[] {
  let found = headingsOf.get(file);
  if (found === undefined) {
    found = readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => /^#{1,6} /.test(line))
      .map((line) => line.replace(/^#+ /, '').trim());
    headingsOf.set(file, found);
  }
  return found;
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as dashes; repeats get -1, -2. */
const anchorsOf = new Map<string, Set<string>>();
function anchors(file: string): Set<string> {
  const known = anchorsOf.get(file);
  if (known !== undefined) return known;
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const h of headings(file)) {
    const text = h.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/`/g, '');
    const slug = text.toLowerCase().replace(/[^\p{L}\p{N}_\- ]/gu, '').replace(/ /g, '-');
    const n = seen.get(slug);
    seen.set(slug, n === undefined ? 0 : n + 1);
    out.add(n === undefined ? slug : `${slug}-${n + 1}`);
  }
  anchorsOf.set(file, out);
  return out;
}

/** Whether `cited` names one of `titles`: the whole title, or its first words (a citation may shorten a long one). */
function names(titles: string[], cited: string): boolean {
  const c = cited.replace(/\s+/g, ' ').replace(/…$/, '').trim();
  return titles.some((t) => t === c || t.startsWith(c));
}

/** Each match of `pattern` in the code: its last group is the title cited, the one before it (if any) the document. */
function citations(pattern: RegExp): { file: string; doc: string; cited: string }[] {
  const files = [...CODE_DIRS.flatMap((d) => walk(path.join(ROOT, d))), ...CODE_FILES.map((f) => path.join(ROOT, f)).filter(existsSync)];
  const out: { file: string; doc: string; cited: string }[] = [];
  for (const file of files) {
    for (const m of joinedText(file).matchAll(pattern)) {
      out.push({ file: path.relative(ROOT, file), doc: m.length > 2 ? (m[1] as string) : '', cited: m[m.length - 1] as string });
    }
  }
  return out;
}

test('every section of docs/*.md the code cites by title is there (an entry of docs/decisions.md, a heading of the others)', () => {
  const found = citations(/docs\/([a-z-]+)\.md,?\s*\(?"([^"]+)"/g);
  assert.ok(found.filter((c) => c.doc === 'decisions').length > 50, 'the pattern no longer matches the code\'s citations of docs/decisions.md');
  const missing = found
    .filter((c) => {
      const file = path.join(ROOT, 'docs', `${c.doc}.md`);
      return !existsSync(file) || !names(headings(file), c.cited);
    })
    .map((c) => `${c.file}: docs/${c.doc}.md, "${c.cited}"`);
  assert.deepEqual(missing, [], 'citations of docs/ that name no section');
});

test('every section of bench/RESULTS.md or bench/RESULTS-archive.md the code cites is a heading there', () => {
  const current = headings(path.join(ROOT, 'bench/RESULTS.md'));
  const archive = headings(path.join(ROOT, 'bench/RESULTS-archive.md'));
  const found = [
    ...citations(/RESULTS\.md,?\s*\(?"([^"]+)"/g).map((c) => ({ ...c, titles: current, doc: 'RESULTS.md' })),
    ...citations(/RESULTS-archive\.md,?\s*\(?"([^"]+)"/g).map((c) => ({ ...c, titles: archive, doc: 'RESULTS-archive.md' })),
  ];
  assert.ok(found.length > 5, `only ${found.length} citations found`);
  const missing = found.filter((c) => !names(c.titles, c.cited)).map((c) => `${c.file}: ${c.doc}, "${c.cited}"`);
  assert.deepEqual(missing, [], 'citations of the benchmark results that name no heading');
});

test("every relative link of README.md and docs/*.md reaches a file of the repository, and a heading of it", () => {
  const docs = path.join(ROOT, 'docs');
  const pages = [path.join(ROOT, 'README.md'), path.join(ROOT, 'bench/RESULTS.md'), ...readdirSync(docs).filter((f) => f.endsWith('.md')).map((f) => path.join(docs, f))];
  const bad: string[] = [];
  let links = 0;
  for (const page of pages) {
    const text = readFileSync(page, 'utf8');
    if (text.includes('../shared')) bad.push(`${path.relative(ROOT, page)}: cites ../shared`);
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1];
      if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
      links += 1;
      const [file, anchor] = target.split('#', 2);
      const full = file === '' ? page : path.resolve(path.dirname(page), file);
      const where = `${path.relative(ROOT, page)}: ${target}`;
      if (path.relative(ROOT, full).startsWith('..')) bad.push(`${where} leads outside the repository`);
      else if (!existsSync(full)) bad.push(`${where}: no such file`);
      else if (anchor !== undefined && full.endsWith('.md') && !anchors(full).has(anchor)) bad.push(`${where}: no such heading`);
    }
  }
  assert.ok(links > 100, `only ${links} links found`);
  assert.deepEqual(bad, []);
});

test('docs/configuration.md has a row for every SLEEVE_* setting sleeve reads, and for no other', () => {
  const rows = [...readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8').matchAll(/^\| `(SLEEVE_[A-Z0-9_]+)`/gm)].map((m) => m[1]);
  assert.deepEqual([...rows].sort(), Object.keys(VARIABLES).sort());
});

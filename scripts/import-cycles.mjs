#!/usr/bin/env node
// Fails on any import cycle among the TypeScript files of src/ and bench/ (docs/decisions.md,
// "Layering"). Every import counts: type-only ones, re-exports, `import()` and
// `typeof import()`, since they are how a reader sees which module needs which. ESLint keeps
// the layers apart; this keeps each layer's files in one direction too.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const roots = process.argv.length > 2 ? process.argv.slice(2) : ['src', 'bench'];

function collect(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) out.push(...collect(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out.sort();
}

/** Every module specifier a file names, however it imports it. */
function specifiers(file) {
  const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, false);
  const out = [];
  const visit = (node) => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push(node.moduleSpecifier.text);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument) && ts.isStringLiteral(node.argument.literal)) {
      out.push(node.argument.literal.text);
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword && node.arguments[0] && ts.isStringLiteralLike(node.arguments[0])) {
      out.push(node.arguments[0].text);
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference) && ts.isStringLiteral(node.moduleReference.expression)) {
      out.push(node.moduleReference.expression.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** A relative specifier's file among the checked ones (`./x.js` is `./x.ts`), or undefined. */
function resolve(from, spec, known) {
  if (!spec.startsWith('.')) return undefined;
  const target = path.resolve(path.dirname(from), spec);
  for (const candidate of [target.replace(/\.js$/, '.ts'), target, `${target}.ts`, path.join(target, 'index.ts')]) {
    if (known.has(candidate)) return candidate;
  }
  return undefined;
}

const files = roots.flatMap((r) => collect(path.join(root, r)));
const known = new Set(files);
const edges = new Map(files.map((f) => [f, [...new Set(specifiers(f).map((s) => resolve(f, s, known)).filter((t) => t !== undefined))]]));

// Tarjan's strongly connected components, iteratively (no recursion limit on deep chains).
const index = new Map();
const low = new Map();
const onStack = new Set();
const stack = [];
const components = [];
let next = 0;
for (const start of files) {
  if (index.has(start)) continue;
  const work = [[start, 0]];
  index.set(start, next); low.set(start, next); next++;
  stack.push(start); onStack.add(start);
  while (work.length > 0) {
    const frame = work[work.length - 1];
    const [node, i] = frame;
    const out = edges.get(node);
    if (i < out.length) {
      frame[1]++;
      const to = out[i];
      if (!index.has(to)) {
        index.set(to, next); low.set(to, next); next++;
        stack.push(to); onStack.add(to);
        work.push([to, 0]);
      } else if (onStack.has(to)) {
        low.set(node, Math.min(low.get(node), index.get(to)));
      }
      continue;
    }
    work.pop();
    if (work.length > 0) {
      const parent = work[work.length - 1][0];
      low.set(parent, Math.min(low.get(parent), low.get(node)));
    }
    if (low.get(node) === index.get(node)) {
      const component = [];
      let member;
      do {
        member = stack.pop();
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || edges.get(node).includes(node)) components.push(component);
    }
  }
}

/** One shortest circle through a component's first file, to show what to break. */
function circleIn(component) {
  const members = new Set(component);
  const first = [...component].sort()[0];
  const previous = new Map([[first, undefined]]);
  const queue = [first];
  while (queue.length > 0) {
    const node = queue.shift();
    for (const to of edges.get(node)) {
      if (!members.has(to)) continue;
      if (to === first) {
        const path = [node];
        for (let p = previous.get(node); p !== undefined; p = previous.get(p)) path.unshift(p);
        return [...path, first];
      }
      if (!previous.has(to)) { previous.set(to, node); queue.push(to); }
    }
  }
  return [first];
}

const rel = (f) => path.relative(root, f);
if (components.length === 0) {
  console.log(`import-cycles: no import circles among ${files.length} files of ${roots.join(', ')}`);
} else {
  for (const component of components) {
    console.error(`import-cycles: ${component.length} files import each other in a circle: ${[...component].map(rel).sort().join(', ')}`);
    console.error(`  e.g. ${circleIn(component).map(rel).join(' -> ')}`);
  }
  console.error('Move what both sides need into a module both import, or a small types module (docs/decisions.md, "Layering").');
  process.exitCode = 1;
}

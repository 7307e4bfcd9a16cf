import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/**
 * The layers of src/, bottom-up (docs/decisions.md, "Layering"): a layer imports only from the
 * layers before it in this list. Each entry is a folder of src/ (or top-level files) and the
 * layers above it that it may still import, where the design says so.
 */
const LAYERS = [
  { name: 'shared', files: ['src/shared/**'] },
  // Below db and storage: they take their settings' types from config/load.ts.
  { name: 'config', files: ['src/config/**'] },
  { name: 'db', files: ['src/db/**'] },
  { name: 'storage', files: ['src/storage/**'] },
  // The edge: what reaches into Node's internals (the fast lane, one-write responses, tick
  // shaping, flat strings), in one folder so that a Node upgrade is audited in one place.
  { name: 'edge', files: ['src/edge/**'] },
  // Generic listener plumbing, which knows of no module (each module owns its listener).
  { name: 'http', files: ['src/http/**'] },
  { name: 'metrics', files: ['src/metrics/**'] },
  { name: 'cluster', files: ['src/cluster/**'] },
  { name: 'import', files: ['src/import/**'] },
  // The two modules never import each other (docs/decisions.md, "Platform").
  { name: 'cover-art', files: ['src/cover-art/**'], peers: ['auth'] },
  { name: 'auth', files: ['src/auth/**'], peers: ['cover-art'] },
  // The website composes the two modules: it uses both, and neither uses it.
  { name: 'website', files: ['src/website/**'] },
  // What builds a process out of the modules (runtime.ts opens their stores for serve and the CLI).
  { name: 'serve', files: ['src/serve.ts', 'src/runtime.ts'] },
  { name: 'cli', files: ['src/cli/**'] },
];

/** How an import of a layer's files is spelled (relative paths; the top-level files by name). */
function importsOf(layer) {
  return layer.files.flatMap((f) => (f.endsWith('/**') ? [`**/${layer.name}/**`, `**/${layer.name}/*`] : [`**/${f.slice('src/'.length).replace(/\.ts$/, '.js')}`]));
}

/** One no-restricted-imports block per layer: everything above it (and its peers) is refused. */
function layerRules() {
  return LAYERS.map((layer, i) => {
    const refused = LAYERS.filter((l, j) => j > i || (layer.peers ?? []).includes(l.name));
    const patterns = refused.map((above) => ({
      group: importsOf(above),
      message: `layers (docs/decisions.md, "Layering"): src/${layer.name} must not import ${above.name}, which is ${(layer.peers ?? []).includes(above.name) ? 'a peer module' : 'above it'}; move the shared piece down or pass it in`,
    }));
    return { files: layer.files, rules: { 'no-restricted-imports': patterns.length === 0 ? 'off' : ['error', { patterns }] } };
  });
}

export default tseslint.config(
  { ignores: ['dist/', 'dist-*/', 'node_modules/', 'data/', 'bench/.work/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setInterval: 'readonly',
        clearInterval: 'readonly',
        setImmediate: 'readonly',
        URL: 'readonly',
        URLSearchParams: 'readonly',
        NodeJS: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // Control characters are what some validation regexes exist to reject.
      'no-control-regex': 'off',
    },
  },
  ...layerRules(),
  {
    // A function that does not fit on a screen or two is split (docs/decisions.md, "Layering"),
    // in the benchmarks too. Tests' describe blocks are not held to it.
    files: ['src/**', 'bench/**'],
    rules: { 'max-lines-per-function': ['error', { max: 100, skipBlankLines: true, skipComments: true }] },
  },
  {
    // The benchmarks do not import the tests: what both use lives in datagen/.
    files: ['bench/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['**/test/**', '**/test/*'], message: 'bench must not import the tests; move what both need to datagen/' }] }] },
  },
  {
    files: ['datagen/**'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/test/**', '**/test/*', '**/bench/**', '**/bench/*'], message: 'datagen is imported by the tests and the benchmarks, and imports neither' }] }],
    },
  },
);

import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  {
    // The two modules never import each other (docs/decisions.md, "Layering").
    files: ['src/cover-art/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/auth/**', '**/auth/*'], message: 'cover-art must not import the auth module' },
            { group: ['**/website/**', '**/website/*'], message: 'the website composes the modules; they do not import it' },
          ],
        },
      ],
    },
  },
  {
    files: ['src/auth/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            { group: ['**/cover-art/**', '**/cover-art/*'], message: 'auth must not import the cover-art module' },
            { group: ['**/website/**', '**/website/*'], message: 'the website composes the modules; they do not import it' },
          ],
        },
      ],
    },
  },
  {
    // HTTP plumbing shared by every listener: it knows of no module (each module owns its listener).
    files: ['src/http/**'],
    rules: {
      'no-restricted-imports': [
        'error',
        { patterns: [{ group: ['**/cover-art/**', '**/cover-art/*', '**/auth/**', '**/auth/*'], message: 'src/http is generic listener plumbing: it must not import the cover-art or auth module' }] },
      ],
    },
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

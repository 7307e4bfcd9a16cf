import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'node_modules/', 'data/', 'bench/.work/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', URL: 'readonly', NodeJS: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      'no-restricted-imports': ['error', { patterns: [{ group: ['**/auth/*'], message: 'cover-art must not import the auth module' }] }],
    },
  },
  {
    files: ['src/auth/**'],
    rules: { 'no-restricted-imports': ['error', { patterns: [{ group: ['**/cover-art/*'], message: 'auth must not import the cover-art module' }] }] },
  },
  {
    files: ['src/serve.ts', 'src/cli/**', 'test/**', 'bench/**'],
    rules: { 'no-restricted-imports': 'off' },
  },
);

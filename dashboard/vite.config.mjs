// Built with NODE_ENV=production (package.json) even under the test runner's NODE_ENV=test, so no
// library's development code ships. Builds the console into dist/app/: index.html and assets/ named by content hash, served by the API
// server at `/` and `/assets/` (apiserver/src/routes/dashboard.ts). Type-checking is `tsc -b`'s;
// Vite only bundles (esbuild compiles the JSX for Preact).
import { defineConfig } from 'vite';

export default defineConfig({
  root: import.meta.dirname,
  base: '/',
  logLevel: 'warn',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact', legalComments: 'none' },
  build: {
    outDir: 'dist/app',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: ['chrome110', 'firefox110', 'safari16', 'edge110'],
    modulePreload: { polyfill: false },
    reportCompressedSize: false,
  },
});

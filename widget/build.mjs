// Bundles the widget into one script for browsers (dist/berth-chat.js), with its stylesheet
// minified into it, and prints its size raw and gzipped. Run by `npm run build` after `tsc -b`,
// which type-checks the sources; esbuild only strips the types.
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, transform } from 'esbuild';

const here = import.meta.dirname;
const out = join(here, 'dist', 'berth-chat.js');

const css = await transform(readFileSync(join(here, 'src', 'widget.css'), 'utf8'), { loader: 'css', minify: true });
const result = await build({
  entryPoints: [join(here, 'src', 'main.ts')],
  bundle: true,
  format: 'iife',
  // Browsers of the last few years; the widget uses nothing newer than these have.
  target: ['chrome100', 'firefox100', 'safari15', 'edge100'],
  minify: true,
  legalComments: 'none',
  define: { BERTH_WIDGET_CSS: JSON.stringify(css.code.trim()) },
  write: false,
  logLevel: 'warning',
});
const code = result.outputFiles[0].contents;
mkdirSync(join(here, 'dist'), { recursive: true });
writeFileSync(out, code);
const gzipped = gzipSync(code, { level: 9 }).length;
process.stdout.write(`widget: dist/berth-chat.js ${(code.length / 1024).toFixed(1)} KiB, ${(gzipped / 1024).toFixed(1)} KiB gzipped\n`);

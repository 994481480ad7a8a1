// Prints the built console's size, raw and gzipped (level 9, as the API server sends it), after `vite build`.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';

const dist = join(import.meta.dirname, 'dist', 'app');
const files = ['index.html', ...readdirSync(join(dist, 'assets')).map((name) => join('assets', name))];
let raw = 0;
let gzipped = 0;
for (const file of files) {
  const body = readFileSync(join(dist, file));
  raw += body.length;
  gzipped += gzipSync(body, { level: 9 }).length;
}
process.stdout.write(`dashboard: dist/ ${(raw / 1024).toFixed(1)} KiB, ${(gzipped / 1024).toFixed(1)} KiB gzipped (${files.length} files)\n`);

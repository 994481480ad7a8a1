import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { appendFile, chmod, cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Compute } from '@berth/crds';
import { SandboxNotReadyError, silentLogger } from '@berth/common';
import { BUILD_SCRIPT, IMAGE_NAMES, ImageStore, type ImageName } from './images.js';
import { LocalProvider } from './provider.js';
import type { Runsc } from './runsc.js';

const SANDBOX_IMAGES = dirname(dirname(BUILD_SCRIPT));

const inputsOf = (name: ImageName) =>
  execFileSync('bash', [BUILD_SCRIPT, '--inputs', name], { encoding: 'utf8' }).split('\n').filter(Boolean);

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'berth-images-test-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('the build inputs of each image', () => {
  it.each(IMAGE_NAMES)('%s: lists files that exist, including its package list', (name) => {
    const inputs = inputsOf(name);
    expect(inputs).toEqual(expect.arrayContaining(['local/build-rootfs.sh', 'versions.env', 'packages/base.txt', `packages/${name}.txt`]));
    for (const file of inputs) expect(existsSync(join(SANDBOX_IMAGES, file)), file).toBe(true);
  });

  it('leaves out what only other images and the Dockerfiles read', () => {
    expect(inputsOf('python')).not.toContain('packages/browser.txt');
    expect(inputsOf('browser')).toContain('browser/berth-browser');
    for (const name of IMAGE_NAMES) expect(inputsOf(name).some((file) => file.endsWith('Dockerfile'))).toBe(false);
  });
});

describe('ImageStore.path', () => {
  let tree: string;
  const pathsOf = async () => {
    const store = new ImageStore(join(tmp, 'images'), silentLogger, join(tree, 'local', 'build-rootfs.sh'));
    return Object.fromEntries(await Promise.all(IMAGE_NAMES.map(async (name) => [name, basename(await store.path(name))])));
  };

  beforeEach(async () => {
    tree = join(tmp, 'sandbox-images');
    await cp(SANDBOX_IMAGES, tree, { recursive: true });
  });

  it('names each image by a hash of its inputs, the same every time', async () => {
    const paths = await pathsOf();
    for (const name of IMAGE_NAMES) expect(paths[name]).toMatch(new RegExp(`^${name}-[0-9a-f]{12}$`));
    expect(await pathsOf()).toEqual(paths);
  });

  it('changes only for the images whose inputs changed', async () => {
    const before = await pathsOf();
    await appendFile(join(tree, 'packages', 'browser.txt'), 'fonts-noto-color-emoji\n');
    const after = await pathsOf();
    expect(after.browser).not.toBe(before.browser);
    expect({ ...after, browser: undefined }).toEqual({ ...before, browser: undefined });
  });

  it('changes for every image when a version or the build script changes', async () => {
    const before = await pathsOf();
    await appendFile(join(tree, 'versions.env'), '# touched\n');
    const afterVersions = await pathsOf();
    await appendFile(join(tree, 'local', 'build-rootfs.sh'), '# touched\n');
    const afterScript = await pathsOf();
    for (const name of IMAGE_NAMES) {
      expect(afterVersions[name]).not.toBe(before[name]);
      expect(afterScript[name]).not.toBe(afterVersions[name]);
    }
  });

  it('ignores the Dockerfiles and the README', async () => {
    const before = await pathsOf();
    await appendFile(join(tree, 'browser', 'Dockerfile'), '# touched\n');
    await appendFile(join(tree, 'README.md'), 'touched\n');
    expect(await pathsOf()).toEqual(before);
  });
});

describe('ImageStore builds', () => {
  let store: ImageStore;
  let calls: string;

  beforeEach(async () => {
    // A stand-in build script: records each build, fails for go, and makes a rootfs otherwise.
    const script = join(tmp, 'src', 'local', 'build-rootfs.sh');
    calls = join(tmp, 'calls');
    await mkdir(dirname(script), { recursive: true });
    await writeFile(
      script,
      [
        '#!/usr/bin/env bash',
        'set -eu',
        'if [ "$1" = --inputs ]; then echo local/build-rootfs.sh; exit 0; fi',
        'echo "[build-rootfs $1] working" >&2',
        `echo "$1" >>'${calls}'`,
        'if [ "$1" = go ]; then echo "no toolchain today" >&2; mkdir -p "$2"; exit 1; fi',
        'sleep 0.2',
        'mkdir -p "$2/rootfs/usr/bin"',
      ].join('\n'),
    );
    await chmod(script, 0o755);
    store = new ImageStore(join(tmp, 'images'), silentLogger, script);
  });

  const builds = async () => (existsSync(calls) ? (await readFile(calls, 'utf8')).split('\n').filter(Boolean) : []);

  it('builds an image once, however many ask at the same time, and renames it into place', async () => {
    const [first, second] = await Promise.all([store.ensure('python'), store.ensure('python')]);
    expect(first).toBe(second);
    expect(first).toBe(join(await store.path('python'), 'rootfs'));
    expect(await store.isBuilt('python')).toBe(true);
    expect(await store.ensure('python')).toBe(first);
    expect(await builds()).toEqual(['python']);
    expect(await readdir(join(tmp, 'images'))).toEqual([basename(await store.path('python'))]);
  });

  it('answers "not ready" while an image builds, then its rootfs', async () => {
    await expect(store.ready('node')).rejects.toBeInstanceOf(SandboxNotReadyError);
    await store.ensure('node');
    expect(await store.ready('node')).toBe(join(await store.path('node'), 'rootfs'));
  });

  it('reports a failed build with the end of its output and leaves nothing behind', async () => {
    await expect(store.ensure('go')).rejects.toThrow(/building sandbox image go failed: .*no toolchain today/);
    expect(await store.isBuilt('go')).toBe(false);
    expect(await readdir(join(tmp, 'images'))).toEqual([]);
  });
});

describe('the image of each agent', () => {
  // A sandbox that is already running (its directory is there) is adopted as it is, so
  // provision only picks its image.
  const runsc = { state: async () => 'running' } as unknown as Runsc;
  const provider = (browserImage?: string) =>
    new LocalProvider({
      runsc,
      images: new ImageStore(join(tmp, 'images'), silentLogger),
      sandboxDir: join(tmp, 'sandboxes'),
      cpus: 1,
      memoryBytes: 1024 ** 3,
      workspaceBytes: 1024 ** 3,
      overlayBytes: 256 * 1024 ** 2,
      ...(browserImage !== undefined ? { browserImage } : {}),
      log: silentLogger,
    });
  const imageOf = async (local: LocalProvider, request: { compute: Compute; browser?: boolean }) => {
    await mkdir(join(tmp, 'sandboxes', 'agt_1'), { recursive: true });
    return (await local.provision({ agentId: 'agt_1', sessionId: 'ses_1', timeoutSeconds: 60, env: {}, browser: false, ...request })).details?.image;
  };

  it.each(['python', 'node', 'go'] as const)('runs %s agents on the %s image', async (compute) => {
    expect(await imageOf(provider(), { compute })).toBe(compute);
  });

  it('runs browser agents on the browser image, whatever their compute', async () => {
    const local = provider('browser');
    expect(local.capabilities.browser).toBe(true);
    expect(await imageOf(local, { compute: 'node', browser: true })).toBe('browser');
    expect(await imageOf(local, { compute: 'node' })).toBe('node');
  });

  it('refuses browser agents without a browser image, and a browser image it does not have', async () => {
    expect(provider().capabilities.browser).toBe(false);
    await expect(imageOf(provider(), { compute: 'python', browser: true })).rejects.toThrow(/browser/);
    expect(() => provider('berth/sandbox-browser:0.1.0')).toThrow(/not a local sandbox image/);
  });
});

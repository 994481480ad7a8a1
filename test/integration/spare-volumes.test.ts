import { randomBytes, randomUUID } from 'node:crypto';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../common/src/config.js';
import { createLogger } from '../../common/src/log.js';
import { createLocalProvider } from '../../providers/src/local/index.js';
import { ensureVolume, isMountPoint, SpareVolumes, unmountVolume } from '../../providers/src/local/volume.js';
import { tempDir } from '../helpers/berth.js';
import { mountsUnder, removeDataDir } from '../helpers/runsc.js';

/**
 * The spare workspace filesystems of the local provider, on real ext4 images, loop devices and
 * mounts (root): spares are made and mounted ahead, a new sandbox's directory is a spare renamed
 * (its workspace mounted already), `close` unmounts the stock, and a stock left by a process that
 * crashed is used again, its partial, old and other-sized spares unmounted and removed. No loop
 * device outlives the filesystems it backs.
 */
const SIZE = 64 * 1024 ** 2;
const SPARE_NAME = new RegExp(`^${SIZE}-[0-9a-f-]{36}$`);

let dir: string;

beforeAll(() => {
  dir = tempDir('berth-spares-');
});

afterAll(() => {
  removeDataDir(dir);
});

/** e2fsck's forced, read-only check: its exit status (0: no errors) and what it printed. */
function fsck(image: string): { status: number | null; output: string } {
  const result = spawnSync('e2fsck', ['-fn', image], { encoding: 'utf8' });
  return { status: result.status, output: result.stdout + result.stderr };
}

/** A filesystem e2fsck finds without errors, holding `files` inodes in use (10 for an empty ext4: the reserved ones and the root). */
function expectClean(image: string, files: number): void {
  const { status, output } = fsck(image);
  expect(status, output).toBe(0);
  expect(output).toMatch(new RegExp(`: ${files}/\\d+ files`));
}

/** The backing files of the loop devices set up on files under `under` (`losetup -a`, other tests' devices left out). */
function loopsUnder(under: string): string[] {
  const result = spawnSync('losetup', ['--list', '--noheadings', '--raw', '--output', 'BACK-FILE'], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout
    .split('\n')
    .map((line) => line.trim())
    .filter((file) => file.startsWith(`${under}/`));
}

/** The loop devices under `under` once there are `count` of them: an autoclear device goes just after its unmount. */
async function loopsOnceSettled(under: string, count: number): Promise<string[]> {
  const deadline = Date.now() + 5_000;
  let loops = loopsUnder(under);
  while (loops.length !== count && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    loops = loopsUnder(under);
  }
  return loops;
}

/** An ext4 image at `image`, mounted at `mountPoint`, made as a stopped process would have left it. */
function mountedImage(image: string, mountPoint: string, sizeBytes = SIZE): void {
  mkdirSync(mountPoint, { recursive: true });
  for (const [command, ...args] of [
    ['truncate', '-s', String(sizeBytes), image],
    ['mkfs.ext4', '-q', '-F', image],
    ['mount', '-o', 'loop', image, mountPoint],
  ] as string[][]) {
    const result = spawnSync(command!, args, { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
  }
}

function spares(stock: string): string[] {
  return readdirSync(stock).filter((name) => SPARE_NAME.test(name));
}

describe('spare workspace filesystems, mounted ahead', () => {
  it('makes spares mounted; a new directory is one renamed: its workspace mounted, empty (no lost+found), clean, of the size; fill makes another; close unmounts the stock', async () => {
    const area = join(dir, 'life');
    const stock = join(area, 'stock');
    const errors: Error[] = [];
    const volumes = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 2, onError: (error) => errors.push(error) });
    volumes.fill();
    await volumes.settled();
    const made = spares(stock);
    expect(readdirSync(stock)).toEqual(made);
    expect(made).toHaveLength(2);
    for (const name of made) {
      expect(await isMountPoint(join(stock, name, 'workspace'))).toBe(true);
      expect(readdirSync(join(stock, name, 'workspace'))).toEqual([]);
      expect(statSync(join(stock, name)).mode & 0o777).toBe(0o700);
    }
    expect(await loopsOnceSettled(area, 2)).toHaveLength(2);
    const inodes = made.map((name) => statSync(join(stock, name, 'workspace.ext4')).ino);

    const root = join(area, 'sandbox');
    expect(await volumes.take(root)).toBe(true);
    // The directory is one of the spares, moved with its mount: a rename keeps the inodes.
    expect(inodes).toContain(statSync(join(root, 'workspace.ext4')).ino);
    expect(await isMountPoint(join(root, 'workspace'))).toBe(true);
    expect(statSync(root).mode & 0o777).toBe(0o700);
    expect(readdirSync(join(root, 'workspace'))).toEqual([]);
    expect(spares(stock)).toHaveLength(1);
    writeFileSync(join(root, 'workspace', 'kept.txt'), 'kept\n');
    await unmountVolume(join(root, 'workspace'));
    expect(statSync(join(root, 'workspace.ext4')).size).toBe(SIZE);
    expectClean(join(root, 'workspace.ext4'), 11);
    expect(await loopsOnceSettled(area, 1)).toHaveLength(1);

    // Taken, not made again until asked (the provider asks once the sandbox has started).
    volumes.fill();
    await volumes.settled();
    expect(spares(stock)).toHaveLength(2);
    expect(await loopsOnceSettled(area, 2)).toHaveLength(2);
    expect(errors).toEqual([]);

    // Mounted again, the workspace keeps what was written: it is the image's, not a new spare's.
    await ensureVolume(join(root, 'workspace.ext4'), join(root, 'workspace'), SIZE);
    expect(readFileSync(join(root, 'workspace', 'kept.txt'), 'utf8')).toBe('kept\n');
    await unmountVolume(join(root, 'workspace'));

    // Stopped: no spare mounted, no loop device left; the files stay for the next process.
    await volumes.close();
    expect(mountsUnder(stock)).toEqual([]);
    expect(await loopsOnceSettled(area, 0)).toEqual([]);
    expect(spares(stock)).toHaveLength(2);
    expect(await volumes.take(join(area, 'after-close'))).toBe(false);
    volumes.fill();
    await volumes.settled();
    expect(mountsUnder(stock)).toEqual([]);
  });

  it('an unmount returns once the filesystem is released, all its writes in the image, though a mount namespace made meanwhile held a copy of the mount', async () => {
    const area = join(dir, 'held');
    const image = join(area, 'workspace.ext4');
    const mountPoint = join(area, 'workspace');
    mountedImage(image, mountPoint);
    // A namespace made while the volume is mounted copies its mount, as a starting sandbox's does.
    const holder = spawn('unshare', ['--mount', '--propagation', 'unchanged', 'sleep', '1.5'], { stdio: 'ignore' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    writeFileSync(join(mountPoint, 'kept.txt'), 'kept\n');
    const exited = new Promise((resolve) => holder.once('exit', resolve));
    await unmountVolume(mountPoint);
    // Read before anything else waits: the image holds the file (11 inodes of an empty ext4, the file's), no loop device is left.
    expectClean(image, 12);
    expect(loopsUnder(area)).toEqual([]);
    expect(await exited).toBe(0);
    expect(await isMountPoint(mountPoint)).toBe(false);
  });

  it('has no spare for a directory that holds files already, nor when the stock is empty: the caller makes its own workspace', async () => {
    const area = join(dir, 'refused');
    const stock = join(area, 'stock');
    const volumes = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 1 });
    expect(await volumes.take(join(area, 'a'))).toBe(false);
    await ensureVolume(join(area, 'a', 'workspace.ext4'), join(area, 'a', 'workspace'), SIZE);
    expect(readdirSync(join(area, 'a', 'workspace'))).toEqual([]);
    await unmountVolume(join(area, 'a', 'workspace'));
    expectClean(join(area, 'a', 'workspace.ext4'), 10);

    volumes.fill();
    await volumes.settled();
    const [spare] = spares(stock);
    const occupied = join(area, 'occupied');
    mkdirSync(occupied);
    writeFileSync(join(occupied, 'bundle.json'), '{}');
    expect(await volumes.take(occupied)).toBe(false);
    expect(readdirSync(occupied)).toEqual(['bundle.json']);
    // The spare stays in the stock, mounted, for the next directory.
    expect(spares(stock)).toEqual([spare]);
    expect(await volumes.take(join(area, 'b'))).toBe(true);
    expect(await isMountPoint(join(area, 'b', 'workspace'))).toBe(true);
    await unmountVolume(join(area, 'b', 'workspace'));
    await volumes.close();
    expect(await loopsOnceSettled(area, 0)).toEqual([]);
  });

  it('after a crash: uses the spares left mounted, mounts those left unmounted, unmounts and removes partial, old and other-sized ones; no loop device leaks', async () => {
    const area = join(dir, 'crash');
    const stock = join(area, 'stock');
    const first = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 2 });
    first.fill();
    await first.settled();
    // The process crashes here: `close` never runs, both spares stay mounted.
    const [stillMounted, unmounted] = spares(stock) as [string, string];
    // One of them unmounted, as after a reboot (or a `close`).
    await unmountVolume(join(stock, unmounted, 'workspace'));
    // What else a crash can leave: a spare being made (mounted, not renamed yet), a spare of another
    // size (a changed BERTH_WORKSPACE_SIZE), an image of the stock before spares were mounted.
    const partial = join(stock, `${SIZE}-${randomUUID()}.partial`);
    mountedImage(join(partial, 'workspace.ext4'), join(partial, 'workspace'));
    const otherSize = join(stock, `${2 * SIZE}-${randomUUID()}`);
    mountedImage(join(otherSize, 'workspace.ext4'), join(otherSize, 'workspace'), 2 * SIZE);
    const oldImage = join(stock, `${SIZE}-${randomUUID()}.ext4`);
    writeFileSync(oldImage, '');
    expect(await loopsOnceSettled(area, 3)).toHaveLength(3);
    const mountedInode = statSync(join(stock, stillMounted, 'workspace.ext4')).ino;
    const unmountedInode = statSync(join(stock, unmounted, 'workspace.ext4')).ino;

    const second = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 2 });
    const rootA = join(area, 'a');
    expect(await second.take(rootA)).toBe(true);
    // The mounted spare first: nothing to mount on the way.
    expect(statSync(join(rootA, 'workspace.ext4')).ino).toBe(mountedInode);
    expect(await isMountPoint(join(rootA, 'workspace'))).toBe(true);
    expect(readdirSync(stock)).toEqual([unmounted]);
    expect(existsSync(partial) || existsSync(otherSize) || existsSync(oldImage)).toBe(false);
    // The partial and other-sized spares' devices are gone with their mounts.
    expect(await loopsOnceSettled(area, 1)).toEqual([join(rootA, 'workspace.ext4')]);

    // The spare left unmounted is mounted where it is taken to.
    const rootB = join(area, 'b');
    expect(await second.take(rootB)).toBe(true);
    expect(statSync(join(rootB, 'workspace.ext4')).ino).toBe(unmountedInode);
    expect(await isMountPoint(join(rootB, 'workspace'))).toBe(true);
    expect(readdirSync(join(rootB, 'workspace'))).toEqual([]);
    expect(readdirSync(stock)).toEqual([]);

    second.fill();
    await second.settled();
    expect(spares(stock)).toHaveLength(2);
    for (const name of spares(stock)) expect(await isMountPoint(join(stock, name, 'workspace'))).toBe(true);
    await second.close();
    await unmountVolume(join(rootA, 'workspace'));
    await unmountVolume(join(rootB, 'workspace'));
    expect(mountsUnder(area)).toEqual([]);
    expect(await loopsOnceSettled(area, 0)).toEqual([]);
    expectClean(join(rootA, 'workspace.ext4'), 10);
  });

  it('a local sandbox starts in a spare: its /workspace the spare mounted, empty and writable; no mount or loop device stays after its end and the provider close', async () => {
    const dataDir = join(dir, 'provider');
    mkdirSync(dataDir, { mode: 0o755 });
    const provider = createLocalProvider({ ...loadConfig({}), dataDir, workspaceSize: SIZE }, createLogger({ level: 'warn', name: 'spare-volumes-test' }));
    const stock = join(dataDir, 'sandboxes', '.spare-volumes');
    await provider.prepareImages();
    // Filled in the background: the first sandbox may start before a spare is ready, so wait for one.
    const deadline = Date.now() + 60_000;
    while (!(existsSync(stock) && spares(stock).length === 4) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
    expect(spares(stock)).toHaveLength(4);
    const inodes = spares(stock).map((name) => statSync(join(stock, name, 'workspace.ext4')).ino);

    const agentId = `agt_${randomBytes(6).toString('hex')}`;
    const sandbox = await provider.provision({ agentId, sessionId: 'ses_spares', timeoutSeconds: 600, compute: 'python', browser: false, env: {} });
    const root = join(dataDir, 'sandboxes', agentId);
    expect(inodes).toContain(statSync(join(root, 'workspace.ext4')).ino);
    expect(await isMountPoint(join(root, 'workspace'))).toBe(true);
    const written = await provider.exec(sandbox, { language: 'bash', code: 'ls -A /workspace | wc -l; echo hello > /workspace/a.txt; df -k --output=size /workspace | tail -1', timeoutMs: 30_000 });
    expect(written.exitCode, written.stderr).toBe(0);
    // Empty before the write (no lost+found); the filesystem of the spare's size (64 MiB, less ext4's own blocks).
    const [entries, sizeKib] = written.stdout.trim().split('\n').map((line) => Number(line.trim()));
    expect(entries).toBe(0);
    expect(sizeKib).toBeGreaterThan(50_000);
    expect(sizeKib).toBeLessThanOrEqual(SIZE / 1024);
    expect(readFileSync(join(root, 'workspace', 'a.txt'), 'utf8')).toBe('hello\n');

    await provider.terminate(sandbox);
    expect(existsSync(root)).toBe(false);
    await provider.close();
    expect(mountsUnder(join(dataDir, 'sandboxes'))).toEqual([]);
    expect(await loopsOnceSettled(dataDir, 0)).toEqual([]);
  }, 180_000);
});

import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { runProcess, type RunResult } from './process.js';

/**
 * A sandbox's `/workspace` as a filesystem of its own: an ext4 filesystem in a sparse file,
 * loop-mounted on the host at the workspace directory (see docs/adr/0015-sandbox-disk-limits.md).
 * A program that fills it gets ENOSPC; the host disk holds at most the file's size, and less when
 * little is written (mounted with `discard`, deleted files give their blocks back to the host).
 * The mount point stays the path the rest of the provider reads (archives, tests), and it outlives
 * Berth and the sandbox, like the directory did.
 */
export class VolumeError extends Error {
  constructor(operation: string, result: RunResult) {
    super(`${operation} failed (exit ${result.exitCode}): ${result.stderr.trim().split('\n').slice(-2).join(' | ')}`);
    this.name = 'VolumeError';
  }
}

// A fresh sparse file reads as zeros, so the inode tables need no initialising, neither by mkfs
// nor by the kernel's lazy-init thread (which would write them all out on the host).
const MKFS_ARGS = ['-q', '-F', '-m', '0', '-E', 'lazy_itable_init=1,lazy_journal_init=1,nodiscard'];
const MOUNT_OPTIONS = 'loop,discard,noinit_itable,nosuid,nodev';

async function run(command: string, args: string[], operation: string): Promise<void> {
  const result = await runProcess(command, args, { timeoutMs: 60_000 });
  if (result.exitCode !== 0) throw new VolumeError(operation, result);
}

/**
 * Makes sure the filesystem in `image` exists (an empty one of `sizeBytes` when it does not) and
 * is mounted at `mountPoint`. Idempotent. A `mountPoint` that is a plain directory holding files
 * (a workspace from before volumes) has its files moved into the new filesystem.
 */
export async function ensureVolume(image: string, mountPoint: string, sizeBytes: number): Promise<void> {
  if (await isMountPoint(mountPoint)) return;
  await mkdir(mountPoint, { recursive: true });
  if (!existsSync(image)) {
    await createFilesystem(image, sizeBytes);
    if ((await readdir(mountPoint)).length > 0) await adoptDirectory(image, mountPoint);
  }
  await mount(image, mountPoint);
}

async function createFilesystem(image: string, sizeBytes: number): Promise<void> {
  const partial = `${image}.partial`;
  await rm(partial, { force: true });
  await run('truncate', ['-s', String(sizeBytes), partial], 'truncate');
  await run('mkfs.ext4', [...MKFS_ARGS, partial], 'mkfs.ext4');
  // lost+found would show in every /workspace and snapshot; e2fsck makes it again when it needs it.
  const scratch = `${image}.mnt`;
  await mkdir(scratch, { recursive: true });
  await mount(partial, scratch);
  try {
    await rmdir(`${scratch}/lost+found`);
  } finally {
    await unmountVolume(scratch);
    await rmdir(scratch);
  }
  await rename(partial, image);
}

/** Copies the files of a plain workspace directory into the (unmounted) filesystem in `image`. */
async function adoptDirectory(image: string, directory: string): Promise<void> {
  const scratch = `${image}.mnt`;
  await mkdir(scratch, { recursive: true });
  await mount(image, scratch);
  try {
    await run('cp', ['-a', '--', `${directory}/.`, `${scratch}/`], 'copying the workspace into its volume');
  } finally {
    await unmountVolume(scratch);
    await rmdir(scratch);
  }
  await rm(directory, { recursive: true, force: true });
  await mkdir(directory);
}

function mount(image: string, mountPoint: string): Promise<void> {
  return run('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, image, mountPoint], 'mount');
}

/** Unmounts the volume at `mountPoint`, if one is mounted there; the loop device goes with it. */
export async function unmountVolume(mountPoint: string): Promise<void> {
  if (!(await isMountPoint(mountPoint))) return;
  const result = await runProcess('umount', [mountPoint], { timeoutMs: 60_000 });
  if (result.exitCode === 0) return;
  // Still busy (a process that has not exited yet holds a file): detach it now, it goes when freed.
  await run('umount', ['--lazy', mountPoint], 'umount');
}

/** Whether something is mounted at `path` (an absolute path), from this process's mount table. */
export async function isMountPoint(path: string): Promise<boolean> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  return table.split('\n').some((line) => unescapeMountPath(line.split(' ')[4] ?? '') === path);
}

/** mountinfo writes space, tab, newline and backslash in paths as octal escapes. */
function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

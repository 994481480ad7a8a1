import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
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
 * Makes sure the filesystem in `image` exists (an empty one of `sizeBytes` when it does not: a
 * spare one when `spares` has one of that size) and is mounted at `mountPoint`. Idempotent. A
 * `mountPoint` that is a plain directory holding files (a workspace from before volumes) has its
 * files moved into the new filesystem.
 */
export async function ensureVolume(image: string, mountPoint: string, sizeBytes: number, spares?: SpareVolumes): Promise<void> {
  if (await isMountPoint(mountPoint)) return;
  await mkdir(mountPoint, { recursive: true });
  if (!existsSync(image)) {
    const taken = spares?.sizeBytes === sizeBytes && (await spares.take(image));
    if (!taken) await createFilesystem(image, sizeBytes);
    if ((await readdir(mountPoint)).length > 0) await adoptDirectory(image, mountPoint);
  }
  await mount(image, mountPoint);
}

/** With `niced`, its programs yield the CPU to everything else (a spare is made while sandboxes start). */
async function createFilesystem(image: string, sizeBytes: number, niced = false): Promise<void> {
  const partial = `${image}.partial`;
  const program = (command: string, args: string[]): [string, string[]] => (niced ? ['nice', ['-n', '19', command, ...args]] : [command, args]);
  await rm(partial, { force: true });
  await run('truncate', ['-s', String(sizeBytes), partial], 'truncate');
  await run(...program('mkfs.ext4', [...MKFS_ARGS, partial]), 'mkfs.ext4');
  // lost+found would show in every /workspace and snapshot; e2fsck makes it again when it needs
  // it. debugfs removes it from the unmounted image: no mount and unmount of a scratch directory.
  await run(...program('debugfs', ['-w', '-R', 'rmdir lost+found', partial]), 'removing lost+found');
  await rename(partial, image);
}

/**
 * Empty workspace filesystems made ahead of need, so that a new sandbox's workspace costs a
 * rename and a mount rather than a truncate, a mkfs and a debugfs on the way to its start. Each
 * spare is complete when it has its name (`<size>-<uuid>.ext4`, renamed from a partial file);
 * what else is in the directory (a partial file of a process that stopped, spares of another
 * size) is removed when the stock is first used. The owner calls `fill` when the host has a
 * moment (the local provider: once a sandbox has started), and spares are made one at a time,
 * niced, so that they do not slow the starts they are for. A spare is a sparse file: it holds a
 * few megabytes of the host's disk (4.3 MB for 10 GiB).
 */
export class SpareVolumes {
  private readonly ready: string[] = [];
  private scanned: Promise<void> | undefined;
  private filling: Promise<void> | undefined;

  constructor(
    private readonly options: {
      dir: string;
      sizeBytes: number;
      /** How many spares are kept. */
      count: number;
      /** Told when a spare could not be made; the next take tries again. */
      onError?: (error: Error) => void;
    },
  ) {}

  get sizeBytes(): number {
    return this.options.sizeBytes;
  }

  /** Moves a spare filesystem to `image` (on the same filesystem) and says whether there was one. */
  async take(image: string): Promise<boolean> {
    const scanned = await this.scan().then(
      () => true,
      () => false, // the fill reports it
    );
    const spare = scanned ? this.ready.shift() : undefined;
    if (spare === undefined) return false;
    try {
      await rename(spare, image);
      return true;
    } catch {
      return false; // gone from under us: made afresh by the caller
    }
  }

  /** Makes spares until there are `count`, unless that is under way; the first take starts it too. */
  fill(): void {
    this.filling ??= (async () => {
      await this.scan();
      while (this.ready.length < this.options.count) {
        const spare = join(this.options.dir, `${this.options.sizeBytes}-${randomUUID()}.ext4`);
        await createFilesystem(spare, this.options.sizeBytes, true);
        this.ready.push(spare);
      }
    })()
      .catch((error: unknown) => this.options.onError?.(error as Error))
      .finally(() => {
        this.filling = undefined;
      });
  }

  /** Resolves when no spare is being made (for tests, and before removing the directory). */
  async settled(): Promise<void> {
    await this.filling;
  }

  /** Reads the directory once (again after a failure). */
  private scan(): Promise<void> {
    this.scanned ??= this.readDirectory().catch((error: unknown) => {
      this.scanned = undefined;
      throw error;
    });
    return this.scanned;
  }

  private async readDirectory(): Promise<void> {
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    const complete = new RegExp(`^${this.options.sizeBytes}-[0-9a-f-]{36}\\.ext4$`);
    for (const name of (await readdir(this.options.dir)).sort()) {
      if (complete.test(name)) this.ready.push(join(this.options.dir, name));
      else await rm(join(this.options.dir, name), { force: true });
    }
  }
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

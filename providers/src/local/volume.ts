import { randomUUID } from 'node:crypto';
import { existsSync, renameSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { WORKSPACE_DIR } from './manifest.js';
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
 * (a workspace from before volumes) has its files moved into the new filesystem. A new sandbox's
 * workspace comes ready mounted from `SpareVolumes.take` instead.
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

/** With `niced`, its programs yield the CPU to everything else (a spare is made while sandboxes start). */
async function createFilesystem(image: string, sizeBytes: number, niced = false): Promise<void> {
  const partial = `${image}.partial`;
  await rm(partial, { force: true });
  await run('truncate', ['-s', String(sizeBytes), partial], 'truncate');
  await run(...program('mkfs.ext4', [...MKFS_ARGS, partial], niced), 'mkfs.ext4');
  // lost+found would show in every /workspace and snapshot; e2fsck makes it again when it needs
  // it. debugfs removes it from the unmounted image: no mount and unmount of a scratch directory.
  await run(...program('debugfs', ['-w', '-R', 'rmdir lost+found', partial], niced), 'removing lost+found');
  await rename(partial, image);
}

function program(command: string, args: string[], niced: boolean): [string, string[]] {
  return niced ? ['nice', ['-n', '19', command, ...args]] : [command, args];
}

/** A sandbox's workspace filesystem in its directory (mounted at `workspace/` there): the layout of a spare, which becomes one. */
export const VOLUME_IMAGE = 'workspace.ext4';
const SPARE_MOUNT = WORKSPACE_DIR;

/**
 * Empty workspace filesystems made and mounted ahead of need, so that a new sandbox's workspace
 * costs one rename on its way to its start: no truncate, mkfs and debugfs, and no mount either.
 * Each spare is a directory `<size>-<uuid>` holding `workspace.ext4` and, mounted from it,
 * `workspace/`: the layout of a sandbox's own directory, which `take` renames the spare to. A
 * directory that holds a mount point can be renamed and the mount goes with it (the mount point
 * itself cannot be: EBUSY), and a rename is no mount operation, so it works whatever the
 * propagation of the parent mount (`mount --move` fails under a shared one, as `/` is on systemd
 * hosts).
 *
 * A spare is complete when it has its name (renamed from `<name>.partial` once mounted); what else
 * is in the directory (a partial spare of a process that stopped, spares of another size, the
 * unmounted image files of the stock before spares were mounted) is unmounted and removed when the
 * stock is first used. Complete spares a stopped process left are used again: still mounted after
 * a crash, or mounted again by `fill` (after `close` or a reboot). The owner calls `fill` when the
 * host has a moment (the local provider: once a sandbox has started), and spares are made one at
 * a time, niced, so that they do not slow the starts they are for; `close` unmounts every spare,
 * so a stopped process holds no mount and no loop device. A spare is a sparse file: it holds a few
 * megabytes of the host's disk (4.3 MB for 10 GiB).
 */
export class SpareVolumes {
  /** Complete spares whose workspace is mounted. */
  private readonly mounted: string[] = [];
  /** Complete spares whose workspace is not mounted (left by `close` or a reboot). */
  private readonly unmounted: string[] = [];
  private scanned: Promise<void> | undefined;
  private filling: Promise<void> | undefined;
  private closed = false;

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

  /**
   * Renames a spare to `directory` (on the same filesystem, not there yet or empty), which then
   * holds `workspace.ext4` mounted at `workspace/`, and says whether there was one. A spare that
   * is not mounted yet (after a restart) is mounted there.
   */
  async take(directory: string): Promise<boolean> {
    if (this.closed) return false;
    const scanned = await this.scan().then(
      () => true,
      () => false, // the fill reports it
    );
    if (!scanned) return false;
    const wasMounted = this.mounted.length > 0;
    const spare = this.mounted.shift() ?? this.unmounted.shift();
    if (spare === undefined) return false;
    try {
      // Synchronous: a rename takes microseconds, and on a loaded host a round through the
      // thread pool on the way to the sandbox's start took milliseconds.
      renameSync(spare, directory);
    } catch {
      // `directory` holds files already, or the spare went from under us: the caller makes its own.
      if (existsSync(spare)) (wasMounted ? this.mounted : this.unmounted).push(spare);
      return false;
    }
    if (!wasMounted) await mount(join(directory, VOLUME_IMAGE), join(directory, SPARE_MOUNT));
    return true;
  }

  /** Makes and mounts spares until there are `count` mounted, unless that is under way; the first take starts it too. */
  fill(): void {
    if (this.closed) return;
    this.filling ??= (async () => {
      await this.scan();
      while (!this.closed && this.mounted.length < this.options.count) {
        const left = this.unmounted.shift();
        this.mounted.push(left !== undefined ? await this.mountSpare(left) : await this.makeSpare());
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

  /** Stops making spares and unmounts every spare; their files stay, to be mounted again by the next process. */
  async close(): Promise<void> {
    this.closed = true;
    await this.filling;
    while (this.mounted.length > 0) {
      const spare = this.mounted.shift()!;
      await unmountVolume(join(spare, SPARE_MOUNT));
      this.unmounted.push(spare);
    }
  }

  private async makeSpare(): Promise<string> {
    const spare = join(this.options.dir, `${this.options.sizeBytes}-${randomUUID()}`);
    const partial = `${spare}.partial`;
    await rm(partial, { recursive: true, force: true });
    // Readable by root only, as a sandbox's directory is: the spare becomes one.
    await mkdir(partial, { mode: 0o700 });
    await mkdir(join(partial, SPARE_MOUNT));
    try {
      await createFilesystem(join(partial, VOLUME_IMAGE), this.options.sizeBytes, true);
      await mount(join(partial, VOLUME_IMAGE), join(partial, SPARE_MOUNT), true);
      await rename(partial, spare);
      return spare;
    } catch (error) {
      await unmountVolume(join(partial, SPARE_MOUNT)).catch(() => undefined); // the first error is the one to report
      await rm(partial, { recursive: true, force: true }).catch(() => undefined);
      throw error;
    }
  }

  private async mountSpare(spare: string): Promise<string> {
    const mountPoint = join(spare, SPARE_MOUNT);
    if (!(await isMountPoint(mountPoint))) await mount(join(spare, VOLUME_IMAGE), mountPoint, true);
    return spare;
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
    const complete = new RegExp(`^${this.options.sizeBytes}-[0-9a-f-]{36}$`);
    const mounts = await mountTable();
    for (const entry of (await readdir(this.options.dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      const path = join(this.options.dir, entry.name);
      if (entry.isDirectory() && complete.test(entry.name) && existsSync(join(path, VOLUME_IMAGE))) {
        (mounts.has(join(path, SPARE_MOUNT)) ? this.mounted : this.unmounted).push(path);
        continue;
      }
      if (mounts.has(join(path, SPARE_MOUNT))) await unmountVolume(join(path, SPARE_MOUNT));
      await rm(path, { recursive: true, force: true });
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

function mount(image: string, mountPoint: string, niced = false): Promise<void> {
  return run(...program('mount', ['-t', 'ext4', '-o', MOUNT_OPTIONS, image, mountPoint], niced), 'mount');
}

/**
 * Unmounts the volume at `mountPoint`, if one is mounted there, and waits until its filesystem is
 * released: its loop device detached, every write in the image. `umount` alone returns once this
 * namespace's mount is gone, but a mount namespace made meanwhile (a sandbox starting, any
 * `unshare`) holds a copy of the mount until it drops it, and until then the image on disk can
 * lack what was written. Callers read, copy or mount the image next.
 */
export async function unmountVolume(mountPoint: string): Promise<void> {
  const source = (await mountTable()).get(mountPoint);
  if (source === undefined) return;
  const device = /^\/dev\/(loop\d+)$/.exec(source)?.[1];
  const loop = device === undefined ? undefined : await loopBacking(device);
  const result = await runProcess('umount', [mountPoint], { timeoutMs: 60_000 });
  if (result.exitCode !== 0) {
    // Still busy (a process that has not exited yet holds a file): detach it now, it goes when freed.
    await run('umount', ['--lazy', mountPoint], 'umount');
    return;
  }
  if (device === undefined || loop === undefined) return;
  const deadline = Date.now() + RELEASE_TIMEOUT_MS;
  while ((await loopBacking(device)) === loop) {
    if (Date.now() > deadline) {
      throw new Error(`the filesystem unmounted from ${mountPoint} is still held by another mount namespace after ${RELEASE_TIMEOUT_MS / 1000} s (${source} backs ${loop})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const RELEASE_TIMEOUT_MS = 30_000;

/** The file the loop device `device` (`loopN`) reads, or undefined when it is detached. */
async function loopBacking(device: string): Promise<string | undefined> {
  try {
    return (await readFile(`/sys/block/${device}/loop/backing_file`, 'utf8')).trim();
  } catch {
    return undefined;
  }
}

/** Whether something is mounted at `path` (an absolute path), from this process's mount table. */
export async function isMountPoint(path: string): Promise<boolean> {
  return (await mountTable()).has(path);
}

/** This process's mount table: each mount point with its source (the device), the last mount on a point winning. */
async function mountTable(): Promise<Map<string, string>> {
  const table = await readFile('/proc/self/mountinfo', 'utf8');
  const mounts = new Map<string, string>();
  for (const line of table.split('\n')) {
    if (line === '') continue;
    const fields = line.split(' ');
    const optional = fields.indexOf('-', 6);
    mounts.set(unescapeMountPath(fields[4] ?? ''), unescapeMountPath(fields[optional + 2] ?? ''));
  }
  return mounts;
}

/** mountinfo writes space, tab, newline and backslash in paths as octal escapes. */
function unescapeMountPath(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

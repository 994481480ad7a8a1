import { randomBytes } from 'node:crypto';
import { chmod, mkdir, open, rename, rmdir, stat, unlink, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve, sep } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { ArchiveNotFoundError, meterArchive, type SnapshotStorage, type StoredArchive } from '@berth/common';

export class InvalidArchiveKeyError extends Error {
  constructor(readonly key: string, reason: string) {
    super(`snapshot archive key ${JSON.stringify(key)} is refused: ${reason}`);
    this.name = 'InvalidArchiveKeyError';
  }
}

/** Errors that mean "no file there": the file, or one of its parent directories, is missing or is a file. */
const ABSENT = new Set(['ENOENT', 'ENOTDIR']);
const isAbsent = (error: unknown) => ABSENT.has((error as NodeJS.ErrnoException).code ?? '');

/**
 * Snapshot archives as files under one root directory, for embedded mode. Keys are relative
 * paths (`agents/a1/snap_1`); a write is all-or-nothing, so a crash or a broken source never
 * leaves half an archive under a key. Only the owner reads them (directories 0700, files 0600):
 * an archive holds an agent's files and, at native level, its processes' memory.
 */
export class DirectoryStorage implements SnapshotStorage {
  readonly kind = 'directory';
  readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  async put(key: string, body: Readable): Promise<StoredArchive> {
    const target = this.pathOf(key);
    await mkdir(this.root, { recursive: true, mode: 0o700 });
    await chmod(this.root, 0o700); // a root made before archives were kept private
    const { handle, path: temp } = await openTempBeside(target);
    try {
      const meter = meterArchive();
      // The stream owns the handle and closes it, even on error. `flush` syncs the data before
      // closing, so the rename below never publishes a name over bytes still in the page cache
      // (a power loss would leave a complete-looking but empty or partial file).
      await pipeline(body, meter.stream, handle.createWriteStream({ flush: true }));
      await rename(temp, target);
      await syncDirectory(dirname(target));
      return { key, ...meter.result() };
    } catch (error) {
      await handle.close().catch(() => {}); // normally closed already by the stream
      await unlink(temp).catch(() => {}); // gone already when the rename went through
      await this.removeEmptyParents(target).catch(() => {}); // the first error is the one to report
      throw error;
    }
  }

  async get(key: string): Promise<Readable> {
    const path = this.pathOf(key);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (error) {
      if (isAbsent(error)) throw new ArchiveNotFoundError(key);
      throw error;
    }
    // A key naming a directory (the parent of other keys) opens fine on Linux but is no archive.
    if (!(await handle.stat()).isFile()) {
      await handle.close();
      throw new ArchiveNotFoundError(key);
    }
    return handle.createReadStream(); // closes the handle at its end or when destroyed
  }

  async delete(key: string): Promise<void> {
    const path = this.pathOf(key);
    try {
      await unlink(path);
    } catch (error) {
      // EISDIR: the key names the directory of other keys, which holds no archive of its own.
      if (!isAbsent(error) && (error as NodeJS.ErrnoException).code !== 'EISDIR') throw error;
    }
    await this.removeEmptyParents(path);
  }

  async exists(key: string): Promise<boolean> {
    try {
      return (await stat(this.pathOf(key))).isFile();
    } catch (error) {
      if (isAbsent(error)) return false;
      throw error;
    }
  }

  /**
   * The file of a key. Keys are `/`-separated relative paths; anything that could name a file
   * outside the root, or the same file by two keys, is refused.
   */
  pathOf(key: string): string {
    const segments = key.split('/');
    for (const segment of segments) {
      if (segment === '') throw new InvalidArchiveKeyError(key, 'it is empty, absolute or has an empty segment');
      if (segment === '.' || segment === '..') throw new InvalidArchiveKeyError(key, 'it has a . or .. segment');
      if (segment.includes('\0')) throw new InvalidArchiveKeyError(key, 'it has a NUL character');
    }
    const path = join(this.root, ...segments);
    // The rules above already keep keys inside; this keeps a future loosening of them honest.
    if (relative(this.root, path).split(sep).includes('..')) throw new InvalidArchiveKeyError(key, 'it leads out of the root');
    return path;
  }

  /** Keys own their directories: once the last archive under one goes, so does the directory. */
  private async removeEmptyParents(path: string): Promise<void> {
    for (let dir = dirname(path); dir !== this.root; dir = dirname(dir)) {
      try {
        await rmdir(dir);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') continue; // a concurrent delete got there first; its parent may still be empty
        if (code === 'ENOTEMPTY' || code === 'EEXIST') return;
        throw error;
      }
    }
  }
}

/**
 * Creates a uniquely named temp file in the target's directory, so the final rename stays on
 * one filesystem and is atomic.
 */
async function openTempBeside(target: string): Promise<{ handle: FileHandle; path: string }> {
  // A concurrent delete may remove the directory between our mkdir and open: make it again.
  for (let attempt = 1; ; attempt++) {
    await mkdir(dirname(target), { recursive: true, mode: 0o700 });
    const path = join(dirname(target), `.${basename(target)}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      return { handle: await open(path, 'wx', 0o600), path };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT' || attempt === 3) throw error;
    }
  }
}

/** Makes a rename durable: the new directory entry is only on disk once the directory is synced. */
async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}


import { Readable } from 'node:stream';
import { posix } from 'node:path';
import type { SandboxRef } from '@berth/crds';
import { ProviderError, SandboxFileError, WORKSPACE_ROOT, type FileChange, type FileChangeType, type FileInfo, type FileWatch, type SandboxFiles } from '@berth/common';

/** What a test key's sandbox holds at most, as a real workspace volume would refuse more. */
export const MOCK_WORKSPACE_BYTES = 64 * 1024 * 1024;

/** A watch of a test key's directory: told of the changes made through the files API. */
interface Watcher {
  dir: string;
  recursive: boolean;
  push(change: FileChange): void;
  fail(error: Error): void;
}

interface Entry {
  type: 'file' | 'directory';
  data: Buffer;
  mode: number;
  modifiedAt: Date;
}

/**
 * Test keys' files (ADR 40): an in-memory tree per sandbox with the behaviour of a real one (a
 * directory must exist to hold a file, a directory with entries is removed only recursively, a
 * full workspace refuses a write), so that a client written against test keys meets the same
 * answers with live ones. No symlinks: nothing in a test key's sandbox makes them.
 */
export class MockFiles implements SandboxFiles {
  private readonly trees = new Map<string, Map<string, Entry>>();
  private readonly watchers = new Map<string, Set<Watcher>>();

  constructor(private readonly clock: () => Date = () => new Date()) {}

  /** Forgets a sandbox's files (it ended); its watches end with it. */
  drop(agentId: string): void {
    this.trees.delete(agentId);
    for (const watcher of this.watchers.get(agentId) ?? []) watcher.fail(new ProviderError('mock', `sandbox ${agentId} ended`, { sandbox: agentId }));
    this.watchers.delete(agentId);
  }

  /**
   * Tells the sandbox's watches of a change at `path`, as inotify would: a watch hears of its
   * directory's entries (and, recursive, of everything below); one whose directory itself was
   * removed or moved away ends with `not_found`.
   */
  private tell(ref: SandboxRef, path: string, type: FileChangeType): void {
    for (const watcher of this.watchers.get(ref.id) ?? []) {
      if (watcher.dir === path || watcher.dir.startsWith(`${path}/`)) {
        if (type === 'remove' || type === 'rename') watcher.fail(new SandboxFileError('not_found', `${watcher.dir}: the watched directory was removed or moved`, watcher.dir));
        continue;
      }
      if (posix.dirname(path) === watcher.dir || (watcher.recursive && path.startsWith(`${watcher.dir}/`))) watcher.push({ name: path.slice(watcher.dir.length + 1), type });
    }
  }

  private tree(ref: SandboxRef): Map<string, Entry> {
    let tree = this.trees.get(ref.id);
    if (!tree) {
      tree = new Map([[WORKSPACE_ROOT, { type: 'directory', data: Buffer.alloc(0), mode: 0o755, modifiedAt: this.clock() }]]);
      this.trees.set(ref.id, tree);
    }
    return tree;
  }

  private entry(ref: SandboxRef, path: string): Entry {
    const entry = this.tree(ref).get(path);
    if (!entry) throw new SandboxFileError('not_found', `${path}: No such file or directory`, path);
    return entry;
  }

  private info(path: string, entry: Entry): FileInfo {
    return { name: posix.basename(path), path, type: entry.type, size: entry.type === 'file' ? entry.data.length : 4096, mode: entry.mode, modifiedAt: entry.modifiedAt.toISOString() };
  }

  private children(tree: Map<string, Entry>, path: string): string[] {
    return [...tree.keys()].filter((key) => posix.dirname(key) === path && key !== path).sort();
  }

  private parentDirectory(ref: SandboxRef, path: string, parents: boolean): void {
    const parent = posix.dirname(path);
    const tree = this.tree(ref);
    const entry = tree.get(parent);
    if (entry?.type === 'directory') return;
    if (entry) throw new SandboxFileError('not_directory', `${parent}: Not a directory`, path);
    if (!parents) throw new SandboxFileError('not_found', `${parent}: No such file or directory`, path);
    this.parentDirectory(ref, parent, true);
    tree.set(parent, { type: 'directory', data: Buffer.alloc(0), mode: 0o755, modifiedAt: this.clock() });
    this.tell(ref, parent, 'create');
  }

  async stat(ref: SandboxRef, path: string): Promise<FileInfo> {
    return this.info(path, this.entry(ref, path));
  }

  async list(ref: SandboxRef, path: string): Promise<{ entries: FileInfo[]; omitted: number }> {
    if (this.entry(ref, path).type !== 'directory') throw new SandboxFileError('not_directory', `${path} is not a directory`, path);
    const tree = this.tree(ref);
    return { entries: this.children(tree, path).map((child) => this.info(child, tree.get(child)!)), omitted: 0 };
  }

  async read(ref: SandboxRef, path: string): Promise<{ info: FileInfo; body: Readable }> {
    const entry = this.entry(ref, path);
    if (entry.type === 'directory') throw new SandboxFileError('is_directory', `${path} is a directory (ask for its tar)`, path);
    return { info: this.info(path, entry), body: Readable.from([entry.data]) };
  }

  async write(ref: SandboxRef, path: string, body: Readable, options: { mode?: number; parents?: boolean }): Promise<FileInfo> {
    if (this.tree(ref).get(path)?.type === 'directory') throw new SandboxFileError('is_directory', `${path} is a directory`, path);
    this.parentDirectory(ref, path, options.parents ?? false);
    const used = [...this.tree(ref).entries()].reduce((sum, [key, entry]) => sum + (key === path ? 0 : entry.data.length), 0);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of body) {
      size += (chunk as Buffer).length;
      if (used + size > MOCK_WORKSPACE_BYTES) throw new SandboxFileError('no_space', `${path}: No space left on device`, path);
      chunks.push(chunk as Buffer);
    }
    const entry: Entry = { type: 'file', data: Buffer.concat(chunks), mode: options.mode ?? 0o644, modifiedAt: this.clock() };
    const created = !this.tree(ref).has(path);
    this.tree(ref).set(path, entry);
    if (created) this.tell(ref, path, 'create');
    this.tell(ref, path, 'write');
    return this.info(path, entry);
  }

  async mkdir(ref: SandboxRef, path: string, options: { parents?: boolean }): Promise<FileInfo> {
    const existing = this.tree(ref).get(path);
    if (existing && !(options.parents && existing.type === 'directory')) throw new SandboxFileError('exists', `${path}: File exists`, path);
    if (!existing) {
      this.parentDirectory(ref, path, options.parents ?? false);
      this.tree(ref).set(path, { type: 'directory', data: Buffer.alloc(0), mode: 0o755, modifiedAt: this.clock() });
      this.tell(ref, path, 'create');
    }
    return this.info(path, this.entry(ref, path));
  }

  async remove(ref: SandboxRef, path: string, options: { recursive?: boolean }): Promise<void> {
    if (path === WORKSPACE_ROOT) throw new SandboxFileError('bad_request', `${WORKSPACE_ROOT} itself cannot be removed`, path);
    const entry = this.entry(ref, path);
    const tree = this.tree(ref);
    const below = [...tree.keys()].filter((key) => key.startsWith(`${path}/`));
    if (entry.type === 'directory' && below.length > 0 && !options.recursive) throw new SandboxFileError('not_empty', `${path}: Directory not empty`, path);
    for (const key of [path, ...below]) tree.delete(key);
    for (const key of [...below].reverse()) this.tell(ref, key, 'remove');
    this.tell(ref, path, 'remove');
  }

  async move(ref: SandboxRef, from: string, to: string, options: { overwrite?: boolean }): Promise<FileInfo> {
    const entry = this.entry(ref, from);
    const tree = this.tree(ref);
    if (tree.has(to) && !options.overwrite) throw new SandboxFileError('exists', `${to} exists`, to);
    this.parentDirectory(ref, to, false);
    for (const key of [from, ...[...tree.keys()].filter((key) => key.startsWith(`${from}/`))]) {
      const moved = tree.get(key)!;
      tree.delete(key);
      tree.set(to + key.slice(from.length), moved);
    }
    // As envd tells a rename: the old name's rename, then the new name's create.
    this.tell(ref, from, 'rename');
    this.tell(ref, to, 'create');
    return this.info(to, entry);
  }

  async watch(ref: SandboxRef, path: string, options: { recursive?: boolean }): Promise<FileWatch> {
    const entry = this.entry(ref, path);
    if (entry.type !== 'directory') throw new SandboxFileError('not_directory', `${path} is not a directory`, path);
    const queue: FileChange[] = [];
    let failure: Error | undefined;
    let closed = false;
    let wake: (() => void) | undefined;
    const watcher: Watcher = {
      dir: path,
      recursive: options.recursive ?? false,
      push: (change) => {
        queue.push(change);
        wake?.();
      },
      fail: (error) => {
        failure ??= error;
        wake?.();
      },
    };
    const watchers = this.watchers.get(ref.id) ?? new Set<Watcher>();
    this.watchers.set(ref.id, watchers.add(watcher));
    const stop = () => {
      watchers.delete(watcher);
      if (watchers.size === 0 && this.watchers.get(ref.id) === watchers) this.watchers.delete(ref.id);
    };
    async function* changes(): AsyncGenerator<FileChange> {
      try {
        for (;;) {
          while (queue.length > 0) yield queue.shift()!;
          if (failure) throw failure;
          if (closed) return;
          await new Promise<void>((resolve) => (wake = resolve));
          wake = undefined;
        }
      } finally {
        stop();
      }
    }
    return {
      info: this.info(path, entry),
      changes: changes(),
      close: () => {
        closed = true;
        stop();
        wake?.();
      },
    };
  }

  async archive(ref: SandboxRef, path: string): Promise<{ info: FileInfo; body: Readable }> {
    const entry = this.entry(ref, path);
    if (entry.type !== 'directory') throw new SandboxFileError('not_directory', `${path} is not a directory`, path);
    const tree = this.tree(ref);
    const members = [...tree.entries()].filter(([key]) => key === path || key.startsWith(`${path}/`)).sort(([a], [b]) => a.localeCompare(b));
    const blocks: Buffer[] = [];
    for (const [key, member] of members) {
      const name = `.${key.slice(path.length)}${member.type === 'directory' ? '/' : ''}`;
      blocks.push(tarHeader(name === './' ? './' : name, member), member.data, Buffer.alloc((512 - (member.data.length % 512)) % 512));
    }
    blocks.push(Buffer.alloc(1024));
    return { info: this.info(path, entry), body: Readable.from(blocks) };
  }
}

/** A ustar header for one member. */
function tarHeader(name: string, entry: Entry): Buffer {
  const header = Buffer.alloc(512);
  header.write(name.slice(0, 100), 0, 'utf8');
  header.write(`${entry.mode.toString(8).padStart(7, '0')}\0`, 100, 'ascii');
  header.write('0000000\0', 108, 'ascii');
  header.write('0000000\0', 116, 'ascii');
  header.write(`${(entry.type === 'file' ? entry.data.length : 0).toString(8).padStart(11, '0')}\0`, 124, 'ascii');
  header.write(`${Math.floor(entry.modifiedAt.getTime() / 1000).toString(8).padStart(11, '0')}\0`, 136, 'ascii');
  header.write(entry.type === 'directory' ? '5' : '0', 156, 'ascii');
  header.write('ustar\0' + '00', 257, 'ascii');
  header.fill(' ', 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return header;
}

import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { ProviderError, SandboxFileError, type FileChange } from '@berth/common';
import { MockFiles } from './mock-files.js';

const ref = { provider: 'mock', id: 'agt_a' };
const body = (text: string) => Readable.from([Buffer.from(text)]);

/** The changes a watch told, up to `count` of them. */
async function take(changes: AsyncIterable<FileChange>, count: number): Promise<string[]> {
  const seen: string[] = [];
  for await (const change of changes) {
    seen.push(`${change.type} ${change.name}`);
    if (seen.length === count) break;
  }
  return seen;
}

describe("test keys' in-memory files", () => {
  it('tell a watch what changes in its directory, and below it with recursive, as inotify would', async () => {
    const files = new MockFiles();
    await files.mkdir(ref, '/workspace/w', {});
    const flat = await files.watch(ref, '/workspace/w', {});
    const deep = await files.watch(ref, '/workspace/w', { recursive: true });
    await files.write(ref, '/workspace/w/sub/a.txt', body('a'), { parents: true });
    await files.write(ref, '/workspace/w/sub/a.txt', body('b'), {});
    await files.move(ref, '/workspace/w/sub/a.txt', '/workspace/w/b.txt', {});
    await files.remove(ref, '/workspace/w/b.txt', {});
    await files.write(ref, '/workspace/elsewhere.txt', body('x'), {});
    expect(await take(deep.changes, 7)).toEqual(['create sub', 'create sub/a.txt', 'write sub/a.txt', 'write sub/a.txt', 'rename sub/a.txt', 'create b.txt', 'remove b.txt']);
    expect(await take(flat.changes, 3)).toEqual(['create sub', 'create b.txt', 'remove b.txt']);
  });

  it('end a watch on close, with not_found when its directory goes, and with the sandbox', async () => {
    const files = new MockFiles();
    await files.mkdir(ref, '/workspace/w', {});
    const closed = await files.watch(ref, '/workspace/w', {});
    closed.close();
    expect(await take(closed.changes, 1)).toEqual([]);
    const removed = await files.watch(ref, '/workspace/w', {});
    await files.remove(ref, '/workspace/w', { recursive: true });
    await expect(take(removed.changes, 1)).rejects.toBeInstanceOf(SandboxFileError);
    await files.mkdir(ref, '/workspace/v', {});
    const dropped = await files.watch(ref, '/workspace/v', {});
    files.drop(ref.id);
    await expect(take(dropped.changes, 1)).rejects.toBeInstanceOf(ProviderError);
    await expect(files.watch(ref, '/workspace/nothing', {})).rejects.toMatchObject({ code: 'not_found' });
  });
});

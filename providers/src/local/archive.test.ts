import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ArchiveIntegrityError, verifyArchive } from '@berth/common';
import { extractArchive, packArchive, readMember } from './archive.js';

let tmp: string;
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'berth-archive-test-'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const sha256 = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');

/** manifest.json in one directory, workspace/ (with a file too large to compress) in another. */
async function packSample(): Promise<{ archive: Buffer; payload: Buffer }> {
  const scratch = join(tmp, 'scratch');
  const root = join(tmp, 'root');
  const payload = randomBytes(3 * 1024 * 1024);
  await mkdir(scratch, { recursive: true });
  await mkdir(join(root, 'workspace', 'sub'), { recursive: true });
  await writeFile(join(scratch, 'manifest.json'), '{"level":"filesystem"}');
  await writeFile(join(root, 'workspace', 'sub', 'data.bin'), payload);
  const archive = await collect(
    packArchive([
      { dir: scratch, names: ['manifest.json'] },
      { dir: root, names: ['workspace'] },
    ]),
  );
  return { archive, payload };
}

describe('snapshot archives through the system tar', () => {
  it('extract what was packed, from several directories, when the digest matches', async () => {
    const { archive, payload } = await packSample();
    const out = join(tmp, 'out');
    await mkdir(out);
    await extractArchive(Readable.from([archive]), verifyArchive('k', sha256(archive)), out);
    expect((await readdir(out)).sort()).toEqual(['manifest.json', 'workspace']);
    expect(sha256(await readFile(join(out, 'workspace', 'sub', 'data.bin')))).toBe(sha256(payload)); // toEqual on megabytes is slow
  });

  it('write zstd, and read gzip and plain tars too, telling them apart by their first bytes', async () => {
    const { archive } = await packSample();
    expect([...archive.subarray(0, 4)]).toEqual([0x28, 0xb5, 0x2f, 0xfd]);
    await writeFile(join(tmp, 'scratch', 'note.txt'), 'from a pod');
    for (const flag of ['--gzip', undefined]) {
      const tar = spawnSync('tar', ['--create', ...(flag ? [flag] : []), '--file=-', '-C', join(tmp, 'scratch'), 'note.txt']);
      const other = tar.stdout;
      const out = await mkdtemp(join(tmp, 'out-'));
      await extractArchive(Readable.from([other]), verifyArchive('k', sha256(other)), out);
      expect(await readFile(join(out, 'note.txt'), 'utf8')).toBe('from a pod');
    }
  });

  it('read one member back with the digest and size of the whole archive', async () => {
    const { archive } = await packSample();
    expect(await readMember(Readable.from([archive]), 'manifest.json')).toEqual({
      content: '{"level":"filesystem"}',
      sha256: sha256(archive),
      sizeBytes: archive.length,
    });
  });

  it('report a flipped byte as the integrity error, not as what tar made of it', async () => {
    const { archive } = await packSample();
    const expected = sha256(archive);
    const corrupt = Buffer.from(archive);
    corrupt[Math.floor(corrupt.length / 3)]! ^= 0xff;
    const out = join(tmp, 'out');
    await mkdir(out);
    await expect(extractArchive(Readable.from([corrupt]), verifyArchive('k', expected), out)).rejects.toBeInstanceOf(ArchiveIntegrityError);
  });

  it("report tar's failure when the bytes are as stored but not an archive", async () => {
    const garbage = randomBytes(4096);
    const out = join(tmp, 'out');
    await mkdir(out);
    await expect(extractArchive(Readable.from([garbage]), verifyArchive('k', sha256(garbage)), out)).rejects.toThrow(/tar failed/);
  });

  it('fail the stream, instead of ending it short, when tar cannot archive a part', async () => {
    await expect(collect(packArchive([{ dir: tmp, names: ['missing'] }]))).rejects.toThrow(/tar failed \(exit 2\).*missing/);
  });
});

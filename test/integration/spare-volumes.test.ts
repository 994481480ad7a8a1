import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureVolume, isMountPoint, SpareVolumes, unmountVolume } from '../../providers/src/local/volume.js';
import { tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The spare workspace filesystems of the local provider, on real ext4 images and loop mounts
 * (root): a new workspace takes a spare made ahead, complete and empty, and a stock left by a
 * process that stopped is used again, its partial and other-sized files removed.
 */
const SIZE = 64 * 1024 ** 2;

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

describe('spare workspace filesystems', () => {
  it('gives a new workspace a spare made ahead: empty (no lost+found), clean, of the size asked; fill makes another', async () => {
    const errors: Error[] = [];
    const spares = new SpareVolumes({ dir: join(dir, 'stock'), sizeBytes: SIZE, count: 2, onError: (error) => errors.push(error) });
    spares.fill();
    await spares.settled();
    const stocked = readdirSync(join(dir, 'stock'));
    expect(stocked).toHaveLength(2);
    expect(stocked.every((name) => name.startsWith(`${SIZE}-`) && name.endsWith('.ext4'))).toBe(true);

    const inodes = stocked.map((name) => statSync(join(dir, 'stock', name)).ino);

    const image = join(dir, 'a.ext4');
    const mountPoint = join(dir, 'a');
    await ensureVolume(image, mountPoint, SIZE, spares);
    // The image is one of the spares, moved (a rename keeps the inode).
    expect(inodes).toContain(statSync(image).ino);
    expect(await isMountPoint(mountPoint)).toBe(true);
    expect(readdirSync(mountPoint)).toEqual([]);
    writeFileSync(join(mountPoint, 'kept.txt'), 'kept\n');
    await unmountVolume(mountPoint);
    expect(statSync(image).size).toBe(SIZE);
    expectClean(image, 11);

    // Taken, not made again until asked (the provider asks once the sandbox has started).
    expect(readdirSync(join(dir, 'stock'))).toHaveLength(1);
    spares.fill();
    await spares.settled();
    expect(readdirSync(join(dir, 'stock'))).toHaveLength(2);
    expect(errors).toEqual([]);

    // Mounted again, the workspace keeps what was written: it is the image's, not a new spare's.
    await ensureVolume(image, mountPoint, SIZE, spares);
    expect(readFileSync(join(mountPoint, 'kept.txt'), 'utf8')).toBe('kept\n');
    expect(readdirSync(join(dir, 'stock'))).toHaveLength(2);
    await unmountVolume(mountPoint);
  });

  it('makes a workspace itself when the stock is empty or of another size; fill stocks it', async () => {
    const stock = join(dir, 'empty-stock');
    const spares = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 1 });
    const image = join(dir, 'b.ext4');
    await ensureVolume(image, join(dir, 'b'), SIZE, spares);
    expect(readdirSync(join(dir, 'b'))).toEqual([]);
    await unmountVolume(join(dir, 'b'));
    expectClean(image, 10);
    spares.fill();
    await spares.settled();
    expect(readdirSync(stock)).toHaveLength(1);

    // A workspace of another size than the stock's is made to its own size; the stock is left alone.
    const other = join(dir, 'c.ext4');
    await ensureVolume(other, join(dir, 'c'), 2 * SIZE, spares);
    await unmountVolume(join(dir, 'c'));
    expect(statSync(other).size).toBe(2 * SIZE);
    expect(readdirSync(stock)).toHaveLength(1);
  });

  it('uses the spares a stopped process left, and removes its partial files and spares of another size', async () => {
    const stock = join(dir, 'left-stock');
    const first = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 1 });
    first.fill();
    await first.settled();
    const [left] = readdirSync(stock);
    writeFileSync(join(stock, `${SIZE}-00000000-0000-0000-0000-000000000000.ext4.partial`), '');
    writeFileSync(join(stock, `${2 * SIZE}-00000000-0000-0000-0000-000000000000.ext4`), '');

    const second = new SpareVolumes({ dir: stock, sizeBytes: SIZE, count: 1 });
    const image = join(dir, 'd.ext4');
    expect(await second.take(image)).toBe(true);
    expect(existsSync(join(stock, left!))).toBe(false);
    expect(readdirSync(stock)).toEqual([]);
    second.fill();
    await second.settled();
    const after = readdirSync(stock);
    expect(after).toHaveLength(1);
    expect(after[0]).not.toBe(left);
    expect(after[0]).toMatch(new RegExp(`^${SIZE}-[0-9a-f-]{36}\\.ext4$`));
    expectClean(image, 10);
  });
});

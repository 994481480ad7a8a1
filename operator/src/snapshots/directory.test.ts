import { createHash } from 'node:crypto';
import { mkdtemp, open, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { digestOf, generated } from '../../../test/helpers/streams.js';
import { ArchiveIntegrityError, ArchiveNotFoundError, ConfigError, loadConfig, verifyArchive } from '@berth/common';
import { DirectoryStorage, InvalidArchiveKeyError } from './directory.js';
import { createSnapshotStorage, S3Storage } from './index.js';

const MB = 1000 ** 2;
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');


/** A source that sends some bytes and then breaks, as a checkpoint whose tar process died would. */
function breaking(): Readable {
  return Readable.from(
    (async function* () {
      yield Buffer.alloc(256 * 1024, 1);
      throw new Error('tar exited with 2');
    })(),
  );
}

/** Every file and directory under `dir`, relative. */
const listTree = async (dir: string) => (await readdir(dir, { recursive: true })).sort();

let tmp: string;
let storage: DirectoryStorage;
beforeEach(async () => {
  tmp = await mkdtemp(join(tmpdir(), 'berth-snapshots-test-'));
  storage = new DirectoryStorage(join(tmp, 'snapshots'));
});
afterEach(async () => {
  await rm(tmp, { recursive: true, force: true });
});

describe('DirectoryStorage', () => {
  it('stores an archive under its key and gives back the same bytes, their size and SHA-256', async () => {
    const data = Buffer.from('a small archive\n'.repeat(1000));
    const stored = await storage.put('agents/a1/s1.tar.gz', Readable.from([data]));
    expect(stored).toEqual({ key: 'agents/a1/s1.tar.gz', sizeBytes: data.length, sha256: sha256(data) });
    expect(await readFile(join(tmp, 'snapshots', 'agents', 'a1', 's1.tar.gz'))).toEqual(data);
    expect(await storage.exists('agents/a1/s1.tar.gz')).toBe(true);
    const back = Buffer.concat(await (await storage.get('agents/a1/s1.tar.gz')).toArray());
    expect(back).toEqual(data);
  });

  it('replaces what was under a key, leaving no temp file', async () => {
    await storage.put('s.tar.gz', Readable.from([Buffer.from('old')]));
    const stored = await storage.put('s.tar.gz', Readable.from([Buffer.from('new, longer')]));
    expect(stored.sizeBytes).toBe(11);
    expect(Buffer.concat(await (await storage.get('s.tar.gz')).toArray()).toString()).toBe('new, longer');
    expect(await listTree(storage.root)).toEqual(['s.tar.gz']);
  });

  it('stores an empty archive', async () => {
    expect(await storage.put('empty', Readable.from([]))).toEqual({ key: 'empty', sizeBytes: 0, sha256: sha256(Buffer.alloc(0)) });
    expect(await (await storage.get('empty')).toArray()).toEqual([]);
  });

  it('round-trips a 50 MB archive streamed from a generator', async () => {
    const size = 50 * MB;
    const stored = await storage.put('big.tar.gz', generated(size));
    expect(stored.sizeBytes).toBe(size);
    expect(stored.sha256).toBe(await digestOf(generated(size)));
    expect(await digestOf(await storage.get('big.tar.gz'))).toBe(stored.sha256);
  });

  it('leaves neither the file nor a temp file behind when the source breaks, and keeps an older archive', async () => {
    await expect(storage.put('agents/a1/s1.tar.gz', breaking())).rejects.toThrow('tar exited with 2');
    expect(await storage.exists('agents/a1/s1.tar.gz')).toBe(false);
    expect(await listTree(storage.root)).toEqual([]); // nor the directories made for it

    await storage.put('agents/a1/s1.tar.gz', Readable.from([Buffer.from('good')]));
    await expect(storage.put('agents/a1/s1.tar.gz', breaking())).rejects.toThrow('tar exited with 2');
    expect(Buffer.concat(await (await storage.get('agents/a1/s1.tar.gz')).toArray()).toString()).toBe('good');
    expect(await listTree(storage.root)).toEqual(['agents', join('agents', 'a1'), join('agents', 'a1', 's1.tar.gz')]);
  });

  it.each(['', '/etc/passwd', '../outside', 'a/../../outside', 'a/./b', 'a//b', 'a/', '..', 'a/..', 'nul\0byte'])(
    'refuses the key %j in every operation',
    async (key) => {
      await expect(storage.put(key, Readable.from([Buffer.from('x')]))).rejects.toThrow(InvalidArchiveKeyError);
      await expect(storage.get(key)).rejects.toThrow(InvalidArchiveKeyError);
      await expect(storage.exists(key)).rejects.toThrow(InvalidArchiveKeyError);
      await expect(storage.delete(key)).rejects.toThrow(InvalidArchiveKeyError);
      expect(await readdir(tmp)).toEqual([]); // not even the root was made
    },
  );

  it('accepts keys with dots that are not path steps', async () => {
    await storage.put('a/..b/c..', Readable.from([Buffer.from('x')]));
    expect(await listTree(storage.root)).toEqual(['a', join('a', '..b'), join('a', '..b', 'c..')]);
  });

  it('throws ArchiveNotFoundError for a missing archive, a directory, or a path through a file', async () => {
    await expect(storage.get('missing.tar.gz')).rejects.toThrow(ArchiveNotFoundError);
    await storage.put('agents/a1/s1.tar.gz', Readable.from([Buffer.from('x')]));
    await expect(storage.get('agents/a1')).rejects.toThrow(ArchiveNotFoundError);
    await expect(storage.get('agents/a1/s1.tar.gz/deeper')).rejects.toThrow(ArchiveNotFoundError);
    expect(await storage.exists('agents/a1')).toBe(false);
    expect(await storage.exists('agents/a1/s1.tar.gz/deeper')).toBe(false);
    await expect(storage.get('missing.tar.gz')).rejects.toMatchObject({ key: 'missing.tar.gz' });
  });

  it('deletes an archive and the directories it leaves empty, and deleting again is fine', async () => {
    await storage.put('agents/a1/s1.tar.gz', Readable.from([Buffer.from('1')]));
    await storage.put('agents/a1/s2.tar.gz', Readable.from([Buffer.from('2')]));
    await storage.put('agents/a2/s1.tar.gz', Readable.from([Buffer.from('3')]));

    await storage.delete('agents/a1'); // names no archive, only the directory of two
    expect(await storage.exists('agents/a1/s1.tar.gz')).toBe(true);
    await storage.delete('agents/a1/s1.tar.gz');
    expect(await storage.exists('agents/a1/s1.tar.gz')).toBe(false);
    expect(await storage.exists('agents/a1/s2.tar.gz')).toBe(true);
    await storage.delete('agents/a1/s2.tar.gz');
    await storage.delete('agents/a1/s2.tar.gz');
    expect(await listTree(storage.root)).toEqual(['agents', join('agents', 'a2'), join('agents', 'a2', 's1.tar.gz')]);

    await storage.delete('agents/a2/s1.tar.gz');
    expect(await listTree(storage.root)).toEqual([]); // the root itself stays
    await storage.delete('never/was/there.tar.gz');
  });

  it('lets verifyArchive pass a clean archive and fail one with a flipped byte', async () => {
    const stored = await storage.put('s.tar.gz', generated(3 * MB));
    await pipeline(await storage.get('s.tar.gz'), verifyArchive(stored.key, stored.sha256), devNull());

    const file = await open(join(storage.root, 's.tar.gz'), 'r+');
    const [byte] = (await file.read(Buffer.alloc(1), 0, 1, MB)).buffer;
    await file.write(Buffer.from([byte! ^ 0xff]), 0, 1, MB);
    await file.close();

    const reading = pipeline(await storage.get('s.tar.gz'), verifyArchive(stored.key, stored.sha256), devNull());
    await expect(reading).rejects.toThrow(ArchiveIntegrityError);
    await expect(reading).rejects.toThrow(/s\.tar\.gz is corrupted/);
  });
});

/** A sink that drops what it gets, so a pipeline ends only when the whole archive was read. */
function devNull() {
  return async (source: AsyncIterable<unknown>) => {
    for await (const _ of source);
  };
}

describe('createSnapshotStorage', () => {
  it('keeps archives in <data dir>/snapshots unless BERTH_SNAPSHOT_DIR says otherwise', () => {
    const byDefault = createSnapshotStorage(loadConfig({ BERTH_DATA_DIR: '/data' }));
    expect(byDefault).toBeInstanceOf(DirectoryStorage);
    expect((byDefault as DirectoryStorage).root).toBe('/data/snapshots');
    const chosen = createSnapshotStorage(loadConfig({ BERTH_DATA_DIR: '/data', BERTH_SNAPSHOT_DIR: '/archives' }));
    expect((chosen as DirectoryStorage).root).toBe('/archives');
  });

  it('builds S3 storage from BERTH_S3_*, with the default prefix', () => {
    const storage = createSnapshotStorage(loadConfig({ BERTH_SNAPSHOT_STORAGE: 's3', BERTH_S3_BUCKET: 'berth' }));
    expect(storage).toBeInstanceOf(S3Storage);
    expect((storage as S3Storage).objectKey('a/s.tar.gz')).toBe('snapshots/a/s.tar.gz');
  });

  it('refuses s3 without a bucket, naming the setting', () => {
    expect(() => createSnapshotStorage(loadConfig({ BERTH_SNAPSHOT_STORAGE: 's3' }))).toThrow(ConfigError);
    expect(() => createSnapshotStorage(loadConfig({ BERTH_SNAPSHOT_STORAGE: 's3' }))).toThrow(/BERTH_S3_BUCKET/);
    expect(() => loadConfig({ BERTH_SNAPSHOT_STORAGE: 'nfs' })).toThrow(/BERTH_SNAPSHOT_STORAGE/);
  });
});

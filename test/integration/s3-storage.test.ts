import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  CreateBucketCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListMultipartUploadsCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { digestOf, generated } from '../helpers/streams.js';
import { ArchiveIntegrityError, ArchiveNotFoundError, loadConfig, verifyArchive } from '../../common/src/index.js';
import { createSnapshotStorage, S3Storage, S3StorageError, type S3StorageOptions } from '../../operator/src/snapshots/index.js';
import { startMoto, type Moto } from '../helpers/moto.js';

const MB = 1000 ** 2;
const MiB = 1024 ** 2;
const BUCKET = 'berth-snapshots';
/** moto takes any credentials; these only have to be well-formed. */
const CREDENTIALS = { accessKeyId: 'testing', secretAccessKey: 'testing' };


const bytesOf = async (stream: Readable) => Buffer.concat(await stream.toArray());
const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** Reads a stream to its end, dropping the bytes, so a pipeline settles only when all was read. */
const drain = async (source: AsyncIterable<unknown>) => {
  for await (const _ of source);
};

let moto: Moto;
/** A client of our own, to look at and tamper with the bucket behind the storage's back. */
let s3: S3Client;
const storageWith = (options: Partial<S3StorageOptions> = {}) =>
  new S3Storage({
    bucket: BUCKET,
    prefix: 'snapshots/',
    endpoint: moto.endpoint,
    forcePathStyle: true,
    credentials: CREDENTIALS,
    ...options,
  });

beforeAll(async () => {
  moto = await startMoto();
  s3 = new S3Client({ endpoint: moto.endpoint, region: 'us-east-1', forcePathStyle: true, credentials: CREDENTIALS });
  await s3.send(new CreateBucketCommand({ Bucket: BUCKET }));
});
afterAll(async () => {
  s3?.destroy();
  await moto?.stop();
});

describe('S3Storage against moto', () => {
  it('stores an archive under prefix + key and gives back the same bytes, their size and SHA-256', async () => {
    const storage = storageWith();
    const data = Buffer.from('a small archive\n'.repeat(1000));
    const stored = await storage.put('agents/a1/s1.tar.gz', Readable.from([data]));
    expect(stored).toEqual({ key: 'agents/a1/s1.tar.gz', sizeBytes: data.length, sha256: sha256(data) });

    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'snapshots/agents/a1/s1.tar.gz' }));
    expect(head.ContentLength).toBe(data.length);
    expect(await storage.exists('agents/a1/s1.tar.gz')).toBe(true);
    expect(await bytesOf(await storage.get('agents/a1/s1.tar.gz'))).toEqual(data);
  });

  it('uploads an archive larger than a part in several parts, streamed from a generator', async () => {
    const storage = storageWith({ partSizeBytes: 5 * MiB, queueSize: 2 });
    const size = 12 * MB;
    const stored = await storage.put('big.tar.gz', generated(size));
    expect(stored.sizeBytes).toBe(size);
    expect(stored.sha256).toBe(await digestOf(generated(size)));

    // S3 (and moto) give a multipart object the ETag "<md5 of the part md5s>-<parts>": 5 + 5 + 1.4 MiB.
    const head = await s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: 'snapshots/big.tar.gz' }));
    expect(head.ContentLength).toBe(size);
    expect(head.ETag).toMatch(/-3"$/);
    expect(await digestOf(await storage.get('big.tar.gz'))).toBe(stored.sha256);
  });

  it('keeps stores with different prefixes apart, and takes the prefix literally', async () => {
    const tenantA = storageWith({ prefix: 'tenant-a/' });
    const bare = storageWith({ prefix: '' });
    await tenantA.put('same-key', Readable.from([Buffer.from('a')]));
    await bare.put('same-key', Readable.from([Buffer.from('bare')]));

    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET }));
    expect(listed.Contents?.map((object) => object.Key)).toEqual(expect.arrayContaining(['tenant-a/same-key', 'same-key']));
    expect((await bytesOf(await tenantA.get('same-key'))).toString()).toBe('a');
    expect((await bytesOf(await bare.get('same-key'))).toString()).toBe('bare');
    expect(await storageWith({ prefix: 'tenant-b/' }).exists('same-key')).toBe(false);
  });

  it('throws ArchiveNotFoundError for a missing key, and exists says false', async () => {
    const storage = storageWith();
    await expect(storage.get('missing.tar.gz')).rejects.toThrow(ArchiveNotFoundError);
    await expect(storage.get('missing.tar.gz')).rejects.toMatchObject({ key: 'missing.tar.gz' });
    expect(await storage.exists('missing.tar.gz')).toBe(false);
  });

  it('deletes an archive, and deleting it again is fine', async () => {
    const storage = storageWith();
    await storage.put('doomed.tar.gz', Readable.from([Buffer.from('x')]));
    await storage.delete('doomed.tar.gz');
    expect(await storage.exists('doomed.tar.gz')).toBe(false);
    await expect(storage.get('doomed.tar.gz')).rejects.toThrow(ArchiveNotFoundError);
    await storage.delete('doomed.tar.gz');
  });

  it('lets verifyArchive pass the stored object and fail it once its bytes were altered', async () => {
    const storage = storageWith();
    const data = Buffer.from('archive bytes '.repeat(10_000));
    const stored = await storage.put('tampered.tar.gz', Readable.from([data]));
    await pipeline(await storage.get('tampered.tar.gz'), verifyArchive(stored.key, stored.sha256), drain);

    const altered = Buffer.from(data);
    altered[1000] = altered[1000]! ^ 0xff;
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'snapshots/tampered.tar.gz', Body: altered }));

    const reading = pipeline(await storage.get('tampered.tar.gz'), verifyArchive(stored.key, stored.sha256), drain);
    await expect(reading).rejects.toThrow(ArchiveIntegrityError);
  });

  it('passes on the error of a broken source and leaves neither an object nor an unfinished upload', async () => {
    const storage = storageWith({ partSizeBytes: 5 * MiB, queueSize: 2 });
    const breaking = Readable.from(
      (async function* () {
        for (let i = 0; i < 8 * 16; i++) yield Buffer.alloc(64 * 1024, i); // 8 MiB: the upload has started
        throw new Error('tar exited with 2');
      })(),
    );
    const error = await storage.put('broken.tar.gz', breaking).catch((thrown: unknown) => thrown);
    expect(error).not.toBeInstanceOf(S3StorageError);
    expect(error).toMatchObject({ message: 'tar exited with 2' });
    expect(await storage.exists('broken.tar.gz')).toBe(false);
    const uploads = await s3.send(new ListMultipartUploadsCommand({ Bucket: BUCKET }));
    expect(uploads.Uploads ?? []).toEqual([]);
  });

  it('names the operation, bucket and key when S3 refuses', async () => {
    const storage = storageWith({ bucket: 'no-such-bucket' });
    await expect(storage.put('s.tar.gz', Readable.from([Buffer.from('x')]))).rejects.toThrow(S3StorageError);
    await expect(storage.put('s.tar.gz', Readable.from([Buffer.from('x')]))).rejects.toThrow(
      /S3 upload of s3:\/\/no-such-bucket\/snapshots\/s\.tar\.gz failed: NoSuchBucket/,
    );
    // A missing bucket is not a missing archive.
    await expect(storage.get('s.tar.gz')).rejects.toThrow(
      /S3 GetObject of s3:\/\/no-such-bucket\/snapshots\/s\.tar\.gz failed: NoSuchBucket/,
    );
    await expect(storage.delete('s.tar.gz')).rejects.toThrow(/DeleteObject of s3:\/\/no-such-bucket/);
  });

  it('is what createSnapshotStorage builds from BERTH_S3_*, with credentials from the AWS_* variables', async () => {
    const saved = { ...process.env };
    Object.assign(process.env, { AWS_ACCESS_KEY_ID: 'testing', AWS_SECRET_ACCESS_KEY: 'testing', AWS_SESSION_TOKEN: 'testing' });
    try {
      const config = loadConfig({
        BERTH_SNAPSHOT_STORAGE: 's3',
        BERTH_S3_BUCKET: BUCKET,
        BERTH_S3_ENDPOINT: moto.endpoint,
        BERTH_S3_PREFIX: 'configured/',
      });
      const storage = createSnapshotStorage(config);
      expect(storage.kind).toBe('s3');
      await storage.put('s.tar.gz', Readable.from([Buffer.from('configured')]));
      const object = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'configured/s.tar.gz' }));
      expect(await object.Body?.transformToString()).toBe('configured');
    } finally {
      process.env = saved;
    }
  });
});

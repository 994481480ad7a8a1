import { createHash } from 'node:crypto';
import { Readable, Transform } from 'node:stream';

/** What storing a snapshot archive gives back: enough to find it and to check it on the way back. */
export interface StoredArchive {
  key: string;
  sizeBytes: number;
  /** Lowercase hex SHA-256 of the stored bytes. */
  sha256: string;
}

/**
 * A snapshot archive is a tar, compressed with zstd (what the local provider writes: it keeps up
 * with a checkpoint of memory) or gzip (what a pod's own tools write). A reader tells them apart by
 * their first bytes, as tar does not on a pipe.
 */
export type ArchiveCompression = 'zstd' | 'gzip';

const MAGIC: readonly { compression: ArchiveCompression; bytes: Buffer }[] = [
  { compression: 'zstd', bytes: Buffer.from([0x28, 0xb5, 0x2f, 0xfd]) },
  { compression: 'gzip', bytes: Buffer.from([0x1f, 0x8b]) },
];

/**
 * The compression of the archive `source` streams, and the stream to read it from (which still
 * starts at the first byte). `undefined` when the bytes match neither: a plain tar, or not an
 * archive at all, which tar then says.
 */
export async function detectCompression(source: Readable): Promise<{ compression: ArchiveCompression | undefined; stream: Readable }> {
  const chunks: Buffer[] = [];
  let length = 0;
  while (length < 4 && !source.readableEnded) {
    const chunk = source.read() as Buffer | null;
    if (chunk !== null) {
      chunks.push(chunk);
      length += chunk.length;
    } else {
      await new Promise<void>((resolve, reject) => {
        const settle = (error?: Error) => {
          source.off('readable', settle).off('end', settle).off('error', settle);
          if (error) reject(error);
          else resolve();
        };
        source.on('readable', settle).on('end', settle).on('error', settle);
      });
    }
  }
  const head = Buffer.concat(chunks);
  const compression = MAGIC.find(({ bytes }) => head.subarray(0, bytes.length).equals(bytes))?.compression;
  if (source.readableEnded) return { compression, stream: Readable.from(head.length ? [head] : []) };
  if (head.length) source.unshift(head);
  return { compression, stream: source };
}

/**
 * Where snapshot archives live: a directory in embedded mode, S3-compatible object storage in a
 * cluster. Archives are streamed in and out, never held whole in memory.
 */
export interface SnapshotStorage {
  readonly kind: 'directory' | 's3';
  /** Stores the stream under `key` (replacing what was there) and hashes it on the way. */
  put(key: string, body: Readable): Promise<StoredArchive>;
  /** The stored bytes; throws `ArchiveNotFoundError` when there are none. */
  get(key: string): Promise<Readable>;
  /** Removes the archive; removing one that is gone is fine. */
  delete(key: string): Promise<void>;
  exists(key: string): Promise<boolean>;
}

export class ArchiveNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`snapshot archive ${key} is not in storage`);
    this.name = 'ArchiveNotFoundError';
  }
}

export class ArchiveIntegrityError extends Error {
  constructor(readonly key: string, expected: string, actual: string) {
    super(`snapshot archive ${key} is corrupted: its SHA-256 is ${actual}, expected ${expected}`);
    this.name = 'ArchiveIntegrityError';
  }
}

/**
 * Passes bytes through unchanged and fails the stream at its end when their SHA-256 is not
 * `expected`: a reader extracts into a scratch place and keeps the result only when the
 * stream ended cleanly.
 */
export function verifyArchive(key: string, expected: string): Transform {
  const hash = createHash('sha256');
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      done(null, chunk);
    },
    flush(done) {
      const actual = hash.digest('hex');
      done(actual === expected ? null : new ArchiveIntegrityError(key, expected, actual));
    },
  });
}

/**
 * Counts and hashes the bytes that pass through, for `put`: the size and digest of an archive
 * are known once it has streamed into storage.
 */
export function meterArchive(): { stream: Transform; result(): { sizeBytes: number; sha256: string } } {
  const hash = createHash('sha256');
  let sizeBytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      sizeBytes += chunk.length;
      done(null, chunk);
    },
  });
  return { stream, result: () => ({ sizeBytes, sha256: hash.digest('hex') }) };
}

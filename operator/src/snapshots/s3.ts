import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { ArchiveNotFoundError, meterArchive, type SnapshotStorage, type StoredArchive } from '@berth/common';

const MiB = 1024 ** 2;
/** S3 refuses smaller parts (except the last). */
export const MIN_PART_SIZE_BYTES = 5 * MiB;

export interface S3StorageOptions {
  bucket: string;
  /** Put before every key as it is: `snapshots/` keeps `a/snap_1` at `snapshots/a/snap_1`. */
  prefix?: string;
  /** An S3-compatible server instead of AWS. */
  endpoint?: string;
  /** Default us-east-1. */
  region?: string;
  /** Address buckets as `endpoint/bucket/key`, which most S3-compatible servers need. */
  forcePathStyle?: boolean;
  /** Default: the AWS SDK's default provider chain (AWS_ACCESS_KEY_ID..., profile, web identity, instance role). */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
  /** Bytes of each multipart part; default 16 MiB, at least 5 MiB. */
  partSizeBytes?: number;
  /**
   * Parts uploaded at once; default 4. A put holds one part per slot plus the one being filled,
   * whatever the archive's size (measured: about 190 MiB at its peak with the defaults).
   */
  queueSize?: number;
}

/** An S3 call that failed for another reason than a missing archive, with where and what. */
export class S3StorageError extends Error {
  constructor(
    readonly operation: string,
    readonly bucket: string,
    readonly objectKey: string,
    cause: unknown,
  ) {
    super(`S3 ${operation} of s3://${bucket}/${objectKey} failed: ${describeCause(cause)}`, { cause });
    this.name = 'S3StorageError';
  }
}

/**
 * Snapshot archives as objects in an S3-compatible bucket, for cluster mode.
 *
 * The SHA-256 is returned, not stored as `x-amz-meta-sha256`: S3 takes metadata only when an
 * upload starts, and the digest is known only once the last byte has passed. Adding it afterwards
 * means a CopyObject of the whole archive onto itself, which costs a second server-side write,
 * leaves a window where the object has no digest, and fails above 5 GiB (that needs a multipart
 * copy). The caller records the digest in the Snapshot's status, which is where a restore reads
 * it from anyway, so the object carries nothing that could disagree with it.
 *
 * A put that fails aborts its multipart upload. A process killed mid-put leaves an incomplete
 * upload behind; a bucket lifecycle rule (AbortIncompleteMultipartUpload) clears those.
 */
export class S3Storage implements SnapshotStorage {
  readonly kind = 's3';
  readonly bucket: string;
  readonly prefix: string;
  private readonly client: S3Client;
  private readonly partSizeBytes: number;
  private readonly queueSize: number;

  constructor(options: S3StorageOptions) {
    const { bucket, prefix = '', partSizeBytes = 16 * MiB, queueSize = 4 } = options;
    if (partSizeBytes < MIN_PART_SIZE_BYTES) throw new RangeError(`partSizeBytes ${partSizeBytes} is below the S3 minimum of 5 MiB`);
    if (!Number.isInteger(queueSize) || queueSize < 1) throw new RangeError(`queueSize ${queueSize} is not a positive integer`);
    this.bucket = bucket;
    this.prefix = prefix;
    this.partSizeBytes = partSizeBytes;
    this.queueSize = queueSize;
    this.client = new S3Client({
      region: options.region ?? 'us-east-1',
      forcePathStyle: options.forcePathStyle ?? false,
      ...(options.endpoint !== undefined && { endpoint: options.endpoint }),
      // Left out rather than undefined, so that the SDK falls back to its default chain.
      ...(options.credentials !== undefined && { credentials: options.credentials }),
    });
  }

  /**
   * Streams the archive up as a multipart upload (a plain PutObject when it fits in one part),
   * hashing it on the way. The upload pulls from the meter, so the source is read no faster than
   * parts are sent, and at most `queueSize` parts are in memory.
   */
  async put(key: string, body: Readable): Promise<StoredArchive> {
    const objectKey = this.objectKey(key);
    const meter = meterArchive();
    const upload = new Upload({
      client: this.client,
      params: { Bucket: this.bucket, Key: objectKey, Body: meter.stream },
      partSize: this.partSizeBytes,
      queueSize: this.queueSize,
    });
    const [piped, uploaded] = await Promise.allSettled([pipeline(body, meter.stream), upload.done()]);
    if (uploaded.status === 'rejected') {
      // A broken source reaches the upload as the source's own error: pass that on unchanged.
      if (piped.status === 'rejected' && piped.reason === uploaded.reason) throw piped.reason;
      throw new S3StorageError('upload', this.bucket, objectKey, uploaded.reason);
    }
    if (piped.status === 'rejected') throw piped.reason;
    return { key, ...meter.result() };
  }

  async get(key: string): Promise<Readable> {
    const objectKey = this.objectKey(key);
    let body: unknown;
    try {
      ({ Body: body } = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: objectKey })));
    } catch (error) {
      if (errorName(error) === 'NoSuchKey') throw new ArchiveNotFoundError(key);
      throw new S3StorageError('GetObject', this.bucket, objectKey, error);
    }
    // In Node.js the SDK's body is the HTTP response itself (an IncomingMessage).
    if (!(body instanceof Readable)) {
      throw new S3StorageError('GetObject', this.bucket, objectKey, new Error('the response has no Node.js stream body'));
    }
    return body;
  }

  /** S3 answers a delete of a missing key with success, so no special case is needed. */
  async delete(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (error) {
      throw new S3StorageError('DeleteObject', this.bucket, objectKey, error);
    }
  }

  /** A HEAD answer has no body to tell a missing key from a missing bucket; both are false here. */
  async exists(key: string): Promise<boolean> {
    const objectKey = this.objectKey(key);
    try {
      await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      return true;
    } catch (error) {
      if (httpStatusOf(error) === 404) return false;
      throw new S3StorageError('HeadObject', this.bucket, objectKey, error);
    }
  }

  objectKey(key: string): string {
    if (key === '') throw new RangeError('a snapshot archive key cannot be empty');
    return `${this.prefix}${key}`;
  }
}

const errorName = (error: unknown) => (error instanceof Error ? error.name : undefined);
const httpStatusOf = (error: unknown) => (error as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;

/** SDK errors of bodiless answers are named after the status only ("NotFound", "UnknownError"): add the status. */
function describeCause(cause: unknown): string {
  const status = httpStatusOf(cause);
  const text = cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause);
  return status === undefined ? text : `${text} (HTTP ${status})`;
}


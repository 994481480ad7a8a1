import { join } from 'node:path';
import { ConfigError, type BerthConfig, type SnapshotStorage } from '@berth/common';
import { DirectoryStorage } from './directory.js';
import { S3Storage } from './s3.js';

export * from './directory.js';
export * from './s3.js';

export type SnapshotStorageConfig = Pick<
  BerthConfig,
  'dataDir' | 'snapshotStorage' | 'snapshotDir' | 's3Bucket' | 's3Prefix' | 's3Endpoint' | 's3Region'
>;

/** The snapshot storage Berth's configuration names. S3 credentials come from the AWS SDK's default chain. */
export function createSnapshotStorage(config: SnapshotStorageConfig): SnapshotStorage {
  switch (config.snapshotStorage) {
    case 'directory':
      return new DirectoryStorage(config.snapshotDir ?? join(config.dataDir, 'snapshots'));
    case 's3':
      if (config.s3Bucket === undefined) {
        throw new ConfigError('BERTH_SNAPSHOT_STORAGE is s3 but BERTH_S3_BUCKET is not set: name the bucket that keeps snapshot archives');
      }
      return new S3Storage({
        bucket: config.s3Bucket,
        prefix: config.s3Prefix,
        region: config.s3Region,
        endpoint: config.s3Endpoint,
        // S3-compatible servers rarely have the wildcard DNS that bucket-named hosts need.
        forcePathStyle: config.s3Endpoint !== undefined,
      });
  }
}

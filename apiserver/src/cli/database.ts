import { createPool, migrate, type BerthConfig, type Logger, type Pool } from '@berth/common';
import { connectionStringFor, runningServerPort, startEmbeddedPostgres, type EmbeddedPostgres } from '../embedded/postgres.js';
import { join } from 'node:path';

export interface Database {
  pool: Pool;
  connectionString: string;
  /** `embedded` when Berth runs PostgreSQL in the data directory. */
  kind: 'external' | 'embedded';
  close(): Promise<void>;
}

/**
 * The database of this install, migrated: `DATABASE_URL` when set, else the embedded
 * PostgreSQL in the data directory (started here, or the one a running `berth up` owns).
 */
export async function openDatabase(config: BerthConfig, log: Logger, options: { shareRunning?: boolean } = {}): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let connectionString: string;
  if (config.databaseUrl) {
    connectionString = config.databaseUrl;
  } else {
    const port = options.shareRunning ? runningServerPort(join(config.dataDir, 'postgres')) : undefined;
    if (port !== undefined) {
      connectionString = connectionStringFor(config.dataDir, port);
    } else {
      embedded = await startEmbeddedPostgres(config.dataDir, log);
      connectionString = embedded.connectionString;
    }
  }
  const pool = createPool(connectionString, log);
  try {
    await migrate(pool, log);
  } catch (error) {
    await pool.end().catch(() => undefined);
    await embedded?.stop();
    throw error;
  }
  return {
    pool,
    connectionString,
    kind: config.databaseUrl ? 'external' : 'embedded',
    async close() {
      await pool.end();
      await embedded?.stop();
    },
  };
}

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { silentLogger } from '../../common/src/log.js';
import { startEmbeddedPostgres, type EmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';

/** A fresh database on the run's PostgreSQL server, so that test files never see each other's rows. */
export async function createTestDatabase(): Promise<string> {
  const serverUrl = inject('databaseUrl');
  const name = `test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

export interface OwnPostgres {
  connectionString: string;
  /** Fast shutdown: open connections are terminated, as in a restart or failover. */
  stop(): Promise<void>;
  /** Starts it again on the same port and data. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** A PostgreSQL server of the test's own, to stop and start under running Berth processes. */
export async function startOwnPostgres(): Promise<OwnPostgres> {
  const dir = mkdtempSync(join(tmpdir(), 'berth-own-pg-'));
  let server: EmbeddedPostgres | undefined = await startEmbeddedPostgres(dir, silentLogger);
  const port = server.port;
  return {
    connectionString: server.connectionString,
    async stop() {
      await server?.stop();
      server = undefined;
    },
    async start() {
      server ??= await startEmbeddedPostgres(dir, silentLogger, { port });
    },
    async close() {
      await server?.stop();
      server = undefined;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

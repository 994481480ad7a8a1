import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../common/src/clock.js';
import { createPool, migrate } from '../../common/src/index.js';
import { silentLogger } from '../../common/src/log.js';
import { PostgresResourceStore } from '../../common/src/store/postgres.js';
import { resourceStoreContract, sessionSpec } from '../contracts/resource-store.js';
import { createTestDatabase } from '../helpers/postgres.js';

const clock = new ManualClock('2026-03-01T12:00:00Z');

async function startStore() {
  const url = await createTestDatabase();
  const pool = createPool(url);
  await migrate(pool);
  const open = () => new PostgresResourceStore(pool, { connectionString: url, clock, log: silentLogger });
  return { pool, store: open(), open };
}

resourceStoreContract('PostgresResourceStore', async () => {
  const { pool, store, open } = await startStore();
  return {
    store,
    consistency: 'immediate',
    now: () => clock.now(),
    timestampToleranceMs: 0,
    otherClient: open,
    async cutWatchConnections(meanwhile) {
      await pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND datname = current_database()",
      );
      await meanwhile();
    },
    watchReconnect: 'relist',
    async close() {
      await store.close();
      await pool.end();
    },
  };
});

describe('PostgresResourceStore', () => {
  let pool: pg.Pool;
  let store: PostgresResourceStore;
  beforeAll(async () => {
    ({ pool, store } = await startStore());
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
  });

  it('numbers resourceVersions from one sequence, so that a later write has a larger one', async () => {
    const created = await store.create('Session', { name: 'ses-g', spec: sessionSpec('g') });
    const status = await store.updateStatus('Session', 'ses-g', { phase: 'active' });
    expect(BigInt(status.metadata.resourceVersion)).toBeGreaterThan(BigInt(created.metadata.resourceVersion));
    const updated = await store.updateSpec('Session', 'ses-g', (current) => ({ ...current.spec, userId: 'g2' }));
    expect(BigInt(updated.metadata.resourceVersion)).toBeGreaterThan(BigInt(status.metadata.resourceVersion));
  });
});

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../common/src/clock.js';
import { createPool, migrate, type Queryable } from '../../common/src/index.js';
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

  it('commits the rows written alongside a status write with it, and none of them when the write loses a race', async () => {
    await pool.query('CREATE TABLE alongside_rows (note text NOT NULL)');
    const created = await store.create('Session', { name: 'ses-alongside', spec: sessionSpec('alongside') });
    const notes = async () => (await pool.query<{ note: string }>('SELECT note FROM alongside_rows ORDER BY note')).rows.map((row) => row.note);
    const inTransaction: boolean[] = [];
    const alongside = (note: string) => async (db: Queryable | undefined) => {
      inTransaction.push(db !== undefined && db !== pool);
      await db!.query('INSERT INTO alongside_rows (note) VALUES ($1)', [note]);
      // Inside the transaction: another connection does not see the row yet.
      expect(await notes()).not.toContain(note);
    };

    const written = await store.updateStatus('Session', 'ses-alongside', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion, alongside: alongside('first') });
    expect(written.status).toEqual({ phase: 'active' });
    expect(await notes()).toEqual(['first']);

    // The version it names is gone: Conflict, and the row written alongside is rolled back.
    await expect(
      store.updateStatus('Session', 'ses-alongside', { phase: 'ended' }, { resourceVersion: created.metadata.resourceVersion, alongside: alongside('second') }),
    ).rejects.toMatchObject({ reason: 'Conflict' });
    expect(await notes()).toEqual(['first']);
    expect((await store.get('Session', 'ses-alongside'))!.status).toEqual({ phase: 'active' });
    expect(inTransaction).toEqual([true, true]);
  });

  it('creates the objects named with a status write in its commit, told to watchers after it, and none when the write loses a race', async () => {
    const created = await store.create('Session', { name: 'ses-creates', spec: sessionSpec('creates') });
    const told: string[] = [];
    const watch = store.watch('Session', { onEvent: (event) => told.push(`${event.type} ${event.name}`), onResync: () => undefined });
    await watch.ready;
    try {
      // Inside the transaction, after the objects were inserted: another connection does not see them yet.
      const seenMeanwhile: number[] = [];
      const alongside = async () => {
        seenMeanwhile.push((await pool.query("SELECT 1 FROM resources WHERE kind = 'Session' AND name LIKE 'ses-creates-%'")).rowCount ?? 0);
      };
      await store.updateStatus('Session', 'ses-creates', { phase: 'active' }, {
        resourceVersion: created.metadata.resourceVersion,
        alongside,
        creates: [{ kind: 'Session', input: { name: 'ses-creates-one', spec: sessionSpec('one') } }],
      });
      expect(seenMeanwhile).toEqual([0]);
      expect((await store.get('Session', 'ses-creates-one'))!.spec.userId).toBe('one');
      expect(told.filter((event) => event.endsWith('ses-creates-one'))).toEqual(['ADDED ses-creates-one']);

      // The version it names is gone: Conflict, and the object it would have created is not there.
      await expect(
        store.updateStatus('Session', 'ses-creates', { phase: 'ended' }, {
          resourceVersion: created.metadata.resourceVersion,
          creates: [{ kind: 'Session', input: { name: 'ses-creates-two', spec: sessionSpec('two') } }],
        }),
      ).rejects.toMatchObject({ reason: 'Conflict' });
      expect(await store.get('Session', 'ses-creates-two')).toBeUndefined();
      expect(told.some((event) => event.endsWith('ses-creates-two'))).toBe(false);
    } finally {
      watch.stop();
    }
  });
});

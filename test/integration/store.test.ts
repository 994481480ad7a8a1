import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../common/src/clock.js';
import { createPool, listEvents, migrate, waitForResource, type EventInput, type Queryable, type Resource, type WatchEvent } from '../../common/src/index.js';
import { silentLogger } from '../../common/src/log.js';
import { PostgresResourceStore } from '../../common/src/store/postgres.js';
import { resourceStoreContract, sessionSpec } from '../contracts/resource-store.js';
import { eventually } from '../helpers/http.js';
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
  let open: () => PostgresResourceStore;
  beforeAll(async () => {
    ({ pool, store, open } = await startStore());
  });
  afterAll(async () => {
    await store.close();
    await pool.end();
  });

  it('inserts the events given with a status write by its statement, in order, each occurrence once, and none when the write loses a race', async () => {
    const created = await store.create('Session', { name: 'ses-events', spec: sessionSpec('events') });
    const event = (n: number): EventInput => ({ type: 'agent.started', organizationId: 'org_events', mode: 'live', subjectId: 'ses-events', data: { n }, occurrence: `ses-events/${n}` });
    const stored = async () => (await listEvents(pool, { subjectId: 'ses-events' })).map((stored) => stored.data.n);
    const at = clock.now();
    const written = await store.updateStatus('Session', 'ses-events', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion, events: { events: [event(1), event(2)], at, db: pool } });
    expect(await stored()).toEqual([1, 2]);
    expect((await listEvents(pool, { subjectId: 'ses-events' }))[0]!.createdAt).toBe(at.toISOString());
    // The version it names is gone: Conflict, and its event is not recorded.
    await expect(
      store.updateStatus('Session', 'ses-events', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion, events: { events: [event(3)], at, db: pool } }),
    ).rejects.toMatchObject({ reason: 'Conflict' });
    await expect(store.updateStatus('Session', 'ses-gone', { phase: 'active' }, { events: { events: [event(5)], at, db: pool } })).rejects.toMatchObject({ reason: 'NotFound' });
    expect(await stored()).toEqual([1, 2]);
    // An occurrence written before is not written again; in a transaction of the caller's, the events commit with it.
    const tx = await store.beginTransaction();
    await store.updateStatus('Session', 'ses-events', { phase: 'active' }, { resourceVersion: written.metadata.resourceVersion, events: { events: [event(2), event(4)], at, db: pool }, within: tx });
    expect(await stored()).toEqual([1, 2, 4]);
  });

  it("tells this process's watchers of its own writes once each, with the object as written, even when the notification comes first", async () => {
    const told: WatchEvent[] = [];
    const watch = store.watch('Session', { onEvent: (event) => told.push(event), onResync: () => undefined });
    await watch.ready;
    const versions = [(await store.create('Session', { name: 'ses-told', spec: sessionSpec('told') })).metadata.resourceVersion];
    for (let i = 0; i < 20; i++) {
      const written = i % 2 === 0
        ? await store.updateSpec('Session', 'ses-told', (current) => ({ ...current.spec, userId: `told-${i}` }))
        : await store.updateStatus('Session', 'ses-told', { phase: 'active' });
      versions.push(written.metadata.resourceVersion);
    }
    // Another client's write, heard by notification after every one before it.
    const other = open();
    await other.create('Session', { name: 'ses-told-after', spec: sessionSpec('told-after') });
    await eventually(async () => (told.some((event) => event.name === 'ses-told-after') ? true : undefined), { what: 'the later write heard' });
    watch.stop();
    await other.close();
    const own = told.filter((event) => event.name === 'ses-told');
    expect(own.map((event) => [event.resourceVersion, event.object?.metadata.resourceVersion])).toEqual(versions.map((version) => [version, version]));
    expect((own[1]!.object as Resource<'Session'>).spec.userId).toBe('told-0');
    // Another process's write comes by notification, without the object.
    expect(told.find((event) => event.name === 'ses-told-after')!.object).toBeUndefined();
  });

  it('a wait answers from the object its watch was told by a write of this process, and reads what another process wrote', async () => {
    // Watched from before its creation, so that the creation is told here and its notification, coming later, is not.
    const before = store.watch('Session', { onEvent: () => undefined, onResync: () => undefined });
    await before.ready;
    await store.create('Session', { name: 'ses-wait', spec: sessionSpec('wait') });
    let reads = 0;
    const counted = new Proxy(store, {
      get(target, property) {
        if (property === 'get') {
          return (...args: Parameters<PostgresResourceStore['get']>) => {
            reads++;
            return target.get(...args);
          };
        }
        const value = Reflect.get(target, property, target) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const waited = waitForResource(counted, 'Session', 'ses-wait', 10_000, (session) => session?.spec.userId === 'here');
    await eventually(async () => (reads === 1 ? true : undefined), { what: 'the first read' });
    await store.updateSpec('Session', 'ses-wait', (current) => ({ ...current.spec, userId: 'here' }));
    expect((await waited)?.spec.userId).toBe('here');
    expect(reads).toBe(1);

    const other = open();
    const waitedOther = waitForResource(counted, 'Session', 'ses-wait', 10_000, (session) => session?.spec.userId === 'there');
    await eventually(async () => (reads === 2 ? true : undefined), { what: 'the first read' });
    await other.updateSpec('Session', 'ses-wait', (current) => ({ ...current.spec, userId: 'there' }));
    expect((await waitedOther)?.spec.userId).toBe('there');
    expect(reads).toBe(3);
    await other.close();
    before.stop();
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

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../common/src/clock.js';
import { createPool, migrate } from '../../common/src/index.js';
import { silentLogger } from '../../common/src/log.js';
import { PostgresResourceStore } from '../../common/src/store/postgres.js';
import { isStoreError, type WatchEvent } from '../../common/src/store/types.js';
import type { SessionSpec } from '../../crds/src/session.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';

let url: string;
let pool: pg.Pool;
let store: PostgresResourceStore;
const clock = new ManualClock('2026-03-01T12:00:00Z');

const spec = (userId: string): SessionSpec => ({
  organizationId: 'org_1',
  mode: 'live',
  userId,
  environment: 'production',
  limits: {},
  metadata: {},
});

beforeAll(async () => {
  url = await createTestDatabase();
  pool = createPool(url);
  await migrate(pool);
  store = new PostgresResourceStore(pool, { connectionString: url, clock, log: silentLogger });
});
afterAll(async () => {
  await store.close();
  await pool.end();
});

describe('PostgresResourceStore', () => {
  it('creates with metadata a Kubernetes object would carry, and refuses a duplicate name', async () => {
    const created = await store.create('Session', { name: 'ses-a', labels: { team: 'x' }, spec: spec('a') });
    expect(created.metadata).toMatchObject({
      name: 'ses-a',
      generation: 1,
      labels: { team: 'x' },
      finalizers: [],
      ownerReferences: [],
      creationTimestamp: '2026-03-01T12:00:00.000Z',
    });
    expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(Number(created.metadata.resourceVersion)).toBeGreaterThan(0);
    await expect(store.create('Session', { name: 'ses-a', spec: spec('a') })).rejects.toSatisfy((error) =>
      isStoreError(error, 'AlreadyExists'),
    );
    expect(await store.get('Session', 'ses-a')).toEqual(created);
    expect(await store.get('Session', 'ses-none')).toBeUndefined();
  });

  it('lists by label in name order, both ways, page by page', async () => {
    for (const name of ['ses-p1', 'ses-p2', 'ses-p3', 'ses-p4', 'ses-p5']) {
      await store.create('Session', { name, labels: { page: 'yes' }, spec: spec(name) });
    }
    const first = await store.list('Session', { labels: { page: 'yes' }, limit: 2 });
    expect(first.items.map((item) => item.metadata.name)).toEqual(['ses-p1', 'ses-p2']);
    expect(first.hasMore).toBe(true);
    const rest = await store.list('Session', { labels: { page: 'yes' }, limit: 10, after: 'ses-p2' });
    expect(rest.items.map((item) => item.metadata.name)).toEqual(['ses-p3', 'ses-p4', 'ses-p5']);
    expect(rest.hasMore).toBe(false);
    const descending = await store.list('Session', { labels: { page: 'yes' }, limit: 2, order: 'desc', after: 'ses-p4' });
    expect(descending.items.map((item) => item.metadata.name)).toEqual(['ses-p3', 'ses-p2']);
  });

  it('bumps generation on spec changes only, and resourceVersion on every write', async () => {
    const created = await store.create('Session', { name: 'ses-g', spec: spec('g') });
    const status = await store.updateStatus('Session', 'ses-g', { phase: 'active' });
    expect(status.metadata.generation).toBe(1);
    expect(BigInt(status.metadata.resourceVersion)).toBeGreaterThan(BigInt(created.metadata.resourceVersion));
    const updated = await store.updateSpec('Session', 'ses-g', (current) => ({ ...current.spec, userId: 'g2' }));
    expect(updated.metadata.generation).toBe(2);
    expect(updated.status).toEqual({ phase: 'active' });
    const unchanged = await store.updateSpec('Session', 'ses-g', () => undefined);
    expect(unchanged.metadata.resourceVersion).toBe(updated.metadata.resourceVersion);
  });

  it('refuses a status write at a stale resourceVersion with Conflict', async () => {
    const created = await store.create('Session', { name: 'ses-c', spec: spec('c') });
    await store.updateStatus('Session', 'ses-c', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion });
    await expect(
      store.updateStatus('Session', 'ses-c', { phase: 'ended' }, { resourceVersion: created.metadata.resourceVersion }),
    ).rejects.toSatisfy((error) => isStoreError(error, 'Conflict'));
    await expect(store.updateStatus('Session', 'ses-missing', { phase: 'ended' })).rejects.toSatisfy((error) =>
      isStoreError(error, 'NotFound'),
    );
    expect((await store.get('Session', 'ses-c'))!.status).toEqual({ phase: 'active' });
  });

  it('keeps an object with finalizers until they are removed, and cascades to what it owns', async () => {
    const owner = await store.create('Session', { name: 'ses-owner', spec: spec('o') });
    const ownerRef = [{ kind: 'Session' as const, name: 'ses-owner', uid: owner.metadata.uid, controller: true }];
    await store.create('Session', { name: 'ses-child-plain', ownerReferences: ownerRef, spec: spec('c1') });
    await store.create('Session', { name: 'ses-child-final', ownerReferences: ownerRef, finalizers: ['berth.dev/x'], spec: spec('c2') });

    await store.delete('Session', 'ses-owner');
    expect(await store.get('Session', 'ses-owner')).toBeUndefined();
    expect(await store.get('Session', 'ses-child-plain')).toBeUndefined();
    const held = await store.get('Session', 'ses-child-final');
    expect(held?.metadata.deletionTimestamp).toBe('2026-03-01T12:00:00.000Z');

    await store.removeFinalizer('Session', 'ses-child-final', 'berth.dev/x');
    expect(await store.get('Session', 'ses-child-final')).toBeUndefined();
    await expect(store.delete('Session', 'ses-owner')).rejects.toSatisfy((error) => isStoreError(error, 'NotFound'));
  });

  it('watches: every write arrives as an event of its kind', async () => {
    const events: WatchEvent[] = [];
    const watch = store.watch('Session', { onEvent: (event) => events.push(event), onResync: () => undefined });
    await watch.ready;
    await store.create('Session', { name: 'ses-w', spec: spec('w') });
    await store.updateStatus('Session', 'ses-w', { phase: 'active' });
    await store.delete('Session', 'ses-w');
    await eventually(async () => (events.length >= 3 ? true : undefined), { what: 'three events' });
    expect(events.map((event) => [event.type, event.name])).toEqual([
      ['ADDED', 'ses-w'],
      ['MODIFIED', 'ses-w'],
      ['DELETED', 'ses-w'],
    ]);
    watch.stop();
  });

  it('reconnects a watch whose connection is killed and tells the watcher to relist', async () => {
    const local = new PostgresResourceStore(pool, { connectionString: url, clock, log: silentLogger });
    let resyncs = 0;
    const names: string[] = [];
    const watch = local.watch('Session', { onEvent: (event) => names.push(event.name), onResync: () => resyncs++ });
    await watch.ready;
    await pool.query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND pid <> pg_backend_pid() AND datname = current_database()",
    );
    await eventually(async () => (resyncs > 0 ? true : undefined), { what: 'a resync after the connection dropped' });
    await store.create('Session', { name: 'ses-after-reconnect', spec: spec('r') });
    await eventually(async () => (names.includes('ses-after-reconnect') ? true : undefined), { what: 'events after the reconnect' });
    watch.stop();
    await local.close();
  });
});

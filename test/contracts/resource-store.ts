import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isStoreError, type ResourceStore, type WatchEvent } from '../../common/src/store/types.js';
import type { SessionSpec } from '../../crds/src/session.js';
import { eventually } from '../helpers/http.js';

/** One store, set up on its backend, as the contract sees it. */
export interface StoreUnderTest {
  store: ResourceStore;
  /**
   * `immediate`: a write is visible to the next read, and a delete has removed what the object
   * owned when it returns (PostgreSQL, one transaction). `eventual`: reads come from a watch-fed
   * cache and owned objects go in the background (Kubernetes: informer and garbage collector),
   * so the contract waits for what it then checks as strictly.
   */
  consistency: 'immediate' | 'eventual';
  /** The time the store stamps on objects it writes now. */
  now(): Date;
  /**
   * How far a stamped time may be from `now()`: 0 when the store takes an injected clock (the
   * stamp must be exactly `now()`), more when a server stamps with its own clock and precision.
   */
  timestampToleranceMs: number;
  /** A second, independent client of the same backend, for writes by someone else. Closed by the contract. */
  otherClient(): ResourceStore;
  /**
   * Cuts every connection the store's watches ride on, as a network failure or a server restart
   * would, runs `meanwhile` (writes by another client) and lets the store connect again.
   */
  cutWatchConnections(meanwhile: () => Promise<void>): Promise<void>;
  /**
   * What a watch does after its connection was cut. `relist`: the backend keeps no history
   * (PostgreSQL NOTIFY), so every reconnect tells the watchers to relist. `resume`: the watch
   * goes on from its last resourceVersion and tells the watchers to relist only when that is
   * not possible (Kubernetes list-watch).
   */
  watchReconnect: 'relist' | 'resume';
  close(): Promise<void>;
}

export const sessionSpec = (userId: string): SessionSpec => ({
  organizationId: 'org_1',
  mode: 'live',
  userId,
  environment: 'production',
  limits: {},
  metadata: {},
});

/**
 * The behaviour every ResourceStore must have, whichever backend holds the resources. Each case
 * works on names of its own, so that a store's cases share one namespace or database.
 */
export function resourceStoreContract(name: string, setup: () => Promise<StoreUnderTest>): void {
  describe(`${name}: the ResourceStore contract`, () => {
    let target: StoreUnderTest;
    let store: ResourceStore;
    beforeAll(async () => {
      target = await setup();
      store = target.store;
    });
    afterAll(async () => {
      await target?.close();
    });

    /** Waits, on an eventually consistent store, until `condition` holds; the assertions that follow must then pass. */
    async function settled(what: string, condition: () => Promise<boolean>): Promise<void> {
      if (target.consistency === 'immediate') return;
      await eventually(async () => ((await condition()) ? true : undefined), { what });
    }

    function expectStampedNow(timestamp: string | undefined): void {
      if (target.timestampToleranceMs === 0) {
        expect(timestamp).toBe(target.now().toISOString());
        return;
      }
      expect(timestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
      expect(Math.abs(Date.parse(timestamp!) - target.now().getTime())).toBeLessThanOrEqual(target.timestampToleranceMs);
    }

    it('creates with metadata a Kubernetes object would carry, and refuses a duplicate name', async () => {
      const created = await store.create('Session', { name: 'ses-a', labels: { team: 'x' }, spec: sessionSpec('a') });
      expect(created.metadata).toMatchObject({ name: 'ses-a', generation: 1, labels: { team: 'x' }, finalizers: [], ownerReferences: [] });
      expectStampedNow(created.metadata.creationTimestamp);
      expect(created.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
      expect(Number(created.metadata.resourceVersion)).toBeGreaterThan(0);
      expect(created.status).toBeUndefined();
      await expect(store.create('Session', { name: 'ses-a', spec: sessionSpec('a') })).rejects.toSatisfy((error) =>
        isStoreError(error, 'AlreadyExists'),
      );
      await settled('the created object in reads', async () => (await store.get('Session', 'ses-a')) !== undefined);
      expect(await store.get('Session', 'ses-a')).toEqual(created);
      expect(await store.get('Session', 'ses-none')).toBeUndefined();
    });

    it('creates with its status', async () => {
      const created = await store.create('Session', { name: 'ses-s', spec: sessionSpec('s'), status: { phase: 'active' } });
      expect(created.status).toEqual({ phase: 'active' });
      expect(created.metadata.generation).toBe(1);
      await settled('the status in reads', async () => (await store.get('Session', 'ses-s'))?.status !== undefined);
      expect(await store.get('Session', 'ses-s')).toEqual(created);
      expect((await store.get('Session', 'ses-s'))!.spec.userId).toBe('s');
    });

    it('lists by label in name order, both ways, page by page', async () => {
      for (const name of ['ses-p1', 'ses-p2', 'ses-p3', 'ses-p4', 'ses-p5']) {
        await store.create('Session', { name, labels: { page: 'yes' }, spec: sessionSpec(name) });
      }
      await store.create('Session', { name: 'ses-p0-other', labels: { page: 'no' }, spec: sessionSpec('other') });
      await settled('five listed', async () => (await store.list('Session', { labels: { page: 'yes' } })).items.length === 5);
      const all = await store.list('Session', { labels: { page: 'yes' } });
      expect(all.items.map((item) => item.metadata.name)).toEqual(['ses-p1', 'ses-p2', 'ses-p3', 'ses-p4', 'ses-p5']);
      expect(all.hasMore).toBe(false);
      const first = await store.list('Session', { labels: { page: 'yes' }, limit: 2 });
      expect(first.items.map((item) => item.metadata.name)).toEqual(['ses-p1', 'ses-p2']);
      expect(first.hasMore).toBe(true);
      const rest = await store.list('Session', { labels: { page: 'yes' }, limit: 10, after: 'ses-p2' });
      expect(rest.items.map((item) => item.metadata.name)).toEqual(['ses-p3', 'ses-p4', 'ses-p5']);
      expect(rest.hasMore).toBe(false);
      const exact = await store.list('Session', { labels: { page: 'yes' }, limit: 3, after: 'ses-p2' });
      expect(exact.items.map((item) => item.metadata.name)).toEqual(['ses-p3', 'ses-p4', 'ses-p5']);
      expect(exact.hasMore).toBe(false);
      const descending = await store.list('Session', { labels: { page: 'yes' }, limit: 2, order: 'desc', after: 'ses-p4' });
      expect(descending.items.map((item) => item.metadata.name)).toEqual(['ses-p3', 'ses-p2']);
      expect(descending.hasMore).toBe(true);
      const descendingToTheEnd = await store.list('Session', { labels: { page: 'yes' }, order: 'desc', after: 'ses-p3' });
      expect(descendingToTheEnd.items.map((item) => item.metadata.name)).toEqual(['ses-p2', 'ses-p1']);
      expect(descendingToTheEnd.hasMore).toBe(false);
    });

    it('bumps generation on spec changes only, and changes resourceVersion on every write', async () => {
      const created = await store.create('Session', { name: 'ses-g', spec: sessionSpec('g') });
      const status = await store.updateStatus('Session', 'ses-g', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion });
      expect(status.metadata.generation).toBe(1);
      expect(status.spec).toEqual(created.spec);
      expect(status.metadata.resourceVersion).not.toBe(created.metadata.resourceVersion);
      const updated = await store.updateSpec('Session', 'ses-g', (current) => ({ ...current.spec, userId: 'g2' }));
      expect(updated.metadata.generation).toBe(2);
      expect(updated.spec.userId).toBe('g2');
      expect(updated.status).toEqual({ phase: 'active' });
      expect(updated.metadata.resourceVersion).not.toBe(status.metadata.resourceVersion);
      const unchanged = await store.updateSpec('Session', 'ses-g', () => undefined);
      expect(unchanged.metadata.resourceVersion).toBe(updated.metadata.resourceVersion);
      expect(unchanged.metadata.generation).toBe(2);
      await expect(store.updateSpec('Session', 'ses-missing', (current) => current.spec)).rejects.toSatisfy((error) =>
        isStoreError(error, 'NotFound'),
      );
    });

    it('refuses a status write at a stale resourceVersion with Conflict, and one to a missing object with NotFound', async () => {
      const created = await store.create('Session', { name: 'ses-c', spec: sessionSpec('c') });
      await store.updateStatus('Session', 'ses-c', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion });
      await expect(
        store.updateStatus('Session', 'ses-c', { phase: 'ended' }, { resourceVersion: created.metadata.resourceVersion }),
      ).rejects.toSatisfy((error) => isStoreError(error, 'Conflict'));
      await expect(store.updateStatus('Session', 'ses-missing', { phase: 'ended' })).rejects.toSatisfy((error) =>
        isStoreError(error, 'NotFound'),
      );
      await settled('the status write in reads', async () => (await store.get('Session', 'ses-c'))?.status !== undefined);
      expect((await store.get('Session', 'ses-c'))!.status).toEqual({ phase: 'active' });
    });

    it('creates the objects named with a status write, and leaves one that exists as it is', async () => {
      const created = await store.create('Session', { name: 'ses-cw', spec: sessionSpec('cw') });
      const existing = await store.create('Session', { name: 'ses-cw-there', spec: sessionSpec('there'), status: { phase: 'active' } });
      const written = await store.updateStatus('Session', 'ses-cw', { phase: 'active' }, {
        resourceVersion: created.metadata.resourceVersion,
        creates: [
          { kind: 'Session', input: { name: 'ses-cw-new', labels: { made: 'with-write' }, spec: sessionSpec('new'), status: { phase: 'active' } } },
          { kind: 'Session', input: { name: 'ses-cw-there', spec: sessionSpec('replaced'), status: { phase: 'ended' } } },
        ],
      });
      expect(written.status).toEqual({ phase: 'active' });
      await settled('the created object in reads', async () => (await store.get('Session', 'ses-cw-new')) !== undefined);
      expect(await store.get('Session', 'ses-cw-new')).toMatchObject({
        metadata: { name: 'ses-cw-new', labels: { made: 'with-write' }, generation: 1 },
        spec: { userId: 'new' },
        status: { phase: 'active' },
      });
      expect(await store.get('Session', 'ses-cw-there')).toEqual(existing);
    });

    it('keeps an object with finalizers until they are removed, and cascades to what it owns', async () => {
      const owner = await store.create('Session', { name: 'ses-owner', spec: sessionSpec('o') });
      const ownerRef = [{ kind: 'Session' as const, name: 'ses-owner', uid: owner.metadata.uid, controller: true }];
      const plain = await store.create('Session', { name: 'ses-child-plain', ownerReferences: ownerRef, spec: sessionSpec('c1') });
      expect(plain.metadata.ownerReferences).toEqual(ownerRef);
      await store.create('Session', { name: 'ses-child-final', ownerReferences: ownerRef, finalizers: ['berth.dev/x'], spec: sessionSpec('c2') });

      await store.delete('Session', 'ses-owner');
      await settled('the owner and its plain child gone, the other child marked', async () => {
        const [gone, plainGone, held] = await Promise.all([
          store.get('Session', 'ses-owner'),
          store.get('Session', 'ses-child-plain'),
          store.get('Session', 'ses-child-final'),
        ]);
        return gone === undefined && plainGone === undefined && held?.metadata.deletionTimestamp !== undefined;
      });
      expect(await store.get('Session', 'ses-owner')).toBeUndefined();
      expect(await store.get('Session', 'ses-child-plain')).toBeUndefined();
      const held = await store.get('Session', 'ses-child-final');
      expectStampedNow(held?.metadata.deletionTimestamp);
      expect(held?.metadata.finalizers).toEqual(['berth.dev/x']);

      await store.removeFinalizer('Session', 'ses-child-final', 'berth.dev/x');
      await settled('the child gone', async () => (await store.get('Session', 'ses-child-final')) === undefined);
      expect(await store.get('Session', 'ses-child-final')).toBeUndefined();
      await expect(store.delete('Session', 'ses-owner')).rejects.toSatisfy((error) => isStoreError(error, 'NotFound'));
    });

    it('reads an object with its owner of a kind in one call; without an owner, or an object, they are left out', async () => {
      const owner = await store.create('Session', { name: 'ses-with-owner', spec: sessionSpec('wo') });
      const snapshotSpec = { organizationId: 'org_1', mode: 'live' as const, agentId: 'agt_1', sessionId: 'ses_with-owner', provider: 'local', type: 'manual' as const };
      await store.create('Snapshot', {
        name: 'snp-owned',
        ownerReferences: [{ kind: 'Session', name: 'ses-with-owner', uid: owner.metadata.uid, controller: true }],
        spec: snapshotSpec,
      });
      await store.create('Snapshot', { name: 'snp-unowned', spec: snapshotSpec });
      await settled('both snapshots readable', async () => (await store.get('Snapshot', 'snp-owned')) !== undefined && (await store.get('Snapshot', 'snp-unowned')) !== undefined);

      const both = await store.getWithOwner('Snapshot', 'snp-owned', 'Session');
      expect(both.resource?.metadata.name).toBe('snp-owned');
      expect(both.resource?.spec).toEqual(snapshotSpec);
      expect(both.owner?.metadata).toMatchObject({ name: 'ses-with-owner', uid: owner.metadata.uid });
      expect(both.owner?.spec).toEqual(owner.spec);
      const alone = await store.getWithOwner('Snapshot', 'snp-unowned', 'Session');
      expect(alone.resource?.metadata.name).toBe('snp-unowned');
      expect(alone.owner).toBeUndefined();
      expect(await store.getWithOwner('Snapshot', 'snp-none', 'Session')).toEqual({});
    });

    it('removes only the finalizer named, and deletes nothing that is not being deleted', async () => {
      await store.create('Session', { name: 'ses-f', finalizers: ['berth.dev/a', 'berth.dev/b'], spec: sessionSpec('f') });
      await store.removeFinalizer('Session', 'ses-f', 'berth.dev/a');
      await store.removeFinalizer('Session', 'ses-f', 'berth.dev/not-there');
      await settled('one finalizer left', async () => (await store.get('Session', 'ses-f'))?.metadata.finalizers.length === 1);
      const kept = await store.get('Session', 'ses-f');
      expect(kept?.metadata.finalizers).toEqual(['berth.dev/b']);
      expect(kept?.metadata.deletionTimestamp).toBeUndefined();
      await store.removeFinalizer('Session', 'ses-f', 'berth.dev/b');
      await settled('no finalizer left', async () => (await store.get('Session', 'ses-f'))?.metadata.finalizers.length === 0);
      expect(await store.get('Session', 'ses-f')).toMatchObject({ metadata: { name: 'ses-f', finalizers: [] } });
      await store.removeFinalizer('Session', 'ses-never-was', 'berth.dev/a');
    });

    it('watches: every write arrives as an event of its kind', async () => {
      const events: WatchEvent[] = [];
      const watch = store.watch('Session', { onEvent: (event) => events.push(event), onResync: () => undefined });
      await watch.ready;
      const created = await store.create('Session', { name: 'ses-w', spec: sessionSpec('w') });
      const updated = await store.updateStatus('Session', 'ses-w', { phase: 'active' });
      await store.delete('Session', 'ses-w');
      await eventually(async () => (events.length >= 3 ? true : undefined), { what: 'three events' });
      expect(events.map((event) => [event.type, event.name])).toEqual([
        ['ADDED', 'ses-w'],
        ['MODIFIED', 'ses-w'],
        ['DELETED', 'ses-w'],
      ]);
      expect(events[0]!.resourceVersion).toBe(created.metadata.resourceVersion);
      expect(events[1]!.resourceVersion).toBe(updated.metadata.resourceVersion);
      watch.stop();
    });

    it('watches: writes by another client arrive as events, and a stopped watch hears no more', async () => {
      const other = target.otherClient();
      const events: WatchEvent[] = [];
      const stopped: WatchEvent[] = [];
      const watch = store.watch('Session', { onEvent: (event) => events.push(event), onResync: () => undefined });
      const early = store.watch('Session', { onEvent: (event) => stopped.push(event), onResync: () => undefined });
      await Promise.all([watch.ready, early.ready]);
      early.stop();
      try {
        await other.create('Session', { name: 'ses-w-other', spec: sessionSpec('w') });
        await other.delete('Session', 'ses-w-other');
        await eventually(async () => (events.some((event) => event.name === 'ses-w-other' && event.type === 'DELETED') ? true : undefined), {
          what: 'the other client’s delete',
        });
        expect(events.filter((event) => event.name === 'ses-w-other').map((event) => event.type)).toEqual(['ADDED', 'DELETED']);
        expect(stopped).toEqual([]);
      } finally {
        watch.stop();
        await other.close();
      }
    });

    it('loses no change while a watch connection is cut: the watcher gets the events or is told to relist', async () => {
      const other = target.otherClient();
      let resyncs = 0;
      const names: string[] = [];
      const watch = store.watch('Session', { onEvent: (event) => names.push(event.name), onResync: () => resyncs++ });
      try {
        await watch.ready;
        await target.cutWatchConnections(async () => {
          await other.create('Session', { name: 'ses-during-cut', spec: sessionSpec('d') });
        });
        if (target.watchReconnect === 'relist') {
          await eventually(async () => (resyncs > 0 ? true : undefined), { what: 'a resync after the connection dropped' });
        } else {
          await eventually(async () => (resyncs > 0 || names.includes('ses-during-cut') ? true : undefined), {
            what: 'the write made during the cut, or a resync',
          });
        }
        await store.create('Session', { name: 'ses-after-reconnect', spec: sessionSpec('r') });
        await eventually(async () => (names.includes('ses-after-reconnect') ? true : undefined), { what: 'events after the reconnect' });
      } finally {
        watch.stop();
        await other.close();
      }
    });
  });
}

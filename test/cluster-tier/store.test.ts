import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { silentLogger } from '../../common/src/log.js';
import { KubernetesResourceStore } from '../../common/src/store/kubernetes.js';
import { isStoreError, type WatchEvent } from '../../common/src/store/types.js';
import type { SessionSpec } from '../../crds/src/session.js';
import { eventually } from '../helpers/http.js';
import { createNamespace, kubectl, kubectlJson } from './helpers.js';

/** The same store contract as the PostgreSQL store's tests, on custom resources. */
let namespace: string;
let store: KubernetesResourceStore;

const spec = (userId: string): SessionSpec => ({
  organizationId: 'org_1',
  mode: 'live',
  userId,
  environment: 'production',
  limits: {},
  metadata: {},
});

beforeAll(async () => {
  namespace = await createNamespace('store');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(inject('kubeconfig'));
  store = new KubernetesResourceStore(kubeConfig, { namespace, log: silentLogger });
});
afterAll(async () => {
  await store.close();
  await kubectl(['delete', 'namespace', namespace, '--wait=false']);
});

describe('KubernetesResourceStore', () => {
  it('creates with its status and refuses a duplicate name', async () => {
    const created = await store.create('Session', { name: 'ses-a', labels: { team: 'x' }, spec: spec('a'), status: { phase: 'active' } });
    expect(created.metadata).toMatchObject({ name: 'ses-a', generation: 1, labels: { team: 'x' } });
    expect(created.status).toEqual({ phase: 'active' });
    await expect(store.create('Session', { name: 'ses-a', spec: spec('a') })).rejects.toSatisfy((error) => isStoreError(error, 'AlreadyExists'));
    expect((await store.get('Session', 'ses-a'))!.spec.userId).toBe('a');
    expect(await store.get('Session', 'ses-none')).toBeUndefined();
  });

  it('lists from its cache by label, in name order, page by page', async () => {
    for (const name of ['ses-p1', 'ses-p2', 'ses-p3']) await store.create('Session', { name, labels: { page: 'yes' }, spec: spec(name) });
    await eventually(async () => ((await store.list('Session', { labels: { page: 'yes' } })).items.length === 3 ? true : undefined));
    const first = await store.list('Session', { labels: { page: 'yes' }, limit: 2 });
    expect(first.items.map((item) => item.metadata.name)).toEqual(['ses-p1', 'ses-p2']);
    expect(first.hasMore).toBe(true);
    const descending = await store.list('Session', { labels: { page: 'yes' }, order: 'desc', after: 'ses-p3' });
    expect(descending.items.map((item) => item.metadata.name)).toEqual(['ses-p2', 'ses-p1']);
  });

  it('bumps generation on spec changes only, and refuses a stale status write', async () => {
    const created = await store.create('Session', { name: 'ses-g', spec: spec('g') });
    const status = await store.updateStatus('Session', 'ses-g', { phase: 'active' }, { resourceVersion: created.metadata.resourceVersion });
    expect(status.metadata.generation).toBe(1);
    const updated = await store.updateSpec('Session', 'ses-g', (current) => ({ ...current.spec, userId: 'g2' }));
    expect(updated.metadata.generation).toBe(2);
    expect(updated.status).toEqual({ phase: 'active' });
    await expect(
      store.updateStatus('Session', 'ses-g', { phase: 'ended' }, { resourceVersion: created.metadata.resourceVersion }),
    ).rejects.toSatisfy((error) => isStoreError(error, 'Conflict'));
    await expect(store.updateStatus('Session', 'ses-missing', { phase: 'ended' })).rejects.toSatisfy((error) => isStoreError(error, 'NotFound'));
  });

  it('keeps an object with finalizers until they are removed, and the garbage collector removes what it owns', async () => {
    const owner = await store.create('Session', { name: 'ses-owner', spec: spec('o') });
    const ownerRef = [{ kind: 'Session' as const, name: 'ses-owner', uid: owner.metadata.uid, controller: true }];
    await store.create('Session', { name: 'ses-child', ownerReferences: ownerRef, finalizers: ['berth.dev/x'], spec: spec('c') });
    await store.delete('Session', 'ses-owner');
    const held = await eventually(async () => {
      const child = await kubectlJson(['get', 'session', 'ses-child', '-n', namespace]).catch(() => undefined);
      return child?.metadata?.deletionTimestamp ? child : undefined;
    }, { what: 'the garbage collector to delete the child' });
    expect(held.metadata.finalizers).toEqual(['berth.dev/x']);
    await store.removeFinalizer('Session', 'ses-child', 'berth.dev/x');
    await eventually(async () => ((await kubectl(['get', 'session', 'ses-child', '-n', namespace])).code !== 0 ? true : undefined));
    await expect(store.delete('Session', 'ses-owner')).rejects.toSatisfy((error) => isStoreError(error, 'NotFound'));
  });

  it('watches: writes by anyone arrive as events', async () => {
    const events: WatchEvent[] = [];
    const watch = store.watch('Session', { onEvent: (event) => events.push(event), onResync: () => undefined });
    await watch.ready;
    const applied = await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'berth.dev/v1alpha1', kind: 'Session', metadata: { name: 'ses-w', namespace }, spec: spec('w') }),
    );
    expect(applied.code, applied.stderr).toBe(0);
    await kubectl(['delete', 'session', 'ses-w', '-n', namespace]);
    await eventually(async () => (events.some((event) => event.name === 'ses-w' && event.type === 'DELETED') ? true : undefined));
    expect(events.filter((event) => event.name === 'ses-w').map((event) => event.type)).toEqual(['ADDED', 'DELETED']);
    watch.stop();
  });
});

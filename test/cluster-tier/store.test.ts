import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { KubeConfig } from '@kubernetes/client-node';
import { silentLogger } from '../../common/src/log.js';
import { KubernetesResourceStore } from '../../common/src/store/kubernetes.js';
import type { WatchEvent } from '../../common/src/store/types.js';
import { resourceStoreContract, sessionSpec } from '../contracts/resource-store.js';
import { eventually } from '../helpers/http.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';
import { createNamespace, kubectl, kubectlJson } from './helpers.js';

/** The store's custom resources in a namespace of their own, read through a proxy that can cut its watches. */
async function startStore(prefix: string) {
  const namespace = await createNamespace(prefix);
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(inject('kubeconfig'));
  const server = new URL(kubeConfig.getCurrentCluster()!.server);
  const proxy = await startTcpProxy(`http://${server.host}`);
  const proxied = new KubeConfig();
  proxied.loadFromClusterAndUser(
    { ...kubeConfig.getCurrentCluster()!, server: `https://127.0.0.1:${new URL(proxy.url).port}` },
    kubeConfig.getCurrentUser()!,
  );
  const open = (config: KubeConfig) => new KubernetesResourceStore(config, { namespace, log: silentLogger });
  return { namespace, proxy, store: open(proxied), other: () => open(kubeConfig) };
}

resourceStoreContract('KubernetesResourceStore', async () => {
  const { namespace, proxy, store, other } = await startStore('store');
  return {
    store,
    consistency: 'eventual',
    now: () => new Date(),
    // The API server stamps with its own clock, to the second.
    timestampToleranceMs: 5_000,
    otherClient: other,
    async cutWatchConnections(meanwhile) {
      await proxy.down();
      try {
        await meanwhile();
      } finally {
        await proxy.up();
      }
    },
    watchReconnect: 'resume',
    async close() {
      await store.close();
      await proxy.close();
      await kubectl(['delete', 'namespace', namespace, '--wait=false']);
    },
  };
});

describe('KubernetesResourceStore', () => {
  let namespace: string;
  let store: KubernetesResourceStore;
  let close: () => Promise<void>;
  beforeAll(async () => {
    const started = await startStore('store-k8s');
    ({ namespace, store } = started);
    close = async () => {
      await store.close();
      await started.proxy.close();
      await kubectl(['delete', 'namespace', namespace, '--wait=false']);
    };
  });
  afterAll(async () => {
    await close?.();
  });

  it('leaves the garbage collector to delete what an object owns, in the API server', async () => {
    const owner = await store.create('Session', { name: 'ses-owner', spec: sessionSpec('o') });
    const ownerRef = [{ kind: 'Session' as const, name: 'ses-owner', uid: owner.metadata.uid, controller: true }];
    await store.create('Session', { name: 'ses-child', ownerReferences: ownerRef, finalizers: ['berth.dev/x'], spec: sessionSpec('c') });
    const child = await kubectlJson(['get', 'session', 'ses-child', '-n', namespace]);
    expect(child.metadata.ownerReferences).toEqual([
      { apiVersion: 'berth.dev/v1alpha1', kind: 'Session', name: 'ses-owner', uid: owner.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    await store.delete('Session', 'ses-owner');
    const held = await eventually(async () => {
      const found = await kubectlJson(['get', 'session', 'ses-child', '-n', namespace]).catch(() => undefined);
      return found?.metadata?.deletionTimestamp ? found : undefined;
    }, { what: 'the garbage collector to delete the child' });
    expect(held.metadata.finalizers).toEqual(['berth.dev/x']);
    await store.removeFinalizer('Session', 'ses-child', 'berth.dev/x');
    await eventually(async () => ((await kubectl(['get', 'session', 'ses-child', '-n', namespace])).code !== 0 ? true : undefined));
  });

  it('watches: writes made with kubectl arrive as events', async () => {
    const events: WatchEvent[] = [];
    const watch = store.watch('Session', { onEvent: (event) => events.push(event), onResync: () => undefined });
    await watch.ready;
    const applied = await kubectl(
      ['apply', '-f', '-'],
      JSON.stringify({ apiVersion: 'berth.dev/v1alpha1', kind: 'Session', metadata: { name: 'ses-w', namespace }, spec: sessionSpec('w') }),
    );
    expect(applied.code, applied.stderr).toBe(0);
    await kubectl(['delete', 'session', 'ses-w', '-n', namespace]);
    await eventually(async () => (events.some((event) => event.name === 'ses-w' && event.type === 'DELETED') ? true : undefined));
    expect(events.filter((event) => event.name === 'ses-w').map((event) => event.type)).toEqual(['ADDED', 'DELETED']);
    watch.stop();
  });
});

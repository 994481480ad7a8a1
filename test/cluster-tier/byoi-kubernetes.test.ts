import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inject } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { createNamespace, kubectl, kubectlJson } from './helpers.js';

/**
 * BYOI Kubernetes: an embedded `berth up` (whose own provider is local gVisor) provisions an
 * organization's agents into that organization's cluster, from the kubeconfig kept in one of
 * its secrets. The test control plane plays the customer's cluster.
 */
let berth: BerthProcess;
let live: ApiClient;
let namespace: string;

beforeAll(async () => {
  namespace = await createNamespace('byoi');
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase(), BERTH_RUNTIME_CLASS: 'none' } });
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

describe('BYOI kubernetes', () => {
  it('provisions into the cluster of the kubeconfig in the credential secret, and cleans up there', async () => {
    expect((await live.post('/v1/secrets', { CUSTOMER_KUBECONFIG: readFileSync(inject('kubeconfig'), 'utf8') })).status).toBe(200);
    const put = await live.raw('/v1/providers/kubernetes', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ credentialRef: 'CUSTOMER_KUBECONFIG', config: { namespace } }),
    });
    expect(put.body).toEqual({ ok: true, provider: 'kubernetes', mode: 'byoi' });
    const session = (await live.post('/v1/sessions', { userId: 'byoi-k8s' })).body;
    const created = await live.post(`/v1/sessions/${session.id}/agents`, { provider: 'kubernetes' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const pod = created.body.id.replace('_', '-');
    await eventually(async () => ((await live.get(`/v1/agents/${created.body.id}`)).body.status === 'idle' ? true : undefined), {
      what: 'the agent idle on the customer cluster',
      timeoutMs: 60_000,
    });
    const running = await kubectlJson(['get', 'pod', pod, '-n', namespace]);
    expect(running.status.phase).toBe('Running');
    expect(running.metadata.labels['berth.dev/agent']).toBe(pod);
    // The agent is no resource of that cluster: nothing there owns the pod, or its garbage collector would delete it.
    expect(running.metadata.ownerReferences).toBeUndefined();

    // Removing the configuration leaves the agent where it runs.
    expect((await live.raw('/v1/providers/kubernetes', { method: 'DELETE' })).body).toEqual({ ok: true, provider: 'kubernetes', mode: 'managed' });
    await live.post(`/v1/agents/${created.body.id}/terminate`);
    expect((await live.get(`/v1/agents/${created.body.id}`)).body.status).toBe('terminated');
    await eventually(async () => ((await kubectl(['get', 'pod', pod, '-n', namespace])).code !== 0 ? true : undefined), { what: 'the pod deleted' });
  });
});

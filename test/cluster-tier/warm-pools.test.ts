import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, type BerthInCluster } from './helpers.js';

/**
 * WarmPool custom resources on the real kube-apiserver: the operator's WarmPool controller
 * reconciles them and writes their status, `kubectl get warmpools` shows size, ready and claims,
 * and deleting one waits for the controller's finalizer. The Kubernetes provider keeps no warm
 * sandboxes yet: the API refuses a pool on it, and the controller says so on a pool written
 * directly.
 */
let berth: BerthInCluster;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'warm' });
});
afterAll(async () => {
  await berth?.stop();
});

describe('warm pools in cluster mode', () => {
  it('refuses a pool on the Kubernetes provider with 422 naming the provider', async () => {
    const response = await berth.live.post('/v1/warm-pools', { compute: 'python', size: 2 });
    expect(response.status, JSON.stringify(response.body)).toBe(422);
    expect(response.body.error.details.fields).toHaveProperty('provider');
  });

  it('reconciles a WarmPool resource, shows it with kubectl get warmpools, and removes it on delete', async () => {
    const name = 'wpl-01m80gqv9d4kjqfcmvs2q4jxem';
    const manifest = {
      apiVersion: 'berth.dev/v1alpha1',
      kind: 'WarmPool',
      metadata: { name, namespace: berth.namespace, finalizers: ['berth.dev/warm-sandboxes'] },
      spec: { organizationId: 'org_cluster', mode: 'live', provider: 'kubernetes', compute: 'python', browser: false, size: 3 },
    };
    const applied = await kubectl(['apply', '-f', '-'], JSON.stringify(manifest));
    expect(applied.code, applied.stderr).toBe(0);

    const pool = await eventually(async () => {
      const object = await kubectlJson(['get', 'warmpool', name, '-n', berth.namespace]);
      return object.status?.conditions?.length ? object : undefined;
    }, { what: 'the operator to reconcile the pool', timeoutMs: 60_000, intervalMs: 500 });
    expect(pool.status).toMatchObject({ ready: 0, starting: 0, claims: 0, observedGeneration: pool.metadata.generation });
    expect(pool.status.conditions).toEqual([expect.objectContaining({ type: 'Filled', status: 'False', reason: 'Unsupported' })]);

    const table = await kubectl(['get', 'warmpools', '-n', berth.namespace]);
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'COMPUTE', 'SIZE', 'READY', 'CLAIMS', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 5)).toEqual([name, 'python', '3', '0', '0']);

    const deleted = await kubectl(['delete', 'warmpool', name, '-n', berth.namespace, '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    const gone = await kubectl(['get', 'warmpool', name, '-n', berth.namespace]);
    expect(gone.code).not.toBe(0);
  });
});

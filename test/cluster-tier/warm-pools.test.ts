import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { kubectl, kubectlJson, startBerthInCluster, waitForAgent, type BerthInCluster } from './helpers.js';

/**
 * Warm pools on the Kubernetes provider (ADR 53) against the real kube-apiserver, with KWOK
 * nodes (pods run at once, no container does): a pool's sandboxes are pods labelled warm, with no
 * agent, secrets or deadline; a new agent adopts one (its labels, owner and deadline become the
 * agent's, and every call finds it by the ref's pod name); the pool refills; `kubectl get
 * warmpools` and the operator's metrics show it; a deleted pool ends its unclaimed pods. Secrets
 * reaching the programs through the launcher need a launcher, which only the node tier runs
 * (test/node-tier/warm-pools.test.ts).
 */
let berth: BerthInCluster;

type Pod = { metadata: { name: string; labels: Record<string, string>; ownerReferences?: { kind: string; name: string; uid: string }[] }; spec: any };
const warmPods = async (): Promise<Pod[]> => (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', berth.namespace, '-l', 'berth.dev/warm=true'])).items;
const podsOf = async (agentId: string): Promise<Pod[]> =>
  (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', berth.namespace, '-l', `berth.dev/agent=${agentId.replace('_', '-')}`])).items;

beforeAll(async () => {
  berth = await startBerthInCluster({ prefix: 'warm' });
});
afterAll(async () => {
  await berth?.stop();
});

describe('warm pools on the Kubernetes provider', () => {
  it('refuses what the provider cannot keep warm with 422 naming the field', async () => {
    const browser = await berth.live.post('/v1/warm-pools', { compute: 'python', browser: true, size: 1 });
    expect(browser.status, JSON.stringify(browser.body)).toBe(422);
    expect(browser.body.error.details.fields).toHaveProperty('browser');
  });

  it('keeps warm pods, gives one to a new agent, refills, and ends the rest with the pool', async () => {
    const created = await berth.live.post('/v1/warm-pools', { compute: 'python', size: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const pool = created.body;
    expect(pool.provider).toBe('kubernetes');
    await eventually(async () => ((await berth.live.get(`/v1/warm-pools/${pool.id}`)).body.ready === 2 ? true : undefined), {
      what: 'the pool to be filled',
      timeoutMs: 60_000,
      intervalMs: 250,
    });
    const before = await warmPods();
    expect(before.map((pod) => pod.metadata.name).sort()).toEqual(expect.arrayContaining([expect.stringMatching(/^wsb-/), expect.stringMatching(/^wsb-/)]));
    expect(before).toHaveLength(2);
    for (const pod of before) {
      // The chart's NetworkPolicy selects sandboxes: a warm pod is one.
      expect(pod.metadata.labels['berth.dev/sandbox']).toBe('true');
      expect(pod.metadata.labels['berth.dev/agent']).toBeUndefined();
      expect(pod.metadata.ownerReferences).toBeUndefined();
      expect(pod.spec.activeDeadlineSeconds).toBeUndefined();
      expect(pod.spec.containers[0].envFrom).toBeUndefined();
      expect(pod.spec.containers[0].command.join(' ')).toMatch(/launcher\.py/);
    }
    const table = await kubectl(['get', 'warmpools', '-n', berth.namespace]);
    expect(table.stdout.trim().split('\n')[1]!.split(/\s+/).slice(1, 5)).toEqual(['python', '2', '2', '0']);

    const session = (await berth.live.post('/v1/sessions', { userId: 'warm-user' })).body.id as string;
    const agent = (await berth.live.post(`/v1/sessions/${session}/agents`, { timeout: '10m' })).body;
    const idle = await waitForAgent(berth.live, agent.id, 'idle');
    expect(idle.conditions[0].message).toBe(`the sandbox is running (claimed from warm pool ${pool.id})`);
    const [adopted, ...others] = await podsOf(agent.id);
    expect(others).toEqual([]);
    expect(before.map((pod) => pod.metadata.name)).toContain(adopted!.metadata.name);
    expect(adopted!.metadata.labels).toMatchObject({ 'berth.dev/sandbox': 'true', 'berth.dev/session': session.replace('_', '-') });
    expect(adopted!.metadata.labels['berth.dev/warm']).toBeUndefined();
    const agentResource = await kubectlJson(['get', 'agent', agent.id.replace('_', '-'), '-n', berth.namespace]);
    expect(adopted!.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Agent', name: agentResource.metadata.name, uid: agentResource.metadata.uid })]);
    expect(agentResource.status.sandbox).toMatchObject({ provider: 'kubernetes', id: agent.id, details: { pod: adopted!.metadata.name } });
    // The kubelet's backstop: the agent's timeout, counted from the pod's start.
    expect(adopted!.spec.activeDeadlineSeconds).toBeGreaterThanOrEqual(600);
    expect(adopted!.spec.activeDeadlineSeconds).toBeLessThan(600 + 120);
    // Calls reach the adopted pod by its own name: kwok runs the exec on this host for that pod.
    const exec = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'echo adopted' });
    expect(exec.body, JSON.stringify(exec.body)).toMatchObject({ exitCode: 0, stdout: 'adopted\n' });

    const refilled = await eventually(
      async () => {
        const view = (await berth.live.get(`/v1/warm-pools/${pool.id}`)).body;
        return view.ready === 2 && view.claims === 1 ? view : undefined;
      },
      { what: 'the pool to be refilled', timeoutMs: 60_000, intervalMs: 250 },
    );
    expect(refilled.conditions[0]).toMatchObject({ type: 'Filled', status: 'True' });
    const after = await warmPods();
    expect(after).toHaveLength(2);
    expect(after.map((pod) => pod.metadata.name)).not.toContain(adopted!.metadata.name);

    const samples = parsePrometheus(await (await fetch(`${berth.operators[0]!.url}/metrics`)).text());
    expect(metricValue(samples, 'berth_warm_pool_claims_total', { provider: 'kubernetes', compute: 'python' })).toBe(1);
    expect(metricValue(samples, 'berth_warm_pool_ready', { pool: pool.id, compute: 'python' })).toBe(2);

    // The agent's end ends the pod it adopted.
    expect((await berth.live.post(`/v1/agents/${agent.id}/terminate`)).status).toBe(200);
    await eventually(async () => ((await kubectl(['get', 'pod', adopted!.metadata.name, '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the adopted pod to be deleted',
      timeoutMs: 60_000,
    });

    // The pool's deletion ends its unclaimed pods (its finalizer, through the provider).
    expect((await berth.live.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' })).status).toBe(200);
    await eventually(async () => ((await warmPods()).length === 0 ? true : undefined), { what: 'the warm pods to be deleted', timeoutMs: 60_000 });
  });

  it('fills a WarmPool written with kubectl and ends its pods when it is deleted', async () => {
    const name = 'wpl-01m80gqv9d4kjqfcmvs2q4jxem';
    const manifest = {
      apiVersion: 'berth.dev/v1alpha1',
      kind: 'WarmPool',
      metadata: { name, namespace: berth.namespace, finalizers: ['berth.dev/warm-sandboxes'] },
      spec: { organizationId: 'org_cluster', mode: 'live', provider: 'kubernetes', compute: 'go', browser: false, size: 3 },
    };
    const applied = await kubectl(['apply', '-f', '-'], JSON.stringify(manifest));
    expect(applied.code, applied.stderr).toBe(0);

    const pool = await eventually(async () => {
      const object = await kubectlJson(['get', 'warmpool', name, '-n', berth.namespace]);
      return object.status?.ready === 3 ? object : undefined;
    }, { what: 'the operator to fill the pool', timeoutMs: 60_000, intervalMs: 500 });
    expect(pool.status).toMatchObject({ ready: 3, starting: 0, claims: 0, observedGeneration: pool.metadata.generation });
    expect(pool.status.conditions).toEqual([expect.objectContaining({ type: 'Filled', status: 'True', reason: 'Filled' })]);
    const pods = await warmPods();
    expect(pods.map((pod) => pod.spec.containers[0].image)).toEqual(Array(3).fill(expect.stringMatching(/sandbox-go/)));

    const table = await kubectl(['get', 'warmpools', '-n', berth.namespace]);
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'COMPUTE', 'SIZE', 'READY', 'CLAIMS', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 5)).toEqual([name, 'go', '3', '3', '0']);

    const deleted = await kubectl(['delete', 'warmpool', name, '-n', berth.namespace, '--timeout=60s']);
    expect(deleted.code, deleted.stderr).toBe(0);
    expect((await kubectl(['get', 'warmpool', name, '-n', berth.namespace])).code).not.toBe(0);
    await eventually(async () => ((await warmPods()).length === 0 ? true : undefined), { what: 'the pool\'s pods to be deleted', timeoutMs: 60_000 });
  });

  it('ends a warm pod that cannot be scheduled at its start deadline, says why on the pool, and starts another', async () => {
    // Sandbox pods asking for more memory than any node has (kwok's nodes hold 1Ti): each stays Pending (Unschedulable).
    const greedy = await startBerthInCluster({
      prefix: 'warm-pending',
      env: { BERTH_SANDBOX_MEMORY: '2048Gi', BERTH_SANDBOX_MEMORY_REQUEST: '2048Gi', BERTH_WARM_START_TIMEOUT: '4s' },
    });
    try {
      const pool = (await greedy.live.post('/v1/warm-pools', { compute: 'python', size: 1 })).body;
      let seen: unknown;
      const pending = await eventually(
        async () => {
          const view = (await greedy.live.get(`/v1/warm-pools/${pool.id}`)).body;
          seen = view;
          return /not scheduled/.test(view.conditions[0]?.message ?? '') ? view : undefined;
        },
        { what: 'the pool to say its pod is not scheduled', timeoutMs: 30_000, intervalMs: 250 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; the pool said ${JSON.stringify(seen)}`);
      });
      expect(pending).toMatchObject({ ready: 0, starting: 1 });
      expect(pending.conditions[0]).toMatchObject({ type: 'Filled', status: 'False', reason: 'Filling' });
      expect(pending.conditions[0].message).toMatch(/^0 of 1 sandboxes ready; pod wsb-\S+ is not scheduled: .*Insufficient memory/);
      const podsOfPool = async () => (await kubectlJson<{ items: Pod[] }>(['get', 'pods', '-n', greedy.namespace, '-l', 'berth.dev/warm=true'])).items;
      const [first] = await podsOfPool();
      expect(first).toBeDefined();

      // Past the deadline: ended, counted as a failed start, the reason on the pool.
      const failed = await eventually(
        async () => {
          const view = (await greedy.live.get(`/v1/warm-pools/${pool.id}`)).body;
          seen = view;
          return view.conditions[0]?.reason === 'StartFailed' ? view : undefined;
        },
        { what: 'the pool to give up on its pod', timeoutMs: 30_000, intervalMs: 250 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; the pool said ${JSON.stringify(seen)}\n${greedy.operators[0]!.output().split('\n').filter((line) => /warm/i.test(line)).slice(-20).join('\n')}`);
      });
      expect(failed.conditions[0].message).toMatch(/^1 sandboxes failed to start: not started within 4s: pod wsb-\S+ is not scheduled: .*Insufficient memory/);
      const samples = parsePrometheus(await (await fetch(`${greedy.operators[0]!.url}/metrics`)).text());
      expect(metricValue(samples, 'berth_warm_pool_sandbox_starts_total', { provider: 'kubernetes', result: 'failed' })).toBeGreaterThanOrEqual(1);
      // And another pod takes its place, after the pool's retry delay.
      await eventually(
        async () => {
          const pods = await podsOfPool();
          return pods.length === 1 && pods[0]!.metadata.name !== first!.metadata.name ? true : undefined;
        },
        { what: 'a new pod in place of the unschedulable one', timeoutMs: 30_000, intervalMs: 250 },
      );
      expect((await greedy.live.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' })).status).toBe(200);
      await eventually(async () => ((await podsOfPool()).length === 0 ? true : undefined), { what: 'the pool\'s pods to be deleted', timeoutMs: 60_000 });
    } finally {
      await greedy.stop();
    }
  });
});

import { spawnSync } from 'node:child_process';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { kubectl, kubectlJson, startBerthInCluster, startClusterProcess, waitForAgent, type BerthInCluster } from './helpers.js';

/**
 * Berth in cluster mode against a real API server: the REST API writes custom resources,
 * the operator turns Agents into pods on KWOK nodes, exec goes through the API server.
 */
let berth: BerthInCluster;

beforeAll(async () => {
  berth = await startBerthInCluster({
    prefix: 'operator',
    env: { BERTH_BROWSER_IMAGE: 'berth/sandbox-browser:test', BERTH_EXEC_TIMEOUT: '3s' },
  });
});
afterAll(async () => {
  await berth.stop();
});

const podName = (agentId: string) => agentId.replace('_', '-');

async function createAgent(sessionId: string, body: Record<string, unknown> = {}) {
  const response = await berth.live.post(`/v1/sessions/${sessionId}/agents`, body);
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body;
}

describe('an agent in cluster mode', () => {
  let sessionId: string;
  let agent: any;

  beforeAll(async () => {
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'cluster-user' })).body.id;
    agent = await createAgent(sessionId, { timeout: '30m' });
  });

  it('is a custom resource owned by its Session', async () => {
    const resource = await kubectlJson(['get', 'agent', podName(agent.id), '-n', berth.namespace]);
    const session = await kubectlJson(['get', 'session', podName(sessionId), '-n', berth.namespace]);
    expect(resource.spec).toMatchObject({ sessionId, compute: 'python', provider: 'kubernetes', timeout: '30m', timeoutSeconds: 1800 });
    expect(resource.metadata.ownerReferences).toEqual([
      { apiVersion: 'berth.dev/v1alpha1', kind: 'Session', name: podName(sessionId), uid: session.metadata.uid, controller: true, blockOwnerDeletion: true },
    ]);
    expect(resource.metadata.finalizers).toEqual(['berth.dev/sandbox']);
  });

  it('becomes a pod with exactly the expected spec, then idle', async () => {
    const ready = await waitForAgent(berth.live, agent.id, 'idle');
    expect(ready.conditions[0]).toMatchObject({ type: 'SandboxReady', status: 'True', reason: 'Provisioned' });
    const pod = await kubectlJson(['get', 'pod', podName(agent.id), '-n', berth.namespace]);
    const resource = await kubectlJson(['get', 'agent', podName(agent.id), '-n', berth.namespace]);
    expect(pod.metadata.labels).toMatchObject({ 'berth.dev/sandbox': 'true', 'berth.dev/agent': podName(agent.id), 'berth.dev/session': podName(sessionId) });
    expect(pod.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Agent', uid: resource.metadata.uid, controller: true })]);
    expect(pod.spec).toMatchObject({
      runtimeClassName: 'gvisor',
      activeDeadlineSeconds: 1800,
      automountServiceAccountToken: false,
      restartPolicy: 'Never',
      securityContext: { runAsNonRoot: true, runAsUser: 1000 },
    });
    expect(pod.spec.containers[0]).toMatchObject({
      image: 'berth/sandbox-python:0.1.0',
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      resources: { limits: { cpu: '1', memory: '1Gi' }, requests: { cpu: '250m', memory: '256Mi' } },
    });
    expect(pod.status.phase).toBe('Running');
    const listed = await kubectl(['get', 'agents', '-n', berth.namespace]);
    expect(listed.stdout).toMatch(new RegExp(`${podName(agent.id)}\\s+${sessionId}\\s+idle\\s+python\\s+kubernetes`));
  });

  it('runs exec through the API server and returns output, stderr and the exit code', async () => {
    const response = await berth.live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'bash',
      code: 'echo "hello from $(basename "$0" .sh)"; echo oops >&2; exit 4',
    });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toMatchObject({ stdout: 'hello from main\n', stderr: 'oops\n', exitCode: 4 });
    const python = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'python', code: 'print(6 * 7)' });
    expect(python.body).toMatchObject({ stdout: '42\n', exitCode: 0 });
  });

  it('cuts an exec that overruns its limit with 504', async () => {
    const response = await berth.live.post(`/v1/agents/${agent.id}/exec`, { language: 'bash', code: 'sleep 30' });
    expect(response.status).toBe(504);
    expect(response.body.error.code).toBe('timeout');
  });

  it("reports a program that prints timeout's notice and exits 124 as its own exit, not a timeout", async () => {
    const response = await berth.live.post(`/v1/agents/${agent.id}/exec`, {
      language: 'bash',
      code: `echo "timeout: sending signal TERM to command 'bash'" >&2; exit 124`,
    });
    expect(response.status, JSON.stringify(response.body)).toBe(200);
    expect(response.body).toMatchObject({ stderr: "timeout: sending signal TERM to command 'bash'\n", exitCode: 124 });
  });

  it('terminate deletes the pod', async () => {
    expect((await berth.live.post(`/v1/agents/${agent.id}/terminate`)).body).toEqual({ ok: true });
    expect((await berth.live.get(`/v1/agents/${agent.id}`)).body.status).toBe('terminated');
    await eventually(async () => ((await kubectl(['get', 'pod', podName(agent.id), '-n', berth.namespace])).code !== 0 ? true : undefined), {
      what: 'the pod to be deleted',
    });
  });
});

describe('pod specs', () => {
  let sessionId: string;
  beforeAll(async () => {
    sessionId = (await berth.live.post('/v1/sessions', { userId: 'specs' })).body.id;
  });

  it('maps gpu through the table to a node selector, a toleration and a device limit; it waits unscheduled without GPU nodes', async () => {
    const agent = await createAgent(sessionId, { gpu: 'a100', compute: 'go' });
    const pod = await eventually(async () => {
      const result = await kubectl(['get', 'pod', podName(agent.id), '-n', berth.namespace, '-o', 'json']);
      return result.code === 0 ? JSON.parse(result.stdout) : undefined;
    });
    expect(pod.spec.nodeSelector).toEqual({ 'nvidia.com/gpu.product': 'NVIDIA-A100-SXM4-80GB' });
    expect(pod.spec.tolerations).toContainEqual({ key: 'nvidia.com/gpu', operator: 'Exists', effect: 'NoSchedule' });
    expect(pod.spec.containers[0].resources.limits['nvidia.com/gpu']).toBe('1');
    expect(pod.spec.containers[0].image).toBe('berth/sandbox-go:0.1.0');
    const booting = await eventually(async () => {
      const current = (await berth.live.get(`/v1/agents/${agent.id}`)).body;
      return current.conditions[0]?.message?.includes('not scheduled') ? current : undefined;
    });
    expect(booting.status).toBe('booting');
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('uses the browser image for browser agents', async () => {
    const agent = await createAgent(sessionId, { browser: true });
    await waitForAgent(berth.live, agent.id, 'idle');
    const pod = await kubectlJson(['get', 'pod', podName(agent.id), '-n', berth.namespace]);
    expect(pod.spec.containers[0].image).toBe('berth/sandbox-browser:test');
    await berth.live.post(`/v1/agents/${agent.id}/terminate`);
  });

  it('refuses a gpu type the table does not have', async () => {
    const response = await berth.live.post(`/v1/sessions/${sessionId}/agents`, { gpu: 'tpu-v5' });
    expect(response.status).toBe(422);
    expect(response.body.error.message).toContain('a100');
  });
});

describe('deleting a session', () => {
  it('removes its agents and their pods', async () => {
    const sessionId = (await berth.live.post('/v1/sessions', { userId: 'cascade' })).body.id;
    const agents = [await createAgent(sessionId), await createAgent(sessionId)];
    for (const agent of agents) await waitForAgent(berth.live, agent.id, 'idle');
    const deleted = await kubectl(['delete', 'session', podName(sessionId), '-n', berth.namespace, '--wait=false']);
    expect(deleted.code, deleted.stderr).toBe(0);
    await eventually(
      async () => {
        const remaining = await kubectlJson(['get', 'agents,pods', '-n', berth.namespace, '-l', `berth.dev/session=${podName(sessionId)}`]);
        return remaining.items.length === 0 ? true : undefined;
      },
      { timeoutMs: 60_000, what: 'the agents and pods of the session to be gone' },
    );
    for (const agent of agents) expect((await berth.live.get(`/v1/agents/${agent.id}`)).status).toBe(404);
  });
});

describe('the operator', () => {
  it('converges after being killed mid-reconcile', async () => {
    const sessionId = (await berth.live.post('/v1/sessions', { userId: 'crash' })).body.id;
    const [operator] = berth.operators;
    const agents = await Promise.all(Array.from({ length: 5 }, () => createAgent(sessionId)));
    // Kill it as soon as it has started on the batch (the first pod exists), then start a new one.
    await eventually(async () => {
      const pods = await kubectlJson(['get', 'pods', '-n', berth.namespace, '-l', `berth.dev/session=${podName(sessionId)}`]);
      return pods.items.length > 0 ? true : undefined;
    }, { intervalMs: 10 });
    expect(await operator!.stop('SIGKILL')).toBe(null);
    const late = await createAgent(sessionId);
    agents.push(late);
    const replacement = await startClusterProcess('operator', { ...berth.env, POD_NAME: 'operator-replacement' });
    berth.operators[0] = replacement;
    for (const agent of agents) await waitForAgent(berth.live, agent.id, 'idle', 90_000);
    expect(replacement.output()).toContain('became the leader');
    const pods = await kubectlJson(['get', 'pods', '-n', berth.namespace, '-l', `berth.dev/session=${podName(sessionId)}`]);
    expect(pods.items).toHaveLength(6);
    const events = await eventually(async () => {
      const client = new pg.Client({ connectionString: berth.databaseUrl });
      await client.connect();
      try {
        const { rows } = await client.query("SELECT subject_id FROM events WHERE type = 'agent.started' AND subject_id = ANY($1)", [
          agents.map((agent) => agent.id),
        ]);
        return rows.length === 6 ? rows : undefined;
      } finally {
        await client.end();
      }
    });
    expect(new Set(events.map((row: any) => row.subject_id)).size).toBe(6);
  });

  it('serves health and reconcile metrics', async () => {
    const operator = berth.operators[0]!;
    expect((await fetch(`${operator.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${operator.url}/readyz`)).status).toBe(200);
    const samples = parsePrometheus(await (await fetch(`${operator.url}/metrics`)).text());
    expect(metricValue(samples, 'berth_reconcile_total', { kind: 'Agent' })).toBeGreaterThan(0);
    expect(metricValue(samples, 'berth_reconcile_duration_seconds_count', { kind: 'Agent' })).toBeGreaterThan(0);
    expect(samples.some((sample) => sample.name === 'berth_workqueue_depth')).toBe(true);
    expect(metricValue(samples, 'berth_sandboxes', { provider: 'kubernetes', phase: 'idle' })).toBeGreaterThan(0);
  });

  it('serves metrics that promtool check metrics finds no problem in, from the operator and the apiserver (its API port and its metrics port)', async () => {
    for (const url of [berth.operators[0]!.url, berth.apiserver.url, berth.apiserver.metricsUrl]) {
      const target = { url };
      const exposition = await (await fetch(`${target.url}/metrics`)).text();
      const check = spawnSync('promtool', ['check', 'metrics'], { input: exposition, encoding: 'utf8' });
      if (check.error) throw new Error(`promtool is needed for this test (make host installs it): ${check.error.message}`);
      expect(`${check.stdout}${check.stderr}`.trim(), target.url).toBe('');
      expect(check.status).toBe(0);
      expect(parsePrometheus(exposition).find((sample) => sample.name === 'berth_build_info')?.labels.version).toMatch(/^\d+\.\d+\.\d+/);
    }
  });

  it("serves the API server's own registry on its metrics port, and nothing of the API there", async () => {
    const { apiserver } = berth;
    expect(apiserver.metricsUrl).not.toBe(apiserver.url);
    expect((await berth.live.get('/v1/sessions')).status).toBe(200);
    // The request counter of the API is in the exposition of the metrics port: one registry.
    const samples = parsePrometheus(await (await fetch(`${apiserver.metricsUrl}/metrics`)).text());
    const served = samples.filter((sample) => sample.name === 'berth_http_requests_total' && sample.labels.method === 'GET' && sample.labels.status === '200');
    expect(served.reduce((sum, sample) => sum + sample.value, 0)).toBeGreaterThan(0);
    for (const path of ['/v1/sessions', '/healthz', '/v1/openapi.json']) expect((await fetch(`${apiserver.metricsUrl}${path}`)).status, path).toBe(404);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, type BerthInCluster } from './helpers.js';

/**
 * A Fleet custom resource on the real kube-apiserver: the API server writes it, the operator's
 * Fleet controller runs its items (each an agent in a pod) and writes its status, kubectl shows it.
 */
let model: FakeModelServer;
let berth: BerthInCluster;

const script = (body: any): FakeTurn => {
  const task = String(body.messages.filter((message: any) => message.role === 'user').at(-1)?.content ?? '');
  return { text: `checked ${task}`, usage: { input: 40, output: 4 } };
};

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  berth = await startBerthInCluster({
    prefix: 'fleet',
    env: { BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }) },
  });
  const definition = await berth.live.post('/v1/agent-definitions', { name: 'checker', systemPrompt: 'Check the item.', tools: [] });
  expect(definition.status, JSON.stringify(definition.body)).toBe(201);
});
afterAll(async () => {
  await berth?.stop();
  await model?.close();
});

describe('a fleet in cluster mode', () => {
  it('is a Fleet resource the operator runs to completion, shown by kubectl get fleets', async () => {
    const session = (await berth.live.post('/v1/sessions', { userId: 'cluster-fleet' })).body;
    const created = await berth.live.post('/v1/fleets', { agent: 'checker', sessionId: session.id, items: ['alpha', 'beta', 'gamma'], concurrency: 2, prompt: 'Check {{item}}' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const name = id.replace('_', '-');

    const running = await kubectlJson(['get', 'fleet', name, '-n', berth.namespace, '-o', 'json']);
    expect(running.spec).toMatchObject({ sessionId: session.id, definition: 'checker', definitionId: created.body.definitionId, itemCount: 3, concurrency: 2, prompt: 'Check {{item}}' });

    const resource = await eventually(async () => {
      const object = await kubectlJson(['get', 'fleet', name, '-n', berth.namespace, '-o', 'json']);
      return object.status?.phase === 'completed' ? object : undefined;
    }, { what: 'the operator to complete the fleet', timeoutMs: 180_000, intervalMs: 1_000 });
    expect(resource.status).toMatchObject({ completed: 3, failed: 0, running: 0, cancelled: 0, cost: { amount: expect.any(Number), currency: 'usd' } });
    expect(resource.status.conditions).toEqual([expect.objectContaining({ type: 'Finished', status: 'True', reason: 'Completed', observedGeneration: resource.metadata.generation })]);

    const table = await kubectl(['get', 'fleets', '-n', berth.namespace]);
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'PHASE', 'COMPLETED', 'FAILED', 'TOTAL', 'COST', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 6)).toEqual([name, 'completed', '3', '0', '3', String(resource.status.cost.amount)]);

    const items = (await berth.live.get(`/v1/fleets/${id}/items`)).body.data;
    expect(items.map((item: any) => [item.status, item.output])).toEqual([
      ['completed', 'checked Check alpha'],
      ['completed', 'checked Check beta'],
      ['completed', 'checked Check gamma'],
    ]);
    expect((await berth.live.get(`/v1/fleets/${id}`)).body).toMatchObject({ status: 'completed', completed: 3, total: 3 });
  });

  it('cancel is written into the resource and the controller ends the fleet cancelled', async () => {
    const session = (await berth.live.post('/v1/sessions', { userId: 'cluster-fleet-cancel' })).body;
    const created = await berth.live.post('/v1/fleets', { agent: 'checker', sessionId: session.id, items: Array.from({ length: 20 }, (_, i) => `item ${i}`), concurrency: 1 });
    const id = created.body.id as string;
    expect((await berth.live.post(`/v1/fleets/${id}/cancel`, {})).status).toBe(200);
    const resource = await eventually(async () => {
      const object = await kubectlJson(['get', 'fleet', id.replace('_', '-'), '-n', berth.namespace, '-o', 'json']);
      return object.status?.phase === 'cancelled' && object.status.running === 0 ? object : undefined;
    }, { what: 'the fleet cancelled', timeoutMs: 120_000, intervalMs: 1_000 });
    expect(resource.spec.cancelled).toBe(true);
    expect(resource.status.reason).toBe('cancelled');
    expect(resource.status.completed + resource.status.failed + resource.status.cancelled).toBe(20);
    expect(resource.status.cancelled).toBeGreaterThanOrEqual(18);
  });
});

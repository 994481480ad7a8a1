import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually } from '../helpers/http.js';
import { kubectl, kubectlJson, startBerthInCluster, type BerthInCluster } from './helpers.js';

/**
 * A Schedule custom resource on the real kube-apiserver: the API server writes it, the operator
 * reconciles it (status, the fire at the next minute, the run in a pod), kubectl shows it.
 */
let model: FakeModelServer;
let berth: BerthInCluster;

const script = (): FakeTurn => ({ text: 'Report done.', usage: { input: 40, output: 4 } });

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  berth = await startBerthInCluster({
    prefix: 'sched',
    env: { BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }) },
  });
  const definition = await berth.live.post('/v1/agent-definitions', { name: 'reporter', systemPrompt: 'Report.', tools: [] });
  expect(definition.status, JSON.stringify(definition.body)).toBe(201);
});
afterAll(async () => {
  await berth?.stop();
  await model?.close();
});

describe('a schedule in cluster mode', () => {
  let id: string;

  it('is a Schedule resource whose status the operator writes, shown by kubectl get schedules', async () => {
    const created = await berth.live.post('/v1/schedules', { agent: 'reporter', userId: 'cluster-cron', name: 'every-minute', cron: '* * * * *', input: 'report' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    id = created.body.id;
    const name = id.replace('_', '-');
    const resource = await eventually(async () => {
      const object = await kubectlJson(['get', 'schedule', name, '-n', berth.namespace, '-o', 'json']);
      return object.status?.nextRunAt ? object : undefined;
    }, { what: 'the operator to write nextRunAt', timeoutMs: 30_000 });
    expect(resource.spec).toMatchObject({ cron: '* * * * *', timezone: 'UTC', userId: 'cluster-cron', paused: false, definitionId: created.body.definitionId });
    expect(resource.status.conditions).toEqual([expect.objectContaining({ type: 'Scheduled', status: 'True', reason: 'Active' })]);
    expect(new Date(resource.status.nextRunAt).getUTCSeconds()).toBe(0);

    const table = await kubectl(['get', 'schedules', '-n', berth.namespace]);
    expect(table.code, table.stderr).toBe(0);
    const [header, row] = table.stdout.trim().split('\n');
    expect(header!.split(/\s+/)).toEqual(['NAME', 'SCHEDULE-NAME', 'CRON', 'TIMEZONE', 'NEXT-RUN', 'LAST-RUN', 'PAUSED', 'AGE']);
    expect(row).toContain(name);
    expect(row).toContain('every-minute');
    expect(row).toContain(resource.status.nextRunAt);
  });

  it('fires at the next minute and the run completes in a pod', async () => {
    const execution = await eventually(async () => {
      const history = (await berth.live.get(`/v1/schedules/${id}/history`)).body.data;
      return history.find((entry: any) => entry.status === 'completed');
    }, { what: 'a completed run of the schedule', timeoutMs: 150_000, intervalMs: 1_000 });
    expect(execution).toMatchObject({ jobId: expect.stringMatching(/^job_/), agentId: expect.stringMatching(/^agt_/), error: null });
    expect((await berth.live.get(`/v1/tasks/${execution.taskId}`)).body.output).toBe('Report done.');
    const resource = await kubectlJson(['get', 'schedule', id.replace('_', '-'), '-n', berth.namespace, '-o', 'json']);
    expect(Date.parse(resource.status.lastRunAt)).toBeGreaterThanOrEqual(Date.parse(execution.scheduledFor));
  });

  it('pause shows in kubectl and clears the next run', async () => {
    expect((await berth.live.post(`/v1/schedules/${id}/pause`)).body).toEqual({ ok: true });
    const resource = await eventually(async () => {
      const object = await kubectlJson(['get', 'schedule', id.replace('_', '-'), '-n', berth.namespace, '-o', 'json']);
      return object.spec.paused && !object.status?.nextRunAt ? object : undefined;
    }, { what: 'the paused status' });
    expect(resource.status.conditions).toEqual([expect.objectContaining({ type: 'Scheduled', status: 'False', reason: 'Paused' })]);
    expect((await berth.live.raw(`/v1/schedules/${id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    await eventually(async () => ((await kubectl(['get', 'schedule', id.replace('_', '-'), '-n', berth.namespace])).code !== 0 ? true : undefined), { what: 'the resource gone' });
  });
});

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, type ApiClient, type ApiResponse } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse, runEvents, type SseEvent } from '../helpers/sse.js';

/**
 * Workflows through a real `berth up` over HTTP: steps run as jobs in real gVisor sandboxes
 * against a local server speaking the OpenAI protocol, which fails a step's first model call
 * (a 400 at the network boundary) so the step's retry is seen; the run's stream read end to end
 * and resumed with Last-Event-ID; a cancelled run, a partial run, the estimate at 0, 9, 10 and
 * 100 completed runs, refused input, a test key's run on the mock model, and a process
 * SIGKILLed in the middle of a run with no step run twice to completion.
 */
let model: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let liveKey: string;
let testKey: string;
let db: pg.Pool;
let databaseUrl: string;
const dataDir = tempDir('berth-workflows-');

/** Tasks whose first model call is refused once (by their first word). */
const failOnce = new Set<string>();
/** How long the model takes for tasks of a first word. */
const delays = new Map<string, number>();

/** The model echoes its task; a task's first word decides a failure or a delay. */
const script = async (body: any): Promise<FakeTurn> => {
  const task = String(body.messages.filter((message: any) => message.role === 'user').at(-1)?.content ?? '');
  const word = task.split(/[\s:]/)[0]!;
  if (failOnce.delete(word)) return { status: 400, error: `refused ${word} once` };
  if (word === 'doomed') return { status: 400, error: 'doomed always fails' };
  return { text: `did(${task})`, usage: { input: 100_000, output: 50_000 }, ...(delays.has(word) ? { delayMs: delays.get(word)! } : {}) };
};

const env = () => ({
  DATABASE_URL: databaseUrl,
  BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
  BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '10.00', output: '10.00' } }),
  BERTH_RUNNER_LEASE: '3s',
  BERTH_STREAM_HEARTBEAT: '1s',
});

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ dataDir, env: env() });
  liveKey = berth.liveKey!;
  testKey = berth.testKey!;
  live = berth.api(liveKey);
  for (const name of ['researcher', 'writer']) {
    const definition = await live.post('/v1/agent-definitions', { name, model: 'openai/gpt-4o-mini', systemPrompt: `You are the ${name}.`, timeout: '10m' });
    expect(definition.status, JSON.stringify(definition.body)).toBe(201);
  }
}, 120_000);
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(dataDir);
  await db.end();
  await model.close();
});

function expectRefused(response: ApiResponse, status: number, code: string, field?: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error).toMatchObject({ code, requestId: expect.stringMatching(/^req_/) });
  if (field) expect(Object.keys(response.body.error.details.fields)).toContain(field);
}

function runEnded(runId: string, client = live): Promise<any> {
  return eventually(
    async () => {
      const run = (await client.get(`/v1/workflow-runs/${runId}`)).body;
      return run.status !== 'running' ? run : undefined;
    },
    { timeoutMs: 150_000, intervalMs: 250, what: `workflow run ${runId} to end` },
  );
}

async function createWorkflow(body: Record<string, unknown>, client = live): Promise<any> {
  const created = await client.post('/v1/workflows', body);
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  return created.body;
}

const threeSteps = (name: string) => ({
  name,
  description: 'research, draft, polish',
  steps: [
    { name: 'research', agent: 'researcher', input: 'research: {{input.topic}}' },
    { name: 'draft', agent: 'writer', input: 'draft: {{steps.research.output}}', dependsOn: ['research'], retries: 1, timeout: '5m' },
    { name: 'polish', agent: 'writer', input: 'polish: {{steps.draft.output}}', dependsOn: ['draft'] },
  ],
});

describe('a three-step workflow whose second step fails once', () => {
  let workflow: any;
  let runId: string;
  let streamed: SseEvent[];

  it('is created at version 1 with its steps resolved to definitions', async () => {
    workflow = await createWorkflow(threeSteps('report'));
    expect(workflow).toMatchObject({ id: expect.stringMatching(/^wf_[0-9a-z]{26}$/), name: 'report', version: 1, archived: false });
    expect(workflow.steps.map((step: any) => [step.name, step.dependsOn, step.retries, step.optional, step.timeout])).toEqual([
      ['research', [], 0, false, null],
      ['draft', ['research'], 1, false, '5m'],
      ['polish', ['draft'], 0, false, null],
    ]);
    expect(workflow.steps[0].definitionId).toMatch(/^adef_/);
    expect((await live.get(`/v1/workflows/${workflow.id}`)).body).toEqual(workflow);
  });

  it('runs to completion, retrying the step that failed, and its stream shows it from start to end', async () => {
    failOnce.add('draft');
    const started = await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'ada', input: { topic: 'tides' } });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    expect(started.body).toMatchObject({ status: 'running', workflowId: workflow.id, workflowVersion: 1, userId: 'ada', input: { topic: 'tides' }, output: null });
    runId = started.body.id;
    expect(runId).toMatch(/^wfr_[0-9a-z]{26}$/);

    const stream = await openSse(`${berth.baseUrl}/v1/workflow-runs/${runId}/stream`, liveKey);
    expect(stream.status).toBe(200);
    streamed = runEvents(await stream.waitFor((events) => events.some((event) => event.event.startsWith('run.')), 150_000));
    stream.close();
    expect(streamed.map((event) => `${event.event}${event.data.stepId ? `:${event.data.stepId}` : ''}`)).toEqual([
      'connected',
      'started',
      'step.completed:research',
      'step.failed:draft',
      'step.completed:draft',
      'step.completed:polish',
      'run.completed',
    ]);
    expect(streamed[0]).toEqual({ event: 'connected', data: { runId, status: 'running' } });
    expect(streamed[1]!.data).toEqual({ runId, workflowId: workflow.id, workflowVersion: 1, stepCount: 3 });
    expect(streamed[3]!.data).toMatchObject({ runId, stepId: 'draft', attempt: 1, willRetry: true, error: { code: 'provider_error' } });
    expect(streamed[4]!.data).toMatchObject({ runId, stepId: 'draft', attempt: 2, cost: { amount: expect.any(Number), currency: 'usd' } });
    const ids = streamed.slice(1).map((event) => Number(event.id));
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1]!)).toBe(true);

    const run = await runEnded(runId);
    expect(run.status).toBe('completed');
    // Each step's task is the template filled with the run's input and the step before.
    expect(run.steps.map((step: any) => [step.name, step.status, step.attempts])).toEqual([
      ['research', 'completed', 1],
      ['draft', 'completed', 2],
      ['polish', 'completed', 1],
    ]);
    expect(run.steps[0].output).toBe('did(research: tides)');
    expect(run.steps[1].output).toBe('did(draft: did(research: tides))');
    expect(run.output).toBe('did(polish: did(draft: did(research: tides)))');
    const total = run.steps.reduce((sum: number, step: any) => sum + step.cost.amount, 0);
    expect(run.cost).toEqual({ amount: total, currency: 'usd' });
    expect(total).toBeGreaterThan(0);
    expect(streamed.at(-1)!.data).toEqual({ runId, status: 'completed', totalCost: run.cost, output: run.output });
  }, 200_000);

  it('replays from Last-Event-ID what came after it, and an ended run alone is one run.completed', async () => {
    const from = streamed[2]!; // step.completed of research
    const replay = await openSse(`${berth.baseUrl}/v1/workflow-runs/${runId}/stream`, liveKey, { 'Last-Event-ID': from.id! });
    const replayed = runEvents(await replay.waitFor((events) => events.some((event) => event.event === 'run.completed')));
    replay.close();
    expect(replayed).toEqual(streamed.slice(3));

    const ended = await openSse(`${berth.baseUrl}/v1/workflow-runs/${runId}/stream`, liveKey);
    const only = await ended.waitFor((events) => events.length > 0);
    await new Promise((resolve) => setTimeout(resolve, 300));
    ended.close();
    expect(only).toEqual([streamed.at(-1)]);
  });

  it('sends workflow.started, one workflow.step_completed per step and workflow.completed', async () => {
    const { rows } = await db.query('SELECT type, data FROM events WHERE subject_id = $1 ORDER BY seq', [runId]);
    expect(rows.map((row) => `${row.type}${row.data.step ? `:${row.data.step}` : ''}`)).toEqual([
      'workflow.started',
      'workflow.step_completed:research',
      'workflow.step_completed:draft',
      'workflow.step_completed:polish',
      'workflow.completed',
    ]);
    expect(rows[0].data).toMatchObject({ workflowId: workflow.id, runId, stepCount: 3 });
    expect(rows[4].data).toMatchObject({ status: 'completed', output: 'did(polish: did(draft: did(research: tides)))', cost: { currency: 'usd' } });
  });

  it('lists its runs and keeps a run on the steps it started with after an update', async () => {
    const updated = await live.raw(`/v1/workflows/${workflow.id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ description: 'v2' }) });
    expect(updated.body).toMatchObject({ version: 2, description: 'v2' });
    const runs = await live.get(`/v1/workflows/${workflow.id}/runs?limit=1`);
    expect(runs.status).toBe(200);
    expect(runs.body).toMatchObject({ hasMore: false, data: [{ id: runId, workflowVersion: 1, status: 'completed' }] });
  });
});

describe('a run that is cancelled', () => {
  it('ends cancelled at once, stops its step under way and never starts the next', async () => {
    delays.set('slow', 15_000);
    const workflow = await createWorkflow({
      name: 'cancellable',
      steps: [
        { name: 'first', agent: 'researcher', input: 'slow: {{input}}' },
        { name: 'second', agent: 'writer', input: 'after: {{steps.first.output}}', dependsOn: ['first'] },
      ],
    });
    const run = (await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'bob', input: 'x' })).body;
    const stepJob = await eventually(
      async () => {
        const { rows } = await db.query(`SELECT j.id, j.agent_id, j.task_id, t.state FROM jobs j JOIN tasks t ON t.id = j.task_id WHERE j.source_id = $1`, [run.id]);
        return rows[0]?.state === 'running' ? rows[0] : undefined;
      },
      { timeoutMs: 90_000, what: 'the first step to be running' },
    );
    // A stream open while the step runs: heartbeats, then the cancel, then it ends.
    const open = await openSse(`${berth.baseUrl}/v1/workflow-runs/${run.id}/stream`, liveKey);
    await open.waitFor((events) => events.some((event) => event.event === 'heartbeat'), 10_000);
    const cancelled = await live.post(`/v1/workflow-runs/${run.id}/cancel`, {});
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' } });
    expect(cancelled.body.steps.map((step: any) => step.status)).toEqual(['cancelled', 'pending']);
    expectRefused(await live.post(`/v1/workflow-runs/${run.id}/cancel`, {}), 409, 'conflict');
    const seen = runEvents(await open.waitFor((events) => events.some((event) => event.event === 'run.cancelled')));
    open.close();
    expect(seen.map((event) => event.event)).toEqual(['connected', 'started', 'run.cancelled']);
    expect(seen[2]!.data).toMatchObject({ runId: run.id, status: 'cancelled', totalCost: { currency: 'usd' } });
    expect(open.events.find((event) => event.event === 'heartbeat')!.id).toBeUndefined();

    const job = await eventually(async () => ((await live.get(`/v1/jobs/${stepJob.id}`)).body.state === 'cancelled' ? true : undefined), { what: 'the step job cancelled' });
    expect(job).toBe(true);
    const agent = await eventually(async () => {
      const body = (await live.get(`/v1/agents/${stepJob.agent_id}`)).body;
      return body.status === 'terminated' ? body : undefined;
    }, { timeoutMs: 60_000, what: 'the step agent ended' });
    expect(agent.status).toBe('terminated');
    const task = await eventually(async () => {
      const body = (await live.get(`/v1/tasks/${stepJob.task_id}`)).body;
      return body.status !== 'running' && body.status !== 'queued' ? body : undefined;
    }, { timeoutMs: 60_000, what: 'the step task ended' });
    // The model call under way when the agent ended may still bring its answer; the job, the
    // step and the run stay cancelled whatever it brings.
    expect(['cancelled', 'completed']).toContain(task.status);
    expect((await live.get(`/v1/jobs/${stepJob.id}`)).body.state).toBe('cancelled');

    // The driver never moves a cancelled run on: no job for the second step.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const { rows } = await db.query('SELECT count(*)::int AS n FROM jobs WHERE source_id = $1', [run.id]);
    expect(rows[0].n).toBe(1);
    expect((await live.get(`/v1/workflow-runs/${run.id}`)).body.status).toBe('cancelled');
    const stream = await openSse(`${berth.baseUrl}/v1/workflow-runs/${run.id}/stream`, liveKey);
    const events = await stream.waitFor((list) => list.length > 0);
    stream.close();
    expect(events.map((event) => event.event)).toEqual(['run.cancelled']);
    delays.delete('slow');
  }, 200_000);
});

describe('a run whose optional step fails', () => {
  it('ends partial: the step after it runs with its output empty, and the run has the last step’s output', async () => {
    const workflow = await createWorkflow({
      name: 'with-optional',
      steps: [
        { name: 'enrich', agent: 'researcher', input: 'doomed: {{input}}', optional: true, retries: 1 },
        { name: 'answer', agent: 'writer', input: 'answer: [{{steps.enrich.output}}] {{input}}', dependsOn: ['enrich'] },
      ],
    });
    const run = (await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'cy', input: 'q' })).body;
    const ended = await runEnded(run.id);
    expect(ended).toMatchObject({ status: 'partial', output: 'did(answer: [] q)', error: null });
    expect(ended.steps.map((step: any) => [step.name, step.status, step.attempts])).toEqual([
      ['enrich', 'failed', 2],
      ['answer', 'completed', 1],
    ]);
    const { rows } = await db.query(`SELECT data FROM events WHERE subject_id = $1 AND type = 'workflow.completed'`, [run.id]);
    expect(rows[0].data).toMatchObject({ status: 'partial', failedSteps: ['enrich'] });
  }, 200_000);

  it('a required step that fails after its retries fails the run with workflow.failed', async () => {
    const workflow = await createWorkflow({ name: 'failing', steps: [{ name: 'only', agent: 'researcher', input: 'doomed: {{input}}' }] });
    const run = (await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'cy', input: 'q' })).body;
    const ended = await runEnded(run.id);
    expect(ended).toMatchObject({ status: 'failed', output: null, error: { step: 'only', code: 'provider_error' } });
    const { rows } = await db.query(`SELECT data FROM events WHERE subject_id = $1 AND type = 'workflow.failed'`, [run.id]);
    expect(rows[0].data).toMatchObject({ runId: run.id, step: 'only', attempts: 1, error: { code: 'provider_error' } });
  }, 200_000);
});

describe('a step that runs past its timeout', () => {
  it('fails the attempt with timeout, retries it, and fails the run when it times out again', async () => {
    delays.set('sluggish', 20_000);
    const workflow = await createWorkflow({ name: 'too-slow', steps: [{ name: 'wait', agent: 'researcher', input: 'sluggish: {{input}}', timeout: '2s', retries: 1 }] });
    const run = (await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'eve', input: 'q' })).body;
    const ended = await runEnded(run.id);
    expect(ended).toMatchObject({ status: 'failed', error: { step: 'wait', code: 'timeout' } });
    expect(ended.steps[0]).toMatchObject({ status: 'failed', attempts: 2, error: { code: 'timeout' } });
    const { rows } = await db.query(`SELECT j.state, j.error, j.timeout_ms FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id WHERE s.run_id = $1 ORDER BY s.attempt`, [run.id]);
    expect(rows).toEqual([
      { state: 'failed', error: expect.objectContaining({ code: 'timeout' }), timeout_ms: '2000' },
      { state: 'failed', error: expect.objectContaining({ code: 'timeout' }), timeout_ms: '2000' },
    ]);
    delays.delete('sluggish');
  }, 200_000);
});

describe('the estimate', () => {
  /** Completed runs written straight into PostgreSQL, with their steps, at these costs. */
  async function seedCompletedRuns(workflowId: string, count: number, from: number): Promise<void> {
    const { rows } = await db.query('SELECT organization_id, mode, steps FROM workflows WHERE id = $1', [workflowId]);
    const { organization_id: organizationId, mode, steps } = rows[0];
    for (let i = 0; i < count; i++) {
      const id = `wfr_seed${workflowId.slice(3, 12)}${String(from + i).padStart(6, '0')}`;
      await db.query(
        `INSERT INTO workflow_runs (id, workflow_id, workflow_version, organization_id, mode, user_id, input, steps, status, cost_cents, currency, created_at, finished_at)
         VALUES ($1, $2, 1, $3, $4, 'seed', 'null', $5, 'completed', $6, 'usd', now(), now())`,
        [id, workflowId, organizationId, mode, JSON.stringify(steps), 20 + from + i],
      );
      for (const [index, step] of steps.entries()) {
        const jobId = `job_seed${id.slice(8)}${index}`;
        await db.query(
          `INSERT INTO jobs (id, organization_id, mode, source, source_id, user_id, definition_id, input, state, cost_cents, currency, created_at)
           VALUES ($1, $2, $3, 'workflow', $4, 'seed', $5, '""', 'completed', $6, 'usd', now())`,
          [jobId, organizationId, mode, id, step.definitionId, 10 + index],
        );
        await db.query(
          `INSERT INTO workflow_step_runs (run_id, step, attempt, job_id, state, output, cost_cents, created_at, finished_at) VALUES ($1, $2, 1, $3, 'completed', 'x', $4, now(), now())`,
          [id, step.name, jobId, 10 + index + ((from + i) % 3)],
        );
      }
    }
  }

  it('is the per-step heuristic at 0, and min/max of completed runs with exact confidence at 9, 10 and 100', async () => {
    const workflow = await createWorkflow(threeSteps('estimated'));
    const estimate = async () => {
      const response = await live.post(`/v1/workflows/${workflow.id}/estimate`, {});
      expect(response.status, JSON.stringify(response.body)).toBe(200);
      return response.body;
    };
    expect(await estimate()).toEqual({
      estimated: { min: 15, max: 150, currency: 'usd' },
      confidence: 'low',
      breakdown: ['research', 'draft', 'polish'].map((step) => ({ step, min: 5, max: 50, basedOn: 0 })),
      basedOn: 0,
    });

    await seedCompletedRuns(workflow.id, 9, 0); // costs 20..28
    expect(await estimate()).toMatchObject({ estimated: { min: 20, max: 28, currency: 'usd' }, confidence: 'low', basedOn: 9 });
    await seedCompletedRuns(workflow.id, 1, 9); // 29
    const ten = await estimate();
    expect(ten).toMatchObject({ estimated: { min: 20, max: 29 }, confidence: 'medium', basedOn: 10 });
    expect(ten.breakdown).toEqual([
      { step: 'research', min: 10, max: 12, basedOn: 10 },
      { step: 'draft', min: 11, max: 13, basedOn: 10 },
      { step: 'polish', min: 12, max: 14, basedOn: 10 },
    ]);
    await seedCompletedRuns(workflow.id, 89, 10);
    expect(await estimate()).toMatchObject({ estimated: { min: 20, max: 118 }, confidence: 'medium', basedOn: 99 });
    await seedCompletedRuns(workflow.id, 1, 99);
    expect(await estimate()).toMatchObject({ estimated: { min: 20, max: 119 }, confidence: 'high', basedOn: 100 });
  }, 120_000);
});

describe('refused input', () => {
  it('answers 422 naming the field for cycles, unknown dependencies, templates and definitions', async () => {
    const agent = 'researcher';
    expectRefused(
      await live.post('/v1/workflows', { name: 'cyclic', steps: [{ name: 'a', agent, dependsOn: ['b'] }, { name: 'b', agent, dependsOn: ['a'] }] }),
      422,
      'unprocessable_entity',
      'steps.0.dependsOn',
    );
    expectRefused(await live.post('/v1/workflows', { name: 'dangling', steps: [{ name: 'a', agent }, { name: 'b', agent, dependsOn: ['zz'] }] }), 422, 'unprocessable_entity', 'steps.1.dependsOn.0');
    expectRefused(
      await live.post('/v1/workflows', { name: 'peeking', steps: [{ name: 'a', agent }, { name: 'b', agent, input: '{{steps.a.output}}' }] }),
      422,
      'unprocessable_entity',
      'steps.1.input',
    );
    expectRefused(await live.post('/v1/workflows', { name: 'evil', steps: [{ name: 'a', agent, input: '{{constructor.constructor}}' }] }), 422, 'unprocessable_entity', 'steps.0.input');
    expectRefused(await live.post('/v1/workflows', { name: 'nobody', steps: [{ name: 'a', agent: 'no-such-definition' }] }), 422, 'unprocessable_entity', 'steps.0.agent');
    expectRefused(await live.post('/v1/workflows', { name: 'empty', steps: [] }), 422, 'unprocessable_entity', 'steps');
    expectRefused(await live.post('/v1/workflows', { name: 'extra', steps: [{ name: 'a', agent }], color: 'red' }), 422, 'unprocessable_entity');
    expectRefused(await live.post('/v1/workflows', { name: 'neg', steps: [{ name: 'a', agent, retries: -1 }] }), 422, 'unprocessable_entity', 'steps.0.retries');
    expectRefused(await live.post('/v1/workflows', { name: 'report', steps: [{ name: 'a', agent }] }), 409, 'conflict');
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM workflows WHERE name IN ('cyclic', 'dangling', 'peeking', 'evil', 'nobody', 'empty', 'extra', 'neg')`);
    expect(rows[0].n).toBe(0);
  });

  it('answers 404 for workflows and runs that are not the caller’s, and 409 for an archived workflow', async () => {
    expectRefused(await live.get('/v1/workflows/wf_00000000000000000000000000'), 404, 'not_found');
    expectRefused(await live.post('/v1/workflows/wf_00000000000000000000000000/runs', { userId: 'u' }), 404, 'not_found');
    expectRefused(await live.post('/v1/workflows/wf_00000000000000000000000000/estimate', {}), 404, 'not_found');
    expectRefused(await live.get('/v1/workflow-runs/wfr_00000000000000000000000000'), 404, 'not_found');
    expectRefused(await live.post('/v1/workflow-runs/wfr_00000000000000000000000000/cancel', {}), 404, 'not_found');
    expectRefused(await live.get('/v1/workflow-runs/wfr_00000000000000000000000000/stream'), 404, 'not_found');
    const workflow = await createWorkflow({ name: 'to-archive', steps: [{ name: 'a', agent: 'researcher' }] });
    // The organization's test key (the other mode) does not see it.
    expectRefused(await berth.api(testKey).get(`/v1/workflows/${workflow.id}`), 404, 'not_found');
    expectRefused(await live.post(`/v1/workflows/${workflow.id}/runs`, {}), 422, 'unprocessable_entity', 'userId');
    expect((await live.raw(`/v1/workflows/${workflow.id}`, { method: 'DELETE' })).status).toBe(200);
    expectRefused(await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'u' }), 409, 'conflict');
    expect((await live.get(`/v1/workflows/${workflow.id}`)).body.archived).toBe(true);
    const listed = (await live.get('/v1/workflows')).body.data.map((item: any) => item.id);
    expect(listed).not.toContain(workflow.id);
    expect((await live.get('/v1/workflows?includeArchived=true')).body.data.map((item: any) => item.id)).toContain(workflow.id);
  });
});

describe('listing', () => {
  it('pages newest first with a cursor, and refuses a cursor it did not give', async () => {
    for (let i = 0; i < 4; i++) await createWorkflow({ name: `listed-${i}`, steps: [{ name: 'a', agent: 'researcher' }] });
    const all = (await live.get('/v1/workflows?limit=100')).body;
    expect(all.data.length).toBeGreaterThanOrEqual(4);
    const first = (await live.get('/v1/workflows?limit=2')).body;
    expect(first).toMatchObject({ hasMore: true, cursor: expect.any(String) });
    const second = (await live.get(`/v1/workflows?limit=2&cursor=${encodeURIComponent(first.cursor)}`)).body;
    expect([...first.data, ...second.data].map((item: any) => item.id)).toEqual(all.data.slice(0, 4).map((item: any) => item.id));
    expect(all.data.map((item: any) => item.id)).toEqual([...all.data.map((item: any) => item.id)].sort().reverse());
    expectRefused(await live.get('/v1/workflows?cursor=bogus'), 422, 'unprocessable_entity', 'cursor');
    expectRefused(await live.get('/v1/workflows?limit=0'), 422, 'unprocessable_entity', 'limit');
  });
});

describe('a test key', () => {
  it('runs the steps on the mock model and records no usage', async () => {
    const test = berth.api(testKey);
    expect((await test.post('/v1/agent-definitions', { name: 'mocked' })).status).toBe(201);
    const workflow = await createWorkflow({ name: 'mocked-flow', steps: [{ name: 'a', agent: 'mocked' }, { name: 'b', agent: 'mocked', dependsOn: ['a'] }] }, test);
    const run = (await test.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'tess', input: 'hello' })).body;
    const ended = await runEnded(run.id, test);
    expect(ended).toMatchObject({ status: 'completed', cost: { amount: 0, currency: 'usd' } });
    expect(ended.output).toContain('[test mode]');
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM usage_ledger u JOIN jobs j ON j.session_id = u.session_id WHERE j.source_id = $1`, [run.id]);
    expect(rows[0].n).toBe(0);
  }, 200_000);
});

describe('a process killed in the middle of a run', () => {
  it('goes on in the next process, and no step runs twice to completion', async () => {
    delays.set('steady', 4_000);
    const workflow = await createWorkflow({
      name: 'survivor',
      steps: [
        { name: 'one', agent: 'researcher', input: 'steady: {{input}}' },
        { name: 'two', agent: 'writer', input: 'steady: {{steps.one.output}}', dependsOn: ['one'] },
        { name: 'three', agent: 'writer', input: 'end: {{steps.two.output}}', dependsOn: ['two'] },
      ],
    });
    const run = (await live.post(`/v1/workflows/${workflow.id}/runs`, { userId: 'dora', input: 'go' })).body;
    // Killed while step two's model call is under way.
    await eventually(
      async () => {
        const { rows } = await db.query(
          `SELECT t.state FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id JOIN tasks t ON t.id = j.task_id WHERE s.run_id = $1 AND s.step = 'two'`,
          [run.id],
        );
        return rows[0]?.state === 'running' ? true : undefined;
      },
      { timeoutMs: 120_000, intervalMs: 100, what: 'step two running' },
    );
    expect(await berth.stop('SIGKILL')).toBe(null);

    berth = await startBerth({ dataDir, env: env() });
    live = berth.api(liveKey);
    const ended = await runEnded(run.id);
    expect(ended.status).toBe('completed');
    expect(ended.output).toBe('did(end: did(steady: did(steady: go)))');
    const { rows } = await db.query(
      `SELECT s.step, count(*)::int AS attempts, count(DISTINCT j.id)::int AS jobs,
         (SELECT count(*)::int FROM tasks t JOIN jobs k ON k.task_id = t.id JOIN workflow_step_runs r ON r.job_id = k.id
          WHERE r.run_id = s.run_id AND r.step = s.step AND t.state = 'completed') AS completed_tasks,
         (SELECT count(*)::int FROM tasks t JOIN jobs k ON k.agent_id = t.agent_id JOIN workflow_step_runs r ON r.job_id = k.id
          WHERE r.run_id = s.run_id AND r.step = s.step) AS tasks
       FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id WHERE s.run_id = $1 GROUP BY s.run_id, s.step ORDER BY s.step`,
      [run.id],
    );
    expect(rows).toEqual([
      { step: 'one', attempts: 1, jobs: 1, completed_tasks: 1, tasks: 1 },
      { step: 'three', attempts: 1, jobs: 1, completed_tasks: 1, tasks: 1 },
      { step: 'two', attempts: 1, jobs: 1, completed_tasks: 1, tasks: 1 },
    ]);
    // Step two's run was continued by the next process's runner (a takeover), not started again.
    const takeover = await db.query(
      `SELECT t.attempt FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id JOIN tasks t ON t.id = j.task_id WHERE s.run_id = $1 AND s.step = 'two'`,
      [run.id],
    );
    expect(takeover.rows[0].attempt).toBeGreaterThan(1);
    const events = await db.query(`SELECT type, count(*)::int AS n FROM workflow_run_events WHERE run_id = $1 GROUP BY type ORDER BY type`, [run.id]);
    expect(events.rows).toEqual([
      { type: 'run.completed', n: 1 },
      { type: 'started', n: 1 },
      { type: 'step.completed', n: 3 },
    ]);
    delays.delete('steady');
  }, 300_000);
});

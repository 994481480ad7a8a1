import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pgModule from 'pg';
import {
  cancelJobsOf,
  createLimitGuard,
  createOrganization,
  enqueueJob,
  getJob,
  idToObjectName,
  jobOutput,
  parseJobEnded,
  silentLogger,
  systemClock,
  UnsupportedRequestError,
  type Job,
  type PostgresResourceStore,
} from '../../common/src/index.js';
import { createAgentFactory } from '../../operator/src/agents/create.js';
import { createRunStarter } from '../../operator/src/agents/run.js';
import { JobExecutor } from '../../operator/src/jobs/executor.js';
import { ModelRouter } from '../../operator/src/runner/models/router.js';
import { loadConfig } from '../../common/src/config.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { ScriptedProvider } from '../helpers/fake-providers.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { startInProcessOperator, type InProcessOperator } from '../helpers/operator.js';

/**
 * The shared jobs engine against real PostgreSQL: jobs of a test key run through the real
 * operator (Agent controller, job executor) and runner on the mock provider and mock model.
 */
let testApi: TestApi;
let pool: pg.Pool;
let store: PostgresResourceStore;
let api: ApiClient;
let organizationId: string;
let operator: InProcessOperator;
// Live-key agents provision here; test-key agents get the mock stand-in of it.
const local = new ScriptedProvider({ name: 'local' });
const providers = new ProviderRegistry([local], 'local');

beforeAll(async () => {
  testApi = await startTestApi({ clock: systemClock, providers });
  ({ pool, store } = testApi);
  organizationId = (await createOrganization(pool, 'jobs')).id;
  api = (await testApi.client(organizationId, 'test')).api;
  const created = await api.post('/v1/agent-definitions', { name: 'reporter', systemPrompt: 'Report briefly.', tools: ['exec'] });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  operator = await startInProcessOperator({ pool, store, connectionString: testApi.databaseUrl, providers, clock: systemClock, identity: 'operator-a' });
});
afterAll(async () => {
  await operator?.stop();
  await testApi.close();
});

async function definitionId(name: string): Promise<string> {
  const { rows } = await pool.query('SELECT id FROM agent_definitions WHERE name = $1 AND archived_at IS NULL', [name]);
  return rows[0].id;
}

const finished = (id: string) =>
  eventually(async () => {
    const job = await getJob(pool, id);
    return job && ['completed', 'failed', 'cancelled'].includes(job.state) ? job : undefined;
  }, { what: `job ${id} finished`, timeoutMs: 30_000 });

describe('a job of a test key', () => {
  let job: Job;

  it('gets the user a session, creates the agent from the definition, runs the input as text and completes', async () => {
    const queued = await enqueueJob(
      pool,
      { organizationId, mode: 'test', source: 'trigger', sourceId: 'trg_jobs1', userId: 'jobs-user', definitionId: await definitionId('reporter'), input: { city: 'Oslo' } },
      new Date(),
    );
    expect(queued.state).toBe('queued');
    job = await finished(queued.id);
    expect(job).toMatchObject({ state: 'completed', error: null, cost: { amount: 0, currency: 'usd' } });
    expect(job.startedAt).not.toBeNull();
    const agent = (await store.get('Agent', idToObjectName(job.agentId!)))!;
    expect(agent.spec).toMatchObject({ definition: await definitionId('reporter'), definitionVersion: 1, instructions: 'Report briefly.', userId: 'jobs-user', mode: 'test' });
    const { rows: sessions } = await pool.query('SELECT session_id FROM session_users WHERE organization_id = $1 AND mode = $2 AND user_id = $3', [organizationId, 'test', 'jobs-user']);
    expect(sessions[0].session_id).toBe(job.sessionId);
    const task = await api.get(`/v1/tasks/${job.taskId}`);
    expect(task.body).toMatchObject({ status: 'completed', task: '{"city":"Oslo"}' });
    expect(task.body.output).toContain('[test mode]');
  });

  it('ends its agent once the run ended, and records no usage', async () => {
    await eventually(async () => ((await store.get('Agent', idToObjectName(job.agentId!)))?.status?.phase === 'terminated' ? true : undefined), { what: 'agent ended' });
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE session_id = $1', [job.sessionId]);
    expect(rows[0].n).toBe(0);
  });

  it('a second job of the same user reuses the session and a string input is the task as it is', async () => {
    const second = await finished(
      (await enqueueJob(pool, { organizationId, mode: 'test', source: 'schedule', sourceId: 'sched_jobs1', userId: 'jobs-user', definitionId: await definitionId('reporter'), input: 'count the files' }, new Date())).id,
    );
    expect(second.sessionId).toBe(job.sessionId);
    expect((await api.get(`/v1/tasks/${second.taskId}`)).body.task).toBe('count the files');
    const text = await operator.metrics.metrics();
    expect(metricValue(parsePrometheus(text), 'berth_jobs_finished_total', { source: 'schedule', state: 'completed' })).toBe(1);
  });
});

describe('a job that cannot run', () => {
  it('of a definition archived after it was queued fails, naming the agent definition', async () => {
    const created = await api.post('/v1/agent-definitions', { name: 'short-lived' });
    // Queued and archived in one transaction, as the route archives it: the executor, which may
    // claim a job the moment it is committed, can only ever see the definition archived.
    const client = await pool.connect();
    let queued: Job;
    try {
      await client.query('BEGIN');
      queued = await enqueueJob(client, { organizationId, mode: 'test', source: 'trigger', sourceId: 'trg_jobs2', userId: 'jobs-user', definitionId: created.body.id, input: 'x' }, new Date());
      await client.query('UPDATE agent_definitions SET archived_at = now(), updated_at = now() WHERE id = $1', [created.body.id]);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const job = await finished(queued.id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatchObject({ code: 'unprocessable_entity' });
    expect(job.error!.message).toContain('archived');
    expect(job.taskId).toBeNull();
  });
});

describe('a job whose agent fails', () => {
  it('fails with the reason, and its agent is ended', async () => {
    // A live key: the agent goes to the install's provider, which refuses it for good.
    local.nextProvisionError = new UnsupportedRequestError('local', 'no sandboxes for this test');
    const liveApi = (await testApi.client(organizationId, 'live')).api;
    const created = await liveApi.post('/v1/agent-definitions', { name: 'live-reporter' });
    const queued = await enqueueJob(pool, { organizationId, mode: 'live', source: 'trigger', sourceId: 'trg_jobs4', userId: 'live-user', definitionId: created.body.id, input: 'x' }, new Date());
    const job = await finished(queued.id);
    expect(job.state).toBe('failed');
    expect(job.error).toMatchObject({ code: 'agent_failed' });
    expect(job.error!.message).toContain(job.agentId!);
    expect(job.error!.message).toContain('no sandboxes for this test');
    expect(job.taskId).toBeNull();
    expect((await store.get('Agent', idToObjectName(job.agentId!)))?.spec.desiredState ?? 'terminated').toBe('terminated');
    local.nextProvisionError = undefined;
  });
});

/** A job executor of its own, advanced pass by pass by the test (no operator: agents stay booting). */
function manualExecutor(identity: string): JobExecutor {
  const models = new ModelRouter(loadConfig({}));
  const limits = createLimitGuard({ pool, store, clock: systemClock });
  return new JobExecutor({
    pool,
    store,
    factory: createAgentFactory({ store, pool, providers, limits, models, clock: systemClock, defaultModel: 'openai/gpt-4o-mini', currency: 'usd' }),
    runs: createRunStarter({ pool, store, limits, models, clock: systemClock }),
    clock: systemClock,
    log: silentLogger,
    metrics: new Registry(),
    identity,
    currency: 'usd',
  });
}

describe('a job of a workflow in a given session', () => {
  it('runs in that session, its output can be read, and its end is announced on berth_job_ended', async () => {
    const listener = new pgModule.Client({ connectionString: testApi.databaseUrl });
    await listener.connect();
    const ended: string[] = [];
    listener.on('notification', (message) => ended.push(message.payload ?? ''));
    await listener.query('LISTEN berth_job_ended');
    try {
      const session = await api.post('/v1/sessions', { userId: 'fleet-user' });
      expect(session.status, JSON.stringify(session.body)).toBe(201);
      const queued = await enqueueJob(
        pool,
        { organizationId, mode: 'test', source: 'workflow', sourceId: 'wfr_jobs5', userId: 'fleet-user', definitionId: await definitionId('reporter'), input: 'say hi', sessionId: session.body.id },
        new Date(),
      );
      expect(queued).toMatchObject({ sessionId: session.body.id, source: 'workflow', timeoutMs: null });
      expect(await jobOutput(pool, queued)).toBeNull();
      const job = await finished(queued.id);
      expect(job).toMatchObject({ state: 'completed', sessionId: session.body.id });
      expect((await store.get('Agent', idToObjectName(job.agentId!)))!.spec.sessionId).toBe(session.body.id);
      const output = await jobOutput(pool, job);
      expect(output).toContain('[test mode]');
      expect(output).toBe((await api.get(`/v1/tasks/${job.taskId}`)).body.output);
      await eventually(async () => (ended.includes(`workflow:wfr_jobs5:${job.id}`) ? true : undefined), { what: 'berth_job_ended notification' });
      expect(parseJobEnded(`workflow:wfr_jobs5:${job.id}`)).toEqual({ source: 'workflow', sourceId: 'wfr_jobs5', jobId: job.id });
      expect(ended.filter((payload) => payload.endsWith(job.id))).toHaveLength(1);
    } finally {
      await listener.end();
    }
  });
});

describe('a job stopped before its task ends', () => {
  beforeAll(async () => {
    await operator.stop();
  });
  afterAll(async () => {
    operator = await startInProcessOperator({ pool, store, connectionString: testApi.databaseUrl, providers, clock: systemClock, identity: 'operator-c' });
  });

  it('is cancelled while running: its agent is ended, no run starts, and a queued job of the source is cancelled at once', async () => {
    const executor = manualExecutor('cancel-x');
    const source = { organizationId, mode: 'test' as const, source: 'fleet' as const, sourceId: 'flt_jobs6', userId: 'cancel-user', definitionId: await definitionId('reporter') };
    const running = await enqueueJob(pool, { ...source, input: 'one' }, new Date());
    const other = await enqueueJob(pool, { ...source, sourceId: 'flt_jobs6b', input: 'three' }, new Date());
    await executor.pass();
    const queued = await enqueueJob(pool, { ...source, input: 'two' }, new Date());
    const before = (await getJob(pool, running.id))!;
    expect(before).toMatchObject({ state: 'running', taskId: null, cancelRequestedAt: null });
    expect(before.agentId).not.toBeNull();

    // Without includeRunning (a schedule's delete) a running job is left to finish.
    expect(await cancelJobsOf(pool, 'fleet', 'flt_jobs6b', new Date())).toBe(0);
    expect((await getJob(pool, other.id))!).toMatchObject({ state: 'running', cancelRequestedAt: null });

    expect(await cancelJobsOf(pool, 'fleet', 'flt_jobs6', new Date(), { includeRunning: true })).toBe(2);
    expect((await getJob(pool, queued.id))!).toMatchObject({ state: 'cancelled', agentId: null });
    const requested = (await getJob(pool, running.id))!;
    expect(requested.state).toBe('running');
    expect(requested.cancelRequestedAt).not.toBeNull();
    // Asking again changes nothing: the request stands, nothing else is open.
    expect(await cancelJobsOf(pool, 'fleet', 'flt_jobs6', new Date(), { includeRunning: true })).toBe(0);

    await executor.pass();
    const cancelled = (await getJob(pool, running.id))!;
    expect(cancelled).toMatchObject({ state: 'cancelled', taskId: null, error: { code: 'cancelled' } });
    expect((await store.get('Agent', idToObjectName(cancelled.agentId!)))!.spec.desiredState).toBe('terminated');
  });

  it('fails with timeout once its timeoutMs ran out, and its agent is ended', async () => {
    const executor = manualExecutor('timeout-x');
    const queued = await enqueueJob(
      pool,
      { organizationId, mode: 'test', source: 'workflow', sourceId: 'wfr_jobs7', userId: 'timeout-user', definitionId: await definitionId('reporter'), input: 'slow', timeoutMs: 300 },
      new Date(),
    );
    expect(queued.timeoutMs).toBe(300);
    await executor.pass();
    expect((await getJob(pool, queued.id))!.state).toBe('running');
    await new Promise((resolve) => setTimeout(resolve, 400));
    await executor.pass();
    const job = (await getJob(pool, queued.id))!;
    expect(job).toMatchObject({ state: 'failed', error: { code: 'timeout' } });
    expect(job.error!.message).toContain('300 ms');
    expect((await store.get('Agent', idToObjectName(job.agentId!)))!.spec.desiredState).toBe('terminated');
  });
});

describe('two executors', () => {
  it('advance one job once: one agent, one run', async () => {
    await operator.stop();
    const executors = ['x', 'y'].map(manualExecutor);
    const queued = await enqueueJob(pool, { organizationId, mode: 'test', source: 'trigger', sourceId: 'trg_jobs3', userId: 'race-user', definitionId: await definitionId('reporter'), input: 'race' }, new Date());
    for (let i = 0; i < 5; i++) await Promise.all(executors.map((executor) => executor.pass()));
    const job = (await getJob(pool, queued.id))!;
    expect(job.state).toBe('running');
    const { items } = await store.list('Agent', { labels: { 'berth.dev/session': idToObjectName(job.sessionId!) } });
    expect(items.filter((agent) => agent.spec.userId === 'race-user' && agent.metadata.name === idToObjectName(job.agentId!))).toHaveLength(1);
    const { rows } = await pool.query("SELECT count(*)::int AS n FROM jobs WHERE source_id = 'trg_jobs3'");
    expect(rows[0].n).toBe(1);
    // A fresh operator takes the job over where it stands and finishes it.
    operator = await startInProcessOperator({ pool, store, connectionString: testApi.databaseUrl, providers, clock: systemClock, identity: 'operator-b' });
    const done = await finished(queued.id);
    expect(done).toMatchObject({ state: 'completed', agentId: job.agentId, sessionId: job.sessionId });
    const { rows: tasks } = await pool.query('SELECT count(*)::int AS n FROM tasks WHERE agent_id = $1', [job.agentId]);
    expect(tasks[0].n).toBe(1);
  });
});

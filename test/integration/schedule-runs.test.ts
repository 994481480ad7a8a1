import pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManualClock,
  PostgresResourceStore,
  createOrganization,
  createPool,
  eventIdFor,
  idToObjectName,
  listEvents,
  silentLogger,
} from '../../common/src/index.js';
import { createScheduleMetrics, createScheduleReconciler } from '../../operator/src/controllers/schedule.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { startInProcessOperator } from '../helpers/operator.js';

/**
 * Schedules of a test key end to end on a moved clock: operator replicas (Schedule reconciler,
 * job executor, Agent controller, runner) on real PostgreSQL fire into the mock provider and mock
 * model; a replica that dies in the middle of a fire and two that reconcile at once fire once.
 */
let testApi: TestApi;
let pool: pg.Pool;
let api: ApiClient;
let organizationId: string;
const clock = new ManualClock('2026-09-01T08:00:00Z');
const providers = new ProviderRegistry([new IdleProvider({ name: 'local' })], 'local');

beforeAll(async () => {
  testApi = await startTestApi({ clock, providers });
  pool = testApi.pool;
  organizationId = (await createOrganization(pool, 'schedule-runs')).id;
  api = (await testApi.client(organizationId, 'test')).api;
  expect((await api.post('/v1/agent-definitions', { name: 'reporter', systemPrompt: 'Report.', tools: ['exec'] })).status).toBe(201);
});
afterAll(async () => {
  await testApi.close();
});

/** What a replica of its own has: a pool (named, to find its connections) and a store. */
function replica(name: string) {
  const url = new URL(testApi.databaseUrl);
  url.searchParams.set('application_name', name);
  const own = createPool(url.toString());
  const store = new PostgresResourceStore(own, { connectionString: url.toString(), clock, log: silentLogger });
  const reconcile = createScheduleReconciler({ store, db: own, clock, metrics: createScheduleMetrics(new Registry()) });
  return { pool: own, store, reconcile, close: async () => (await store.close(), await own.end().catch(() => undefined)) };
}

async function counts(scheduleId: string) {
  const { rows } = await pool.query(
    `SELECT (SELECT count(*)::int FROM schedule_executions WHERE schedule_id = $1) AS executions,
            (SELECT count(*)::int FROM jobs WHERE source_id = $1) AS jobs,
            (SELECT count(*)::int FROM events WHERE subject_id = $1 AND type = 'schedule.fired') AS events`,
    [scheduleId],
  );
  return rows[0];
}

describe('an operator killed in the middle of a fire', () => {
  it('leaves nothing half-written, and its replacement fires the time once', async () => {
    clock.set('2026-09-01T08:00:00Z');
    const created = await api.post('/v1/schedules', { agent: 'reporter', userId: 'night-owl', cron: '*/5 * * * *', input: 'tally' });
    const id = created.body.id as string;
    clock.set('2026-09-01T08:05:00Z');

    // Hold the row its schedule.fired will write, so replica A stops inside its fire transaction,
    // after it claimed the time and queued the job; then end A's connection as a crash would.
    const blocker = new pg.Client({ connectionString: testApi.databaseUrl });
    await blocker.connect();
    await blocker.query('BEGIN');
    await blocker.query(
      `INSERT INTO events (id, organization_id, mode, type, subject_id, data, created_at) VALUES ($1, $2, 'test', 'schedule.fired', $3, '{}', now())`,
      [eventIdFor(`${id}/schedule.fired/2026-09-01T08:05:00.000Z`), organizationId, id],
    );
    const a = replica('replica-a');
    const firing = a.reconcile(idToObjectName(id), silentLogger);
    const pid = await eventually(async () => {
      const { rows } = await pool.query("SELECT pid FROM pg_stat_activity WHERE application_name = 'replica-a' AND wait_event_type = 'Lock'");
      return rows[0]?.pid as number | undefined;
    }, { what: 'replica A waiting inside its fire' });
    await pool.query('SELECT pg_terminate_backend($1)', [pid]);
    await expect(firing).rejects.toThrow();
    await blocker.query('ROLLBACK');
    await blocker.end();
    await a.close();
    expect(await counts(id)).toEqual({ executions: 0, jobs: 0, events: 0 });

    const b = replica('replica-b');
    await b.reconcile(idToObjectName(id), silentLogger);
    await b.reconcile(idToObjectName(id), silentLogger);
    expect(await counts(id)).toEqual({ executions: 1, jobs: 1, events: 1 });
    // A restarted A reconciles the same time again: still one.
    const again = replica('replica-a2');
    await again.reconcile(idToObjectName(id), silentLogger);
    expect(await counts(id)).toEqual({ executions: 1, jobs: 1, events: 1 });
    await Promise.all([b.close(), again.close()]);
    await api.raw(`/v1/schedules/${id}`, { method: 'DELETE' });
  });
});

describe('two operator replicas', () => {
  it('reconciling at once fire a matching time once; the run completes on the mock model and records no usage', async () => {
    clock.set('2026-09-02T08:00:00Z');
    const created = await api.post('/v1/schedules', { agent: 'reporter', userId: 'early-bird', name: 'hourly', cron: '0 * * * *', input: { count: 'files' } });
    const id = created.body.id as string;
    const replicas = [replica('replica-x'), replica('replica-y')];
    const operators = await Promise.all(
      replicas.map((one, i) => startInProcessOperator({ pool: one.pool, store: one.store, connectionString: testApi.databaseUrl, providers, clock, identity: `operator-${i}` })),
    );
    try {
      clock.set('2026-09-02T09:00:00Z');
      // A change of the schedule wakes the Schedule controllers of both replicas at the same moment;
      // the reconcilers are also called straight, side by side, as a double reconcile would.
      const renamed = await api.raw(`/v1/schedules/${id}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'hourly report' }) });
      expect(renamed.status).toBe(200);
      await Promise.all(replicas.flatMap((one) => [one.reconcile(idToObjectName(id), silentLogger), one.reconcile(idToObjectName(id), silentLogger)]));

      const execution = await eventually(async () => {
        const history = (await api.get(`/v1/schedules/${id}/history`)).body.data;
        return history.length === 1 && history[0].status === 'completed' ? history[0] : undefined;
      }, { what: 'the run completed', timeoutMs: 60_000 });
      expect(await counts(id)).toEqual({ executions: 1, jobs: 1, events: 1 });
      expect(execution).toMatchObject({
        scheduledFor: '2026-09-02T09:00:00.000Z',
        firedAt: '2026-09-02T09:00:00.000Z',
        status: 'completed',
        jobId: expect.stringMatching(/^job_/),
        sessionId: expect.stringMatching(/^ses_/),
        agentId: expect.stringMatching(/^agt_/),
        taskId: expect.stringMatching(/^task_/),
        cost: { amount: 0, currency: 'usd' },
        error: null,
      });
      const task = (await api.get(`/v1/tasks/${execution.taskId}`)).body;
      expect(task).toMatchObject({ status: 'completed', task: '{"count":"files"}' });
      expect(task.output).toContain('[test mode]');
      const { rows: usage } = await pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE session_id = $1', [execution.sessionId]);
      expect(usage[0].n).toBe(0);
      const agent = (await api.get(`/v1/agents/${execution.agentId}`)).body;
      expect(agent).toMatchObject({ sessionId: execution.sessionId, definition: created.body.definitionId });
      const [fired] = await listEvents(pool, { subjectId: id, type: 'schedule.fired' });
      // The rename and the time's arrival race in the controllers: the event names the schedule as the firing reconcile read it.
      expect(['hourly', 'hourly report']).toContain(fired!.data.name);
      expect(fired!.data).toMatchObject({ scheduleId: id, jobId: execution.jobId, executionId: execution.id, userId: 'early-bird' });
      expect((await api.get(`/v1/schedules/${id}`)).body).toMatchObject({ lastRunAt: '2026-09-02T09:00:00.000Z', nextRunAt: '2026-09-02T10:00:00.000Z' });
    } finally {
      await Promise.all(operators.map((operator) => operator.stop()));
      await Promise.all(replicas.map((one) => one.close()));
    }
  });
});

import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createOrganization, idToObjectName, listEvents, silentLogger, type PostgresResourceStore } from '../../common/src/index.js';
import { createScheduleMetrics, createScheduleReconciler, SCHEDULE_GRACE_MS } from '../../operator/src/controllers/schedule.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import type { ApiClient } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';

/**
 * Schedules through the API and the real Schedule reconciler against real PostgreSQL, with time
 * on a manual clock: the reconciler is called as its work queue would call it, at the times it
 * asks to be called again (no operator runs the jobs here; schedule-runs.test.ts does).
 */
let testApi: TestApi;
let pool: pg.Pool;
let store: PostgresResourceStore;
let api: ApiClient;
let other: ApiClient;
let organizationId: string;
const clock = new ManualClock('2026-01-01T00:00:00Z');
const registry = new Registry();
let reconcile: ReturnType<typeof createScheduleReconciler>;

beforeAll(async () => {
  testApi = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider({ name: 'local' })], 'local') });
  ({ pool, store } = testApi);
  organizationId = (await createOrganization(pool, 'schedules')).id;
  api = (await testApi.client(organizationId, 'live')).api;
  other = (await testApi.client((await createOrganization(pool, 'other')).id, 'live')).api;
  expect((await api.post('/v1/agent-definitions', { name: 'reporter', systemPrompt: 'Report.' })).status).toBe(201);
  reconcile = createScheduleReconciler({ store, db: pool, clock, metrics: createScheduleMetrics(registry) });
});
afterAll(async () => {
  await testApi.close();
});

const put = (path: string, body: unknown) => api.raw(path, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

async function createSchedule(body: Record<string, unknown>): Promise<string> {
  const response = await api.post('/v1/schedules', { agent: 'reporter', userId: 'sched-user', ...body });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body.id;
}

async function executions(scheduleId: string): Promise<{ scheduled_for: Date; outcome: string; job_id: string | null }[]> {
  const { rows } = await pool.query('SELECT scheduled_for, outcome, job_id FROM schedule_executions WHERE schedule_id = $1 ORDER BY scheduled_for', [scheduleId]);
  return rows;
}

/** Reconciles, then moves the clock to the time the reconciler asked to be called again, until `until`. */
async function runUntil(scheduleId: string, until: string): Promise<void> {
  const name = idToObjectName(scheduleId);
  for (;;) {
    const result = await reconcile(name, silentLogger);
    const status = (await store.get('Schedule', name))!.status!;
    expect(result.requeueAfterMs).toBeDefined();
    const next = new Date(status.nextRunAt!);
    if (next > new Date(until)) return;
    clock.set(next);
  }
}

describe('the API', () => {
  it('creates a schedule whose first run is the next matching time, and lists and gets it', async () => {
    clock.set('2026-01-01T00:00:00Z');
    const response = await api.post('/v1/schedules', { agent: 'reporter', userId: 'u1', name: 'nightly', cron: '30 2 * * *', timezone: 'Europe/Berlin', input: { report: 'sales' } });
    expect(response.status, JSON.stringify(response.body)).toBe(201);
    expect(response.body).toMatchObject({
      id: expect.stringMatching(/^sched_/),
      name: 'nightly',
      agent: 'reporter',
      definitionId: expect.stringMatching(/^adef_/),
      userId: 'u1',
      cron: '30 2 * * *',
      timezone: 'Europe/Berlin',
      input: { report: 'sales' },
      paused: false,
      nextRunAt: '2026-01-01T01:30:00.000Z',
      lastRunAt: null,
    });
    const listed = await api.get('/v1/schedules');
    expect(listed.body.data.map((schedule: any) => schedule.id)).toContain(response.body.id);
    expect((await api.get(`/v1/schedules/${response.body.id}`)).body).toEqual(response.body);
    expect((await other.get(`/v1/schedules/${response.body.id}`)).status).toBe(404);
    expect((await other.get('/v1/schedules')).body).toEqual({ data: [] });
  });

  it('defaults the time zone to UTC and takes text as input', async () => {
    const response = await api.post('/v1/schedules', { agent: 'reporter', userId: 'u1', cron: ' 0  * * * * ', input: 'count the files' });
    expect(response.body).toMatchObject({ cron: '0 * * * *', timezone: 'UTC', input: 'count the files', name: null, nextRunAt: '2026-01-01T01:00:00.000Z' });
  });

  it.each([
    [{ cron: '61 * * * *' }, 'cron', 'minute'],
    [{ cron: '* * * *' }, 'cron', 'five fields'],
    [{ cron: '0 0 30 2 *' }, 'cron', 'impossible'],
    [{ timezone: 'Mars/Olympus' }, 'timezone', 'unknown time zone'],
    [{ agent: 'nobody' }, 'agent', 'no agent definition'],
    [{ agent: 'adef_01jq3vd5g7j9m1p3r5t7v9x1z3' }, 'agent', 'no agent definition'],
    [{ userId: undefined }, 'userId', ''],
    [{ cron: undefined }, 'cron', ''],
    [{ input: 42 }, 'input', ''],
    [{ paused: true }, 'body', 'unknown field: paused'],
  ])('refuses %j with 422 naming %s, and writes nothing', async (change, field, words) => {
    const before = (await api.get('/v1/schedules')).body.data.length;
    const response = await api.post('/v1/schedules', { agent: 'reporter', userId: 'u1', cron: '0 * * * *', ...change });
    expect(response.status, JSON.stringify(response.body)).toBe(422);
    expect(response.body.error.code).toBe('unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)).toContain(field);
    expect(JSON.stringify(response.body.error.details.fields[field])).toContain(words);
    expect((await api.get('/v1/schedules')).body.data.length).toBe(before);
  });

  it('refuses an archived definition, naming agent', async () => {
    const created = await api.post('/v1/agent-definitions', { name: 'retired' });
    await api.raw(`/v1/agent-definitions/${created.body.id}`, { method: 'DELETE' });
    const response = await api.post('/v1/schedules', { agent: 'retired', userId: 'u1', cron: '0 * * * *' });
    expect(response.status).toBe(422);
    expect(response.body.error.details.fields.agent).toEqual(['archived']);
  });

  it('answers 404 for an unknown schedule on every route', async () => {
    for (const [method, path] of [
      ['GET', ''],
      ['PUT', ''],
      ['DELETE', ''],
      ['POST', '/pause'],
      ['POST', '/resume'],
      ['GET', '/history'],
    ] as const) {
      const response = await api.raw(`/v1/schedules/sched_01jq3vf1j3m5p7r9t1v3x5z7b9${path}`, {
        method,
        ...(method === 'PUT' ? { headers: { 'content-type': 'application/json' }, body: '{}' } : {}),
      });
      expect(response.status, `${method} ${path}`).toBe(404);
      expect(response.body.error.code).toBe('not_found');
    }
  });
});

describe('the reconciler on a moved clock', () => {
  it('runs */5 exactly twelve times in an hour, each with its job and schedule.fired', async () => {
    clock.set('2026-02-02T10:00:00Z');
    const id = await createSchedule({ cron: '*/5 * * * *' });
    // Every minute of the hour, as a busy work queue might call it, plus the requeues.
    for (let minute = 0; minute <= 60; minute++) {
      clock.set(new Date(Date.parse('2026-02-02T10:00:00Z') + minute * 60_000));
      await reconcile(idToObjectName(id), silentLogger);
      await reconcile(idToObjectName(id), silentLogger);
    }
    const rows = await executions(id);
    expect(rows).toHaveLength(12);
    expect(rows.map((row) => row.scheduled_for.toISOString())).toEqual(Array.from({ length: 12 }, (_, i) => new Date(Date.parse('2026-02-02T10:05:00Z') + i * 5 * 60_000).toISOString()));
    expect(rows.every((row) => row.outcome === 'fired' && row.job_id)).toBe(true);
    const { rows: jobs } = await pool.query("SELECT count(*)::int AS n FROM jobs WHERE source = 'schedule' AND source_id = $1", [id]);
    expect(jobs[0].n).toBe(12);
    const events = await listEvents(pool, { subjectId: id, type: 'schedule.fired' });
    expect(events).toHaveLength(12);
    expect(events[0]!.data).toMatchObject({ scheduleId: id, userId: 'sched-user', agent: 'reporter', jobId: expect.stringMatching(/^job_/), scheduledFor: expect.any(String) });
    const schedule = (await api.get(`/v1/schedules/${id}`)).body;
    expect(schedule).toMatchObject({ lastRunAt: '2026-02-02T11:00:00.000Z', nextRunAt: '2026-02-02T11:05:00.000Z' });
  });

  it('runs 30 2 * * * in Europe/Berlin once a day through both DST changes of a year', async () => {
    clock.set('2026-01-01T00:00:00Z');
    const id = await createSchedule({ cron: '30 2 * * *', timezone: 'Europe/Berlin' });
    await runUntil(id, '2027-01-01T00:00:00Z');
    const times = (await executions(id)).map((row) => row.scheduled_for.toISOString());
    expect(times).toHaveLength(365);
    // One run per Berlin calendar day, none twice.
    const days = new Set(times.map((time) => new Intl.DateTimeFormat('en-CA', { timeZone: 'Europe/Berlin' }).format(new Date(time))));
    expect(days.size).toBe(365);
    // Spring: 02:30 does not exist on 29 March; it runs at 03:00 CEST.
    expect(times).toContain('2026-03-28T01:30:00.000Z');
    expect(times).toContain('2026-03-29T01:00:00.000Z');
    expect(times).toContain('2026-03-30T00:30:00.000Z');
    // Autumn: 02:30 happens twice on 25 October; it runs once, at the first.
    expect(times.filter((time) => time.startsWith('2026-10-25'))).toEqual(['2026-10-25T00:30:00.000Z']);
    expect(times).toContain('2026-10-26T01:30:00.000Z');
  });

  it('pause stops firing; resume runs at the next matching time after it, with no catch-up burst', async () => {
    clock.set('2026-04-01T08:00:00Z');
    const id = await createSchedule({ cron: '0 * * * *' });
    const name = idToObjectName(id);
    clock.set('2026-04-01T09:00:00Z');
    await reconcile(name, silentLogger);
    expect(await executions(id)).toHaveLength(1);

    expect((await api.post(`/v1/schedules/${id}/pause`)).body).toEqual({ ok: true });
    expect((await api.post(`/v1/schedules/${id}/pause`)).body).toEqual({ ok: true });
    expect((await api.get(`/v1/schedules/${id}`)).body).toMatchObject({ paused: true, nextRunAt: null });
    await reconcile(name, silentLogger);
    const paused = (await store.get('Schedule', name))!;
    expect(paused.status).toMatchObject({ lastRunAt: '2026-04-01T09:00:00.000Z' });
    expect(paused.status!.nextRunAt).toBeUndefined();
    expect(paused.status!.conditions).toEqual([expect.objectContaining({ type: 'Scheduled', status: 'False', reason: 'Paused' })]);
    for (const hour of ['10', '11', '12', '13']) {
      clock.set(`2026-04-01T${hour}:00:00Z`);
      await reconcile(name, silentLogger);
    }
    expect(await executions(id)).toHaveLength(1);

    clock.set('2026-04-01T13:20:00Z');
    expect((await api.post(`/v1/schedules/${id}/resume`)).body).toEqual({ ok: true });
    expect((await api.get(`/v1/schedules/${id}`)).body).toMatchObject({ paused: false, nextRunAt: '2026-04-01T14:00:00.000Z' });
    await reconcile(name, silentLogger);
    expect(await executions(id)).toHaveLength(1);
    expect((await store.get('Schedule', name))!.status).toMatchObject({ nextRunAt: '2026-04-01T14:00:00.000Z' });
    clock.set('2026-04-01T14:00:00Z');
    await reconcile(name, silentLogger);
    expect((await executions(id)).map((row) => row.scheduled_for.toISOString())).toEqual(['2026-04-01T09:00:00.000Z', '2026-04-01T14:00:00.000Z']);
  });

  it('PUT of a new cron moves nextRunAt; omitted fields keep their values', async () => {
    clock.set('2026-05-04T07:10:00Z');
    const id = await createSchedule({ cron: '0 12 * * *', name: 'noon', input: 'say hi' });
    await reconcile(idToObjectName(id), silentLogger);
    expect((await api.get(`/v1/schedules/${id}`)).body.nextRunAt).toBe('2026-05-04T12:00:00.000Z');
    const updated = await put(`/v1/schedules/${id}`, { cron: '30 7 * * *' });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ cron: '30 7 * * *', name: 'noon', input: 'say hi', timezone: 'UTC', nextRunAt: '2026-05-04T07:30:00.000Z' });
    await reconcile(idToObjectName(id), silentLogger);
    expect((await store.get('Schedule', idToObjectName(id)))!.status!.nextRunAt).toBe('2026-05-04T07:30:00.000Z');
    const zoned = await put(`/v1/schedules/${id}`, { timezone: 'America/New_York', input: { mood: 'cheerful' } });
    expect(zoned.body).toMatchObject({ cron: '30 7 * * *', timezone: 'America/New_York', input: { mood: 'cheerful' }, nextRunAt: '2026-05-04T11:30:00.000Z' });
    const refused = await put(`/v1/schedules/${id}`, { cron: 'every day' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.details.fields.cron).toBeDefined();
    expect((await api.get(`/v1/schedules/${id}`)).body.cron).toBe('30 7 * * *');
  });

  it('records times older than the grace window as missed and runs the recent ones once', async () => {
    clock.set('2026-06-01T00:00:00Z');
    const id = await createSchedule({ cron: '*/5 * * * *' });
    // No operator ran for two hours.
    clock.set('2026-06-01T02:00:00Z');
    await reconcile(idToObjectName(id), silentLogger);
    await reconcile(idToObjectName(id), silentLogger);
    const rows = await executions(id);
    expect(rows).toHaveLength(24);
    const fired = rows.filter((row) => row.outcome === 'fired').map((row) => row.scheduled_for.toISOString());
    expect(SCHEDULE_GRACE_MS).toBe(15 * 60_000);
    expect(fired).toEqual(['2026-06-01T01:45:00.000Z', '2026-06-01T01:50:00.000Z', '2026-06-01T01:55:00.000Z', '2026-06-01T02:00:00.000Z']);
    expect(rows.filter((row) => row.outcome === 'missed' && row.job_id === null)).toHaveLength(20);
    const history = (await api.get(`/v1/schedules/${id}/history`)).body.data;
    expect(history).toHaveLength(24);
    expect(history[0]).toMatchObject({ scheduledFor: '2026-06-01T02:00:00.000Z', status: 'queued', jobId: expect.stringMatching(/^job_/), firedAt: '2026-06-01T02:00:00.000Z', taskId: null });
    expect(history[23]).toMatchObject({ scheduledFor: '2026-06-01T00:05:00.000Z', status: 'missed', jobId: null, firedAt: null });
    const metrics = parsePrometheus(await registry.metrics());
    expect(metricValue(metrics, 'berth_schedule_times_total', { outcome: 'missed' })).toBeGreaterThanOrEqual(20);
  });

  it('DELETE cancels the queued runs and nothing fires after it', async () => {
    clock.set('2026-07-01T00:00:00Z');
    const id = await createSchedule({ cron: '*/5 * * * *' });
    clock.set('2026-07-01T00:05:00Z');
    await reconcile(idToObjectName(id), silentLogger);
    expect((await api.raw(`/v1/schedules/${id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    const { rows } = await pool.query("SELECT state FROM jobs WHERE source_id = $1", [id]);
    expect(rows).toEqual([{ state: 'cancelled' }]);
    clock.set('2026-07-01T00:10:00Z');
    expect(await reconcile(idToObjectName(id), silentLogger)).toEqual({});
    expect(await executions(id)).toHaveLength(1);
    expect((await api.get(`/v1/schedules/${id}`)).status).toBe(404);
    expect((await api.get(`/v1/schedules/${id}/history`)).status).toBe(404);
  });
});

import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOrganization, silentLogger, systemClock } from '../../common/src/index.js';
import { WorkflowDriver } from '../../operator/src/workflows/driver.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { startInProcessOperator, type InProcessOperator } from '../helpers/operator.js';

/**
 * Workflow drivers racing on real PostgreSQL: the operator's own driver and two more, all
 * reconciling the same test-key runs at once (the operator's job executor and runner do the
 * steps on the mock provider and model). Each attempt of each step is queued once.
 */
let testApi: TestApi;
let pool: pg.Pool;
let api: ApiClient;
let operator: InProcessOperator;
const providers = new ProviderRegistry([new IdleProvider({ name: 'local' })], 'local');

beforeAll(async () => {
  testApi = await startTestApi({ clock: systemClock, providers });
  pool = testApi.pool;
  const organizationId = (await createOrganization(pool, 'workflow-drivers')).id;
  api = (await testApi.client(organizationId, 'test')).api;
  expect((await api.post('/v1/agent-definitions', { name: 'worker' })).status).toBe(201);
  operator = await startInProcessOperator({ pool, store: testApi.store, connectionString: testApi.databaseUrl, providers, clock: systemClock, identity: 'operator-a' });
});
afterAll(async () => {
  await operator?.stop();
  await testApi.close();
});

describe('three drivers on the same runs', () => {
  it('queue each step once: one attempt row and one job per step, and every run completes', async () => {
    const metrics = new Registry();
    const extra = ['b', 'c'].map(
      (name) => new WorkflowDriver({ pool, clock: systemClock, log: silentLogger, metrics: name === 'b' ? metrics : new Registry(), currency: 'usd', connectionString: testApi.databaseUrl, pollMs: 50 }),
    );
    for (const driver of extra) await driver.start();
    try {
      const created = await api.post('/v1/workflows', {
        name: 'diamond',
        steps: [
          { name: 'a', agent: 'worker' },
          { name: 'b', agent: 'worker', input: 'b {{steps.a.output}}', dependsOn: ['a'] },
          { name: 'c', agent: 'worker', input: 'c {{steps.a.output}}', dependsOn: ['a'] },
          { name: 'd', agent: 'worker', input: '{{steps.b.output}} + {{steps.c.output}}', dependsOn: ['b', 'c'] },
        ],
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const runs = [];
      for (let i = 0; i < 5; i++) runs.push((await api.post(`/v1/workflows/${created.body.id}/runs`, { userId: `racer-${i}`, input: `n${i}` })).body.id as string);
      // Passes on top of the notifications and polls: the three drivers meet on every run.
      const hammer = (async () => {
        for (let i = 0; i < 40; i++) await Promise.all(extra.map((driver) => driver.pass()));
      })();
      for (const id of runs) {
        const run = await eventually(async () => {
          const body = (await api.get(`/v1/workflow-runs/${id}`)).body;
          return body.status !== 'running' ? body : undefined;
        }, { timeoutMs: 60_000, what: `run ${id}` });
        expect(run.status).toBe('completed');
        expect(run.output).toContain('[test mode]');
      }
      await hammer;
      const { rows } = await pool.query(
        `SELECT s.run_id, s.step, count(*)::int AS attempts, count(DISTINCT j.id)::int AS jobs
         FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id WHERE s.run_id = ANY($1) GROUP BY s.run_id, s.step`,
        [runs],
      );
      expect(rows).toHaveLength(runs.length * 4);
      expect(rows.every((row) => row.attempts === 1 && row.jobs === 1)).toBe(true);
      const { rows: jobs } = await pool.query(`SELECT count(*)::int AS n FROM jobs WHERE source = 'workflow' AND source_id = ANY($1)`, [runs]);
      expect(jobs[0].n).toBe(runs.length * 4);
      const { rows: events } = await pool.query(
        `SELECT type, count(*)::int AS n FROM workflow_run_events WHERE run_id = ANY($1) GROUP BY type ORDER BY type`,
        [runs],
      );
      expect(events).toEqual([
        { type: 'run.completed', n: runs.length },
        { type: 'started', n: runs.length },
        { type: 'step.completed', n: runs.length * 4 },
      ]);
      const text = await metrics.metrics();
      expect(metricValue(parsePrometheus(text), 'berth_workflow_run_reconciles_total', { result: 'unchanged' })).toBeGreaterThan(0);
    } finally {
      for (const driver of extra) await driver.stop();
    }
  }, 120_000);
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../common/src/clock.js';
import { createPool, idToObjectName, type Pool } from '../../common/src/index.js';
import { silentLogger } from '../../common/src/log.js';
import { PostgresResourceStore } from '../../common/src/store/postgres.js';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { startOwnPostgres, type OwnPostgres } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse, runEvents } from '../helpers/sse.js';

/**
 * PostgreSQL stops for a few seconds and starts again under a running `berth up`: the three
 * LISTEN users (the stream hub, the runner, the resource watch) reconnect and catch up. The
 * runner polls only every 10 minutes here, so a run picked up at once after the restart was
 * woken by its notification or by the reconnect, not found by the poll.
 */
let postgres: OwnPostgres;
let berth: BerthProcess;
let test: ApiClient;
let pool: Pool;
let store: PostgresResourceStore;

beforeAll(async () => {
  postgres = await startOwnPostgres();
  berth = await startBerth({ env: { DATABASE_URL: postgres.connectionString, BERTH_RUNNER_POLL: '10m', BERTH_STREAM_HEARTBEAT: '1s' } });
  test = berth.api(berth.testKey);
  pool = createPool(postgres.connectionString);
  store = new PostgresResourceStore(pool, { connectionString: postgres.connectionString, clock: new ManualClock('2026-03-01T12:00:00Z'), log: silentLogger });
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await store.close();
  await pool.end();
  await postgres.close();
});

const agentStatus = async (id: string) => (await test.get(`/v1/agents/${id}`)).body.status as string | undefined;
const readyAgent = async (sessionId: string) => {
  const created = await test.post(`/v1/sessions/${sessionId}/agents`, { tools: ['exec'] });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await eventually(async () => ((await agentStatus(created.body.id)) === 'idle' ? true : undefined), { what: 'an idle agent', timeoutMs: 20_000 });
  return created.body.id as string;
};
const finished = (taskId: string, timeoutMs: number) =>
  eventually(
    async () => {
      const task = (await test.get(`/v1/tasks/${taskId}`)).body;
      return task.status === 'completed' || task.status === 'failed' || task.status === 'cancelled' ? task : undefined;
    },
    { what: `task ${taskId} finished`, timeoutMs },
  );

describe('a PostgreSQL restart under a running berth up', () => {
  it('keeps streams open and complete, wakes the runner, and the watches see changes after it', async () => {
    const sessionId = (await test.post('/v1/sessions', { userId: 'restart' })).body.id as string;
    const agentId = await readyAgent(sessionId);
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agentId}/stream`, berth.testKey);
    expect(stream.status).toBe(200);
    const before = await test.post(`/v1/agents/${agentId}/run`, { task: 'before the restart' });
    expect(before.status).toBe(202);
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));

    const resyncs: number[] = [];
    const seen: string[] = [];
    const watch = store.watch('Session', { onEvent: (event) => seen.push(event.name), onResync: () => resyncs.push(Date.now()) });
    await watch.ready;

    await postgres.stop();
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    await postgres.start();
    const restartedAt = Date.now();

    // The process survived the outage (an unhandled rejection would have ended it).
    expect(berth.child.exitCode).toBeNull();
    // Requests reach the database again as soon as it is up.
    const after = await eventually(
      async () => {
        const response = await test.post(`/v1/agents/${agentId}/run`, { task: 'after the restart' });
        return response.status === 202 ? response : undefined;
      },
      { what: 'a run accepted after the restart', timeoutMs: 20_000 },
    );
    // Picked up long before the 10-minute poll, and streamed on the stream opened before the outage.
    const task = await finished(after.body.taskId, 30_000);
    expect(task.status).toBe('completed');
    await stream.waitFor((events) => events.filter((event) => event.event === 'output').length === 2, 15_000);
    stream.close();
    const ids = runEvents(stream.events).map((event) => Number(event.id));
    expect(ids.length).toBeGreaterThan(0);
    expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b)); // in order, none twice
    const secondRun = runEvents(stream.events).filter((event) => event.data.taskId === after.body.taskId).map((event) => event.event);
    expect(secondRun.filter((kind, index, all) => kind !== 'thinking' || all[index - 1] !== 'thinking')).toEqual([
      'thinking',
      'tool_call',
      'tool_result',
      'thinking',
      'output',
    ]);

    // The operator's watch sees a new agent and provisions it; this process's watch relisted and sees new sessions.
    await readyAgent(sessionId);
    await eventually(async () => (resyncs.length > 0 ? true : undefined), { what: 'a relist after the reconnect' });
    const created = await test.post('/v1/sessions', { userId: 'after-restart' });
    await eventually(async () => (seen.includes(idToObjectName(created.body.id)) ? true : undefined), { what: 'a watch event after the restart' });
    watch.stop();

    // Each listener reconnects on its own backoff (up to 10 s between tries): one may still be
    // waiting for its next try when the others have caught up, so the metrics are awaited.
    const samples = await eventually(
      async () => {
        const current = parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());
        const settled = ['stream-hub', 'runner', 'resource-watch', 'jobs'].every(
          (listener) =>
            metricValue(current, 'berth_database_listener_reconnects_total', { listener }) >= 1 &&
            metricValue(current, 'berth_database_listener_connected', { listener }) === 1,
        );
        return settled ? current : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 250, what: 'every LISTEN connection to be back' },
    );
    for (const listener of ['stream-hub', 'runner', 'resource-watch', 'jobs']) {
      expect(metricValue(samples, 'berth_database_listener_reconnects_total', { listener }), listener).toBeGreaterThanOrEqual(1);
      expect(metricValue(samples, 'berth_database_listener_connected', { listener }), listener).toBe(1);
    }
    expect(Date.now() - restartedAt).toBeLessThan(60_000);
  });
});

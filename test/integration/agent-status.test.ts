import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, startRunnerProcess, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The Agent reconciler is the only writer of an agent's status (ADR 18): `running` and `idle`
 * follow from its task in PostgreSQL, not from what a runner says. A runner killed in the middle
 * of a run writes nothing more, and no runner takes the run over; the agent still leaves
 * `running` once the reconciler sees that the task's lease ran out, and shows why.
 */
let model: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let runnerEnv: Record<string, string>;
let slowOnce = true;

const script = (body: any): FakeTurn => {
  const answers = body.messages.filter((message: any) => message.role === 'assistant').length;
  if (answers === 0) return { text: 'step one', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'echo one' } }] };
  if (answers === 1 && slowOnce) {
    slowOnce = false;
    // Long past the runner's death: the first runner never sees this answer.
    return { text: 'too late', delayMs: 60_000 };
  }
  return { text: 'done after all' };
};

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  runnerEnv = {
    DATABASE_URL: databaseUrl,
    BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
    BERTH_RUNNER_LEASE: '2s',
    BERTH_RUNNER_WORKERS: '1',
  };
  // The API and the controllers run no runs: the only runner is a process of its own.
  berth = await startBerth({ env: { ...runnerEnv, BERTH_RUNNER_WORKERS: '0' } });
  runnerEnv.BERTH_DATA_DIR = berth.dataDir;
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  await berth.stop();
  removeDataDir(berth.dataDir);
  await db.end();
  await model.close();
});

const condition = (agent: any, type: string) => agent.conditions.find((entry: any) => entry.type === type);

describe('an agent whose runner dies mid-run', () => {
  it('leaves running by the reconciler alone, says why, and runs again when a runner takes the run over', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'status' })).body;
    const created = (await live.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec'], timeout: '30m' })).body;
    const idle = await eventually(async () => {
      const agent = (await live.get(`/v1/agents/${created.id}`)).body;
      return agent.status === 'idle' ? agent : undefined;
    });
    expect(condition(idle, 'Running')).toMatchObject({ status: 'False', reason: 'NoRun' });

    const runner = await startRunnerProcess(runnerEnv);
    const { taskId } = (await live.post(`/v1/agents/${created.id}/run`, { task: 'outlive your runner' })).body;
    // The runner claims the task; the reconciler, told by the database, moves the agent to running.
    const running = await eventually(
      async () => {
        const agent = (await live.get(`/v1/agents/${created.id}`)).body;
        return agent.status === 'running' ? agent : undefined;
      },
      { timeoutMs: 20_000, what: 'the agent running' },
    );
    expect(condition(running, 'Running')).toMatchObject({ status: 'True', reason: 'RunInProgress', message: expect.stringContaining(taskId) });

    await eventually(async () => (model.requests.length >= 2 ? true : undefined), { timeoutMs: 30_000, what: 'the second model call' });
    expect(await runner.stop('SIGKILL')).toBe(null);
    expect((await db.query('SELECT state, attempt FROM tasks WHERE id = $1', [taskId])).rows[0]).toEqual({ state: 'running', attempt: 1 });

    // No runner is left and nothing notifies: the reconciler looks again when the lease would end.
    const orphaned = await eventually(
      async () => {
        const agent = (await live.get(`/v1/agents/${created.id}`)).body;
        return agent.status === 'idle' ? agent : undefined;
      },
      { timeoutMs: 15_000, what: 'the agent to leave running' },
    );
    expect(condition(orphaned, 'Running')).toMatchObject({ status: 'False', reason: 'RunnerLost', message: expect.stringContaining(taskId) });
    expect(condition(orphaned, 'SandboxReady')).toMatchObject({ status: 'True' });
    // The task itself is as the dead runner left it, waiting to be taken over.
    expect((await db.query('SELECT state, attempt FROM tasks WHERE id = $1', [taskId])).rows[0]).toEqual({ state: 'running', attempt: 1 });
    // One run at a time still holds: the run is not lost, only its runner.
    expect((await live.post(`/v1/agents/${created.id}/run`, { task: 'another' })).body.error).toMatchObject({ code: 'conflict' });

    const second = await startRunnerProcess(runnerEnv);
    try {
      const task = await eventually(
        async () => {
          const current = (await live.get(`/v1/tasks/${taskId}`)).body;
          return current.status === 'completed' ? current : undefined;
        },
        { timeoutMs: 30_000, what: 'the run to complete' },
      );
      expect(task.output).toBe('done after all');
      const after = await eventually(async () => {
        const agent = (await live.get(`/v1/agents/${created.id}`)).body;
        return agent.status === 'idle' && condition(agent, 'Running')?.reason === 'NoRun' ? agent : undefined;
      });
      expect(condition(after, 'Running').observedGeneration).toBe(after.conditions[0].observedGeneration);
    } finally {
      await second.stop();
    }
  });
});

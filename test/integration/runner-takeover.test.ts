import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, startRunnerProcess, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse, runEvents } from '../helpers/sse.js';

/**
 * A runner killed in the middle of a run: another runner takes the task over when its lease
 * runs out, continues from the checkpoint (the first tool call is not run again) and finishes
 * it once: one output, one agent.completed, each step charged once.
 */
let model: FakeModelServer;
let berth: BerthProcess;
let db: pg.Pool;
let env: Record<string, string>;
let slowOnce = true;

const script = (body: any): FakeTurn => {
  const answers = body.messages.filter((message: any) => message.role === 'assistant').length;
  if (answers === 0) return { text: 'step one', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'echo one >> log.txt; echo one' } }] };
  if (answers === 1) {
    const delayMs = slowOnce ? 8_000 : 0;
    slowOnce = false;
    return { text: 'step two', toolCalls: [{ name: 'exec', input: { language: 'bash', code: 'echo two >> log.txt; echo two' } }], delayMs };
  }
  return { text: 'finished once' };
};

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  env = {
    DATABASE_URL: databaseUrl,
    BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
    BERTH_RUNNER_LEASE: '2s',
    BERTH_RUNNER_WORKERS: '1',
    BERTH_LOG_LEVEL: 'info',
  };
  // The API and controllers run no runs themselves: separate runner processes do.
  berth = await startBerth({ env: { ...env, BERTH_RUNNER_WORKERS: '0' } });
  env.BERTH_DATA_DIR = berth.dataDir;
});
afterAll(async () => {
  await berth.stop();
  removeDataDir(berth.dataDir);
  await db.end();
  await model.close();
});

describe('a runner that dies mid-run', () => {
  it('is replaced by another runner, which finishes the run exactly once', async () => {
    const live = berth.api(berth.liveKey);
    const session = (await live.post('/v1/sessions', { userId: 'takeover' })).body;
    const agent = (await live.post(`/v1/sessions/${session.id}/agents`, { tools: ['exec'] })).body;
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined));
    const stream = await openSse(`${berth.baseUrl}/v1/agents/${agent.id}/stream`, berth.liveKey);

    const first = await startRunnerProcess(env);
    const { taskId } = (await live.post(`/v1/agents/${agent.id}/run`, { task: 'take me over' })).body;
    // Kill the runner while it waits for the (slow) second model answer.
    await eventually(async () => (model.requests.length >= 2 ? true : undefined), { timeoutMs: 30_000, what: 'the second model call' });
    expect(await first.stop('SIGKILL')).toBe(null);
    expect((await db.query('SELECT state, attempt FROM tasks WHERE id = $1', [taskId])).rows[0]).toEqual({ state: 'running', attempt: 1 });

    const second = await startRunnerProcess(env);
    const task = await eventually(
      async () => {
        const current = (await live.get(`/v1/tasks/${taskId}`)).body;
        return current.status === 'completed' ? current : undefined;
      },
      { timeoutMs: 60_000, what: 'the run to complete' },
    );
    await stream.waitFor((events) => events.some((event) => event.event === 'output'));
    await second.stop();
    stream.close();

    expect(task).toMatchObject({ output: 'finished once', steps: 3 });
    expect((await db.query('SELECT attempt FROM tasks WHERE id = $1', [taskId])).rows[0].attempt).toBe(2);
    expect(second.output()).toContain('continuing a task whose runner stopped');
    // The first tool call ran once, before the crash; the second once, after it.
    expect(readFileSync(join(berth.dataDir, 'sandboxes', agent.id, 'workspace', 'log.txt'), 'utf8')).toBe('one\ntwo\n');
    expect(runEvents(stream.events).filter((event) => event.event === 'output')).toHaveLength(1);
    const { rows: events } = await db.query("SELECT type FROM events WHERE subject_id = $1 AND type LIKE 'agent.%completed' ORDER BY seq", [agent.id]);
    expect(events.map((event) => event.type)).toEqual(['agent.completed', 'agent.run.completed']);
    const { rows: ledger } = await db.query('SELECT dedupe_key FROM usage_ledger WHERE task_id = $1 ORDER BY id', [taskId]);
    expect(ledger.map((row) => row.dedupe_key)).toEqual([`${taskId}/model/1`, `${taskId}/model/2`, `${taskId}/model/3`]);
  });
});

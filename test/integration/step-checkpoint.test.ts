import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LostClaimError,
  appendStreamEvent,
  checkpointTask,
  claimTask,
  createPool,
  insertTask,
  migrate,
  silentLogger,
  type ExecRequest,
  type ExecResult,
  type LedgerEntry,
  type Resource,
  type Task,
} from '../../common/src/index.js';
import { MockProvider } from '../../providers/src/mock.js';
import { runLoop, type LoopIo } from '../../operator/src/runner/loop.js';
import type { ModelRoute } from '../../operator/src/runner/models/router.js';
import type { ModelRequest, ModelResponse } from '../../operator/src/runner/models/types.js';
import { createTestDatabase } from '../helpers/postgres.js';

/**
 * A step's checkpoint carries the step's stream events and charge in one statement: in order,
 * all or none, fenced by the claim (the charge aside, which its dedupe key makes count once).
 */
let pool: pg.Pool;
let connectionString: string;

beforeAll(async () => {
  connectionString = await createTestDatabase();
  pool = createPool(connectionString);
  await migrate(pool);
});
afterAll(() => pool.end());

let taskCount = 0;
async function claimedTask(): Promise<Task> {
  const id = `task_step_${++taskCount}`;
  await insertTask(pool, { id, organizationId: 'org_1', mode: 'live', sessionId: 'ses_1', agentId: `agt_step_${taskCount}`, input: 'go' });
  const task = await claimTask(pool, 'runner-a', 60_000);
  expect(task?.id).toBe(id);
  return task!;
}

function charge(task: Task, step: number): LedgerEntry {
  return {
    organizationId: task.organizationId,
    sessionId: task.sessionId,
    userId: 'user_1',
    environment: 'production',
    agentId: task.agentId,
    taskId: task.id,
    kind: 'model',
    provider: 'openai',
    model: 'openai/gpt-4o-mini',
    inputTokens: 100,
    outputTokens: 10,
    amountNanocents: 2_100_000n,
    currency: 'usd',
    billingMode: 'managed',
    dedupeKey: `${task.id}/model/${step}`,
    at: new Date('2026-01-01T00:00:00Z'),
  };
}

const progress = (steps: number) => ({ conversation: [{ role: 'user', content: 'go' }], steps, inputTokens: 100 * steps, outputTokens: 10 * steps });

describe('a step checkpoint', () => {
  it('writes the progress, the events in their order, and the charge together', async () => {
    const task = await claimedTask();
    const events = Array.from({ length: 50 }, (_, index) => ({ type: 'thinking' as const, data: { taskId: task.id, index } }));
    await checkpointTask(pool, task, progress(1), { events, charge: charge(task, 1) });

    const { rows: stored } = await pool.query('SELECT agent_id, task_id, type, data FROM stream_events WHERE task_id = $1 ORDER BY seq', [task.id]);
    expect(stored.map((row) => row.data.index)).toEqual(events.map((event) => event.data.index));
    expect(stored[0]).toMatchObject({ agent_id: task.agentId, task_id: task.id, type: 'thinking' });
    const { rows: ledger } = await pool.query('SELECT amount_nanocents, input_tokens, occurred_at FROM usage_ledger WHERE task_id = $1', [task.id]);
    expect(ledger).toEqual([{ amount_nanocents: '2100000', input_tokens: '100', occurred_at: new Date('2026-01-01T00:00:00Z') }]);
    expect((await pool.query('SELECT steps, conversation FROM tasks WHERE id = $1', [task.id])).rows[0]).toEqual({
      steps: 1,
      conversation: [{ role: 'user', content: 'go' }],
    });
  });

  it('charges a step written twice once', async () => {
    const task = await claimedTask();
    await checkpointTask(pool, task, progress(1), { charge: charge(task, 1) });
    await checkpointTask(pool, task, progress(1), { charge: charge(task, 1) });
    expect((await pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE task_id = $1', [task.id])).rows[0].n).toBe(1);
  });

  it('writes no event and no progress for a runner that lost its claim, and still charges the model call once', async () => {
    const task = await claimedTask();
    await checkpointTask(pool, task, progress(1));
    const stale = { ...task, attempt: task.attempt - 1 };
    await expect(
      checkpointTask(pool, stale, progress(2), { events: [{ type: 'tool_call', data: { taskId: task.id } }], charge: charge(task, 2) }),
    ).rejects.toBeInstanceOf(LostClaimError);
    expect((await pool.query('SELECT count(*)::int AS n FROM stream_events WHERE task_id = $1', [task.id])).rows[0].n).toBe(0);
    expect((await pool.query('SELECT steps FROM tasks WHERE id = $1', [task.id])).rows[0].steps).toBe(1);
    // The runner that holds the task redoes the step under the same key: one charge.
    await checkpointTask(pool, task, progress(2), { charge: charge(task, 2) });
    expect((await pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE task_id = $1', [task.id])).rows[0].n).toBe(1);
  });

  it('writes nothing when one of its rows fails', async () => {
    const task = await claimedTask();
    await checkpointTask(pool, task, progress(1));
    const negative = { ...charge(task, 2), amountNanocents: -1n };
    await expect(checkpointTask(pool, task, progress(2), { events: [{ type: 'thinking', data: { taskId: task.id } }], charge: negative })).rejects.toThrow();
    expect((await pool.query('SELECT count(*)::int AS n FROM stream_events WHERE task_id = $1', [task.id])).rows[0].n).toBe(0);
    expect((await pool.query('SELECT steps FROM tasks WHERE id = $1', [task.id])).rows[0].steps).toBe(1);
  });
});

describe('stream notifications', () => {
  it('are one per statement and agent, carrying the newest seq, however many events the statement wrote', async () => {
    const task = await claimedTask();
    const listener = new pg.Client({ connectionString });
    await listener.connect();
    const payloads: { agentId: string; seq: string }[] = [];
    listener.on('notification', (message) => payloads.push(JSON.parse(message.payload!)));
    await listener.query('LISTEN berth_stream');
    try {
      const events = Array.from({ length: 20 }, (_, index) => ({ type: 'thinking' as const, data: { taskId: task.id, index } }));
      await checkpointTask(pool, task, progress(1), { events });
      const single = await appendStreamEvent(pool, { agentId: task.agentId, taskId: task.id, type: 'output', data: { taskId: task.id } });
      await listener.query('SELECT 1'); // notifications of committed statements arrive before this answer
      const { rows } = await pool.query<{ seq: string }>('SELECT max(seq)::text AS seq FROM stream_events WHERE task_id = $1 AND type = $2', [task.id, 'thinking']);
      expect(payloads).toEqual([
        { agentId: task.agentId, seq: rows[0]!.seq },
        { agentId: task.agentId, seq: single },
      ]);
    } finally {
      await listener.end();
    }
  });
});

/**
 * The loop writes a tool result's checkpoint while it makes the next model call: a real task
 * in a real database, a model at the vendor boundary that answers in the test, test-key
 * sandboxes (MockProvider) for the tool calls.
 */
describe('the checkpoint written beside the next model call', () => {
  const agent = { metadata: { name: 'agt-beside' }, spec: { tools: ['exec'] } } as unknown as Resource<'Agent'>;
  const answer = (text: string, tool: boolean): ModelResponse => ({
    text,
    toolCalls: tool ? [{ id: `call_${text}`, name: 'exec', input: { language: 'bash', code: 'true' } }] : [],
    usage: { inputTokens: 100, outputTokens: 10 },
    stopReason: tool ? 'tool_calls' : 'stop',
  });
  const route = (complete: (request: ModelRequest, call: number) => Promise<ModelResponse>): ModelRoute => {
    let calls = 0;
    return {
      vendor: 'openai',
      model: 'gpt-4o-mini',
      adapter: { complete: (_endpoint, request) => complete(request, ++calls) },
      endpoint: { api: 'openai', baseUrl: 'http://model.invalid' },
      keySource: 'platform',
      price: { inputNanocentsPerToken: 0n, outputNanocentsPerToken: 0n },
    };
  };
  /** A test-key sandbox whose exec also runs `during`: what happens elsewhere while a tool call runs. */
  const sandboxDoing = (during: () => Promise<void>) =>
    new (class extends MockProvider {
      override async exec(ref: { provider: string; id: string }, request: ExecRequest): Promise<ExecResult> {
        await during();
        return super.exec(ref, request);
      }
    })({ computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' });
  const io = (task: Task, signal = new AbortController().signal): LoopIo => ({
    signal,
    emit: async (type, data) => {
      await appendStreamEvent(pool, { agentId: task.agentId, taskId: task.id, type, data: { taskId: task.id, ...data } });
    },
    checkpoint: async (progress, { events, charge: step }) => {
      await checkpointTask(pool, task, progress, {
        events: events.map(({ type, data }) => ({ type, data: { taskId: task.id, ...data } })),
        ...(step ? { charge: charge(task, step.step) } : {}),
      });
    },
    stopReason: async () => undefined,
    awaitDecision: async () => undefined,
  });
  const settings = { maxSteps: 10, modelTimeoutMs: 10_000, toolTimeoutMs: 10_000, log: silentLogger };

  it('stores the next answer\'s streamed text after the tool result, though the model streams it before the result commits', async () => {
    const task = await claimedTask();
    // The tool call leaves the task's row locked by another transaction: the tool result's
    // checkpoint waits for it, and the model is called meanwhile; the model releases the lock once
    // it has streamed its text.
    const blocker = await pool.connect();
    const sandbox = sandboxDoing(async () => {
      await blocker.query('BEGIN');
      await blocker.query('SELECT id FROM tasks WHERE id = $1 FOR UPDATE', [task.id]);
    });
    let messagesStoredAtCall: number | undefined;
    const model = route(async (request, call) => {
      if (call === 1) return answer('first', true);
      const { rows } = await pool.query<{ n: number }>('SELECT jsonb_array_length(conversation) AS n FROM tasks WHERE id = $1', [task.id]);
      messagesStoredAtCall = rows[0]!.n;
      request.onText?.('x'.repeat(300)); // a readable size: streamed at once
      // Time for a thinking event that did not wait for the checkpoint to be stored before it.
      await new Promise((resolve) => setTimeout(resolve, 50));
      await blocker.query('COMMIT');
      blocker.release();
      return answer('x'.repeat(300), false);
    });
    const end = await runLoop(task, agent, { route: model, provider: sandbox, sandbox: { provider: 'mock', id: task.agentId }, policies: {} }, io(task), settings);
    expect(end).toMatchObject({ state: 'completed' });
    // When the model was called, the stored conversation had the task and the first answer, not the tool result yet.
    expect(messagesStoredAtCall).toBe(2);
    const { rows } = await pool.query('SELECT type FROM stream_events WHERE task_id = $1 ORDER BY seq', [task.id]);
    expect(rows.map((row) => row.type)).toEqual(['tool_call', 'tool_result', 'thinking']);
    expect((await pool.query('SELECT steps, jsonb_array_length(conversation) AS n FROM tasks WHERE id = $1', [task.id])).rows[0]).toEqual({ steps: 2, n: 4 });
  });

  it('stops the model call when the checkpoint finds the task taken over, and writes nothing more', async () => {
    const task = await claimedTask();
    // While the tool call runs, the lease runs out and another runner claims the task.
    const sandbox = sandboxDoing(async () => {
      await pool.query(`UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [task.id]);
      expect((await claimTask(pool, 'runner-b', 60_000))?.id).toBe(task.id);
    });
    let aborted: unknown;
    const model = route(async (request, call) => {
      if (call === 1) return answer('first', true);
      // The second call waits for its answer until it is stopped.
      return new Promise((_resolve, reject) =>
        request.signal!.addEventListener('abort', () => {
          aborted = request.signal!.reason;
          reject(request.signal!.reason);
        }),
      );
    });
    await expect(
      runLoop(task, agent, { route: model, provider: sandbox, sandbox: { provider: 'mock', id: task.agentId }, policies: {} }, io(task), settings),
    ).rejects.toBeInstanceOf(LostClaimError);
    expect(aborted).toBeInstanceOf(LostClaimError);
    const { rows } = await pool.query('SELECT type FROM stream_events WHERE task_id = $1 ORDER BY seq', [task.id]);
    expect(rows.map((row) => row.type)).toEqual(['tool_call']);
    expect((await pool.query('SELECT count(*)::int AS n FROM usage_ledger WHERE task_id = $1', [task.id])).rows[0].n).toBe(1);
    expect((await pool.query('SELECT steps, claimed_by FROM tasks WHERE id = $1', [task.id])).rows[0]).toEqual({ steps: 1, claimed_by: 'runner-b' });
  });
});

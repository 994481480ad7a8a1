import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LostClaimError, checkpointTask, claimTask, createPool, insertTask, migrate, type LedgerEntry, type Task } from '../../common/src/index.js';
import { createTestDatabase } from '../helpers/postgres.js';

/**
 * A step's checkpoint carries the step's stream events and charge in one statement: in order,
 * all or none, fenced by the claim (the charge aside, which its dedupe key makes count once).
 */
let pool: pg.Pool;

beforeAll(async () => {
  pool = createPool(await createTestDatabase());
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

import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { LEDGER_COLUMNS, ledgerPlaceholders, ledgerRow, type LedgerEntry } from './ledger.js';
import type { GuardrailHit } from './guardrails.js';
import type { StreamEventType } from './stream.js';

export type TaskState = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';

export type TaskExtraction = { metadata: Record<string, unknown> } | { error: { code: string; message: string; issues?: string[] } };

export interface Task {
  id: string;
  organizationId: string;
  mode: Mode;
  sessionId: string;
  agentId: string;
  input: string;
  state: TaskState;
  attempt: number;
  claimedBy: string | null;
  conversation: unknown[];
  steps: number;
  inputTokens: number;
  outputTokens: number;
  output: string | null;
  error: { code: string; message: string } | null;
  /** The metadata extracted from a completed run's output, or why none was; null without extraction rules. */
  extraction: TaskExtraction | null;
  /** What the agent's guardrails found during the run, in order. */
  guardrailHits: GuardrailHit[];
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

interface TaskRow {
  id: string;
  organization_id: string;
  mode: Mode;
  session_id: string;
  agent_id: string;
  input: string;
  state: TaskState;
  attempt: number;
  claimed_by: string | null;
  conversation: unknown[];
  steps: number;
  input_tokens: string;
  output_tokens: string;
  output: string | null;
  error: { code: string; message: string } | null;
  extraction: TaskExtraction | null;
  guardrail_hits: GuardrailHit[];
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const COLUMNS = `id, organization_id, mode, session_id, agent_id, input, state, attempt, claimed_by, conversation, steps,
  input_tokens, output_tokens, output, error, extraction, guardrail_hits, created_at, started_at, finished_at`;

function toTask(row: TaskRow): Task {
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    sessionId: row.session_id,
    agentId: row.agent_id,
    input: row.input,
    state: row.state,
    attempt: row.attempt,
    claimedBy: row.claimed_by,
    conversation: row.conversation,
    steps: row.steps,
    inputTokens: Number(row.input_tokens),
    outputTokens: Number(row.output_tokens),
    output: row.output,
    error: row.error,
    extraction: row.extraction,
    guardrailHits: row.guardrail_hits,
    createdAt: row.created_at.toISOString(),
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

export async function insertTask(
  db: Queryable,
  task: { id: string; organizationId: string; mode: Mode; sessionId: string; agentId: string; input: string; conversation?: unknown[] | undefined },
): Promise<Task> {
  // A conversation given here is where the loop starts (earlier turns, then the input); without
  // one the loop starts from the input alone.
  const { rows } = await db.query<TaskRow>(
    `INSERT INTO tasks (id, organization_id, mode, session_id, agent_id, input, conversation, state)
     VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued') RETURNING ${COLUMNS}`,
    [task.id, task.organizationId, task.mode, task.sessionId, task.agentId, task.input, JSON.stringify(task.conversation ?? [])],
  );
  return toTask(rows[0]!);
}

export async function findTask(db: Queryable, id: string): Promise<Task | undefined> {
  const { rows } = await db.query<TaskRow>(`SELECT ${COLUMNS} FROM tasks WHERE id = $1`, [id]);
  return rows[0] ? toTask(rows[0]) : undefined;
}

export async function activeTaskOf(db: Queryable, agentId: string): Promise<Task | undefined> {
  const { rows } = await db.query<TaskRow>(
    `SELECT ${COLUMNS} FROM tasks WHERE agent_id = $1 AND state IN ('queued', 'running')`,
    [agentId],
  );
  return rows[0] ? toTask(rows[0]) : undefined;
}

/**
 * Claims the oldest task that is queued, or running under a lease that expired (its runner
 * died): exactly one caller gets it (SKIP LOCKED), and its attempt number fences every later
 * write against a runner that lost the claim.
 */
export async function claimTask(db: Queryable, runner: string, leaseMs: number): Promise<Task | undefined> {
  const { rows } = await db.query<TaskRow>(
    `UPDATE tasks SET state = 'running', claimed_by = $1, attempt = attempt + 1,
       lease_expires_at = now() + ($2::bigint * interval '1 millisecond'),
       started_at = coalesce(started_at, now())
     WHERE id = (
       SELECT id FROM tasks
       WHERE state = 'queued' OR (state = 'running' AND lease_expires_at < now())
       ORDER BY created_at
       FOR UPDATE SKIP LOCKED
       LIMIT 1)
     RETURNING ${COLUMNS}`,
    [runner, leaseMs],
  );
  return rows[0] ? toTask(rows[0]) : undefined;
}

/** Extends the lease; false when the claim was lost (another runner took the task over). */
export async function renewTaskLease(db: Queryable, task: Pick<Task, 'id' | 'attempt'>, leaseMs: number): Promise<boolean> {
  const result = await db.query(
    `UPDATE tasks SET lease_expires_at = now() + ($3::bigint * interval '1 millisecond')
     WHERE id = $1 AND attempt = $2 AND state = 'running'`,
    [task.id, task.attempt, leaseMs],
  );
  return (result.rowCount ?? 0) > 0;
}

export class LostClaimError extends Error {
  constructor(taskId: string) {
    super(`task ${taskId} was taken over by another runner`);
    this.name = 'LostClaimError';
  }
}

/** What one step of the loop writes with its checkpoint. */
export interface StepWrites {
  /** The step's stream events, stored in this order. */
  events?: { type: StreamEventType; data: Record<string, unknown> }[];
  /** The step's model call, charged once under its dedupe key. */
  charge?: LedgerEntry;
}

/**
 * Saves the loop's progress together with what the step streamed and charged, in one statement:
 * all of it is written or none of it, so a runner that dies mid-step leaves neither an event
 * nor a charge that its checkpoint does not account for, and one commit (one WAL flush) serves
 * the whole step. Throws `LostClaimError` when this runner no longer holds the task; then only
 * the charge is written.
 */
export async function checkpointTask(
  db: Queryable,
  task: Pick<Task, 'id' | 'attempt'>,
  progress: { conversation: unknown[]; steps: number; inputTokens: number; outputTokens: number; guardrailHits?: GuardrailHit[] },
  writes: StepWrites = {},
): Promise<void> {
  const params: unknown[] = [
    task.id,
    task.attempt,
    JSON.stringify(progress.conversation),
    progress.steps,
    progress.inputTokens,
    progress.outputTokens,
    JSON.stringify(progress.guardrailHits ?? []),
  ];
  const statements = [
    `checkpoint AS (
       UPDATE tasks SET conversation = $3, steps = $4, input_tokens = $5, output_tokens = $6, guardrail_hits = $7
       WHERE id = $1 AND attempt = $2 AND state = 'running'
       RETURNING id, agent_id)`,
  ];
  if (writes.events?.length) {
    // Rows are numbered in the order of the array; the sort is in a subquery, so each row's
    // sequence number is drawn after it, in that order (it is the SSE id clients replay from).
    params.push(JSON.stringify(writes.events));
    statements.push(
      `stream AS (
         INSERT INTO stream_events (agent_id, task_id, type, data)
         SELECT agent_id, id, type, data FROM (
           SELECT checkpoint.agent_id, checkpoint.id, event.value->>'type' AS type, event.value->'data' AS data
           FROM checkpoint, jsonb_array_elements($${params.length}::jsonb) WITH ORDINALITY AS event(value, position)
           ORDER BY event.position) AS ordered)`,
    );
  }
  if (writes.charge) {
    const first = params.length + 1;
    params.push(...ledgerRow(writes.charge));
    // The model call was made whether or not this runner still holds the task: it is charged
    // either way, once under its key (a runner that redoes the step charges the same key).
    statements.push(
      `charge AS (
         INSERT INTO usage_ledger (${LEDGER_COLUMNS}) VALUES (${ledgerPlaceholders(first)})
         ON CONFLICT (dedupe_key) DO NOTHING)`,
    );
  }
  // A named (prepared) statement: each connection parses and plans each of its four shapes once,
  // not once a step.
  const { rows } = await db.query<{ held: boolean }>({
    name: `berth_checkpoint_${writes.events?.length ? 'events' : 'none'}_${writes.charge ? 'charge' : 'none'}`,
    text: `WITH ${statements.join(',\n')} SELECT count(*) > 0 AS held FROM checkpoint`,
    values: params,
  });
  if (!rows[0]?.held) throw new LostClaimError(task.id);
}

/** Ends the task in a final state; throws `LostClaimError` when this runner no longer holds it. */
export async function finishTask(
  db: Queryable,
  task: Pick<Task, 'id' | 'attempt'>,
  outcome: { state: 'completed' | 'failed' | 'cancelled'; output?: string; error?: { code: string; message: string }; extraction?: TaskExtraction | undefined },
): Promise<void> {
  const result = await db.query(
    `UPDATE tasks SET state = $3, output = $4, error = $5, extraction = $6, finished_at = now(), lease_expires_at = NULL
     WHERE id = $1 AND attempt = $2 AND state = 'running'`,
    [task.id, task.attempt, outcome.state, outcome.output ?? null, outcome.error ? JSON.stringify(outcome.error) : null, outcome.extraction ? JSON.stringify(outcome.extraction) : null],
  );
  if ((result.rowCount ?? 0) === 0) throw new LostClaimError(task.id);
}

/** Gives a task back (a runner shutting down): another runner continues it from its checkpoint. */
export async function releaseTask(db: Queryable, task: Pick<Task, 'id' | 'attempt'>): Promise<void> {
  await db.query(
    `UPDATE tasks SET state = 'queued', claimed_by = NULL, lease_expires_at = NULL
     WHERE id = $1 AND attempt = $2 AND state = 'running'`,
    [task.id, task.attempt],
  );
}

/** An agent's queued or running task as its reconciler sees it: whether a runner holds it, and for how long yet. */
export interface TaskHold {
  id: string;
  state: 'queued' | 'running';
  /** Running under a lease that has not run out, by the database's clock (the one claims go by). */
  held: boolean;
  /** How long the lease lasts yet; 0 when not held. */
  leaseRemainingMs: number;
}

export async function taskHoldOf(db: Queryable, agentId: string): Promise<TaskHold | undefined> {
  return (await taskHoldAndSpendOf(db, agentId)).task;
}

/**
 * An agent's task hold (`taskHoldOf`) and its spend so far (models, compute, storage, exact, from
 * the ledger), in one statement: what the agent's reconcile reads beside the agent.
 */
export async function taskHoldAndSpendOf(db: Queryable, agentId: string): Promise<{ task: TaskHold | undefined; spentNanocents: bigint }> {
  const { rows } = await db.query<{ id: string | null; state: 'queued' | 'running'; held: boolean; lease_remaining_ms: string; nanocents: string | null }>({
    name: 'berth_task_hold_and_spend',
    text: `SELECT task.id, task.state, task.held, task.lease_remaining_ms,
         (SELECT sum(amount_nanocents)::text FROM usage_ledger WHERE agent_id = $1) AS nanocents
       FROM (SELECT 1) one LEFT JOIN LATERAL (
         SELECT id, state, coalesce(state = 'running' AND lease_expires_at > now(), false) AS held,
           greatest(0, coalesce(ceil(extract(epoch FROM lease_expires_at - now()) * 1000), 0))::bigint AS lease_remaining_ms
         FROM tasks WHERE agent_id = $1 AND state IN ('queued', 'running') LIMIT 1
       ) task ON true`,
    values: [agentId],
  });
  const row = rows[0]!;
  const task = row.id ? { id: row.id, state: row.state, held: row.held, leaseRemainingMs: row.held ? Number(row.lease_remaining_ms) : 0 } : undefined;
  return { task, spentNanocents: BigInt(row.nanocents ?? '0') };
}

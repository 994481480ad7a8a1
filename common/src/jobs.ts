/**
 * Jobs: one run of an agent definition for a user, asked for by a schedule, a trigger or a channel.
 *
 * The contract:
 * - A source enqueues with `enqueueJob(db, …)`, passing its own transaction as `db` when the job
 *   belongs with other writes (a schedule's execution row, an event): the job exists exactly when
 *   they do. The definition must be resolved to its `adef_…` id by the caller; `input` is kept as
 *   given (a string or any JSON value) and is sent to the model as text (`jobTaskText`).
 * - Inserting a job NOTIFYs `berth_jobs` with its id (migration 0010); the operator's job
 *   executor takes it (leader only, SKIP LOCKED), gets or creates the user's default session,
 *   creates an agent from the definition's current version, starts its run with the input as the
 *   task, follows the task to its end and then ends the agent. The job's state goes
 *   queued → running → completed | failed; `cancelJobsOf` cancels the queued jobs of a source that
 *   is deleted (a running job finishes).
 * - The job is scoped to the organization and mode (live or test) of its source: a test-mode job
 *   runs on the mock provider and the mock model and records no usage, like any test-key agent.
 * - `getJob` reads one job, optionally checking its scope (undefined when it is not the caller's).
 * - `history` (channels): the turns of a conversation before the input; the run starts from them,
 *   so the model sees them before the input as earlier messages of one conversation.
 */
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';

export type JobSource = 'schedule' | 'trigger' | 'channel';
export type JobState = 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';
export const TERMINAL_JOB_STATES: readonly JobState[] = ['completed', 'failed', 'cancelled'];

/** Why a job failed: a code clients can branch on and a message for people. */
export interface JobError {
  code: string;
  message: string;
}

/** A turn of a conversation before a job's input: what a person said and what was answered. */
export interface ConversationTurn {
  role: 'user' | 'assistant';
  content: string;
}

export interface EnqueueJobInput {
  organizationId: string;
  mode: Mode;
  source: JobSource;
  sourceId: string;
  userId: string;
  /** An `adef_…` id: the definition's current version when the job starts is used. */
  definitionId: string;
  input: unknown;
  /** Earlier turns the run starts from (channels); none for schedules and triggers. */
  history?: ConversationTurn[] | undefined;
}

export interface Job extends EnqueueJobInput {
  id: string;
  state: JobState;
  sessionId: string | null;
  agentId: string | null;
  taskId: string | null;
  error: JobError | null;
  /** The task's cost once the job ended, in integer cents. */
  cost: { amount: number; currency: string } | null;
  claimedBy: string | null;
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
}

export interface JobRow {
  id: string;
  organization_id: string;
  mode: Mode;
  source: JobSource;
  source_id: string;
  user_id: string;
  definition_id: string;
  input: unknown;
  history: ConversationTurn[] | null;
  state: JobState;
  session_id: string | null;
  agent_id: string | null;
  task_id: string | null;
  error: JobError | null;
  cost_cents: string | null;
  currency: string | null;
  claimed_by: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

export const JOB_COLUMNS = `id, organization_id, mode, source, source_id, user_id, definition_id, input, history, state, session_id, agent_id,
  task_id, error, cost_cents, currency, claimed_by, created_at, started_at, finished_at`;

export function toJob(row: JobRow): Job {
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    source: row.source,
    sourceId: row.source_id,
    userId: row.user_id,
    definitionId: row.definition_id,
    input: row.input,
    ...(row.history ? { history: row.history } : {}),
    state: row.state,
    sessionId: row.session_id,
    agentId: row.agent_id,
    taskId: row.task_id,
    error: row.error,
    cost: jobCost(row),
    claimedBy: row.claimed_by,
    createdAt: row.created_at.toISOString(),
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

/** The cost columns of a job row as money, or null until the job ended. */
export function jobCost(row: Pick<JobRow, 'cost_cents' | 'currency'>): { amount: number; currency: string } | null {
  return row.cost_cents === null || row.currency === null ? null : { amount: Number(row.cost_cents), currency: row.currency };
}

/** Queues a job; inside the caller's transaction when `db` is one. */
export async function enqueueJob(db: Queryable, input: EnqueueJobInput, now: Date): Promise<Job> {
  const { rows } = await db.query<JobRow>(
    `INSERT INTO jobs (id, organization_id, mode, source, source_id, user_id, definition_id, input, history, state, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', $10) RETURNING ${JOB_COLUMNS}`,
    [
      newId('job', now),
      input.organizationId,
      input.mode,
      input.source,
      input.sourceId,
      input.userId,
      input.definitionId,
      JSON.stringify(input.input ?? null),
      input.history ? JSON.stringify(input.history) : null,
      now,
    ],
  );
  return toJob(rows[0]!);
}

/** The job, or undefined; with `scope`, only when it belongs to that organization and mode. */
export async function getJob(db: Queryable, id: string, scope?: { organizationId: string; mode: Mode }): Promise<Job | undefined> {
  const { rows } = await db.query<JobRow>(`SELECT ${JOB_COLUMNS} FROM jobs WHERE id = $1`, [id]);
  const job = rows[0] ? toJob(rows[0]) : undefined;
  if (job && scope && (job.organizationId !== scope.organizationId || job.mode !== scope.mode)) return undefined;
  return job;
}

/** Cancels the jobs of a source that have not started; returns how many. */
export async function cancelJobsOf(db: Queryable, source: JobSource, sourceId: string, now: Date): Promise<number> {
  const result = await db.query(
    `UPDATE jobs SET state = 'cancelled', finished_at = $3, claimed_by = NULL, claim_expires_at = NULL
     WHERE source = $1 AND source_id = $2 AND state = 'queued'`,
    [source, sourceId, now],
  );
  return result.rowCount ?? 0;
}

/** The task text of a job's input: a string as it is, anything else as its JSON. */
export function jobTaskText(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? null);
}

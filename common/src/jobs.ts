/**
 * Jobs: one run of an agent definition for a user, asked for by a schedule, a trigger, a step of
 * a workflow run, an item of a fleet or a channel's message.
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
 *   queued → running → completed | failed | cancelled.
 * - `sessionId` (optional) names the session the job's agent runs in instead of the user's default
 *   session; it must exist when the job starts (else the job fails `not_found`).
 * - `timeoutMs` (optional) bounds the job from its start to its task's end: past it the executor
 *   fails the job with the code `timeout` and ends its agent (whose runner cancels the task).
 * - `cancelJobsOf` cancels the queued jobs of a source (a deleted schedule: a running job finishes);
 *   with `includeRunning` (a cancelled workflow run or fleet) running ones too, by a request the
 *   executor carries out at its next pass (it ends the agent, the task is cancelled, the job is
 *   written `cancelled`). A job that ended before the request keeps its state.
 * - A job reaching a final state NOTIFYs `berth_job_ended` with `source:sourceId:jobId` in the
 *   transaction that writes it (migration 0014): a source's driver listens there instead of polling.
 * - `jobOutput` reads a completed job's output: its task's final output text.
 * - The job is scoped to the organization and mode (live or test) of its source: a test-mode job
 *   runs on the mock provider and the mock model and records no usage, like any test-key agent.
 * - `getJob` reads one job, optionally checking its scope (undefined when it is not the caller's).
 * - `history` (channels): the turns of a conversation before the input; the run starts from them,
 *   so the model sees them before the input as earlier messages of one conversation.
 */
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';

export type JobSource = 'schedule' | 'trigger' | 'workflow' | 'fleet' | 'channel';
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
  /** Run in this session (`ses_…`) instead of the user's default one. */
  sessionId?: string;
  /** Fail the job with `timeout` when it has not ended this long after it started. */
  timeoutMs?: number;
  /** Earlier turns the run starts from (channels); none for the other sources. */
  history?: ConversationTurn[] | undefined;
}

export interface Job extends Omit<EnqueueJobInput, 'sessionId' | 'timeoutMs'> {
  id: string;
  state: JobState;
  sessionId: string | null;
  timeoutMs: number | null;
  /** When `cancelJobsOf` asked for the running job to be cancelled. */
  cancelRequestedAt: string | null;
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
  timeout_ms: string | null;
  cancel_requested_at: Date | null;
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

export const JOB_COLUMNS = `id, organization_id, mode, source, source_id, user_id, definition_id, input, history, state, session_id, timeout_ms,
  cancel_requested_at, agent_id, task_id, error, cost_cents, currency, claimed_by, created_at, started_at, finished_at`;

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
    timeoutMs: row.timeout_ms === null ? null : Number(row.timeout_ms),
    cancelRequestedAt: row.cancel_requested_at?.toISOString() ?? null,
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
    `INSERT INTO jobs (id, organization_id, mode, source, source_id, user_id, definition_id, input, history, state, created_at, session_id, timeout_ms)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'queued', $10, $11, $12) RETURNING ${JOB_COLUMNS}`,
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
      input.sessionId ?? null,
      input.timeoutMs ?? null,
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

/**
 * Cancels the queued jobs of a source at once and, with `includeRunning`, asks the executor to
 * cancel its running ones (it ends each one's agent and writes the job `cancelled`). Returns how
 * many jobs were cancelled or asked to cancel. Inside the caller's transaction when `db` is one.
 */
export async function cancelJobsOf(
  db: Queryable,
  source: JobSource,
  sourceId: string,
  now: Date,
  options: { includeRunning?: boolean } = {},
): Promise<number> {
  // Two statements, not one: the second reads afresh, so a job the executor moved from queued to
  // running while the first waited for its row is asked to cancel rather than missed.
  const queued = await db.query(
    `UPDATE jobs SET state = 'cancelled', finished_at = $3, claimed_by = NULL, claim_expires_at = NULL
     WHERE source = $1 AND source_id = $2 AND state = 'queued'`,
    [source, sourceId, now],
  );
  if (!options.includeRunning) return queued.rowCount ?? 0;
  const running = await db.query<{ id: string }>(
    `UPDATE jobs SET cancel_requested_at = $3
     WHERE source = $1 AND source_id = $2 AND state = 'running' AND cancel_requested_at IS NULL RETURNING id`,
    [source, sourceId, now],
  );
  // The executor carries a request out at its next pass; a notification brings that pass now.
  for (const row of running.rows) await db.query(`SELECT pg_notify('berth_jobs', $1)`, [row.id]);
  return (queued.rowCount ?? 0) + running.rows.length;
}

/** The final output text of a completed job's task; null while the job has not completed or its task wrote none. */
export async function jobOutput(db: Queryable, job: Pick<Job, 'state' | 'taskId'>): Promise<string | null> {
  if (job.state !== 'completed' || !job.taskId) return null;
  const { rows } = await db.query<{ output: string | null }>('SELECT output FROM tasks WHERE id = $1', [job.taskId]);
  return rows[0]?.output ?? null;
}

/** Parses a `berth_job_ended` payload (`source:sourceId:jobId`). */
export function parseJobEnded(payload: string): { source: JobSource; sourceId: string; jobId: string } | undefined {
  const [source, sourceId, jobId, ...rest] = payload.split(':');
  if (!source || !sourceId || !jobId || rest.length > 0) return undefined;
  return { source: source as JobSource, sourceId, jobId };
}

/** The task text of a job's input: a string as it is, anything else as its JSON. */
export function jobTaskText(input: unknown): string {
  return typeof input === 'string' ? input : JSON.stringify(input ?? null);
}

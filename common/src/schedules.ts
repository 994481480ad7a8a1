import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';
import { jobCost, type JobError, type JobRow, type JobState } from './jobs.js';

/**
 * The history of a schedule: one execution per matching time that came due. The unique
 * (schedule_id, scheduled_for) row is the claim that makes each time run once.
 */
export type ScheduleExecutionStatus = 'missed' | JobState;

export interface ScheduleExecution {
  id: string;
  scheduleId: string;
  /** The matching time this execution is for. */
  scheduledFor: string;
  /** When the operator fired it (queued its job); null for a missed time. */
  firedAt: string | null;
  startedAt: string | null;
  finishedAt: string | null;
  /** `missed` (older than the grace window when an operator saw it), else its job's state. */
  status: ScheduleExecutionStatus;
  jobId: string | null;
  sessionId: string | null;
  agentId: string | null;
  taskId: string | null;
  /** The run's cost in integer cents, once it ended. */
  cost: { amount: number; currency: string } | null;
  error: JobError | null;
}

export interface ScheduleScope {
  scheduleId: string;
  organizationId: string;
  mode: Mode;
}

/**
 * Claims a matching time: true when this call wrote the row (it must then queue the job, in the
 * same transaction), false when the time was claimed before (by any reconcile or operator).
 */
export async function claimScheduledTime(tx: Queryable, scope: ScheduleScope, scheduledFor: Date, outcome: 'fired' | 'missed', now: Date): Promise<string | undefined> {
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO schedule_executions (id, schedule_id, organization_id, mode, scheduled_for, outcome, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (schedule_id, scheduled_for) DO NOTHING RETURNING id`,
    [newId('exec', now), scope.scheduleId, scope.organizationId, scope.mode, scheduledFor, outcome, now],
  );
  return rows[0]?.id;
}

export async function attachExecutionJob(tx: Queryable, executionId: string, jobId: string): Promise<void> {
  await tx.query('UPDATE schedule_executions SET job_id = $2 WHERE id = $1', [executionId, jobId]);
}

/** The latest matching time claimed (fired or missed), and the latest fired one. */
export async function latestScheduledTimes(db: Queryable, scheduleId: string): Promise<{ claimed: Date | undefined; fired: Date | undefined }> {
  const { rows } = await db.query<{ claimed: Date | null; fired: Date | null }>(
    `SELECT max(scheduled_for) AS claimed, max(scheduled_for) FILTER (WHERE outcome = 'fired') AS fired
     FROM schedule_executions WHERE schedule_id = $1`,
    [scheduleId],
  );
  return { claimed: rows[0]?.claimed ?? undefined, fired: rows[0]?.fired ?? undefined };
}

/** An execution and the columns of its job (null for a missed time). */
type ExecutionRow = {
  id: string;
  schedule_id: string;
  scheduled_for: Date;
  outcome: 'fired' | 'missed';
  created_at: Date;
  job_id: string | null;
  state: JobState | null;
} & Pick<JobRow, 'session_id' | 'agent_id' | 'task_id' | 'error' | 'cost_cents' | 'currency' | 'started_at' | 'finished_at'>;

/** The schedule's executions, newest matching time first, at most `limit`. */
export async function listScheduleExecutions(db: Queryable, scheduleId: string, limit: number): Promise<ScheduleExecution[]> {
  const { rows } = await db.query<ExecutionRow>(
    `SELECT e.id, e.schedule_id, e.scheduled_for, e.outcome, e.created_at, e.job_id, j.state, j.session_id, j.agent_id, j.task_id,
            j.error, j.cost_cents, j.currency, j.started_at, j.finished_at
     FROM schedule_executions e LEFT JOIN jobs j ON j.id = e.job_id
     WHERE e.schedule_id = $1 ORDER BY e.scheduled_for DESC LIMIT $2`,
    [scheduleId, limit],
  );
  return rows.map((row) => ({
    id: row.id,
    scheduleId: row.schedule_id,
    scheduledFor: row.scheduled_for.toISOString(),
    firedAt: row.outcome === 'fired' ? row.created_at.toISOString() : null,
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
    status: row.outcome === 'missed' ? 'missed' : (row.state ?? 'queued'),
    jobId: row.job_id,
    sessionId: row.session_id,
    agentId: row.agent_id,
    taskId: row.task_id,
    cost: jobCost(row),
    error: row.error,
  }));
}

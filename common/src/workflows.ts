/**
 * Workflows and their runs in PostgreSQL (migration 0014, ADR 26): the SQL the API server and
 * the operator's workflow driver share. A run's steps run as jobs (`source: 'workflow'`,
 * `sourceId`: the run); `workflow_step_runs` holds one row per attempt of a step, inserted with
 * its job in one transaction, so an attempt starts once however many drivers look at the run.
 */
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import type { WorkflowStep } from './workflow-graph.js';

export type WorkflowRunStatus = 'running' | 'completed' | 'failed' | 'partial' | 'cancelled';
export const TERMINAL_RUN_STATUSES: readonly WorkflowRunStatus[] = ['completed', 'failed', 'partial', 'cancelled'];

export interface Scope {
  organizationId: string;
  mode: Mode;
}

export interface Workflow {
  id: string;
  name: string;
  description: string | null;
  version: number;
  steps: WorkflowStep[];
  archived: boolean;
  createdAt: string;
  updatedAt: string;
}

interface WorkflowRow {
  id: string;
  organization_id: string;
  mode: Mode;
  name: string;
  description: string | null;
  version: number;
  steps: WorkflowStep[];
  created_at: Date;
  updated_at: Date;
  archived_at: Date | null;
}

const WORKFLOW_COLUMNS = 'id, organization_id, mode, name, description, version, steps, created_at, updated_at, archived_at';

function toWorkflow(row: WorkflowRow): Workflow {
  return {
    id: row.id,
    name: row.name,
    description: row.description,
    version: row.version,
    steps: row.steps,
    archived: row.archived_at !== null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

export async function insertWorkflow(
  db: Queryable,
  scope: Scope,
  workflow: { id: string; name: string; description: string | null; steps: WorkflowStep[] },
  now: Date,
): Promise<Workflow> {
  const { rows } = await db.query<WorkflowRow>(
    `INSERT INTO workflows (id, organization_id, mode, name, description, steps, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $7) RETURNING ${WORKFLOW_COLUMNS}`,
    [workflow.id, scope.organizationId, scope.mode, workflow.name, workflow.description, JSON.stringify(workflow.steps), now],
  );
  return toWorkflow(rows[0]!);
}

/** The workflow of this scope, archived or not; `forUpdate` locks its row in the caller's transaction. */
export async function findWorkflow(db: Queryable, scope: Scope, id: string, forUpdate = false): Promise<Workflow | undefined> {
  const { rows } = await db.query<WorkflowRow>(
    `SELECT ${WORKFLOW_COLUMNS} FROM workflows WHERE id = $1 AND organization_id = $2 AND mode = $3${forUpdate ? ' FOR UPDATE' : ''}`,
    [id, scope.organizationId, scope.mode],
  );
  return rows[0] ? toWorkflow(rows[0]) : undefined;
}

/** One page, newest first, after the id `after` when given; archived ones only when asked for. */
export async function listWorkflows(
  db: Queryable,
  scope: Scope,
  page: { limit: number; after?: string; includeArchived: boolean },
): Promise<{ items: Workflow[]; hasMore: boolean }> {
  const { rows } = await db.query<WorkflowRow>(
    `SELECT ${WORKFLOW_COLUMNS} FROM workflows
     WHERE organization_id = $1 AND mode = $2 AND ($3::text IS NULL OR id < $3) AND ($4 OR archived_at IS NULL)
     ORDER BY id DESC LIMIT $5`,
    [scope.organizationId, scope.mode, page.after ?? null, page.includeArchived, page.limit + 1],
  );
  return { items: rows.slice(0, page.limit).map(toWorkflow), hasMore: rows.length > page.limit };
}

/** Writes a new version (version + 1) of a workflow that is not archived. */
export async function writeWorkflowVersion(
  db: Queryable,
  id: string,
  fields: { name: string; description: string | null; steps: WorkflowStep[] },
  now: Date,
): Promise<Workflow> {
  const { rows } = await db.query<WorkflowRow>(
    `UPDATE workflows SET name = $2, description = $3, steps = $4, version = version + 1, updated_at = $5
     WHERE id = $1 AND archived_at IS NULL RETURNING ${WORKFLOW_COLUMNS}`,
    [id, fields.name, fields.description, JSON.stringify(fields.steps), now],
  );
  return toWorkflow(rows[0]!);
}

export async function archiveWorkflow(db: Queryable, id: string, now: Date): Promise<void> {
  await db.query('UPDATE workflows SET archived_at = $2 WHERE id = $1 AND archived_at IS NULL', [id, now]);
}

// ---- runs ----

export interface WorkflowStepRunView {
  name: string;
  status: 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';
  attempts: number;
  jobId: string | null;
  output: string | null;
  error: { code: string; message: string } | null;
  cost: { amount: number; currency: string };
  startedAt: string | null;
  finishedAt: string | null;
}

export interface WorkflowRun {
  id: string;
  workflowId: string;
  workflowVersion: number;
  userId: string;
  status: WorkflowRunStatus;
  input: unknown;
  output: string | null;
  error: { code: string; message: string; step?: string } | null;
  cost: { amount: number; currency: string };
  steps: WorkflowStepRunView[];
  createdAt: string;
  finishedAt: string | null;
}

export interface WorkflowRunRow {
  id: string;
  workflow_id: string;
  workflow_version: number;
  organization_id: string;
  mode: Mode;
  user_id: string;
  input: unknown;
  steps: WorkflowStep[];
  status: WorkflowRunStatus;
  output: string | null;
  error: { code: string; message: string; step?: string } | null;
  cost_cents: string | null;
  currency: string | null;
  created_at: Date;
  finished_at: Date | null;
}

export const RUN_COLUMNS = `id, workflow_id, workflow_version, organization_id, mode, user_id, input, steps, status, output, error,
  cost_cents, currency, created_at, finished_at`;

/** One attempt of a step with its job's state, output and cost. */
export interface StepAttemptRow {
  step: string;
  attempt: number;
  job_id: string;
  state: 'running' | 'completed' | 'failed' | 'cancelled';
  output: string | null;
  error: { code: string; message: string } | null;
  cost_cents: string | null;
  created_at: Date;
  finished_at: Date | null;
  job_state: 'queued' | 'running' | 'completed' | 'failed' | 'cancelled';
  job_error: { code: string; message: string } | null;
  job_cost_cents: string | null;
  job_task_id: string | null;
  task_output: string | null;
}

/** Every attempt of every step of a run with its job, oldest first. */
export async function stepAttemptsOf(db: Queryable, runId: string): Promise<StepAttemptRow[]> {
  const { rows } = await db.query<StepAttemptRow>(
    `SELECT s.step, s.attempt, s.job_id, s.state, s.output, s.error, s.cost_cents, s.created_at, s.finished_at,
       j.state AS job_state, j.error AS job_error, j.cost_cents AS job_cost_cents, j.task_id AS job_task_id, t.output AS task_output
     FROM workflow_step_runs s JOIN jobs j ON j.id = s.job_id LEFT JOIN tasks t ON t.id = j.task_id
     WHERE s.run_id = $1 ORDER BY s.step, s.attempt`,
    [runId],
  );
  return rows;
}

/** What all the jobs of a run cost so far, in cents (every attempt counts). */
export async function runCostCents(db: Queryable, runId: string): Promise<number> {
  const { rows } = await db.query<{ total: string }>(
    `SELECT coalesce(sum(cost_cents), 0)::bigint AS total FROM jobs WHERE source = 'workflow' AND source_id = $1`,
    [runId],
  );
  return Number(rows[0]!.total);
}

export function toRunView(row: WorkflowRunRow, attempts: StepAttemptRow[], costCents: number, currency: string): WorkflowRun {
  const steps = row.steps.map((step): WorkflowStepRunView => {
    const mine = attempts.filter((attempt) => attempt.step === step.name);
    const latest = mine.at(-1);
    const cost = mine.reduce((sum, attempt) => sum + Number(attempt.job_cost_cents ?? 0), 0);
    if (!latest) return { name: step.name, status: 'pending', attempts: 0, jobId: null, output: null, error: null, cost: { amount: 0, currency }, startedAt: null, finishedAt: null };
    return {
      name: step.name,
      status: latest.state,
      attempts: mine.length,
      jobId: latest.job_id,
      output: latest.output,
      error: latest.error,
      cost: { amount: cost, currency },
      startedAt: mine[0]!.created_at.toISOString(),
      finishedAt: latest.finished_at?.toISOString() ?? null,
    };
  });
  return {
    id: row.id,
    workflowId: row.workflow_id,
    workflowVersion: row.workflow_version,
    userId: row.user_id,
    status: row.status,
    input: row.input,
    output: row.output,
    error: row.error,
    // What its jobs cost so far: a cancelled run's steps that were stopped are charged as they end.
    cost: { amount: costCents, currency: row.currency ?? currency },
    steps,
    createdAt: row.created_at.toISOString(),
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

export async function findRunRow(db: Queryable, id: string, scope?: Scope, lock: '' | 'FOR UPDATE' | 'FOR UPDATE SKIP LOCKED' = ''): Promise<WorkflowRunRow | undefined> {
  const { rows } = await db.query<WorkflowRunRow>(`SELECT ${RUN_COLUMNS} FROM workflow_runs WHERE id = $1 ${lock}`, [id]);
  const row = rows[0];
  if (row && scope && (row.organization_id !== scope.organizationId || row.mode !== scope.mode)) return undefined;
  return row;
}

export async function getRun(db: Queryable, id: string, scope: Scope, currency: string): Promise<WorkflowRun | undefined> {
  const row = await findRunRow(db, id, scope);
  if (!row) return undefined;
  return toRunView(row, await stepAttemptsOf(db, id), await runCostCents(db, id), currency);
}

/** A page of a workflow's runs, newest first. */
export async function listRuns(
  db: Queryable,
  workflowId: string,
  page: { limit: number; after?: string },
  currency: string,
): Promise<{ items: WorkflowRun[]; hasMore: boolean }> {
  const { rows } = await db.query<WorkflowRunRow>(
    `SELECT ${RUN_COLUMNS} FROM workflow_runs WHERE workflow_id = $1 AND ($2::text IS NULL OR id < $2) ORDER BY id DESC LIMIT $3`,
    [workflowId, page.after ?? null, page.limit + 1],
  );
  const items: WorkflowRun[] = [];
  for (const row of rows.slice(0, page.limit)) items.push(toRunView(row, await stepAttemptsOf(db, row.id), await runCostCents(db, row.id), currency));
  return { items, hasMore: rows.length > page.limit };
}

export async function insertRun(
  db: Queryable,
  run: { id: string; workflow: Workflow; scope: Scope; userId: string; input: unknown },
  now: Date,
): Promise<WorkflowRunRow> {
  const { rows } = await db.query<WorkflowRunRow>(
    `INSERT INTO workflow_runs (id, workflow_id, workflow_version, organization_id, mode, user_id, input, steps, status, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'running', $9) RETURNING ${RUN_COLUMNS}`,
    [run.id, run.workflow.id, run.workflow.version, run.scope.organizationId, run.scope.mode, run.userId, JSON.stringify(run.input ?? null), JSON.stringify(run.workflow.steps), now],
  );
  return rows[0]!;
}

/** Ends a running run; false when it had ended already (terminal states are final). */
export async function endRun(
  db: Queryable,
  id: string,
  end: { status: Exclude<WorkflowRunStatus, 'running'>; output: string | null; error: { code: string; message: string; step?: string } | null; costCents: number; currency: string },
  now: Date,
): Promise<boolean> {
  const result = await db.query(
    `UPDATE workflow_runs SET status = $2, output = $3, error = $4, cost_cents = $5, currency = $6, finished_at = $7
     WHERE id = $1 AND status = 'running'`,
    [id, end.status, end.output, end.error ? JSON.stringify(end.error) : null, end.costCents, end.currency, now],
  );
  return (result.rowCount ?? 0) > 0;
}

// ---- the run stream ----

export type WorkflowStreamEventType = 'started' | 'step.completed' | 'step.failed' | 'run.completed' | 'run.failed' | 'run.partial' | 'run.cancelled';

export interface WorkflowStreamEvent {
  seq: string;
  type: WorkflowStreamEventType;
  data: Record<string, unknown>;
}

export async function appendRunEvent(db: Queryable, runId: string, type: WorkflowStreamEventType, data: Record<string, unknown>): Promise<void> {
  await db.query('INSERT INTO workflow_run_events (run_id, type, data) VALUES ($1, $2, $3)', [runId, type, JSON.stringify(data)]);
}

export async function runEventsAfter(db: Queryable, runId: string, afterSeq: string, limit: number): Promise<WorkflowStreamEvent[]> {
  const { rows } = await db.query<WorkflowStreamEvent>(
    'SELECT seq::text AS seq, type, data FROM workflow_run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [runId, afterSeq, limit],
  );
  return rows;
}

export async function latestRunEventSeq(db: Queryable, runId: string): Promise<string> {
  const { rows } = await db.query<{ seq: string | null }>('SELECT max(seq)::text AS seq FROM workflow_run_events WHERE run_id = $1', [runId]);
  return rows[0]?.seq ?? '0';
}

// ---- estimates ----

/** The total costs of a workflow's completed runs, and each step's completed-attempt costs in them. */
export async function completedRunCosts(db: Queryable, workflowId: string): Promise<{ runCosts: number[]; stepCosts: Map<string, number[]> }> {
  const runs = await db.query<{ cost_cents: string }>(
    `SELECT cost_cents FROM workflow_runs WHERE workflow_id = $1 AND status = 'completed' AND cost_cents IS NOT NULL`,
    [workflowId],
  );
  const steps = await db.query<{ step: string; cost_cents: string }>(
    `SELECT s.step, s.cost_cents FROM workflow_step_runs s JOIN workflow_runs r ON r.id = s.run_id
     WHERE r.workflow_id = $1 AND r.status = 'completed' AND s.state = 'completed' AND s.cost_cents IS NOT NULL`,
    [workflowId],
  );
  const stepCosts = new Map<string, number[]>();
  for (const row of steps.rows) {
    const list = stepCosts.get(row.step) ?? [];
    list.push(Number(row.cost_cents));
    stepCosts.set(row.step, list);
  }
  return { runCosts: runs.rows.map((row) => Number(row.cost_cents)), stepCosts };
}

import {
  ApiError,
  appendRunEvent,
  archiveWorkflow,
  cancelJobsOf,
  completedRunCosts,
  endRun,
  estimateWorkflow,
  findRunRow,
  findWorkflow,
  getRun,
  insertRun,
  insertWorkflow,
  isUniqueViolation,
  listRuns,
  listWorkflows,
  newId,
  recordEvent,
  resolveDefinition,
  runCostCents,
  runEventsAfter,
  validateSteps,
  withTransaction,
  writeWorkflowVersion,
  type Clock,
  type Pool,
  type Workflow,
  type WorkflowEstimate,
  type WorkflowRun,
  type WorkflowStep,
  type WorkflowStreamEvent,
} from '@berth/common';
import type { Principal } from '../http/context.js';
import type { CursorCodec, PageRequest } from './pagination.js';

/** A step as a request gives it; defaults are filled in by `normalizeSteps`. */
export interface StepInput {
  name: string;
  agent: string;
  input?: string | undefined;
  dependsOn?: string[] | undefined;
  retries?: number | undefined;
  timeout?: string | undefined;
  optional?: boolean | undefined;
}

export interface WorkflowInput {
  name: string;
  description?: string | null | undefined;
  steps: StepInput[];
}

export type WorkflowView = Workflow;

function unprocessable(fields: Record<string, string[]>): ApiError {
  const summary = Object.entries(fields)
    .map(([field, messages]) => `${field}: ${messages.join('; ')}`)
    .join(', ');
  return new ApiError('unprocessable_entity', summary, { fields });
}

function conflictOnName(name: string): ApiError {
  return new ApiError('conflict', `a workflow named "${name}" exists already`, { fields: { name: ['taken'] } });
}

function notFound(what: string, id: string): ApiError {
  return new ApiError('not_found', `${what} ${id} not found`);
}

/**
 * Workflows and their runs (ADR 26): the API writes workflows and starts runs (the run row, its
 * `started` stream event and `workflow.started`, in one transaction); the operator's workflow
 * driver runs the steps and ends the run. A cancel ends the run here and asks the job executor to
 * stop its steps under way.
 */
export function createWorkflowService(deps: { pool: Pool; clock: Clock; cursors: CursorCodec; currency: string }) {
  const { pool, clock, cursors, currency } = deps;

  /** Validates the graph and templates, then resolves each step's agent definition. */
  async function normalizeSteps(principal: Principal, steps: StepInput[]): Promise<WorkflowStep[]> {
    const withDefaults = steps.map((step) => ({
      name: step.name,
      agent: step.agent,
      input: step.input ?? '{{input}}',
      dependsOn: step.dependsOn ?? [],
      retries: step.retries ?? 0,
      timeout: step.timeout ?? null,
      optional: step.optional ?? false,
    }));
    const problems = validateSteps(withDefaults);
    if (problems.length > 0) {
      const fields: Record<string, string[]> = {};
      for (const problem of problems) (fields[problem.field] ??= []).push(problem.message);
      throw unprocessable(fields);
    }
    const resolved: WorkflowStep[] = [];
    for (const [index, step] of withDefaults.entries()) {
      const definition = await resolveDefinition(pool, principal, step.agent, `steps.${index}.agent`);
      resolved.push({ ...step, definitionId: definition.id });
    }
    return resolved;
  }

  async function find(principal: Principal, id: string): Promise<Workflow> {
    const workflow = await findWorkflow(pool, principal, id);
    if (!workflow) throw notFound('workflow', id);
    return workflow;
  }

  return {
    async create(principal: Principal, input: WorkflowInput): Promise<WorkflowView> {
      const steps = await normalizeSteps(principal, input.steps);
      try {
        return await insertWorkflow(pool, principal, { id: newId('wf', clock.now()), name: input.name, description: input.description ?? null, steps }, clock.now());
      } catch (error) {
        if (isUniqueViolation(error)) throw conflictOnName(input.name);
        throw error;
      }
    },

    async list(principal: Principal, query: PageRequest & { includeArchived: boolean }): Promise<{ data: WorkflowView[]; hasMore: boolean; cursor?: string }> {
      const list = JSON.stringify(['workflows', principal.organizationId, principal.mode, query.includeArchived]);
      const after = query.cursor === undefined ? undefined : cursors.decode(list, query.cursor);
      const { items, hasMore } = await listWorkflows(pool, principal, { limit: query.limit, includeArchived: query.includeArchived, ...(after ? { after } : {}) });
      const last = items.at(-1);
      return { data: items, hasMore, ...(hasMore && last ? { cursor: cursors.encode(list, last.id) } : {}) };
    },

    get: find,

    /** A new version with the fields given; the others keep their values. Runs under way keep the steps they started with. */
    async update(principal: Principal, id: string, input: Partial<WorkflowInput>): Promise<WorkflowView> {
      const current = await find(principal, id);
      if (current.archived) throw new ApiError('conflict', `workflow ${id} is archived`, { status: 'archived' });
      const steps = input.steps === undefined ? current.steps : await normalizeSteps(principal, input.steps);
      try {
        return await withTransaction(pool, async (tx) => {
          const locked = await findWorkflow(tx, principal, id, true);
          if (!locked || locked.archived) throw new ApiError('conflict', `workflow ${id} is archived`, { status: 'archived' });
          return writeWorkflowVersion(
            tx,
            id,
            { name: input.name ?? locked.name, description: input.description === undefined ? locked.description : input.description, steps },
            clock.now(),
          );
        });
      } catch (error) {
        if (isUniqueViolation(error)) throw conflictOnName(input.name ?? current.name);
        throw error;
      }
    },

    /** Archives: kept and readable with its runs, no new runs; runs under way finish. Archiving twice changes nothing. */
    async archive(principal: Principal, id: string): Promise<{ ok: true }> {
      await find(principal, id);
      await archiveWorkflow(pool, id, clock.now());
      return { ok: true };
    },

    async run(principal: Principal, id: string, body: { userId: string; input?: unknown }): Promise<WorkflowRun> {
      const runId = newId('wfr', clock.now());
      await withTransaction(pool, async (tx) => {
        const workflow = await findWorkflow(tx, principal, id, true);
        if (!workflow) throw notFound('workflow', id);
        if (workflow.archived) throw new ApiError('conflict', `workflow ${id} is archived; it cannot run`, { status: 'archived' });
        const now = clock.now();
        await insertRun(tx, { id: runId, workflow, scope: principal, userId: body.userId, input: body.input ?? null }, now);
        await appendRunEvent(tx, runId, 'started', { runId, workflowId: workflow.id, workflowVersion: workflow.version, stepCount: workflow.steps.length });
        await recordEvent(
          tx,
          {
            type: 'workflow.started',
            organizationId: principal.organizationId,
            mode: principal.mode,
            subjectId: runId,
            data: { workflowId: workflow.id, runId, workflowVersion: workflow.version, stepCount: workflow.steps.length, userId: body.userId },
            occurrence: `${runId}/workflow.started`,
          },
          now,
        );
      });
      return (await getRun(pool, runId, principal, currency))!;
    },

    async listRuns(principal: Principal, id: string, query: PageRequest): Promise<{ data: WorkflowRun[]; hasMore: boolean; cursor?: string }> {
      const workflow = await find(principal, id);
      const list = JSON.stringify(['workflow-runs', workflow.id]);
      const after = query.cursor === undefined ? undefined : cursors.decode(list, query.cursor);
      const { items, hasMore } = await listRuns(pool, workflow.id, { limit: query.limit, ...(after ? { after } : {}) }, currency);
      const last = items.at(-1);
      return { data: items, hasMore, ...(hasMore && last ? { cursor: cursors.encode(list, last.id) } : {}) };
    },

    async getRun(principal: Principal, runId: string): Promise<WorkflowRun> {
      const run = await getRun(pool, runId, principal, currency);
      if (!run) throw notFound('workflow run', runId);
      return run;
    },

    /**
     * Ends a running run `cancelled` (steps not started never start; steps under way are stopped:
     * their agents are ended). A run that ended already is 409 with its status.
     */
    async cancelRun(principal: Principal, runId: string): Promise<WorkflowRun> {
      await withTransaction(pool, async (tx) => {
        const run = await findRunRow(tx, runId, principal, 'FOR UPDATE');
        if (!run) throw notFound('workflow run', runId);
        if (run.status !== 'running') throw new ApiError('conflict', `workflow run ${runId} is ${run.status} already`, { status: run.status });
        const now = clock.now();
        await cancelJobsOf(tx, 'workflow', runId, now, { includeRunning: true });
        await tx.query(`UPDATE workflow_step_runs SET state = 'cancelled', finished_at = $2 WHERE run_id = $1 AND state = 'running'`, [runId, now]);
        const costCents = await runCostCents(tx, runId);
        await endRun(tx, runId, { status: 'cancelled', output: null, error: { code: 'cancelled', message: 'the run was cancelled' }, costCents, currency }, now);
        await appendRunEvent(tx, runId, 'run.cancelled', { runId, status: 'cancelled', totalCost: { amount: costCents, currency } });
      });
      return (await getRun(pool, runId, principal, currency))!;
    },

    async estimate(principal: Principal, id: string): Promise<WorkflowEstimate> {
      const workflow = await find(principal, id);
      const { runCosts, stepCosts } = await completedRunCosts(pool, workflow.id);
      return estimateWorkflow(workflow.steps, runCosts, stepCosts, currency);
    },

    /** The run.<status> event written when the run ended. */
    async endEvent(runId: string): Promise<WorkflowStreamEvent | undefined> {
      const { rows } = await pool.query<WorkflowStreamEvent>(
        `SELECT seq::text AS seq, type, data FROM workflow_run_events WHERE run_id = $1 AND type LIKE 'run.%' ORDER BY seq DESC LIMIT 1`,
        [runId],
      );
      return rows[0];
    },

    /** The stream events of a run after `seq`, in order. */
    async eventsAfter(runId: string, seq: string): Promise<WorkflowStreamEvent[]> {
      return runEventsAfter(pool, runId, seq, 10_000);
    },

    /** The run's status for a stream that opens; 404 when it is not the caller's. */
    async runStatus(principal: Principal, runId: string) {
      const run = await findRunRow(pool, runId, principal);
      if (!run) throw notFound('workflow run', runId);
      return { status: run.status, costCents: run.cost_cents === null ? null : Number(run.cost_cents) };
    },
  };
}

export type WorkflowService = ReturnType<typeof createWorkflowService>;

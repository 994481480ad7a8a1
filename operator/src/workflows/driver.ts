import {
  LATENCY_BUCKETS,
  NotificationListener,
  appendRunEvent,
  endRun,
  enqueueJob,
  cancelJobsOf,
  finalStepOf,
  findRunRow,
  parseJobEnded,
  planRun,
  recordEvent,
  renderTemplate,
  runCostCents,
  stepAttemptsOf,
  type Clock,
  type Logger,
  type Pool,
  type Queryable,
  type StepAttempt,
  type StepAttemptRow,
  type WorkflowRunRow,
} from '@berth/common';
import { parseDuration } from '@berth/crds';
import { Counter, Histogram, type Registry } from 'prom-client';
import { WakeablePass } from '../runtime/passes.js';

export interface WorkflowDriverOptions {
  pool: Pool;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  currency: string;
  /** Where to LISTEN for new runs and ended jobs; without it, runs move on the poll alone. */
  connectionString?: string;
  /** How often running runs are looked at without a notification (default 1 s). */
  pollMs?: number;
  /** Running runs read at a time; a pass reads them all (default 50). */
  batch?: number;
}

export interface WorkflowDriverMetrics {
  passes: Histogram<'result'>;
  reconciles: Counter<'result'>;
  stepsStarted: Counter<'retry'>;
  runsEnded: Counter<'status'>;
}

export function createWorkflowDriverMetrics(registry: Registry): WorkflowDriverMetrics {
  return {
    passes: new Histogram({
      name: 'berth_workflow_driver_pass_duration_seconds',
      help: 'One pass of the workflow driver over the running workflow runs',
      labelNames: ['result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    reconciles: new Counter({
      name: 'berth_workflow_run_reconciles_total',
      help: 'Reconciles of one workflow run; result changed, unchanged, skipped (another driver holds it) or error',
      labelNames: ['result'],
      registers: [registry],
    }),
    stepsStarted: new Counter({
      name: 'berth_workflow_steps_started_total',
      help: 'Attempts of workflow steps queued as jobs; retry is true for an attempt after a failed one',
      labelNames: ['retry'],
      registers: [registry],
    }),
    runsEnded: new Counter({
      name: 'berth_workflow_runs_ended_total',
      help: 'Workflow runs the driver ended, by status (completed, partial, failed)',
      labelNames: ['status'],
      registers: [registry],
    }),
  };
}

/** An ended job's state for its step row: a job cancelled alone (not by a cancel of the run) counts as failed. */
const ENDED = new Set(['completed', 'failed', 'cancelled']);

/**
 * Drives workflow runs (ADR 26). Leader only, reconcile-style: for each running run it reads the
 * run, its step attempts and their jobs from PostgreSQL and, in one transaction holding the
 * run's row (`FOR UPDATE SKIP LOCKED`: a second driver skips a run being reconciled), copies the
 * outcome of every ended job into its attempt row (with `step.completed` / `step.failed` and
 * `workflow.step_completed`), queues the jobs of the attempts `planRun` says to start (each an
 * insert of the unique (run, step, attempt) row with its job: an attempt starts once), and ends
 * the run when it is done or failed. A driver that dies mid-reconcile leaves nothing: the
 * transaction rolls back and the next reconcile does it again. A pass runs when a run is created,
 * when a job of a workflow ends (`berth_job_ended`), and every second regardless.
 */
export class WorkflowDriver {
  private readonly metrics: WorkflowDriverMetrics;
  private readonly listener: NotificationListener | undefined;
  private readonly loop: WakeablePass;

  constructor(private readonly options: WorkflowDriverOptions) {
    this.metrics = createWorkflowDriverMetrics(options.metrics);
    this.loop = new WakeablePass(() => this.pass(), { pollMs: options.pollMs ?? 1_000, log: options.log, failure: 'workflow driver pass failed' });
    this.listener = options.connectionString
      ? new NotificationListener({
          connectionString: options.connectionString,
          channels: ['berth_workflow_runs', 'berth_job_ended'],
          name: 'workflows',
          log: options.log,
          metrics: options.metrics,
          onNotification: (channel, payload) => {
            if (channel === 'berth_job_ended' && parseJobEnded(payload ?? '')?.source !== 'workflow') return;
            this.wake();
          },
          onReconnect: () => this.wake(),
        })
      : undefined;
  }

  async start(): Promise<void> {
    await this.listener?.start().catch((error: unknown) => this.options.log.warn({ err: error }, 'listening for workflow runs failed; polling until it is back'));
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    await this.listener?.close();
  }

  /** Asks for a pass soon; passes never overlap. */
  wake(): void {
    this.loop.wake();
  }

  /** One pass over the running runs; returns how many changed. */
  async pass(): Promise<number> {
    const timer = this.metrics.passes.startTimer();
    try {
      let changed = 0;
      // Every running run, a page at a time in id order: a long queue of runs waiting on their
      // steps never keeps newer runs from being looked at.
      let after = '';
      for (;;) {
        const { rows } = await this.options.pool.query<{ id: string }>(
          `SELECT id FROM workflow_runs WHERE status = 'running' AND id > $1 ORDER BY id LIMIT $2`,
          [after, this.options.batch ?? 50],
        );
        for (const { id } of rows) {
          const log = this.options.log.child({ runId: id });
          try {
            const result = await this.reconcile(id, log);
            this.metrics.reconciles.inc({ result });
            if (result === 'changed') changed++;
          } catch (error) {
            this.metrics.reconciles.inc({ result: 'error' });
            log.warn({ err: error }, 'reconciling the workflow run failed; the next pass tries again');
          }
        }
        if (rows.length < (this.options.batch ?? 50) || this.loop.stopped) break;
        after = rows.at(-1)!.id;
      }
      timer({ result: 'ok' });
      return changed;
    } catch (error) {
      timer({ result: 'error' });
      throw error;
    }
  }

  /** Reconciles one run in one transaction. */
  async reconcile(runId: string, log: Logger): Promise<'changed' | 'unchanged' | 'skipped'> {
    const client = await this.options.pool.connect();
    try {
      await client.query('BEGIN');
      const run = await findRunRow(client, runId, undefined, 'FOR UPDATE SKIP LOCKED');
      if (!run || run.status !== 'running') {
        await client.query('ROLLBACK');
        return run ? 'unchanged' : 'skipped';
      }
      const changed = await this.advance(client, run, log);
      await client.query('COMMIT');
      return changed ? 'changed' : 'unchanged';
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  private async advance(db: Queryable, run: WorkflowRunRow, log: Logger): Promise<boolean> {
    const { clock, currency } = this.options;
    const now = clock.now();
    const attempts = await stepAttemptsOf(db, run.id);
    let changed = false;
    const scope = { organizationId: run.organization_id, mode: run.mode };

    // The outcome of every attempt whose job ended, once.
    for (const attempt of attempts) {
      if (attempt.state !== 'running' || !ENDED.has(attempt.job_state)) continue;
      changed = true;
      const step = run.steps.find((candidate) => candidate.name === attempt.step)!;
      const cost = Number(attempt.job_cost_cents ?? 0);
      if (attempt.job_state === 'completed') {
        const output = attempt.task_output ?? '';
        await db.query(
          `UPDATE workflow_step_runs SET state = 'completed', output = $4, cost_cents = $5, finished_at = $6 WHERE run_id = $1 AND step = $2 AND attempt = $3`,
          [run.id, attempt.step, attempt.attempt, output, cost, now],
        );
        Object.assign(attempt, { state: 'completed', output, cost_cents: String(cost) });
        await appendRunEvent(db, run.id, 'step.completed', { runId: run.id, stepId: attempt.step, attempt: attempt.attempt, cost: { amount: cost, currency }, output });
        await recordEvent(
          db,
          {
            type: 'workflow.step_completed',
            organizationId: run.organization_id,
            mode: run.mode,
            subjectId: run.id,
            data: { workflowId: run.workflow_id, runId: run.id, step: attempt.step, attempt: attempt.attempt, output, cost: { amount: cost, currency } },
            occurrence: `${run.id}/workflow.step_completed/${attempt.step}`,
          },
          now,
        );
      } else {
        const error = attempt.job_error ?? { code: attempt.job_state, message: `the job of step ${attempt.step} was ${attempt.job_state}` };
        await db.query(
          `UPDATE workflow_step_runs SET state = 'failed', error = $4, cost_cents = $5, finished_at = $6 WHERE run_id = $1 AND step = $2 AND attempt = $3`,
          [run.id, attempt.step, attempt.attempt, JSON.stringify(error), cost, now],
        );
        Object.assign(attempt, { state: 'failed', error, cost_cents: String(cost) });
        const willRetry = attempt.attempt <= step.retries;
        await appendRunEvent(db, run.id, 'step.failed', { runId: run.id, stepId: attempt.step, attempt: attempt.attempt, error, willRetry });
        log.info({ step: attempt.step, attempt: attempt.attempt, error, willRetry }, 'workflow step attempt failed');
      }
    }

    const latest = new Map<string, StepAttempt>();
    for (const attempt of attempts) latest.set(attempt.step, toStepAttempt(attempt));
    const plan = planRun(run.steps, latest);

    if (plan.kind === 'continue') {
      const outputs = outputsOf(attempts);
      for (const { step: name, attempt } of plan.start) {
        const step = run.steps.find((candidate) => candidate.name === name)!;
        const input = renderTemplate(step.input, run.input, outputs);
        const job = await enqueueJob(
          db,
          {
            ...scope,
            source: 'workflow',
            sourceId: run.id,
            userId: run.user_id,
            definitionId: step.definitionId,
            input,
            ...(step.timeout ? { timeoutMs: parseDuration(step.timeout)! * 1000 } : {}),
          },
          now,
        );
        // The claim: (run, step, attempt) is unique, so a second insert would fail the whole
        // transaction, job included; the run's row lock makes that a matter of a bug, not a race.
        await db.query(
          `INSERT INTO workflow_step_runs (run_id, step, attempt, job_id, state, created_at) VALUES ($1, $2, $3, $4, 'running', $5)`,
          [run.id, name, attempt, job.id, now],
        );
        this.metrics.stepsStarted.inc({ retry: String(attempt > 1) });
        log.info({ step: name, attempt, jobId: job.id }, 'workflow step queued');
        changed = true;
      }
      return changed;
    }

    const costCents = await runCostCents(db, run.id);
    const totalCost = { amount: costCents, currency };
    if (plan.kind === 'failed') {
      const error = { ...plan.error, step: plan.step };
      if (!(await endRun(db, run.id, { status: 'failed', output: null, error, costCents, currency }, now))) return changed;
      await cancelJobsOf(db, 'workflow', run.id, now, { includeRunning: true });
      await appendRunEvent(db, run.id, 'run.failed', { runId: run.id, status: 'failed', stepId: plan.step, error: plan.error, totalCost });
      await recordEvent(
        db,
        {
          type: 'workflow.failed',
          organizationId: run.organization_id,
          mode: run.mode,
          subjectId: run.id,
          data: { workflowId: run.workflow_id, runId: run.id, step: plan.step, error: plan.error, attempts: plan.attempts, cost: totalCost },
          occurrence: `${run.id}/workflow.failed`,
        },
        now,
      );
      this.metrics.runsEnded.inc({ status: 'failed' });
      log.info({ step: plan.step, error: plan.error }, 'workflow run failed');
      return true;
    }

    const output = outputsOf(attempts).get(finalStepOf(run.steps)) ?? null;
    if (!(await endRun(db, run.id, { status: plan.status, output, error: null, costCents, currency }, now))) return changed;
    await appendRunEvent(db, run.id, plan.status === 'completed' ? 'run.completed' : 'run.partial', {
      runId: run.id,
      status: plan.status,
      totalCost,
      output,
      ...(plan.status === 'partial' ? { failedSteps: plan.failedOptional } : {}),
    });
    await recordEvent(
      db,
      {
        type: 'workflow.completed',
        organizationId: run.organization_id,
        mode: run.mode,
        subjectId: run.id,
        data: { workflowId: run.workflow_id, runId: run.id, status: plan.status, output, cost: totalCost, failedSteps: plan.failedOptional },
        occurrence: `${run.id}/workflow.completed`,
      },
      now,
    );
    this.metrics.runsEnded.inc({ status: plan.status });
    log.info({ status: plan.status, cost: costCents }, 'workflow run ended');
    return true;
  }
}

function toStepAttempt(row: StepAttemptRow): StepAttempt {
  return { step: row.step, attempt: row.attempt, state: row.state, output: row.output, error: row.error };
}

/** The output of each step whose latest attempt completed. */
function outputsOf(attempts: StepAttemptRow[]): Map<string, string | null> {
  const outputs = new Map<string, string | null>();
  for (const attempt of attempts) if (attempt.state === 'completed') outputs.set(attempt.step, attempt.output);
  return outputs;
}

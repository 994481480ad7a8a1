import {
  ApiError,
  JOB_COLUMNS,
  LATENCY_BUCKETS,
  NotificationListener,
  agentFieldsOf,
  findTask,
  getOrCreateUserSession,
  idToObjectName,
  jobTaskText,
  newId,
  objectNameToId,
  recordChannelReply,
  resolveDefinition,
  taskCost,
  toJob,
  type Clock,
  type Job,
  type JobError,
  type JobState,
  type Logger,
  type Pool,
  type Principal,
  type ResourceStore,
  type Watch,
} from '@berth/common';
import { Counter, Histogram, type Registry } from 'prom-client';
import { WakeablePass } from '../runtime/passes.js';
import type { AgentFactory, CreateAgentInput } from '../agents/create.js';
import type { RunStarter } from '../agents/run.js';

export interface JobExecutorOptions {
  pool: Pool;
  store: ResourceStore;
  factory: AgentFactory;
  runs: RunStarter;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  /** This process, as written into a job's claim. */
  identity: string;
  currency: string;
  /** Where to LISTEN for new jobs and task changes; without it, jobs move on the poll alone. */
  connectionString?: string;
  /** How often open jobs are looked at without a notification (default 1 s). */
  pollMs?: number;
  /** How long a claim holds a job while one pass advances it (default 15 s: a pass makes a few calls, never waits for a run; a dead executor's jobs are taken over once it runs out). */
  leaseMs?: number;
  /** Jobs advanced per pass (default 20). */
  batch?: number;
}

export interface JobExecutorMetrics {
  passes: Histogram<'result'>;
  finished: Counter<'source' | 'state'>;
  retries: Counter<'source'>;
}

export function createJobExecutorMetrics(registry: Registry): JobExecutorMetrics {
  return {
    passes: new Histogram({
      name: 'berth_job_executor_pass_duration_seconds',
      help: 'One pass of the job executor over the open jobs it could claim',
      labelNames: ['result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    finished: new Counter({
      name: 'berth_jobs_finished_total',
      help: 'Jobs that reached a final state, by source (schedule, trigger, workflow, fleet, channel) and state',
      labelNames: ['source', 'state'],
      registers: [registry],
    }),
    retries: new Counter({
      name: 'berth_job_retries_total',
      help: 'Advances of a job that failed for a passing reason (database, resource store) and will be tried again',
      labelNames: ['source'],
      registers: [registry],
    }),
  };
}

/** Codes of ApiErrors that no retry can change: the job fails with them. */
const PERMANENT = new Set(['unprocessable_entity', 'not_found', 'conflict', 'session_limit_exceeded', 'forbidden']);
const AGENT_ENDED = new Set(['failed', 'terminated', 'paused']);

/**
 * Runs the jobs that schedules, triggers, workflow runs, fleets and channels queue (see common/src/jobs.ts). Leader only. Each
 * pass claims open jobs (SKIP LOCKED, with a lease, so a job is advanced by one executor at a
 * time and a dead executor's jobs are taken over) and advances each as far as it can go now:
 * queued → the user's session → an agent from the definition → (the agent is ready) the run →
 * (the task ended) the job's final state, its cost, and the agent ended. The agent's and the
 * task's ids are written into the job before they are created, so an executor that takes over
 * adopts them: a job never makes two agents or two runs.
 */
export class JobExecutor {
  private readonly metrics: JobExecutorMetrics;
  private readonly listener: NotificationListener | undefined;
  private agentWatch: Watch | undefined;
  private readonly loop: WakeablePass;

  constructor(private readonly options: JobExecutorOptions) {
    this.metrics = createJobExecutorMetrics(options.metrics);
    this.loop = new WakeablePass(() => this.pass(), { pollMs: options.pollMs ?? 1_000, log: options.log, failure: 'job executor pass failed' });
    this.listener = options.connectionString
      ? new NotificationListener({
          connectionString: options.connectionString,
          channels: ['berth_jobs', 'berth_task_states'],
          name: 'jobs',
          log: options.log,
          metrics: options.metrics,
          onNotification: () => this.wake(),
          onReconnect: () => this.wake(),
        })
      : undefined;
  }

  async start(): Promise<void> {
    await this.listener?.start().catch((error: unknown) => this.options.log.warn({ err: error }, 'listening for jobs failed; polling until it is back'));
    // An agent that became ready (or failed) moves its job on at once rather than at the next poll.
    this.agentWatch = this.options.store.watch('Agent', { onEvent: () => this.wake(), onResync: () => this.wake() });
    await this.agentWatch.ready.catch((error: unknown) => this.options.log.warn({ err: error }, 'watching agents failed; polling'));
    this.loop.start();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    this.agentWatch?.stop();
    await this.listener?.close();
  }

  /** Asks for a pass soon; passes never overlap. */
  wake(): void {
    this.loop.wake();
  }

  /** One pass over the open jobs this executor can claim now; returns how many it advanced. */
  async pass(): Promise<number> {
    const timer = this.metrics.passes.startTimer();
    try {
      const jobs = await this.claim();
      for (const job of jobs) await this.advanceClaimed(job);
      timer({ result: 'ok' });
      return jobs.length;
    } catch (error) {
      timer({ result: 'error' });
      throw error;
    }
  }

  private async claim(): Promise<Job[]> {
    const { pool, clock, identity } = this.options;
    const now = clock.now();
    const { rows } = await pool.query(
      `UPDATE jobs SET claimed_by = $1, claim_expires_at = $2
       WHERE id IN (
         SELECT id FROM jobs WHERE state IN ('queued', 'running') AND (claimed_by IS NULL OR claim_expires_at < $3)
         ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED)
       RETURNING ${JOB_COLUMNS}`,
      [identity, new Date(now.getTime() + (this.options.leaseMs ?? 15_000)), now, this.options.batch ?? 20],
    );
    return rows.map(toJob);
  }

  private async advanceClaimed(job: Job): Promise<void> {
    const log = this.options.log.child({ jobId: job.id, source: job.source, sourceId: job.sourceId });
    try {
      await this.advance(job, log);
    } catch (error) {
      if (error instanceof ApiError && PERMANENT.has(error.code)) {
        await this.finish(job, 'failed', { code: error.code, message: error.message }, log);
      } else {
        this.metrics.retries.inc({ source: job.source });
        log.warn({ err: error }, 'advancing the job failed; the next pass tries again');
      }
    } finally {
      await this.options.pool
        .query('UPDATE jobs SET claimed_by = NULL, claim_expires_at = NULL WHERE id = $1 AND claimed_by = $2', [job.id, this.options.identity])
        .catch((error: unknown) => log.warn({ err: error }, 'could not release the claim of a job; it runs out'));
    }
  }

  /**
   * Writes fields of a claimed, open job; false when the claim was lost (another executor has it)
   * or the job was cancelled meanwhile (its schedule deleted): then it is left as it is.
   */
  private async update(job: Job, fields: Record<string, unknown>): Promise<boolean> {
    const names = Object.keys(fields);
    const sets = names.map((name, i) => `${name} = $${i + 3}`).join(', ');
    const result = await this.options.pool.query(`UPDATE jobs SET ${sets} WHERE id = $1 AND claimed_by = $2 AND state IN ('queued', 'running')`, [
      job.id,
      this.options.identity,
      ...names.map((name) => fields[name]),
    ]);
    return (result.rowCount ?? 0) > 0;
  }

  /**
   * Moves the job on as far as it can go now; a cancel request or a timeout that ran out ends it
   * (and its agent) unless its task already ended. `job` is updated in place as its fields are
   * written.
   */
  private async advance(job: Job, log: Logger): Promise<void> {
    const { store, pool, clock } = this.options;
    const principal: Principal = { organizationId: job.organizationId, mode: job.mode, keyId: `${job.source}:${job.sourceId}` };
    if (job.state === 'queued') {
      if (!(await this.update(job, { state: 'running', started_at: clock.now() }))) return;
      Object.assign(job, { state: 'running', startedAt: clock.now().toISOString() });
    }

    if (job.cancelRequestedAt && !job.agentId) {
      await this.finish(job, 'cancelled', { code: 'cancelled', message: `the ${job.source} ${job.sourceId} was cancelled` }, log);
      return;
    }

    let sessionId = job.sessionId;
    if (!sessionId) {
      const { session } = await getOrCreateUserSession({ store, pool }, principal, newId('ses', clock.now()), { userId: job.userId });
      sessionId = objectNameToId(session.metadata.name);
      if (!(await this.update(job, { session_id: sessionId }))) return;
      Object.assign(job, { sessionId });
    }

    let agentId = job.agentId;
    if (!agentId) {
      agentId = newId('agt', clock.now());
      if (!(await this.update(job, { agent_id: agentId }))) return;
      Object.assign(job, { agentId });
    }
    let agent = await store.get('Agent', idToObjectName(agentId));
    if (!agent && !job.taskId) {
      const session = await store.get('Session', idToObjectName(sessionId));
      if (!session) throw new ApiError('not_found', `session ${sessionId} of the job is gone`);
      const definition = await resolveDefinition(pool, principal, job.definitionId, 'agent');
      const input = { ...agentFieldsOf(definition.config), definition: definition.id, definitionVersion: definition.version } as CreateAgentInput;
      agent = await this.options.factory.create(principal, session, input, { id: agentId });
      log.info({ agentId, definition: definition.id, version: definition.version }, 'job created its agent');
    }

    let task = job.taskId ? await findTask(pool, job.taskId) : undefined;
    if (!task || task.state === 'queued' || task.state === 'running') {
      // A task that ended keeps its outcome; one still going is stopped by a cancel or the timeout.
      if (job.cancelRequestedAt) {
        await this.finish(job, 'cancelled', { code: 'cancelled', message: `the ${job.source} ${job.sourceId} was cancelled` }, log);
        return;
      }
      if (job.timeoutMs !== null && job.startedAt && clock.now().getTime() - Date.parse(job.startedAt) > job.timeoutMs) {
        await this.finish(job, 'failed', { code: 'timeout', message: `the job did not end within its timeout of ${job.timeoutMs} ms` }, log);
        return;
      }
    }
    if (!task) {
      if (!agent) throw new ApiError('not_found', `agent ${agentId} of the job is gone before its run started`);
      const phase = agent.status?.phase ?? 'booting';
      if (AGENT_ENDED.has(phase) || agent.spec.desiredState !== 'active') {
        const reason = agent.status?.error?.message ?? `the agent is ${phase}`;
        await this.finish(job, 'failed', { code: 'agent_failed', message: `agent ${agentId} could not run the job: ${reason}` }, log);
        return;
      }
      if (phase === 'booting') return; // its reconcile makes it idle; that change of the agent wakes the next pass
      const taskId = job.taskId ?? newId('task', clock.now());
      if (!job.taskId) {
        if (!(await this.update(job, { task_id: taskId }))) return;
        Object.assign(job, { taskId });
      }
      task = await this.options.runs.start(agent, jobTaskText(job.input), { taskId, history: job.history });
      log.info({ taskId }, 'job started its run');
    }

    if (task.state === 'queued' || task.state === 'running') return;
    const state: JobState = task.state === 'completed' ? 'completed' : task.state === 'cancelled' ? 'cancelled' : 'failed';
    await this.finish(job, state, task.error, log);
  }

  /** The job's final state with the task's cost; its agent, if it made one (only this job used it), is ended. */
  private async finish(job: Job, state: JobState, error: JobError | null, log: Logger): Promise<void> {
    const { pool, clock, currency } = this.options;
    if (job.source === 'channel' && state === 'completed' && job.taskId) {
      // A channel's answer is part of its conversation: stored where the job ends (before the job's
      // state, and idempotent, so a retried finish writes it once), kept and streamed even when no
      // API server waits for it any more.
      const task = await findTask(pool, job.taskId);
      await recordChannelReply(pool, job, task?.output ?? '', clock.now());
    }
    // Its agent is ended before the job's final state is written, so whoever sees the job ended
    // sees its agent ended too (ending is idempotent: a retried finish, or another executor's, finds
    // it terminated).
    const agent = job.agentId ? await this.options.store.get('Agent', idToObjectName(job.agentId)) : undefined;
    if (agent && agent.spec.desiredState !== 'terminated') {
      await this.options.store.updateSpec('Agent', agent.metadata.name, (current) =>
        current.spec.desiredState === 'terminated' ? undefined : { ...current.spec, desiredState: 'terminated' },
      );
    }
    const cost = job.taskId ? await taskCost(pool, job.taskId, currency) : undefined;
    const written = await this.update(job, {
      state,
      error: error ? JSON.stringify(error) : null,
      cost_cents: cost?.total ?? null,
      currency: cost ? cost.currency : null,
      finished_at: clock.now(),
    });
    if (!written) return;
    this.metrics.finished.inc({ source: job.source, state });
    log.info({ state, error }, 'job finished');
  }
}

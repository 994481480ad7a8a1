import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { SandboxRef } from '@berth/crds';
import {
  LATENCY_BUCKETS,
  LostClaimError,
  NotificationListener,
  appendStreamEvent,
  approvalEvent,
  approvalOfCall,
  approvalPolicySchema,
  approvalStreamData,
  approvalTtlSeconds,
  cancelPendingApprovals,
  claimTask,
  decideApproval,
  guardrailsSchema,
  insertApproval,
  isStoreError,
  maskedPreview,
  newId,
  startApprovedCall,
  checkpointTask,
  computeNanocentsPerMinute,
  computeTotalNanocents,
  finishTask,
  idToObjectName,
  nanocentsToCents,
  recordEvent,
  releaseTask,
  renewTaskLease,
  taskCost,
  withTransaction,
  type Clock,
  type ComputePrices,
  type EventInput,
  type LedgerEntry,
  type Logger,
  type Pool,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
  type Approval,
  type Task,
} from '@berth/common';
import type { AgentPhase, Environment } from '@berth/crds';
import type { ProviderRegistry } from '@berth/providers';
import { agentsOf, enforceCostCap, enforceSessionLimit } from '../billing/limits.js';
import { budgetStop } from './budget.js';
import { runLoop, type Decision, type LoopEnd, type LoopIo, type LoopPolicies } from './loop.js';
import { mockModelAdapter } from './mock-model.js';
import { runFileAction } from './tools.js';
import { billingModeOf, modelCostNanocents, type ModelRoute, type ModelRouter } from './models/router.js';
import { ModelError, type ModelResponse } from './models/types.js';

export interface RunnerOptions {
  pool: Pool;
  connectionString: string;
  store: ResourceStore;
  providers: ProviderRegistry;
  models: ModelRouter;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  /** This process, as written into `claimed_by`. */
  identity: string;
  workers: number;
  maxSteps: number;
  modelTimeoutMs: number;
  toolTimeoutMs: number;
  currency: string;
  /** Compute prices, to report the sandbox time of a run in `cost.compute` (default: none). */
  computePrices?: ComputePrices;
  /** A task whose runner has not renewed its claim for this long is taken over. */
  leaseMs?: number;
  /** How often an idle worker looks for work when no notification wakes it. */
  pollMs?: number;
  /** The values of the agent's secrets, masked in what reviewers of its approvals see. */
  secrets?: (agent: Resource<'Agent'>) => Promise<Record<string, string>>;
  /** How often a tool call that waits for a decision reads it again. */
  approvalPollMs?: number;
}

class RunnerStopping extends Error {
  override name = 'RunnerStopping';
}

function createRunnerMetrics(registry: Registry) {
  return {
    tasks: new Counter({ name: 'berth_runner_tasks_total', help: 'Runs finished, by outcome', labelNames: ['outcome'], registers: [registry] }),
    taskDuration: new Histogram({
      name: 'berth_runner_task_duration_seconds',
      help: 'Wall time of a run, by outcome',
      labelNames: ['outcome'],
      buckets: [0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800],
      registers: [registry],
    }),
    active: new Gauge({ name: 'berth_runner_active_tasks', help: 'Runs in progress in this process', registers: [registry] }),
    takeovers: new Counter({
      name: 'berth_runner_takeovers_total',
      help: 'Runs continued after the runner that held them stopped',
      registers: [registry],
    }),
    modelCalls: new Histogram({
      name: 'berth_runner_model_call_duration_seconds',
      help: 'Model calls of the agent loop, by vendor and result',
      labelNames: ['vendor', 'result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    modelRetries: new Counter({
      name: 'berth_runner_model_retries_total',
      help: 'Model calls retried after 429, 5xx or a network failure',
      labelNames: ['vendor', 'status'],
      registers: [registry],
    }),
    approvals: new Counter({
      name: 'berth_runner_approvals_total',
      help: 'Tool calls that waited for a decision, by outcome (requested, approved, denied, expired)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    guardrailHits: new Counter({
      name: 'berth_runner_guardrail_hits_total',
      help: 'Guardrail rules that fired in runs, by rule and action',
      labelNames: ['rule', 'action'],
      registers: [registry],
    }),
    toolCalls: new Histogram({
      name: 'berth_runner_tool_call_duration_seconds',
      help: 'Tool calls of the agent loop, by tool and result',
      labelNames: ['tool', 'result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
  };
}

const FINAL_PHASES: ReadonlySet<AgentPhase> = new Set(['terminated', 'failed']);

/** A run's agent and session as the store has them now (see `Runner.watchAgent`). */
interface WatchedAgent {
  current(): Promise<{ agent: Resource<'Agent'> | undefined; session: Resource<'Session'> | undefined }>;
  stop(): void;
}

/**
 * Runner workers: each claims a queued task (or one whose runner died), runs the agent loop on
 * it, and finishes it with its events in one transaction. Any number of workers in any number
 * of processes can run; the claim's lease and attempt number keep each task with one of them.
 * Runners never write the Agent: its reconciler learns of every claim and end of a task from the
 * database (`berth_task_states`) and derives `running` or `idle` itself (ADR 18).
 */
export class Runner {
  private readonly metrics: ReturnType<typeof createRunnerMetrics>;
  private readonly leaseMs: number;
  private readonly inFlight = new Map<string, AbortController>();
  private workers: Promise<void>[] = [];
  private readonly listener: NotificationListener;
  private wakeWaiters: (() => void)[] = [];
  /** Counts wake-ups, so that one that comes while every worker is busy claiming is not lost. */
  private wakeGeneration = 0;
  private stopping = false;

  constructor(private readonly options: RunnerOptions) {
    this.metrics = createRunnerMetrics(options.metrics);
    this.leaseMs = options.leaseMs ?? 30_000;
    // New tasks wake a worker at once; the poll also finds tasks whose runner died, and a
    // reconnect wakes every worker to claim what was queued while notifications were lost.
    this.listener = new NotificationListener({
      connectionString: options.connectionString,
      channels: ['berth_tasks'],
      name: 'runner',
      log: options.log,
      metrics: options.metrics,
      onNotification: () => this.wakeOne(),
      onReconnect: () => this.wakeAll(),
    });
  }

  async start(): Promise<void> {
    if (this.options.workers === 0) return;
    await this.listener.start();
    for (let i = 0; i < this.options.workers; i++) this.workers.push(this.work());
    this.options.log.info({ workers: this.options.workers, identity: this.options.identity }, 'runner started');
  }

  /** Stops claiming; runs in flight are handed back to be continued by another runner. */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const controller of this.inFlight.values()) controller.abort(new RunnerStopping('runner stopping'));
    this.wakeAll();
    await Promise.all(this.workers);
    await this.listener.close();
  }

  private wakeOne(): void {
    this.wakeGeneration++;
    this.wakeWaiters.shift()?.();
  }

  private wakeAll(): void {
    this.wakeGeneration++;
    for (const wake of this.wakeWaiters.splice(0)) wake();
  }

  /** Waits for a wake-up or the poll interval; returns at once when one came since `since`. */
  private idle(since: number): Promise<void> {
    if (this.wakeGeneration !== since) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.wakeWaiters = this.wakeWaiters.filter((entry) => entry !== wake);
        resolve();
      }, this.options.pollMs ?? 2_000);
      const wake = () => {
        clearTimeout(timer);
        resolve();
      };
      this.wakeWaiters.push(wake);
    });
  }

  private async work(): Promise<void> {
    while (!this.stopping) {
      const since = this.wakeGeneration;
      let task: Task | undefined;
      try {
        task = await claimTask(this.options.pool, this.options.identity, this.leaseMs);
      } catch (error) {
        this.options.log.warn({ err: error }, 'claiming a task failed');
      }
      if (!task) {
        await this.idle(since);
        continue;
      }
      await this.execute(task);
    }
  }

  private async execute(task: Task): Promise<void> {
    const log = this.options.log.child({ taskId: task.id, agentId: task.agentId, attempt: task.attempt });
    const controller = new AbortController();
    this.inFlight.set(task.id, controller);
    this.metrics.active.inc();
    if (task.attempt > 1) {
      this.metrics.takeovers.inc();
      log.info('continuing a task whose runner stopped');
    }
    const heartbeat = setInterval(() => {
      renewTaskLease(this.options.pool, task, this.leaseMs)
        .then((held) => {
          if (!held) controller.abort(new LostClaimError(task.id));
        })
        .catch((error: unknown) => log.warn({ err: error }, 'renewing the task lease failed'));
    }, Math.max(100, Math.floor(this.leaseMs / 3)));
    const started = performance.now();
    let outcome = 'error';
    try {
      outcome = await this.runTask(task, controller.signal, log);
    } catch (error) {
      const reason = controller.signal.reason as unknown;
      if (error instanceof LostClaimError || reason instanceof LostClaimError) {
        outcome = 'lost';
        log.warn('another runner took this task over; leaving it');
      } else if (reason instanceof RunnerStopping) {
        outcome = 'released';
        await releaseTask(this.options.pool, task).catch(() => undefined);
        log.info('runner stopping; task handed back');
      } else {
        log.error({ err: error }, 'run failed unexpectedly');
        await this.finish(task, { state: 'failed', error: { code: 'internal_error', message: 'the run failed unexpectedly' } }, undefined).catch(
          (finishError: unknown) => log.error({ err: finishError }, 'could not record the failed run'),
        );
      }
    } finally {
      clearInterval(heartbeat);
      this.inFlight.delete(task.id);
      this.metrics.active.dec();
      this.metrics.tasks.inc({ outcome });
      this.metrics.taskDuration.observe({ outcome }, (performance.now() - started) / 1000);
    }
  }

  /** Runs the loop on a claimed task and finishes it; returns the outcome for metrics. */
  private async runTask(task: Task, signal: AbortSignal, log: Logger): Promise<string> {
    const { store, providers } = this.options;
    const agent = await store.get('Agent', idToObjectName(task.agentId));
    const sandbox = agent?.status?.sandbox;
    const provider = agent ? await providers.holding(agent.spec, agent.status?.provider).catch(() => undefined) : undefined;
    if (!agent || agent.metadata.deletionTimestamp || !sandbox || !provider || FINAL_PHASES.has(agent.status?.phase ?? 'booting')) {
      const end: LoopEnd = { state: 'cancelled', error: { code: 'agent_unavailable', message: `agent ${task.agentId} has no running sandbox` } };
      await this.finish(task, end, undefined);
      return end.state;
    }
    let route: ModelRoute;
    try {
      route = await this.routeOf(agent);
    } catch (error) {
      // The model cannot be reached as configured (a BYOI model's key secret is gone): the run
      // fails like a refused model call, and the agent stays usable.
      if (!(error instanceof ModelError)) throw error;
      const end: LoopEnd = { state: 'failed', error: { code: 'provider_error', message: `model ${agent.spec.model}: ${error.message}` } };
      await this.finish(task, end, undefined);
      return end.state;
    }
    const policies = policiesOf(agent);
    if ('error' in policies) {
      const end: LoopEnd = { state: 'failed', error: { code: 'invalid_policy', message: policies.error } };
      await this.finish(task, end, undefined);
      return end.state;
    }
    const watched = await this.watchAgent(agent);
    const end = await runLoop(task, agent, { route, provider, sandbox, policies }, this.loopIo(task, agent, route, signal, watched, policies), {
      maxSteps: this.options.maxSteps,
      modelTimeoutMs: this.options.modelTimeoutMs,
      toolTimeoutMs: this.options.toolTimeoutMs,
      log,
      onModelCall: (seconds, result) => this.metrics.modelCalls.observe({ vendor: route.vendor, result }, seconds),
      onModelRetry: (error, attempt, delayMs) => {
        this.metrics.modelRetries.inc({ vendor: route.vendor, status: String(error.status) });
        log.warn({ status: error.status, attempt, delayMs }, 'model call failed; retrying');
      },
      onToolCall: (tool, seconds, isError) => this.metrics.toolCalls.observe({ tool, result: isError ? 'error' : 'ok' }, seconds),
    }).finally(() => watched.stop());
    await this.finish(task, end, { agent, route, provider, sandbox });
    log.info({ state: end.state, ...(end.state === 'completed' ? {} : { code: end.error.code }) }, 'run finished');
    return end.state;
  }

  /** Test keys get the mock model; live keys the model as the router resolves it for the organization. */
  private async routeOf(agent: Resource<'Agent'>): Promise<ModelRoute> {
    if (agent.spec.mode !== 'test') return this.options.models.resolve(agent.spec.organizationId, agent.spec.model!);
    return {
      vendor: agent.spec.model!.split('/')[0]!,
      model: agent.spec.model!.split('/').slice(1).join('/'),
      adapter: mockModelAdapter,
      endpoint: { api: 'openai', baseUrl: 'mock://' },
      keySource: 'platform',
      price: { inputNanocentsPerToken: 0n, outputNanocentsPerToken: 0n },
    };
  }

  /**
   * The agent and its session, read again only after the store's watch said either changed (or
   * relisted): the check before each model call then costs no round trip while neither changes.
   * A read that an event overtakes is not kept. The watch is ready before the first read, so no
   * change falls between the two.
   */
  private async watchAgent(agent: Resource<'Agent'>): Promise<WatchedAgent> {
    const { store } = this.options;
    const sessionName = idToObjectName(agent.spec.sessionId);
    let generation = 0;
    const changed = () => void generation++;
    const watches = [
      store.watch('Agent', { onEvent: (event) => event.name === agent.metadata.name && changed(), onResync: changed }),
      store.watch('Session', { onEvent: (event) => event.name === sessionName && changed(), onResync: changed }),
    ];
    await Promise.all(watches.map((watch) => watch.ready));
    let read: Promise<{ generation: number; agent: Resource<'Agent'> | undefined; session: Resource<'Session'> | undefined }> | undefined;
    return {
      current: async () => {
        let last = read ? await read : undefined;
        if (!last || last.generation !== generation) {
          const at = generation;
          read = Promise.all([store.get('Agent', agent.metadata.name), store.get('Session', sessionName)]).then(([current, session]) => ({
            generation: at,
            agent: current,
            session,
          }));
          read.catch(() => (read = undefined));
          last = await read;
        }
        return { agent: last.agent, session: last.session };
      },
      stop: () => {
        for (const watch of watches) watch.stop();
      },
    };
  }

  private loopIo(task: Task, agent: Resource<'Agent'>, route: ModelRoute, signal: AbortSignal, watched: WatchedAgent, policies: LoopPolicies): LoopIo {
    const { pool, store, clock } = this.options;
    const live = agent.spec.mode === 'live';
    let environment: Promise<Environment> | undefined;
    const sessionEnvironment = () =>
      (environment ??= store.get('Session', idToObjectName(agent.spec.sessionId)).then((session) => session?.spec.environment ?? 'production'));
    const modelCharge = async (step: number, response: ModelResponse): Promise<LedgerEntry> => ({
      organizationId: agent.spec.organizationId,
      sessionId: agent.spec.sessionId,
      userId: agent.spec.userId,
      environment: await sessionEnvironment(),
      agentId: task.agentId,
      taskId: task.id,
      kind: 'model',
      provider: route.vendor,
      model: `${route.vendor}/${route.model}`,
      inputTokens: response.usage.inputTokens,
      outputTokens: response.usage.outputTokens,
      amountNanocents: modelCostNanocents(route, response.usage),
      currency: this.options.currency,
      billingMode: billingModeOf(route),
      dedupeKey: `${task.id}/model/${step}`,
      at: clock.now(),
    });
    const throwIfAborted = () => {
      if (signal.aborted) throw signal.reason instanceof Error ? signal.reason : new RunnerStopping('aborted');
    };
    const stopOf = this.stopCheck(agent, route, watched, throwIfAborted);
    return {
      signal,
      emit: async (type, data) => {
        await appendStreamEvent(pool, { agentId: task.agentId, taskId: task.id, type, data: { taskId: task.id, ...data } });
      },
      checkpoint: async (progress, { events, charge, approval }) => {
        throwIfAborted();
        const writes = {
          events: events.map(({ type, data }) => ({ type, data: { taskId: task.id, ...data } })),
          // Test keys record no usage.
          ...(charge && live ? { charge: await modelCharge(charge.step, charge.response) } : {}),
        };
        for (const event of events) {
          if (event.type === 'guardrail') this.metrics.guardrailHits.inc({ rule: String(event.data.rule), action: String(event.data.action) });
        }
        if (!approval) {
          await checkpointTask(pool, task, progress, writes);
          return;
        }
        // The request is written with the step that streams its call: a runner that takes the
        // task over finds it waiting, never a call that streamed without its request.
        const secrets = agent.spec.secrets?.length && this.options.secrets ? await this.options.secrets(agent) : {};
        const now = clock.now();
        const request = {
          id: newId('apr', now),
          organizationId: agent.spec.organizationId,
          mode: agent.spec.mode,
          sessionId: agent.spec.sessionId,
          agentId: task.agentId,
          taskId: task.id,
          toolCallId: approval.call.id,
          tool: approval.call.name,
          preview: maskedPreview(approval.call.input, secrets),
          rule: approval.rule,
          expiresAt: new Date(now.getTime() + approvalTtlSeconds(policies.approvals!) * 1000),
        };
        try {
          await withTransaction(pool, async (tx) => {
            const recorded = await insertApproval(tx, request);
            const streamed = { type: 'approval.requested' as const, data: approvalStreamData(recorded) };
            await checkpointTask(tx, task, progress, { ...writes, events: [...writes.events, streamed] });
            await recordEvent(tx, approvalEvent(recorded), now);
          });
        } catch (error) {
          // The model call was made: a runner that lost the task still writes its charge.
          if (error instanceof LostClaimError && writes.charge) await checkpointTask(pool, task, progress, { charge: writes.charge });
          throw error;
        }
        this.metrics.approvals.inc({ outcome: 'requested' });
      },
      awaitDecision: async (call) => {
        let approval = await approvalOfCall(pool, task.id, call.id);
        if (!approval) return undefined;
        const pollMs = this.options.approvalPollMs ?? 500;
        for (;;) {
          throwIfAborted();
          const decided = await this.decisionOf(approval, agent);
          if (decided) return decided;
          const stop = await stopOf('after_tool_call');
          if (stop) return { stop };
          const remaining = Date.parse(approval.expiresAt) - clock.now().getTime();
          await sleep(Math.max(10, Math.min(pollMs, remaining)), signal);
          approval = (await approvalOfCall(pool, task.id, call.id)) ?? approval;
        }
      },
      stopReason: (where, next) => stopOf(where, next),
    };
  }

  /**
   * The decision on an approval as the loop acts on it, or undefined while it waits: a pending
   * one past its expiry is expired here (with its events, and the agent paused for a person to
   * look at it).
   */
  private async decisionOf(approval: Approval, agent: Resource<'Agent'>): Promise<Decision | undefined> {
    const { pool, clock } = this.options;
    switch (approval.state) {
      case 'approved':
        // Marked before the call runs: a runner that takes over after this does not run it again.
        if (!(await startApprovedCall(pool, approval.id))) return { decision: 'interrupted' };
        this.metrics.approvals.inc({ outcome: 'approved' });
        return { decision: 'approved' };
      case 'denied':
        this.metrics.approvals.inc({ outcome: 'denied' });
        return { decision: 'denied', reason: approval.reason ?? 'no reason given' };
      case 'expired':
        return { stop: approvalExpiredStop(approval) };
      case 'cancelled':
        return { stop: { state: 'cancelled', code: 'cancelled', message: `approval ${approval.id} was cancelled` } };
      case 'pending': {
        const now = clock.now();
        if (Date.parse(approval.expiresAt) > now.getTime()) return undefined;
        const expired = await withTransaction(pool, async (tx) => {
          const decided = await decideApproval(tx, approval.id, { state: 'expired' }, now);
          if (!decided) return undefined;
          await recordEvent(tx, approvalEvent(decided), now);
          await appendStreamEvent(tx, { agentId: decided.agentId, taskId: decided.taskId, type: 'approval.expired', data: approvalStreamData(decided) });
          return decided;
        });
        // Decided meanwhile: the next read has the decision.
        if (!expired) return undefined;
        this.metrics.approvals.inc({ outcome: 'expired' });
        await this.pauseForApproval(agent);
        return { stop: approvalExpiredStop(expired) };
      }
    }
  }

  /** Pauses the agent as the pause route does (its reconciler checkpoints the sandbox), to wait for a person. */
  private async pauseForApproval(agent: Resource<'Agent'>): Promise<void> {
    try {
      await this.options.store.updateSpec('Agent', agent.metadata.name, (current) =>
        current.spec.desiredState !== 'active' ? current.spec : { ...current.spec, desiredState: 'paused', pauseReason: 'approval_expired' },
      );
    } catch (error) {
      if (!isStoreError(error, 'NotFound')) throw error;
    }
  }

  private stopCheck(
    agent: Resource<'Agent'>,
    route: ModelRoute,
    watched: WatchedAgent,
    throwIfAborted: () => void,
  ): LoopIo['stopReason'] {
    const { pool, store, clock } = this.options;
    const live = agent.spec.mode === 'live';
    return async (_where, next) => {
        throwIfAborted();
        const { agent: current, session: sessionAtClaim } = await watched.current();
        if (!current || current.metadata.deletionTimestamp || current.spec.desiredState === 'terminated' || FINAL_PHASES.has(current.status?.phase ?? 'idle')) {
          return { state: 'cancelled', code: 'cancelled', message: 'the agent was terminated during the run' };
        }
        if (current.spec.desiredState !== 'active' || current.status?.phase === 'paused') {
          return { state: 'cancelled', code: 'cancelled', message: 'the agent was paused during the run' };
        }
        if (!live) return undefined;
        const session =
          current.spec.sessionId === agent.spec.sessionId ? sessionAtClaim : await store.get('Session', idToObjectName(current.spec.sessionId));
        const now = clock.now();
        const nextCost = next ? modelCostNanocents(route, next) : 0n;
        const budget = await budgetStop(pool, current, session, now, nextCost);
        if (!budget) return undefined;
        // The agent is paused through the pause path (its state kept), and the events written,
        // here rather than on the billing loop's next pass.
        const limits = { store, pool, currency: this.options.currency, log: this.options.log };
        if (budget.code === 'budget_exhausted') await enforceCostCap(limits, current, budget.spentCents, now);
        else if (session) await enforceSessionLimit(limits, session, budget.breach, await agentsOf(store, session), now);
        return { state: 'failed', code: budget.code, message: budget.message };
    };
  }

  /** Writes the end of a run (task state, the stream's last event, lifecycle events) in one transaction. */
  private async finish(
    task: Task,
    end: LoopEnd,
    run: { agent: Resource<'Agent'>; route: ModelRoute; provider: SandboxProvider; sandbox: SandboxRef } | undefined,
  ): Promise<void> {
    const { pool, clock } = this.options;
    // The scan of the sandbox and the read of the run's charges are independent: made at once.
    const [artifacts, cost] = await Promise.all([
      end.state === 'completed' && run ? changedFiles(run.provider, run.sandbox, task.startedAt) : [],
      taskCost(pool, task.id, this.options.currency),
    ]);
    if (run && task.startedAt) {
      // The run's sandbox time at the agent's compute price: part of what the compute meter
      // charges the agent, reported per run (not charged twice).
      const perMinute = computeNanocentsPerMinute(this.options.computePrices ?? {}, {
        provider: run.sandbox.provider === 'mock' ? run.agent.spec.provider : run.sandbox.provider,
        compute: run.agent.spec.compute,
        browser: run.agent.spec.browser,
        gpu: run.agent.spec.gpu,
      });
      const runMs = Math.max(0, clock.now().getTime() - Date.parse(task.startedAt));
      cost.compute = run.agent.spec.mode === 'live' ? nanocentsToCents(computeTotalNanocents(perMinute, runMs)) : 0;
      cost.total = cost.model + cost.compute;
    }
    const finishedAt = clock.now();
    const durationMs = task.startedAt ? Math.max(0, finishedAt.getTime() - Date.parse(task.startedAt)) : 0;
    const agentSpec = run?.agent.spec;
    const common = { agentId: task.agentId, sessionId: task.sessionId, userId: agentSpec?.userId, taskId: task.id };
    const event = (type: EventInput['type'], data: Record<string, unknown>): EventInput => ({
      type,
      organizationId: task.organizationId,
      mode: task.mode,
      subjectId: task.agentId,
      occurrence: `${task.id}/${type}`,
      data: { ...common, ...data },
    });
    const events: EventInput[] = [];
    if (end.state === 'completed') {
      events.push(
        event('agent.completed', {
          status: 'completed',
          output: end.output,
          artifacts,
          cost: { amount: cost.total, currency: cost.currency },
          compute: { provider: run?.sandbox.provider === 'mock' ? agentSpec?.provider : run?.sandbox.provider, durationMs },
          model: run
            ? { provider: run.route.vendor, model: run.route.model, inputTokens: end.usage?.inputTokens ?? 0, outputTokens: end.usage?.outputTokens ?? 0 }
            : undefined,
        }),
      );
    } else if (end.state === 'failed') {
      events.push(event('agent.failed', { status: 'failed', error: { code: end.error.code, message: end.error.message } }));
    }
    if (run) {
      events.push(event('agent.run.completed', { status: end.state, cost, billingMode: billingModeOf(run.route) }));
    }
    await withTransaction(pool, async (tx) => {
      await finishTask(tx, task, end.state === 'completed' ? { state: 'completed', output: end.output } : { state: end.state, error: end.error });
      await cancelPendingApprovals(tx, task.id, finishedAt);
      if (end.state === 'completed') {
        await appendStreamEvent(tx, {
          agentId: task.agentId,
          taskId: task.id,
          type: 'output',
          data: { taskId: task.id, text: end.output, cost: { amount: cost.total, currency: cost.currency } },
        });
      } else {
        await appendStreamEvent(tx, {
          agentId: task.agentId,
          taskId: task.id,
          type: 'error',
          data: { taskId: task.id, code: end.error.code, message: end.error.message, ...(end.error.details ?? {}) },
        });
      }
      for (const lifecycle of events) await recordEvent(tx, lifecycle, finishedAt);
    });
  }
}

/** The agent's policies as the loop applies them; they were validated when the agent was created. */
function policiesOf(agent: Resource<'Agent'>): LoopPolicies | { error: string } {
  const policies: LoopPolicies = {};
  if (agent.spec.approvals !== undefined) {
    const parsed = approvalPolicySchema.safeParse(agent.spec.approvals);
    if (!parsed.success) return { error: `the agent's approvals policy is not valid: ${parsed.error.issues[0]?.message}` };
    policies.approvals = parsed.data;
  }
  if (agent.spec.guardrails !== undefined) {
    const parsed = guardrailsSchema.safeParse(agent.spec.guardrails);
    if (!parsed.success) return { error: `the agent's guardrails are not valid: ${parsed.error.issues[0]?.message}` };
    policies.guardrails = parsed.data;
  }
  return policies;
}

function approvalExpiredStop(approval: Approval): { state: 'cancelled'; code: string; message: string } {
  return {
    state: 'cancelled',
    code: 'approval_expired',
    message: `the ${approval.tool} call waited for approval ${approval.id} until it expired at ${approval.expiresAt}; the agent is paused`,
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Files under /workspace written since the run started: the run's artifacts (files.py's changed_files). */
async function changedFiles(provider: SandboxProvider, sandbox: SandboxRef, since: string | null): Promise<string[]> {
  if (!since) return [];
  // A second of slack: file times and the database's clock need not agree to the millisecond.
  const args = { since: Date.parse(since) / 1000 - 1, limit: 1000 };
  const answer = await runFileAction<{ paths: unknown }>({ provider, sandbox, timeoutMs: 30_000 }, 'changed_files', args).catch(() => undefined);
  if (answer === undefined || 'failure' in answer || !Array.isArray(answer.result.paths)) return [];
  return answer.result.paths.filter((entry): entry is string => typeof entry === 'string');
}

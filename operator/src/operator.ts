import { NotificationListener, cancelJobsOf, createLimitGuard, parseJobEnded, idToObjectName, type Clock, type ComputePrices, type Kind, type Logger, type Pool, type ResourceStore, type SecretBox, type SnapshotStorage } from '@berth/common';
import { BillingLoop } from './billing/loop.js';
import type { Registry } from 'prom-client';
import { createAgentMetrics, createAgentReconciler } from './controllers/agent.js';
import { createSnapshotMetrics, createSnapshotReconciler } from './controllers/snapshot.js';
import { createScheduleMetrics, createScheduleReconciler } from './controllers/schedule.js';
import { createFleetMetrics, createFleetReconciler } from './controllers/fleet.js';
import { WARM_REFILL_DELAY_MS, createWarmPoolMetrics, createWarmPoolReconciler } from './controllers/warm-pool.js';
import type { ProviderRegistry } from '@berth/providers';
import { Controller, createControllerMetrics, type Reconciler } from './runtime/controller.js';
import { createAgentFactory } from './agents/create.js';
import { agentSecrets } from './agents/egress.js';
import { createRunStarter } from './agents/run.js';
import { JobExecutor } from './jobs/executor.js';
import { WorkflowDriver } from './workflows/driver.js';
import type { ModelRouter } from './runner/models/router.js';

export interface OperatorDeps {
  store: ResourceStore;
  db: Pool;
  providers: ProviderRegistry;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  snapshots: SnapshotStorage;
  /**
   * Where to LISTEN for changes of tasks' states, which wake the reconcile of their agent at once;
   * without it, an agent's Running condition follows on its periodic reconciles alone.
   */
  connectionString?: string;
  workers?: number;
  /** Judges agents' models, for the agents and runs that jobs start. */
  models: ModelRouter;
  /** The model of an agent whose definition names none. */
  defaultModel: string;
  /** The egress allow-list of agents created without one (BERTH_EGRESS_ALLOW). */
  defaultEgress?: { hosts: string[]; cidrs: string[] };
  /** This process, as written into the claims of the jobs it runs. */
  identity: string;
  /** How often the job executor looks at open jobs without a notification (default 1 s). */
  jobPollMs?: number;
  /** Decrypts the secrets agents name; without it, agents get none. */
  secretBox?: SecretBox;
  /** Longest a warm sandbox may take to start before it is ended and replaced (default 5 min). */
  warmStartTimeoutMs?: number;
  billing: {
    computePrices: ComputePrices;
    /** Dollars per GB-hour. */
    storagePrice: string;
    currency: string;
    sessionCostStep: number;
    intervalMs: number;
  };
}

export interface Operator {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The operator's controllers; one per kind that has something to reconcile. */
export function createOperator(deps: OperatorDeps): Operator {
  const controllerMetrics = createControllerMetrics(deps.metrics);
  const billing = new BillingLoop({
    store: deps.store,
    pool: deps.db,
    clock: deps.clock,
    log: deps.log.child({ loop: 'billing' }),
    metrics: deps.metrics,
    prices: () => ({ compute: deps.billing.computePrices, storagePerGbHour: deps.billing.storagePrice, currency: deps.billing.currency }),
    storageKind: deps.snapshots.kind,
    sessionCostStep: deps.billing.sessionCostStep,
    intervalMs: deps.billing.intervalMs,
    onSpendChange: (agentName) => agents.enqueue(agentName),
  });
  /** One controller per kind, all on the same store and metrics. */
  const controllerOf = (kind: Kind, workers: number, reconcile: Reconciler) =>
    new Controller({ kind, store: deps.store, log: deps.log.child({ controller: kind.toLowerCase() }), metrics: controllerMetrics, workers, reconcile });
  const warmPoolMetrics = createWarmPoolMetrics(deps.metrics);
  const agents = controllerOf(
    'Agent',
    deps.workers ?? 4,
    createAgentReconciler({
      store: deps.store,
      db: deps.db,
      providers: deps.providers,
      clock: deps.clock,
      metrics: createAgentMetrics(deps.metrics),
      snapshots: deps.snapshots,
      meter: billing.compute,
      onSnapshotChange: (snapshotName) => snapshots.enqueue(snapshotName),
      currency: deps.billing.currency,
      warmPools: { metrics: warmPoolMetrics, onPoolChange: (poolName) => warmPools.enqueueAfter(poolName, WARM_REFILL_DELAY_MS) },
      ...(deps.secretBox ? { secrets: agentSecrets(deps.db, deps.secretBox) } : {}),
    }),
  );
  const snapshots = controllerOf(
    'Snapshot',
    2,
    createSnapshotReconciler({
      store: deps.store,
      db: deps.db,
      storage: deps.snapshots,
      providers: deps.providers,
      clock: deps.clock,
      metrics: createSnapshotMetrics(deps.metrics),
      onAgentChange: (agentName) => agents.enqueue(agentName),
    }),
  );
  const limits = createLimitGuard({ pool: deps.db, store: deps.store, clock: deps.clock });
  const jobs = new JobExecutor({
    pool: deps.db,
    store: deps.store,
    factory: createAgentFactory({
      store: deps.store,
      pool: deps.db,
      providers: deps.providers,
      limits,
      models: deps.models,
      clock: deps.clock,
      defaultModel: deps.defaultModel,
      ...(deps.defaultEgress ? { defaultEgress: deps.defaultEgress } : {}),
      currency: deps.billing.currency,
    }),
    runs: createRunStarter({ pool: deps.db, store: deps.store, limits, models: deps.models, clock: deps.clock }),
    clock: deps.clock,
    log: deps.log.child({ component: 'jobs' }),
    metrics: deps.metrics,
    identity: deps.identity,
    currency: deps.billing.currency,
    ...(deps.connectionString ? { connectionString: deps.connectionString } : {}),
    ...(deps.jobPollMs !== undefined ? { pollMs: deps.jobPollMs } : {}),
  });
  const workflows = new WorkflowDriver({
    pool: deps.db,
    clock: deps.clock,
    log: deps.log.child({ component: 'workflows' }),
    metrics: deps.metrics,
    currency: deps.billing.currency,
    ...(deps.connectionString ? { connectionString: deps.connectionString } : {}),
    ...(deps.jobPollMs !== undefined ? { pollMs: deps.jobPollMs } : {}),
  });
  const warmPools = controllerOf(
    'WarmPool',
    2,
    createWarmPoolReconciler({
      store: deps.store,
      db: deps.db,
      providers: deps.providers,
      clock: deps.clock,
      metrics: warmPoolMetrics,
      ...(deps.warmStartTimeoutMs !== undefined ? { startTimeoutMs: deps.warmStartTimeoutMs } : {}),
    }),
  );
  const schedules = controllerOf('Schedule', 2, createScheduleReconciler({ store: deps.store, db: deps.db, clock: deps.clock, metrics: createScheduleMetrics(deps.metrics) }));
  const fleets = controllerOf(
    'Fleet',
    2,
    createFleetReconciler({
      store: deps.store,
      db: deps.db,
      clock: deps.clock,
      metrics: createFleetMetrics(deps.metrics),
      currency: deps.billing.currency,
      cancelOpenJobs: (tx, fleetId, now) => cancelJobsOf(tx, 'fleet', fleetId, now, { includeRunning: true }),
    }),
  );
  // Providers that can tell when a sandbox changes (a pod watch) wake its agent's reconcile.
  const sandboxWatches: { stop(): void }[] = [];
  // A task claimed, finished or handed back wakes its agent's reconcile (ADR 18).
  const taskStates = deps.connectionString
    ? new NotificationListener({
        connectionString: deps.connectionString,
        channels: ['berth_task_states'],
        name: 'agent-tasks',
        log: deps.log,
        metrics: deps.metrics,
        onNotification: (_channel, agentId) => {
          if (agentId) agents.enqueue(idToObjectName(agentId));
        },
        onReconnect: () => agents.resync(),
      })
    : undefined;
  // An item's job that ended wakes its fleet's reconcile at once (its periodic requeue is the fallback).
  const jobEnds = deps.connectionString
    ? new NotificationListener({
        connectionString: deps.connectionString,
        channels: ['berth_job_ended'],
        name: 'fleet-jobs',
        log: deps.log,
        metrics: deps.metrics,
        onNotification: (_channel, payload) => {
          const ended = payload ? parseJobEnded(payload) : undefined;
          if (ended?.source === 'fleet') fleets.enqueue(idToObjectName(ended.sourceId));
        },
        onReconnect: () => fleets.resync(),
      })
    : undefined;
  return {
    async start() {
      await agents.start();
      await snapshots.start();
      await schedules.start();
      await fleets.start();
      await warmPools.start();
      billing.start();
      await jobs.start();
      await workflows.start();
      // Not a reason to fail the start: the listener goes on trying, and reconciles of agents
      // with a run come back when its lease would run out anyway.
      await taskStates?.start().catch((error: unknown) => deps.log.warn({ err: error }, 'listening for task changes failed; retrying'));
      await jobEnds?.start().catch((error: unknown) => deps.log.warn({ err: error }, 'listening for ended jobs failed; fleets poll until it is back'));
      for (const provider of deps.providers.all()) {
        const watch = provider.watchSandboxes?.((agentId) => agents.enqueue(idToObjectName(agentId)));
        if (watch) sandboxWatches.push(watch);
      }
    },
    async stop() {
      await workflows.stop();
      await jobs.stop();
      await taskStates?.close();
      await jobEnds?.close();
      for (const watch of sandboxWatches.splice(0)) watch.stop();
      await Promise.all([agents.stop(), snapshots.stop(), schedules.stop(), fleets.stop(), warmPools.stop(), billing.stop()]);
    },
  };
}

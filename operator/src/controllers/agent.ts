import { isDeepStrictEqual } from 'node:util';
import { API_VERSION, AgentCondition, AgentReason, SANDBOX_FINALIZER, parseDuration, type AgentPhase, type AgentStatus, type Environment, type SandboxRef, type SnapshotStatus } from '@berth/crds';
import {
  LATENCY_BUCKETS,
  Labels,
  ProviderError,
  SandboxNotReadyError,
  UnsupportedRequestError,
  eventIdFor,
  idToObjectName,
  isStoreError,
  objectNameToId,
  recordEvents,
  taskHoldAndSpendOf,
  claimWarmSandbox,
  abandonWarmClaim,
  agentActivity,
  forgetAgentActivity,
  nanocentsToCents,
  type CheckpointResult,
  type CreateInput,
  type CreateRequest,
  type Kind,
  type ProvisionRequest,
  type Clock,
  type EventInput,
  type AgentActivity,
  type Logger,
  type OpenTransaction,
  type Queryable,
  type Resource,
  type ResourceStore,
  type RestoreSource,
  type SandboxProvider,
  type SnapshotStorage,
  type TaskHold,
} from '@berth/common';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ProviderRegistry } from '@berth/providers';
import type { ComputeMeter } from '../billing/meter.js';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { computeConditions, derivePhase, type AgentEnding, type AgentObservation } from './agent-status.js';
import { findCondition } from './conditions.js';
import type { WarmPoolMetrics } from './warm-pool.js';
import { sandboxEgressOf, type AgentSecrets } from '../agents/egress.js';

/** How often a ready sandbox is checked for life when nothing else happens. */
export const HEALTH_CHECK_INTERVAL_MS = 30_000;
/** How soon a starting sandbox is looked at again when its provider cannot say when it is ready. */
export const PENDING_RECHECK_MS = 2_000;
/** A sandbox that cannot be provisioned within this long fails the agent. */
export const PROVISION_DEADLINE_MS = 10 * 60_000;
/**
 * A run's lease is looked at again this long after it would run out: a runner renews it well
 * before, so a lease found ended then means the runner is gone (ADR 18).
 */
export const LEASE_RECHECK_MARGIN_MS = 250;

export interface AgentMetrics {
  provisionDuration: Histogram<'provider' | 'result'>;
  /** Agents paused by their idle policy (`lifecycle.idle`). */
  idlePauses: Counter<'provider'>;
  /** Sandboxes recreated after they died under `lifecycle.onFailure`, and agents failed when out of restarts. */
  restarts: Counter<'provider' | 'result'>;
  /** The rest of the lifecycle policy acting: idle terminations, pauses at the timeout, idle pauses called off by a call in flight. */
  lifecycleActions: Counter<'provider' | 'action'>;
  checkpointDuration: Histogram<'provider'>;
  releaseFailures: Counter<'provider'>;
  /** Last known phase of each agent, counted at scrape time. */
  phases: Map<string, { provider: string; phase: string }>;
}

export function createAgentMetrics(registry: Registry): AgentMetrics {
  const phases = new Map<string, { provider: string; phase: string }>();
  new Gauge({
    name: 'berth_sandboxes',
    help: 'Agents of live keys (each with its sandbox while not paused or ended) by provider and phase; test-key agents, which have no sandbox, are not counted',
    labelNames: ['provider', 'phase'],
    registers: [registry],
    collect() {
      this.reset();
      for (const { provider, phase } of phases.values()) this.inc({ provider, phase });
    },
  });
  return {
    phases,
    idlePauses: new Counter({
      name: 'berth_agent_idle_pauses_total',
      help: 'Agents paused by checkpoint because they had no traffic for their lifecycle.idle.pauseAfter',
      labelNames: ['provider'],
      registers: [registry],
    }),
    restarts: new Counter({
      name: 'berth_agent_restarts_total',
      help: 'Sandboxes that died under a lifecycle.onFailure policy: recreated (result=restarted) or, out of restarts, the agent failed (result=exhausted)',
      labelNames: ['provider', 'result'],
      registers: [registry],
    }),
    lifecycleActions: new Counter({
      name: 'berth_agent_lifecycle_actions_total',
      help: 'The lifecycle policy acting: agents terminated for lifecycle.idle.terminateAfter (action=idle_terminate), paused at their timeout under lifecycle.onTimeout: pause (action=timeout_pause), idle pauses called off before the checkpoint because a call held a lease (action=idle_pause_called_off)',
      labelNames: ['provider', 'action'],
      registers: [registry],
    }),
    releaseFailures: new Counter({
      name: 'berth_sandbox_release_failures_total',
      help: 'Attempts to end a sandbox that failed because its provider could not be reached or refused; retried with backoff, the Agent keeps its finalizer',
      labelNames: ['provider'],
      registers: [registry],
    }),
    checkpointDuration: new Histogram({
      name: 'berth_sandbox_checkpoint_duration_seconds',
      help: 'Time to checkpoint a sandbox onto its host on pause, by providers that keep the checkpoint there (the archive follows: berth_snapshot_archive_duration_seconds, which also times the pause of other providers)',
      labelNames: ['provider'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    provisionDuration: new Histogram({
      name: 'berth_sandbox_provision_duration_seconds',
      help: 'Time to provision (or adopt) a sandbox',
      labelNames: ['provider', 'result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
  };
}

export interface AgentReconcilerDeps {
  store: ResourceStore;
  db: Queryable;
  providers: ProviderRegistry;
  clock: Clock;
  metrics: AgentMetrics;
  snapshots: SnapshotStorage;
  /** Charges a sandbox's last minutes as soon as it is released (the billing loop does the rest). */
  meter?: ComputeMeter;
  /** Asks for a reconcile of a Snapshot whose agent's status this reconcile changed (ADR 21). */
  onSnapshotChange?: (snapshotName: string) => void;
  /**
   * The values of secrets of the agent's organization and session: by default those it names
   * for its sandbox's environment, else `names` (those its egress credentials are bound to).
   */
  secrets?: AgentSecrets;
  /** The install's currency, that of `status.cost`. */
  currency: string;
  /** Warm pools (ADR 45): new agents claim a sandbox that fits, and the pool it came from is reconciled to refill. */
  warmPools?: { metrics: WarmPoolMetrics; onPoolChange: (poolName: string) => void };
}

/** The status of a snapshot whose archive is stored. */
export function readySnapshotStatus(generation: number, archive: CheckpointResult, readyAt: Date): SnapshotStatus {
  return {
    state: 'ready',
    observedGeneration: generation,
    conditions: [],
    level: archive.level,
    sizeBytes: archive.sizeBytes,
    location: archive.key,
    sha256: archive.sha256,
    readyAt: readyAt.toISOString(),
  };
}

/** Snapshots keep their archive until the operator has deleted it from storage. */
export const ARCHIVE_FINALIZER = 'berth.dev/archive';

/** How soon a pause waiting for a run's tool call looks again. */
export const PAUSE_WAIT_MS = 500;
/** How soon a resume waiting for its snapshot's archive (on a host without its checkpoint) looks again. */
export const SNAPSHOT_WAIT_MS = 1_000;
/** Under `lifecycle.onTimeout: pause` the sandbox is provisioned this much longer than the timeout, so the platform's own deadline (a pod's activeDeadlineSeconds) cannot end it before its pause. */
export const TIMEOUT_PAUSE_GRACE_SECONDS = 600;

type AgentResource = Resource<'Agent'>;

function initialStatus(): AgentStatus {
  return { phase: 'booting', observedGeneration: 0, conditions: [] };
}

/**
 * Level-triggered: reads the Agent and drives its sandbox towards the spec, whatever
 * happened before. Running it twice in a row changes nothing the second time.
 */
export function createAgentReconciler(deps: AgentReconcilerDeps): Reconciler {
  const { store, providers, clock, metrics } = deps;

  return async function reconcileAgent(name: string, log: Logger): Promise<ReconcileResult> {
    // The agent's task and its spend so far are read beside the agent (in one statement, one round
    // trip's wait), and before anything else of this reconcile: the reconciler alone writes what they
    // make of the status (its run, status.cost, BudgetOK).
    const agentId = objectNameToId(name);
    const [agent, { task, spentNanocents: spent }] = await Promise.all([store.get('Agent', name), taskHoldAndSpendOf(deps.db, agentId)]);
    if (!agent) {
      metrics.phases.delete(name);
      return {};
    }
    const previous = agent.status ?? initialStatus();
    const observed = { task, spentCents: nanocentsToCents(spent), currency: deps.currency };
    let provider: SandboxProvider | undefined;
    let unavailable: string | undefined;
    try {
      provider = await providers.holding(agent.spec, previous.provider);
    } catch (error) {
      unavailable = (error as Error).message;
    }

    if (agent.metadata.deletionTimestamp) return finalize(agent, previous, provider, unavailable, observed, log);

    const step = new ReconcileStep(agent, previous, clock.now(), observed);
    if (agent.spec.lifecycle?.idle) step.activity = await agentActivity(deps.db, agentId);
    let result: ReconcileResult = {};
    let failure: unknown;
    try {
      if (provider) result = await converge(step, provider, log);
      else if (unavailable !== undefined && useFallback(step, unavailable)) result = { requeueAfterMs: 0 };
      else if (unavailable !== undefined) {
        const providerName = step.status.provider ?? agent.spec.provider;
        if (agent.spec.desiredState === 'terminated' && step.status.sandbox) {
          metrics.releaseFailures.inc({ provider: providerName });
          step.observeSandbox(false, AgentReason.ReleaseFailed, `terminating: provider ${providerName} is unavailable, retrying: ${unavailable}`);
        }
        throw new ProviderError(providerName, unavailable);
      }
      else result = step.fail('provider_error', `provider "${step.status.provider ?? agent.spec.provider}" is not configured on this install`);
    } catch (error) {
      failure = error;
    }
    step.settle();
    let wroteVersion: string | undefined;
    const { claim } = step;
    if (!isDeepStrictEqual(step.status, previous)) {
      // The events and the objects this reconcile made (a pause's Snapshot) commit with the status
      // (one commit, not one each: each is an fsync on the way to the agent's answer), and not at
      // all when the status write loses a race; the events are inserted by the status write's own
      // statement (one round trip). So does a warm claim made in the status write's transaction.
      const events = step.events.length > 0 ? { events: { events: step.events, at: step.now, db: deps.db } } : {};
      const creates = step.creates.length > 0 ? { creates: step.creates } : {};
      const within = claim ? { within: claim.tx } : {};
      try {
        wroteVersion = (await store.updateStatus('Agent', name, step.status, { resourceVersion: agent.metadata.resourceVersion, ...events, ...creates, ...within })).metadata.resourceVersion;
      } catch (error) {
        if (claim) await abandonClaim(claim, log);
        throw error;
      }
      claim?.committed();
      if (previous.sandbox && !step.status.sandbox) await settleCompute(agent, step.status, step.now, log);
    } else {
      for (const { kind, input } of step.creates) await createUnlessExists(kind, input as CreateInput<typeof kind>);
      await recordEvents(deps.db, step.events, step.now);
    }
    // Not written with a status (none to write): the claim cannot stand alone.
    if (claim && !claim.tx.ended) await abandonClaim(claim, log);
    // After the status write: the Snapshot reconciler reads the agent's status to know what to do.
    for (const snapshotId of step.snapshotsToWake) deps.onSnapshotChange?.(idToObjectName(snapshotId));
    if (step.refillPool) deps.warmPools?.onPoolChange(step.refillPool);
    if (step.idleAction && !failure) await actOnIdle(agent, step.idleAction, log);
    if (step.pauseAtTimeout && !failure) await pauseAtTimeout(agent, log);
    // Test keys' agents run on a mock and use no compute: counting them would inflate capacity dashboards.
    if (agent.spec.mode === 'live') metrics.phases.set(name, { provider: agent.spec.provider, phase: step.status.phase });
    if (failure) throw failure;
    return { ...untilLeaseEnds(result, task), ...(wroteVersion ? { wroteVersion } : {}) };
  };

  /**
   * The agent had no traffic for its `lifecycle.idle.pauseAfter` (or `terminateAfter`): it is asked
   * to pause, as the pause route does, with reason `idle` (its next exec, run, file or port call
   * resumes it: ADR 45), or to end, with `terminateReason: idle`. The spec changes only if nothing
   * else did since this reconcile read it, and traffic that came meanwhile, or a call in flight
   * (both read again just before), keeps it as it is.
   */
  async function actOnIdle(agent: AgentResource, idle: IdleAction, log: Logger): Promise<void> {
    const latest = await agentActivity(deps.db, objectNameToId(agent.metadata.name));
    if (latest.callsInFlight > 0 || (latest.lastActivity && latest.lastActivity.getTime() > idle.since.getTime())) return;
    let changed = false;
    await store
      .updateSpec('Agent', agent.metadata.name, (current) => {
        if (current.metadata.generation !== agent.metadata.generation) return undefined;
        const idlePaused = current.spec.desiredState === 'paused' && current.spec.pauseReason === 'idle';
        if (idle.action === 'pause' && current.spec.desiredState !== 'active') return undefined;
        if (idle.action === 'terminate' && current.spec.desiredState !== 'active' && !idlePaused) return undefined;
        changed = true;
        if (idle.action === 'pause') return { ...current.spec, desiredState: 'paused', pauseReason: 'idle' };
        return { ...current.spec, desiredState: 'terminated', terminateReason: 'idle' };
      })
      .catch((error: unknown) => {
        if (!isStoreError(error, 'NotFound') && !isStoreError(error, 'Conflict')) throw error;
      });
    if (!changed) return;
    const provider = agent.status?.provider ?? agent.spec.provider;
    const policy = agent.spec.lifecycle?.idle;
    if (idle.action === 'pause') {
      metrics.idlePauses.inc({ provider });
      log.info({ idleSince: idle.since.toISOString(), pauseAfter: policy?.pauseAfter }, 'agent idle: pausing it');
    } else {
      metrics.lifecycleActions.inc({ provider, action: 'idle_terminate' });
      log.info({ idleSince: idle.since.toISOString(), terminateAfter: policy?.terminateAfter }, 'agent idle: terminating it');
    }
  }

  /**
   * The agent's timeout came under `lifecycle.onTimeout: pause`: it is asked to pause (reason
   * `timeout`) instead of ending; the pause is the ordinary one, and a resume gives it a new lifetime.
   */
  async function pauseAtTimeout(agent: AgentResource, log: Logger): Promise<void> {
    let changed = false;
    await store
      .updateSpec('Agent', agent.metadata.name, (current) => {
        if (current.metadata.generation !== agent.metadata.generation || current.spec.desiredState !== 'active') return undefined;
        changed = true;
        return { ...current.spec, desiredState: 'paused', pauseReason: 'timeout' };
      })
      .catch((error: unknown) => {
        if (!isStoreError(error, 'NotFound') && !isStoreError(error, 'Conflict')) throw error;
      });
    if (!changed) return;
    metrics.lifecycleActions.inc({ provider: agent.status?.provider ?? agent.spec.provider, action: 'timeout_pause' });
    log.info({ timeout: agent.spec.timeout }, 'agent timeout expired: pausing it (lifecycle.onTimeout: pause)');
  }

  /**
   * An idle pause whose checkpoint is about to be taken while a call holds a lease on the agent (it
   * began after the reconcile that decided the pause looked at its traffic): the pause is called
   * off, the agent stays active, and the call keeps its sandbox (ADR 45).
   */
  async function callOffIdlePause(agent: AgentResource, log: Logger): Promise<boolean> {
    if (agent.spec.pauseReason !== 'idle') return false;
    const { callsInFlight } = await agentActivity(deps.db, objectNameToId(agent.metadata.name));
    if (callsInFlight === 0) return false;
    let calledOff = false;
    await store
      .updateSpec('Agent', agent.metadata.name, (current) => {
        if (current.metadata.generation !== agent.metadata.generation || current.spec.desiredState !== 'paused' || current.spec.pauseReason !== 'idle') return undefined;
        calledOff = true;
        const { pauseReason: _reason, ...rest } = current.spec;
        return { ...rest, desiredState: 'active' };
      })
      .catch((error: unknown) => {
        if (!isStoreError(error, 'NotFound') && !isStoreError(error, 'Conflict')) throw error;
      });
    if (!calledOff) return false;
    metrics.lifecycleActions.inc({ provider: agent.status?.provider ?? agent.spec.provider, action: 'idle_pause_called_off' });
    log.info({ callsInFlight }, 'idle pause called off: a call is in flight on the agent');
    return true;
  }

  /**
   * An Agent being deleted: its sandbox is ended before the finalizer goes, so that nothing
   * keeps running (and costing) unseen. A provider that cannot be asked, or fails, keeps the
   * finalizer: the error retries with the work queue's backoff and the reason shows in a
   * condition. A sandbox its provider no longer knows counts as ended.
   */
  async function finalize(
    agent: AgentResource,
    previous: AgentStatus,
    provider: SandboxProvider | undefined,
    unavailable: string | undefined,
    observed: ConstructorParameters<typeof ReconcileStep>[3],
    log: Logger,
  ): Promise<ReconcileResult> {
    const name = agent.metadata.name;
    if (agent.metadata.finalizers.includes(SANDBOX_FINALIZER)) {
      const providerName = previous.provider ?? agent.spec.provider;
      try {
        if (unavailable !== undefined) throw new ProviderError(providerName, `provider ${providerName} is unavailable: ${unavailable}`);
        if (provider) await terminateSandbox(provider, previous.sandbox ?? sandboxOf(agent, provider));
        else log.warn({ provider: providerName }, 'the provider of this agent is not configured on this install; nothing can end its sandbox');
      } catch (error) {
        metrics.releaseFailures.inc({ provider: providerName });
        const message = `deleting: the sandbox could not be ended, retrying (the finalizer ${SANDBOX_FINALIZER} stays until it is): ${(error as Error).message}`;
        const step = new ReconcileStep(agent, previous, clock.now(), observed);
        step.observeSandbox(false, AgentReason.ReleaseFailed, message);
        step.settle();
        if (!isDeepStrictEqual(step.status, previous)) {
          await store.updateStatus('Agent', name, step.status, { resourceVersion: agent.metadata.resourceVersion }).catch((writeError: unknown) => {
            if (!isStoreError(writeError, 'Conflict') && !isStoreError(writeError, 'NotFound')) throw writeError;
          });
        }
        throw error;
      }
      if (previous.sandbox) await settleCompute(agent, { ...previous, computeEndedAt: clock.now().toISOString() }, clock.now(), log);
      await store.removeFinalizer('Agent', name, SANDBOX_FINALIZER);
      log.info('agent deleted; sandbox released');
    }
    metrics.phases.delete(name);
    return {};
  }

  /** Charges the compute of a sandbox just released; the billing loop retries what fails here. */
  async function settleCompute(agent: AgentResource, status: AgentStatus, now: Date, log: Logger): Promise<void> {
    if (!deps.meter || agent.spec.mode !== 'live') return;
    try {
      await deps.meter.meter({ ...agent, status }, await sessionEnvironment(agent), now, true);
    } catch (error) {
      log.warn({ err: error }, 'charging the released sandbox failed; the billing loop charges it');
    }
  }

  async function sessionEnvironment(agent: AgentResource): Promise<Environment> {
    return (await store.get('Session', idToObjectName(agent.spec.sessionId)))?.spec.environment ?? 'production';
  }

  /**
   * Pausing: wait for a run's tool call in flight (the runner stops after it), checkpoint the
   * sandbox, release the compute. A provider that can keep the checkpoint on its host does so, and
   * the agent is paused as soon as it is on disk: the Snapshot reconciler archives it afterwards
   * (ADR 21). Others store the archive here, before the compute goes. Each step is idempotent, so
   * a crash half-way ends the same way on the next reconcile.
   */
  async function pause(step: ReconcileStep, provider: SandboxProvider, log: Logger): Promise<ReconcileResult> {
    const { agent, status } = step;
    if (!status.sandbox) {
      // Paused already, or nothing ran yet: there is nothing to keep.
      if (step.previousPhase !== 'paused') step.observeSandbox(false, AgentReason.Paused, 'paused before its sandbox started');
      return {};
    }
    // The Paused condition says that the pause waits for the run.
    if (step.task?.state === 'running') return { requeueAfterMs: PAUSE_WAIT_MS };
    // Right before the checkpoint: a call that took its lease since the pause was decided keeps the sandbox.
    if (await callOffIdlePause(agent, log)) return {};
    const snapshotId = snapshotIdFor(agent);
    const native = provider.capabilities.checkpoint === 'native';
    if (provider.checkpointLocally) {
      const timer = metrics.checkpointDuration.startTimer({ provider: provider.name });
      const { level } = await provider.checkpointLocally(status.sandbox, { key: archiveKey(snapshotId), native });
      timer();
      // Created with the status that names it, in one commit (its first status is its creator's).
      step.create({ kind: 'Snapshot', input: snapshotInput(agent, snapshotId, provider, { state: 'creating', observedGeneration: 0, conditions: [], level }) });
      paused(step, snapshotId, { level });
      step.wakeSnapshot(snapshotId);
      log.info({ snapshotId, level }, 'agent paused; its checkpoint is on disk, the archive follows');
      return {};
    }
    // The Snapshot reconciler checkpoints the sandbox and stores the archive (the sandbox goes
    // with it); this agent stays pausing until its Snapshot says how that went.
    const snapshot = await ensureSnapshot(agent, snapshotId, provider);
    const stored = snapshot.status;
    if (stored?.state === 'ready') {
      paused(step, snapshotId, { level: stored.level ?? 'filesystem', sizeBytes: stored.sizeBytes ?? 0 }, stored.readyAt);
      log.info({ snapshotId, level: stored.level, sizeBytes: stored.sizeBytes }, 'agent paused');
      return {};
    }
    if (stored?.state === 'failed') {
      return step.fail(stored.error?.code ?? 'checkpoint_failed', `the pause failed: snapshot ${snapshotId}: ${stored.error?.message ?? 'failed'}`, AgentReason.PauseFailed);
    }
    step.wakeSnapshot(snapshotId);
    return {};
  }

  /** The sandbox is checkpointed and gone: the agent is paused into `snapshotId`. */
  function paused(step: ReconcileStep, snapshotId: string, saved: { level: string; sizeBytes?: number }, computeEndedAt?: string): void {
    const { agent, status } = step;
    delete status.sandbox;
    delete status.expiresAt;
    status.computeEndedAt = computeEndedAt ?? clock.now().toISOString();
    status.snapshot = snapshotId;
    const size = saved.sizeBytes === undefined ? 'archive being stored' : `${saved.sizeBytes} bytes`;
    step.observeSandbox(false, AgentReason.Paused, `paused; snapshot ${snapshotId} (${saved.level}, ${size})`);
    step.emit('agent.paused', { snapshotId, reason: agent.spec.pauseReason ?? 'requested', ...saved }, String(agent.metadata.generation));
  }

  async function ensureSnapshot(agent: AgentResource, snapshotId: string, provider: SandboxProvider): Promise<Resource<'Snapshot'>> {
    return createUnlessExists('Snapshot', snapshotInput(agent, snapshotId, provider, { state: 'creating', observedGeneration: 0, conditions: [] }));
  }

  /** Creates the object, or reads the one of its kind and name that an earlier reconcile made. */
  async function createUnlessExists<K extends Kind>(kind: K, input: CreateInput<K>): Promise<Resource<K>> {
    try {
      return await store.create(kind, input);
    } catch (error) {
      if (!isStoreError(error, 'AlreadyExists')) throw error;
      return (await store.get(kind, input.name))!;
    }
  }

  /** Terminating an agent deletes its snapshots (their archives go with the Snapshot finalizer). */
  async function deleteSnapshotsOf(agent: AgentResource): Promise<void> {
    const { items } = await store.list('Snapshot', { labels: { [Labels.agent]: agent.metadata.name } });
    for (const snapshot of items) {
      if (snapshot.metadata.deletionTimestamp) continue;
      await store.delete('Snapshot', snapshot.metadata.name).catch((error: unknown) => {
        if (!isStoreError(error, 'NotFound')) throw error;
      });
    }
  }

  /**
   * The snapshot to provision from, when the spec asks for one not restored yet. A snapshot still
   * `creating` is restored by the provider that keeps its checkpoint on this host, from there;
   * anywhere else the resume waits for its archive.
   */
  async function restoreSource(agent: AgentResource, status: AgentStatus, provider: SandboxProvider): Promise<RestoreSource | undefined> {
    const wanted = agent.spec.restoreFrom;
    if (!wanted || status.restoredFrom === wanted.snapshotId) return undefined;
    const snapshot = await store.get('Snapshot', idToObjectName(wanted.snapshotId));
    const state = snapshot?.metadata.deletionTimestamp ? 'deleting' : snapshot?.status?.state;
    const key = archiveKey(wanted.snapshotId);
    if (state === 'creating' && provider.checkpointLocally && snapshot!.spec.provider === provider.name) {
      return { storage: deps.snapshots, key, level: wanted.level, ...(wanted.fork ? { takenOf: snapshot!.spec.agentId } : {}) };
    }
    if (state === 'creating') {
      throw new SandboxNotReadyError(provider.name, `waiting for the archive of snapshot ${wanted.snapshotId}`, SNAPSHOT_WAIT_MS);
    }
    if (!snapshot?.status || state !== 'ready' || !snapshot.status.location || !snapshot.status.sha256) {
      throw new UnsupportedRequestError(provider.name, `snapshot ${wanted.snapshotId} is ${state ?? 'gone'}; it cannot be restored`);
    }
    return {
      storage: deps.snapshots,
      key,
      archive: { key: snapshot.status.location, sizeBytes: snapshot.status.sizeBytes ?? 0, sha256: snapshot.status.sha256 },
      level: wanted.level,
      ...(wanted.fork ? { takenOf: snapshot.spec.agentId } : {}),
    };
  }

  /**
   * A new agent takes a ready sandbox of a warm pool that fits it (ADR 45): the row is claimed in
   * one statement, then the provider gives the sandbox the agent's name and environment (its
   * secrets, which the pool's sandbox never had). No pool, or none ready that fits: undefined, and
   * the agent starts cold. A claimed sandbox the provider cannot hand over is ended.
   */
  async function claimWarm(step: ReconcileStep, provider: SandboxProvider, request: ProvisionRequest, log: Logger): Promise<{ sandbox: SandboxRef; pool: string } | undefined> {
    const { agent } = step;
    const warmPools = deps.warmPools;
    if (!warmPools || !provider.claimWarm || agent.spec.gpu !== undefined || agent.spec.storage !== undefined) return undefined;
    // A provider that applies an egress policy where it makes the sandbox (a pod's spec, ADR 52)
    // cannot give it to a warm one: such an agent starts cold.
    if (request.egress && !provider.capabilities.egressOnClaim) return undefined;
    const started = performance.now();
    const labels = { provider: provider.name, compute: agent.spec.compute };
    const shape = { organizationId: agent.spec.organizationId, mode: agent.spec.mode, provider: provider.name, compute: agent.spec.compute, browser: agent.spec.browser, definition: agent.spec.definition };
    // Where the hand-over is quick work on this host and the agent's status is a row of the same
    // database, the claim commits with the status write: one commit for both (ADR 45). Until then
    // the row is locked by this transaction, and others' claims skip it.
    const tx = provider.capabilities.handOverInTransaction && store.beginTransaction ? await store.beginTransaction() : undefined;
    let claimed: Awaited<ReturnType<typeof claimWarmSandbox>>;
    try {
      claimed = await claimWarmSandbox(tx?.client ?? deps.db, shape, request.agentId, step.now);
    } catch (error) {
      await tx?.rollback();
      throw error;
    }
    const { sandbox: warm, pooled, fresh } = claimed;
    const claimedAt = performance.now();
    if (!warm) {
      await tx?.rollback();
      if (pooled) warmPools.metrics.misses.inc(labels);
      return undefined;
    }
    const counted = () => {
      // A reconcile that ran again before it saw its own status write (a pod watch's event) gets the
      // same sandbox back: one claim, counted once.
      if (!fresh) return;
      warmPools.metrics.claims.inc(labels);
      warmPools.metrics.claimDuration.observe({ provider: provider.name }, (performance.now() - started) / 1000);
    };
    const ref = { provider: provider.name, id: warm.id, details: { agentId: request.agentId } };
    let sandbox: SandboxRef;
    try {
      sandbox = await provider.claimWarm({ provider: provider.name, id: warm.id }, request);
    } catch (error) {
      log.warn({ warmSandbox: warm.id, err: error }, 'the claimed warm sandbox could not be handed over; ending it and starting cold');
      if (tx) await abandonClaim({ tx, pool: warm.pool, provider, ref, committed: counted }, log);
      else {
        warmPools.onPoolChange(warm.pool);
        await provider.terminate(ref).catch(() => undefined);
      }
      return undefined;
    }
    // Refilled once this reconcile wrote the agent idle: the new sandbox's start (a burst of CPU)
    // does not compete with the claim.
    step.refillPool = warm.pool;
    if (tx) step.claim = { tx, pool: warm.pool, provider, ref, committed: counted };
    else counted();
    const handedAt = performance.now();
    log.info(
      { warmSandbox: warm.id, pool: objectNameToId(warm.pool), again: !fresh, claimMs: Math.round((claimedAt - started) * 10) / 10, handOverMs: Math.round((handedAt - claimedAt) * 10) / 10 },
      'claimed a warm sandbox',
    );
    return { sandbox, pool: warm.pool };
  }

  /**
   * A claim that will not commit (its hand-over failed, or the status write it was to commit with
   * did not happen): rolled back, and the sandbox ended, as it may hold the agent's secrets now; its
   * row goes first, so that no other agent claims it meanwhile, and the pool starts a replacement.
   */
  async function abandonClaim(claim: WarmClaim, log: Logger): Promise<void> {
    const agentId = claim.ref.details!.agentId as string;
    let forgotten = false;
    if (!claim.tx.ended) {
      // Still open: the row goes in the claim's own transaction (it holds its lock), then commits.
      try {
        forgotten = await abandonWarmClaim(claim.tx.client, claim.ref.id, agentId);
        await claim.tx.commit();
      } catch (error) {
        forgotten = false;
        await claim.tx.rollback();
        log.warn({ warmSandbox: claim.ref.id, err: error }, 'forgetting an abandoned warm claim in its transaction failed');
      }
    }
    if (!forgotten) forgotten = await abandonWarmClaim(deps.db, claim.ref.id, agentId);
    deps.warmPools?.onPoolChange(claim.pool);
    // Another agent's claim of it committed meanwhile (its hand-over never reached this one): theirs.
    if (!forgotten) return;
    log.info({ warmSandbox: claim.ref.id }, 'a warm claim did not commit; its sandbox is ended');
    await claim.provider.terminate(claim.ref).catch((error: unknown) => log.warn({ warmSandbox: claim.ref.id, err: error }, 'ending the sandbox of an abandoned warm claim failed'));
  }

  async function converge(step: ReconcileStep, provider: SandboxProvider, log: Logger): Promise<ReconcileResult> {
    const { agent, status, now } = step;

    if (step.previousPhase === 'terminated' || step.previousPhase === 'failed') {
      await step.release(provider);
      step.keepEnding();
      return {};
    }
    if (agent.spec.desiredState === 'terminated') {
      try {
        await step.release(provider, { unrecorded: true });
      } catch (error) {
        metrics.releaseFailures.inc({ provider: provider.name });
        step.observeSandbox(false, AgentReason.ReleaseFailed, `terminating: the sandbox could not be ended, retrying: ${(error as Error).message}`);
        throw error;
      }
      await deleteSnapshotsOf(agent);
      if (agent.spec.lifecycle?.idle) await forgetAgentActivity(deps.db, objectNameToId(agent.metadata.name));
      status.endedAt = now.toISOString();
      const message =
        agent.spec.terminateReason === 'idle'
          ? `the agent was terminated after ${agent.spec.lifecycle?.idle?.terminateAfter} without traffic (lifecycle.idle.terminateAfter); its sandbox and files are gone`
          : 'the agent was terminated; its sandbox and files are gone';
      step.observeSandbox(false, AgentReason.Terminated, message);
      // Berth ended it on its own: the event says why (a terminate asked through the API is its caller's answer).
      if (agent.spec.terminateReason) step.emit('agent.terminated', { reason: agent.spec.terminateReason, terminateAfter: agent.spec.lifecycle?.idle?.terminateAfter });
      step.end({ outcome: 'terminated', message });
      log.info('agent terminated');
      return {};
    }
    // A timeout changed on a running agent (PATCH /v1/agents/:id) moves its deadline: still from when its sandbox started.
    if (status.startedAt && status.expiresAt) {
      const expiresAt = new Date(Date.parse(status.startedAt) + agent.spec.timeoutSeconds * 1000).toISOString();
      if (expiresAt !== status.expiresAt) status.expiresAt = expiresAt;
    }
    // A paused agent has no sandbox, so no deadline runs; resuming starts a new lifetime.
    const expired = step.previousPhase !== 'paused' && status.expiresAt !== undefined && now.getTime() >= Date.parse(status.expiresAt);
    if (expired && agent.spec.lifecycle?.onTimeout === 'pause' && status.sandbox) {
      // Paused by checkpoint instead of ended: asked after the status write (unless a pause is under way already).
      if (agent.spec.desiredState !== 'paused') {
        step.pauseAtTimeout = true;
        return {};
      }
    } else if (expired) {
      await step.release(provider, { unrecorded: true });
      log.info({ timeout: agent.spec.timeout }, 'agent timeout expired');
      return step.fail('timeout', `the agent's timeout of ${agent.spec.timeout} expired; its sandbox was ended`, AgentReason.DeadlineExceeded);
    }

    if (agent.spec.desiredState === 'paused') {
      const result = await pause(step, provider, log);
      // An agent paused by its idle policy is looked at again when its terminateAfter comes.
      const untilTerminate = agent.spec.pauseReason === 'idle' && step.status.phase !== 'failed' ? idleDeadline(step) : Infinity;
      return Number.isFinite(untilTerminate) ? { requeueAfterMs: Math.min(result.requeueAfterMs ?? Infinity, untilTerminate) } : result;
    }

    const sandboxState = status.sandbox ? await provider.state(status.sandbox) : 'missing';
    if (sandboxState === 'expired') {
      await step.release(provider, { unrecorded: true });
      log.info({ timeout: agent.spec.timeout }, 'the platform ended the sandbox at its deadline');
      return step.fail('timeout', `the agent's timeout of ${agent.spec.timeout} expired; its sandbox was ended`, AgentReason.DeadlineExceeded);
    }
    if (sandboxState === 'pending') {
      step.observeSandbox(false, AgentReason.Provisioning, 'the sandbox is starting');
      return { requeueAfterMs: PENDING_RECHECK_MS };
    }
    if (sandboxState !== 'running') {
      const lost = status.sandbox !== undefined;
      const onFailure = agent.spec.lifecycle?.onFailure;
      if (lost && onFailure) {
        const restarts = status.restarts ?? 0;
        if (restarts >= onFailure.restart) {
          await step.release(provider, { unrecorded: true });
          metrics.restarts.inc({ provider: provider.name, result: 'exhausted' });
          log.warn({ restarts, allowed: onFailure.restart }, 'the sandbox died and no restart is left: the agent fails');
          const times = onFailure.restart === 1 ? 'once' : `${onFailure.restart} times`;
          return step.fail(
            'sandbox_lost',
            onFailure.restart === 0
              ? 'the sandbox died (lifecycle.onFailure.restart is 0)'
              : `the sandbox died again after it was restarted ${times} (lifecycle.onFailure.restart: ${onFailure.restart})`,
            AgentReason.RestartLimitReached,
          );
        }
        status.restarts = restarts + 1;
        metrics.restarts.inc({ provider: provider.name, result: 'restarted' });
        step.emit('agent.restarted', { restart: status.restarts, allowed: onFailure.restart, reason: `the sandbox was ${sandboxState === 'missing' ? 'gone' : sandboxState}` }, `restart/${status.restarts}`);
      }
      const timer = metrics.provisionDuration.startTimer({ provider: provider.name });
      let sandbox: SandboxRef;
      let restore: RestoreSource | undefined;
      try {
        restore = await restoreSource(agent, status, provider);
      } catch (error) {
        if (!(error instanceof SandboxNotReadyError)) throw error;
        step.observeSandbox(false, AgentReason.Provisioning, error.message);
        return { requeueAfterMs: error.retryAfterMs };
      }
      let warmPool: string | undefined;
      try {
        const request: ProvisionRequest = {
          ...(restore ? { restore } : {}),
          agentId: objectNameToId(agent.metadata.name),
          sessionId: agent.spec.sessionId,
          // Under onTimeout: pause the reconciler pauses the agent at its timeout: the platform must not end the sandbox first.
          timeoutSeconds: agent.spec.timeoutSeconds + (agent.spec.lifecycle?.onTimeout === 'pause' ? TIMEOUT_PAUSE_GRACE_SECONDS : 0),
          owner: { apiVersion: API_VERSION, kind: 'Agent', name: agent.metadata.name, uid: agent.metadata.uid },
          compute: agent.spec.compute,
          browser: agent.spec.browser,
          gpu: agent.spec.gpu,
          storage: agent.spec.storage,
          env: agent.spec.secrets?.length && deps.secrets ? await deps.secrets(agent) : {},
          ...(agent.spec.egress ? { egress: await sandboxEgressOf(agent, deps.secrets) } : {}),
        };
        const warm = restore || lost ? undefined : await claimWarm(step, provider, request, log);
        warmPool = warm?.pool;
        sandbox = warm?.sandbox ?? (await provider.provision(request));
        timer({ result: warm ? 'warm' : 'success' });
      } catch (error) {
        const message = (error as Error).message;
        if (error instanceof SandboxNotReadyError) {
          timer({ result: 'pending' });
          step.observeSandbox(false, AgentReason.Provisioning, message);
          return { requeueAfterMs: error.retryAfterMs };
        }
        timer({ result: 'error' });
        if (restore && error instanceof ProviderError && error.details.corrupted === true) {
          return step.fail('snapshot_corrupted', message, AgentReason.RestoreFailed);
        }
        if (error instanceof UnsupportedRequestError) return step.fail('unsupported_request', message, AgentReason.ProvisionFailed);
        if (!restore && !lost && useFallback(step, message)) return { requeueAfterMs: 0 };
        if (now.getTime() - Date.parse(agent.metadata.creationTimestamp) > PROVISION_DEADLINE_MS) {
          return step.fail('provider_error', `provisioning did not succeed within ${PROVISION_DEADLINE_MS / 60_000} minutes: ${message}`, AgentReason.ProvisionFailed);
        }
        step.observeSandbox(false, AgentReason.ProvisionFailed, `provisioning failed, retrying: ${message}`);
        throw error;
      }
      status.sandbox = sandbox;
      const readyAt = clock.now();
      if (restore) {
        status.restoredFrom = agent.spec.restoreFrom!.snapshotId;
        // Its checkpoint kept on this host may go now (once archived): the Snapshot reconciler decides.
        step.wakeSnapshot(status.restoredFrom);
        step.observeSandbox(true, AgentReason.Restored, `restored from snapshot ${status.restoredFrom} (${restore.level} level)`);
      } else if (lost) {
        log.warn('sandbox was gone; recreated it with the same workspace');
        step.observeSandbox(true, AgentReason.SandboxLost, 'the sandbox was gone and has been recreated');
      } else if (warmPool) {
        step.observeSandbox(true, AgentReason.Provisioned, `the sandbox is running (claimed from warm pool ${objectNameToId(warmPool)})`);
      } else if (status.provider !== undefined && status.provider !== agent.spec.provider) {
        step.observeSandbox(true, AgentReason.Provisioned, `the sandbox is running on the fallback ${status.provider} (${status.fallbackReason})`);
      } else {
        step.observeSandbox(true, AgentReason.Provisioned, 'the sandbox is running');
      }
      if (restore || !status.startedAt) {
        status.startedAt = readyAt.toISOString();
        status.expiresAt = new Date(readyAt.getTime() + agent.spec.timeoutSeconds * 1000).toISOString();
      }
      if (step.previousPhase === 'booting' || step.previousPhase === 'paused') {
        const onFallback = status.provider !== undefined && status.provider !== agent.spec.provider;
        step.emit('agent.started', {
          provider: sandbox.provider === 'mock' ? (status.provider ?? agent.spec.provider) : sandbox.provider,
          compute: agent.spec.compute,
          ...(onFallback ? { fallbackFrom: agent.spec.provider, fallbackReason: status.fallbackReason } : {}),
        });
        log.info({ provider: provider.name }, 'agent ready');
      }
    }
    // The policy as the spec says now (PATCH /v1/agents/:id changes it while the sandbox runs), with
    // its credentials' current values: set again at each reconcile, as a provider restarted since forgets it.
    if (agent.spec.egress && provider.setEgress && status.sandbox) await provider.setEgress(status.sandbox, await sandboxEgressOf(agent, deps.secrets));
    const untilExpiry = Date.parse(status.expiresAt!) - clock.now().getTime();
    const untilIdle = idleDeadline(step);
    return { requeueAfterMs: Math.max(0, Math.min(untilExpiry, HEALTH_CHECK_INTERVAL_MS, untilIdle)) };
  }
}

/**
 * How long until an agent with an idle policy has been without traffic for `pauseAfter` (while
 * active) or `terminateAfter` (active, or paused by the idle policy); at or past one, `step.idleAction`
 * is set and the reconcile acts after its status write. An agent with a run queued or in progress is
 * not idle (its own tool calls are traffic), nor one with a call in flight (its lease), nor one that
 * has just started: its clock starts at `startedAt` (after a wake, the resume).
 */
function idleDeadline(step: ReconcileStep): number {
  const idle = step.agent.spec.lifecycle?.idle;
  const { desiredState, pauseReason } = step.agent.spec;
  const idlePaused = desiredState === 'paused' && pauseReason === 'idle';
  if (!idle || (desiredState !== 'active' && !idlePaused) || step.task !== undefined || !step.status.startedAt) return Infinity;
  const pauseAfterMs = idle.pauseAfter !== undefined && desiredState === 'active' ? parseDuration(idle.pauseAfter)! * 1000 : Infinity;
  const terminateAfterMs = idle.terminateAfter !== undefined ? parseDuration(idle.terminateAfter)! * 1000 : Infinity;
  // A call in flight: looked at again after the shorter wait; its end is traffic and starts the clock again.
  if ((step.activity?.callsInFlight ?? 0) > 0) return Math.min(pauseAfterMs, terminateAfterMs);
  // A run's end is traffic too: the Running condition turned False then.
  const runEnded = findCondition(step.status.conditions, AgentCondition.Running)?.lastTransitionTime;
  const since = Math.max(Date.parse(step.status.startedAt), step.activity?.lastActivity?.getTime() ?? 0, runEnded ? Date.parse(runEnded) : 0);
  const idleFor = step.now.getTime() - since;
  if (idleFor >= terminateAfterMs) {
    step.idleAction = { action: 'terminate', since: new Date(since) };
    return Infinity;
  }
  if (idleFor >= pauseAfterMs) {
    step.idleAction = { action: 'pause', since: new Date(since) };
    return Infinity;
  }
  return Math.min(pauseAfterMs, terminateAfterMs) - idleFor;
}

/**
 * The primary provider is unavailable: when the agent has a fallback it has not moved to yet,
 * it moves there (recorded in status, and in agent.started once it runs).
 */
function useFallback(step: ReconcileStep, reason: string): boolean {
  const { spec } = step.agent;
  if (!spec.providerFallback || step.status.provider === spec.providerFallback || step.status.sandbox) return false;
  step.status.provider = spec.providerFallback;
  step.status.fallbackReason = `provider ${spec.provider} is unavailable: ${reason}`;
  step.observeSandbox(false, AgentReason.Provisioning, `${step.status.fallbackReason}; provisioning on the fallback ${spec.providerFallback}`);
  return true;
}

/** While a runner holds the agent's task, its lease is looked at again when it would run out. */
function untilLeaseEnds(result: ReconcileResult, task: TaskHold | undefined): ReconcileResult {
  if (!task?.held) return result;
  const leaseEnds = task.leaseRemainingMs + LEASE_RECHECK_MARGIN_MS;
  return { requeueAfterMs: Math.min(result.requeueAfterMs ?? leaseEnds, leaseEnds) };
}

/** Ends a sandbox; one its provider answers "not found" for is already ended. */
async function terminateSandbox(provider: SandboxProvider, sandbox: SandboxRef): Promise<void> {
  try {
    await provider.terminate(sandbox);
  } catch (error) {
    if (error instanceof ProviderError && error.details.status === 404) return;
    throw error;
  }
}

/** Providers name sandboxes after their agent, so the sandbox of an agent can be found without its status. */
function sandboxOf(agent: AgentResource, provider: SandboxProvider): SandboxRef {
  return { provider: provider.name, id: objectNameToId(agent.metadata.name) };
}

/**
 * One reconcile of an agent: the status it computes, what it observed and did, and the events it
 * will record. Conditions and phase are computed once, at the end, from the observation (`settle`).
 */
class ReconcileStep {
  readonly status: AgentStatus;
  readonly events: EventInput[] = [];
  /** Snapshots whose reconcile this one's outcome concerns (a checkpoint to archive or to discard). */
  readonly snapshotsToWake: string[] = [];
  /** Objects to create with the status write: `create`. */
  readonly creates: CreateRequest[] = [];
  /** The phase the agent had when the reconcile began. */
  readonly previousPhase: AgentPhase;
  private sandboxWord: AgentObservation['sandbox'];
  readonly task: TaskHold | undefined;
  private ending: AgentEnding | undefined;
  /** When the agent last had traffic (exec, run, file, port) and its calls in flight, for its idle policy; read only when it has one. */
  activity: AgentActivity | undefined;
  /** Set when the agent has been idle past its `lifecycle.idle.pauseAfter` or `terminateAfter`: the reconcile pauses or ends it. */
  idleAction: IdleAction | undefined;
  /** Set when the agent's timeout came under `lifecycle.onTimeout: pause`: the reconcile asks for the pause. */
  pauseAtTimeout = false;
  /** The warm pool this reconcile claimed a sandbox from, to refill after the status write. */
  refillPool: string | undefined;
  /** A warm claim whose transaction is still open: it commits with the status write. */
  claim: WarmClaim | undefined;

  constructor(
    readonly agent: AgentResource,
    private readonly previous: AgentStatus,
    readonly now: Date,
    /** The agent's queued or running task and its spend, read before anything else in this reconcile. */
    private readonly read: { task: TaskHold | undefined; spentCents: number; currency: string },
  ) {
    this.task = read.task;
    this.status = structuredClone(previous);
    this.status.observedGeneration = agent.metadata.generation;
    this.previousPhase = previous.phase;
  }

  /** The word on the sandbox: what this reconcile found it in, or did to it. */
  observeSandbox(ready: boolean, reason: string, message: string): void {
    this.sandboxWord = { ready, reason, message };
  }

  wakeSnapshot(snapshotId: string): void {
    this.snapshotsToWake.push(snapshotId);
  }

  /** An object this reconcile made, created with its status write (unless it exists already). */
  create(request: CreateRequest): void {
    this.creates.push(request);
  }

  end(ending: AgentEnding): void {
    this.ending = ending;
  }

  /**
   * An agent that ended before its status had the Terminated or Failed condition (written by an
   * earlier version) keeps its ending: the phase it had then is the record of it.
   */
  keepEnding(): void {
    const last = findCondition(this.previous.conditions, AgentCondition.SandboxReady);
    if (findCondition(this.previous.conditions, AgentCondition.Terminated) || findCondition(this.previous.conditions, AgentCondition.Failed)) return;
    if (this.previousPhase === 'terminated') this.end({ outcome: 'terminated', message: last?.message ?? 'the agent was terminated' });
    else this.end({ outcome: 'failed', reason: last?.reason ?? AgentReason.ProvisionFailed, message: this.previous.error?.message ?? last?.message ?? 'the agent failed' });
  }

  /** Computes the conditions from what was observed, and the phase from them: the only place either is written. */
  settle(): void {
    const observed: AgentObservation = {
      ...(this.sandboxWord ? { sandbox: this.sandboxWord } : {}),
      ...(this.ending ? { ended: this.ending } : {}),
      hasSandbox: this.status.sandbox !== undefined,
      snapshot: this.status.snapshot,
      task: this.task,
      spentCents: this.read.spentCents,
    };
    if (this.read.spentCents > 0 || this.previous.cost) this.status.cost = { amount: this.read.spentCents, currency: this.read.currency };
    this.status.conditions = computeConditions(observed, { metadata: this.agent.metadata, spec: this.agent.spec, status: this.previous }, this.now);
    this.status.phase = derivePhase(this.status.conditions);
  }

  /** `instance` tells repeated occurrences apart (each pause of an agent is one). */
  emit(type: EventInput['type'], data: Record<string, unknown>, instance = ''): void {
    const { spec, metadata } = this.agent;
    const agentId = objectNameToId(metadata.name);
    this.events.push({
      type,
      organizationId: spec.organizationId,
      mode: spec.mode,
      subjectId: agentId,
      occurrence: `${metadata.uid}/${type}${instance ? `/${instance}` : ''}`,
      data: { agentId, sessionId: spec.sessionId, userId: spec.userId, ...data },
    });
  }

  fail(code: string, message: string, reason: string = AgentReason.ProvisionFailed): ReconcileResult {
    this.status.error = { code, message };
    this.status.endedAt = this.now.toISOString();
    this.observeSandbox(false, reason, message);
    this.end({ outcome: 'failed', reason, message });
    this.emit('agent.failed', { error: { code, message } });
    return {};
  }

  /**
   * Ends the sandbox. With `unrecorded`, also one the status does not name: a provision that
   * succeeded in a reconcile whose status write then lost a race left no record of it.
   */
  async release(provider: SandboxProvider, options: { unrecorded?: boolean } = {}): Promise<void> {
    const sandbox = this.status.sandbox ?? (options.unrecorded ? sandboxOf(this.agent, provider) : undefined);
    if (!sandbox) return;
    await terminateSandbox(provider, sandbox);
    if (this.status.sandbox) this.status.computeEndedAt = this.now.toISOString();
    delete this.status.sandbox;
  }
}

/** A warm sandbox claimed and handed over in a transaction not yet committed (ADR 45). */
interface WarmClaim {
  tx: OpenTransaction;
  pool: string;
  provider: SandboxProvider;
  /** The claimed sandbox, with its agent's id: what ends both its names if the claim does not commit. */
  ref: SandboxRef;
  /** Counts the claim, once it has committed. */
  committed: () => void;
}

/** What an agent's idle policy does now: pause or end it, idle since `since`. */
interface IdleAction {
  action: 'pause' | 'terminate';
  since: Date;
}

/** The Snapshot of a pause of `agent` into `snapshotId`, made by `provider`, with its first status. Pure. */
export function snapshotInput(agent: Resource<'Agent'>, snapshotId: string, provider: Pick<SandboxProvider, 'name'>, status: SnapshotStatus): CreateInput<'Snapshot'> {
  return {
    name: idToObjectName(snapshotId),
    labels: {
      [Labels.organization]: agent.spec.organizationId,
      [Labels.mode]: agent.spec.mode,
      [Labels.session]: idToObjectName(agent.spec.sessionId),
      [Labels.agent]: agent.metadata.name,
    },
    ownerReferences: [{ kind: 'Agent', name: agent.metadata.name, uid: agent.metadata.uid, controller: true }],
    finalizers: [ARCHIVE_FINALIZER],
    spec: {
      organizationId: agent.spec.organizationId,
      mode: agent.spec.mode,
      agentId: objectNameToId(agent.metadata.name),
      sessionId: agent.spec.sessionId,
      provider: provider.name === 'mock' ? agent.spec.provider : provider.name,
      type: 'pause',
    },
    status,
  };
}

/** One snapshot per pause: its id comes from the agent and the spec generation that asked. */
export function snapshotIdFor(agent: Resource<'Agent'>): string {
  return `snap_${eventIdFor(`${agent.metadata.uid}/pause/${agent.metadata.generation}`).slice(4)}`;
}

/** Where a snapshot's archive is stored. No extension: its compression depends on the provider that made it. */
export function archiveKey(snapshotId: string): string {
  return snapshotId;
}

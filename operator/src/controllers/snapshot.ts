import {
  LATENCY_BUCKETS,
  ProviderError,
  idToObjectName,
  objectNameToId,
  recordSnapshotDeleted,
  recordSnapshotStored,
  type Clock,
  type Logger,
  type Queryable,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
  type SnapshotStorage,
  UnsupportedRequestError,
  type CheckpointResult,
} from '@berth/common';
import type { SnapshotStatus } from '@berth/crds';
import type { ProviderRegistry } from '@berth/providers';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { ARCHIVE_FINALIZER, archiveKey, readySnapshotStatus, snapshotIdFor } from './agent.js';

export interface SnapshotMetrics {
  archiveDuration: Histogram<'provider' | 'result'>;
  keptDiscarded: Counter<'provider'>;
}

export function createSnapshotMetrics(registry: Registry): SnapshotMetrics {
  return {
    archiveDuration: new Histogram({
      name: 'berth_snapshot_archive_duration_seconds',
      help: 'Time to store the archive of a snapshot: of a checkpoint kept on the host, after its agent was paused, or of a sandbox being paused, checkpointed by its provider; result success, error, cancelled (by a resume of the agent, made again), lost or refused',
      labelNames: ['provider', 'result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    keptDiscarded: new Counter({
      name: 'berth_snapshot_kept_checkpoints_discarded_total',
      help: 'Checkpoints kept on the host that were removed once archived and no longer needed for a resume there',
      labelNames: ['provider'],
      registers: [registry],
    }),
  };
}

export interface SnapshotReconcilerDeps {
  store: ResourceStore;
  db: Queryable;
  storage: SnapshotStorage;
  providers: ProviderRegistry;
  clock: Clock;
  metrics: SnapshotMetrics;
  /** Asks for a reconcile of the Agent whose pause this reconcile's status write finished. */
  onAgentChange?: (agentName: string) => void;
}

/**
 * Owns what a snapshot holds outside the store (ADR 21), and is its status's only writer after
 * the Agent reconciler created it `creating`:
 * - A pause by a provider that keeps its checkpoint on the host: the agent is paused already;
 *   this reconciler archives the checkpoint into storage and makes the Snapshot `ready`, then
 *   removes the kept checkpoint once the agent no longer needs it for a resume there.
 * - A pause by any other provider (Kubernetes, remote, the test keys' mock): the agent waits,
 *   `pausing`, with its sandbox; this reconciler has the provider checkpoint the sandbox into
 *   storage (which ends the sandbox), makes the Snapshot `ready` and wakes the agent, which is
 *   then paused. The minutes an archive can take hold a Snapshot worker, not an Agent one.
 * When a Snapshot is deleted, its archive and kept checkpoint go, its storage time is closed, and
 * then it goes.
 */
export function createSnapshotReconciler(deps: SnapshotReconcilerDeps): Reconciler {
  const { store, providers, metrics } = deps;

  return async function reconcileSnapshot(name: string, log: Logger): Promise<ReconcileResult> {
    const snapshot = await store.get('Snapshot', name);
    if (!snapshot) return {};
    const agentId = snapshot.spec.agentId;
    const provider = keeper(snapshot);
    if (snapshot.metadata.deletionTimestamp) {
      if (!snapshot.metadata.finalizers.includes(ARCHIVE_FINALIZER)) return {};
      // By key as well as location: an archive stored by a reconcile whose status write was lost.
      await deps.storage.delete(snapshot.status?.location ?? archiveKey(objectNameToId(name)));
      await provider?.discardCheckpoint?.(agentId, archiveKey(objectNameToId(name)));
      await recordSnapshotDeleted(deps.db, objectNameToId(name), deps.clock.now());
      await store.removeFinalizer('Snapshot', name, ARCHIVE_FINALIZER);
      log.info({ location: snapshot.status?.location }, 'snapshot deleted; archive released');
      return {};
    }
    const agent = await store.get('Agent', idToObjectName(agentId));
    const state = snapshot.status?.state ?? 'creating';
    if (!provider) return state === 'creating' ? checkpointSandbox(snapshot, agent, log) : {};
    if (state === 'creating') {
      if (!checkpointOnDisk(snapshot, agent)) return {}; // the agent's reconcile asks again once it is
      return (await archive(snapshot, provider, agent, log)) ? { requeueAfterMs: 0 } : {};
    }
    if (state === 'ready' && !neededOnHost(snapshot, agent)) {
      const discarded = await provider.discardCheckpoint?.(agentId, archiveKey(objectNameToId(name)));
      if (discarded) {
        metrics.keptDiscarded.inc({ provider: provider.name });
        log.info({ agentId }, 'checkpoint kept on the host removed: archived, and no longer needed for a resume there');
      }
    }
    return {};
  };

  /** The provider that keeps checkpoints on its host and made this snapshot; test keys' snapshots have none. */
  function keeper(snapshot: Resource<'Snapshot'>): SandboxProvider | undefined {
    if (snapshot.spec.mode !== 'live') return undefined;
    const provider = providers.get(snapshot.spec.provider);
    return provider?.archiveCheckpoint ? provider : undefined;
  }

  /** Archives the snapshot and makes it ready (or failed, when its checkpoint is lost); true when it must be tried again at once. */
  async function archive(snapshot: Resource<'Snapshot'>, provider: SandboxProvider, agent: Resource<'Agent'> | undefined, log: Logger): Promise<boolean> {
    const snapshotId = objectNameToId(snapshot.metadata.name);
    const timer = metrics.archiveDuration.startTimer({ provider: provider.name });
    let result;
    try {
      result = await provider.archiveCheckpoint!(snapshot.spec.agentId, { storage: deps.storage, key: archiveKey(snapshotId) });
      timer({ result: 'success' });
    } catch (error) {
      if (error instanceof ProviderError && error.details.lost === true) {
        timer({ result: 'lost' });
        await writeStatus(snapshot, {
          ...(snapshot.status ?? { observedGeneration: 0, conditions: [] }),
          state: 'failed',
          observedGeneration: snapshot.metadata.generation,
          error: { code: 'snapshot_lost', message: error.message },
        });
        log.error({ err: error }, 'the checkpoint kept on the host is gone and was never archived: the snapshot failed');
        return false;
      }
      if (error instanceof ProviderError && error.details.cancelled === true) {
        timer({ result: 'cancelled' });
        // By a resume of its agent (the archive is made again from the workspace as it was paused), or by its end (the snapshot goes with it).
        log.info({ snapshotId, reason: error.message }, 'archive cancelled; reconciled again');
        return true;
      }
      timer({ result: 'error' });
      throw error; // retried with backoff: the kept checkpoint is still there
    }
    await stored(snapshot, agent, result);
    log.info({ snapshotId, level: result.level, sizeBytes: result.sizeBytes }, 'snapshot archived; ready');
    return false;
  }

  /**
   * The pause of a provider without a kept checkpoint: checkpoints the agent's sandbox into
   * storage while the agent waits for it, pausing into this snapshot with its sandbox still
   * there. A pause given up (the agent terminated or deleted meanwhile) is left to the agent,
   * whose end deletes its snapshots. Errors retry with backoff; a provider's refusal is final.
   */
  async function checkpointSandbox(snapshot: Resource<'Snapshot'>, agent: Resource<'Agent'> | undefined, log: Logger): Promise<ReconcileResult> {
    const snapshotId = objectNameToId(snapshot.metadata.name);
    const sandbox = agent?.status?.sandbox;
    if (!agent || !sandbox || agent.metadata.deletionTimestamp || agent.spec.desiredState !== 'paused' || snapshotIdFor(agent) !== snapshotId) return {};
    const provider = await providers.holding(agent.spec, agent.status?.provider);
    if (!provider) throw new ProviderError(agent.status?.provider ?? agent.spec.provider, 'the provider of this snapshot\'s agent is not configured on this install');
    const timer = metrics.archiveDuration.startTimer({ provider: provider.name });
    let result: CheckpointResult;
    try {
      result = await provider.checkpoint(sandbox, { storage: deps.storage, key: archiveKey(snapshotId), native: provider.capabilities.checkpoint === 'native' });
      timer({ result: 'success' });
    } catch (error) {
      if (!(error instanceof UnsupportedRequestError)) {
        timer({ result: 'error' });
        throw error;
      }
      timer({ result: 'refused' });
      await writeStatus(snapshot, {
        ...(snapshot.status ?? { observedGeneration: 0, conditions: [] }),
        state: 'failed',
        observedGeneration: snapshot.metadata.generation,
        error: { code: 'unsupported_request', message: error.message },
      });
      log.error({ err: error }, 'the provider refused to checkpoint the sandbox: the snapshot failed');
      deps.onAgentChange?.(agent.metadata.name);
      return {};
    }
    await stored(snapshot, agent, result);
    log.info({ snapshotId, level: result.level, sizeBytes: result.sizeBytes }, 'sandbox checkpointed into its snapshot; ready');
    deps.onAgentChange?.(agent.metadata.name);
    return {};
  }

  /** The snapshot is `ready` with its archive, and its storage time starts. */
  async function stored(snapshot: Resource<'Snapshot'>, agent: Resource<'Agent'> | undefined, result: CheckpointResult): Promise<void> {
    const readyAt = deps.clock.now();
    await writeStatus(snapshot, readySnapshotStatus(snapshot.metadata.generation, result, readyAt));
    const { spec } = snapshot;
    const session = await store.get('Session', idToObjectName(spec.sessionId));
    await recordSnapshotStored(deps.db, {
      snapshotId: objectNameToId(snapshot.metadata.name),
      organizationId: spec.organizationId,
      mode: spec.mode,
      sessionId: spec.sessionId,
      agentId: spec.agentId,
      userId: agent?.spec.userId ?? session?.spec.userId ?? '',
      environment: session?.spec.environment ?? 'production',
      sizeBytes: result.sizeBytes,
      at: readyAt,
    });
  }

  async function writeStatus(snapshot: Resource<'Snapshot'>, status: SnapshotStatus): Promise<void> {
    await store.updateStatus('Snapshot', snapshot.metadata.name, status, { resourceVersion: snapshot.metadata.resourceVersion });
  }
}

/**
 * Whether the checkpoint of a `creating` snapshot is on the host's disk, ready to archive: the
 * Agent reconciler creates the Snapshot, with the level reached, only after it is; and the agent
 * names its snapshot only after it is (a Snapshot made before a checkpoint that was cut short).
 * Pure.
 */
export function checkpointOnDisk(snapshot: Pick<Resource<'Snapshot'>, 'metadata' | 'status'>, agent: Pick<Resource<'Agent'>, 'status'> | undefined): boolean {
  return snapshot.status?.level !== undefined || agent?.status?.snapshot === objectNameToId(snapshot.metadata.name);
}

/**
 * Whether the checkpoint kept on the host may still serve a resume there: while its agent is
 * paused into this snapshot and has not been restored from it. Pure.
 */
export function neededOnHost(snapshot: Pick<Resource<'Snapshot'>, 'metadata'>, agent: Pick<Resource<'Agent'>, 'status'> | undefined): boolean {
  const snapshotId = objectNameToId(snapshot.metadata.name);
  const status = agent?.status;
  if (!status || status.phase === 'terminated' || status.phase === 'failed') return false;
  return status.snapshot === snapshotId && status.restoredFrom !== snapshotId;
}

import { isDeepStrictEqual } from 'node:util';
import { formatDuration, WARM_SANDBOXES_FINALIZER, WarmPoolCondition, WarmPoolReason, type WarmPoolStatus } from '@berth/crds';
import {
  deleteWarmSandbox,
  deleteWarmSandboxesOf,
  insertWarmSandbox,
  isStoreError,
  markWarmSandboxReady,
  newId,
  objectNameToId,
  SandboxNotReadyError,
  warmSandboxesOf,
  type Clock,
  type Logger,
  type Queryable,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
  type WarmSandbox,
} from '@berth/common';
import type { ProviderRegistry } from '@berth/providers';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { setCondition } from './conditions.js';

/** How often a pool's ready sandboxes are checked for life when nothing else happens. */
export const WARM_POOL_CHECK_MS = 30_000;
/** How soon a pool whose sandboxes failed to start tries again. */
export const WARM_POOL_RETRY_MS = 5_000;
/** How long a warm sandbox may take to start (a pod Pending) before it is ended and another started. */
export const WARM_START_TIMEOUT_MS = 5 * 60_000;
/**
 * How long after a claim its pool starts the replacement: the start (a `runsc run`, a burst of
 * CPU) then does not compete with the answer to the client that waits for the claimed agent, nor
 * with its first call.
 */
export const WARM_REFILL_DELAY_MS = 100;
/** How many of one pool's sandboxes start at once. */
const STARTS_AT_ONCE = 2;

export interface WarmPoolMetrics {
  claims: Counter<'provider' | 'compute'>;
  misses: Counter<'provider' | 'compute'>;
  claimDuration: Histogram<'provider'>;
  starts: Counter<'provider' | 'result'>;
  /** Size and ready sandboxes of each pool, reported at scrape time. */
  pools: Map<string, { compute: string; size: number; ready: number }>;
}

export function createWarmPoolMetrics(registry: Registry): WarmPoolMetrics {
  const pools = new Map<string, { compute: string; size: number; ready: number }>();
  new Gauge({
    name: 'berth_warm_pool_size',
    help: 'Sandboxes each warm pool is asked to keep ready (spec.size)',
    labelNames: ['pool', 'compute'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, { compute, size }] of pools) this.set({ pool, compute }, size);
    },
  });
  new Gauge({
    name: 'berth_warm_pool_ready',
    help: 'Unclaimed sandboxes of each warm pool that are ready to be claimed',
    labelNames: ['pool', 'compute'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [pool, { compute, ready }] of pools) this.set({ pool, compute }, ready);
    },
  });
  return {
    pools,
    claims: new Counter({
      name: 'berth_warm_pool_claims_total',
      help: 'Agents whose sandbox was claimed from a warm pool',
      labelNames: ['provider', 'compute'],
      registers: [registry],
    }),
    misses: new Counter({
      name: 'berth_warm_pool_misses_total',
      help: 'Agents of an organization with warm pools that found no ready sandbox that fits (compute, browser, definition) and were started cold',
      labelNames: ['provider', 'compute'],
      registers: [registry],
    }),
    claimDuration: new Histogram({
      name: 'berth_warm_pool_claim_duration_seconds',
      help: 'Time to claim a warm sandbox for an agent and give it the agent (its row taken, its environment written)',
      labelNames: ['provider'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
      registers: [registry],
    }),
    starts: new Counter({
      name: 'berth_warm_pool_sandbox_starts_total',
      help: 'Sandboxes started to fill warm pools, by result',
      labelNames: ['provider', 'result'],
      registers: [registry],
    }),
  };
}

export interface WarmPoolReconcilerDeps {
  store: ResourceStore;
  db: Queryable;
  providers: ProviderRegistry;
  clock: Clock;
  metrics: WarmPoolMetrics;
  /** WARM_START_TIMEOUT_MS unless given (BERTH_WARM_START_TIMEOUT). */
  startTimeoutMs?: number;
}

type Pool = Resource<'WarmPool'>;

/**
 * Level-triggered: keeps `spec.size` unclaimed sandboxes of the pool started (replacing those that
 * died, ending those over the size), and ends them all before a deleted pool goes. Agent creation
 * claims sandboxes (rows of `warm_sandboxes`) and enqueues the pool; this reconciler alone starts
 * and ends unclaimed ones and writes the pool's status.
 */
export function createWarmPoolReconciler(deps: WarmPoolReconcilerDeps): Reconciler {
  const { store, db, providers, clock, metrics } = deps;
  const startTimeoutMs = deps.startTimeoutMs ?? WARM_START_TIMEOUT_MS;
  /**
   * Pools whose starts failed, until when they wait and why: a reconcile that an event brings
   * sooner (the pool's own status write is one) starts nothing before WARM_POOL_RETRY_MS.
   */
  const backoff = new Map<string, { until: number; problem: { reason: string; message: string } }>();

  return async function reconcileWarmPool(name: string, log: Logger): Promise<ReconcileResult> {
    const pool = await store.get('WarmPool', name);
    if (!pool) {
      metrics.pools.delete(name);
      backoff.delete(name);
      return {};
    }
    const provider = providers.get(pool.spec.provider);
    const rows = await warmSandboxesOf(db, name);
    const unclaimed = rows.filter((row) => row.state !== 'claimed');

    if (pool.metadata.deletionTimestamp) {
      // Its unclaimed sandboxes end with it; claimed ones are their agents' now.
      for (const row of unclaimed) {
        if (provider) await provider.terminate({ provider: provider.name, id: row.id });
        await deleteWarmSandbox(db, row.id);
      }
      await deleteWarmSandboxesOf(db, name);
      if (pool.metadata.finalizers.includes(WARM_SANDBOXES_FINALIZER)) await store.removeFinalizer('WarmPool', name, WARM_SANDBOXES_FINALIZER);
      metrics.pools.delete(name);
      backoff.delete(name);
      log.info({ ended: unclaimed.length }, 'warm pool deleted; its sandboxes ended');
      return {};
    }

    const now = clock.now();
    let problem: { reason: string; message: string } | undefined;
    let retryAfterMs: number | undefined;
    let waiting: string | undefined;
    const held = backoff.get(name);
    if (!provider?.startWarm) {
      problem = { reason: WarmPoolReason.Unsupported, message: `provider "${pool.spec.provider}" cannot keep warm sandboxes on this install` };
    } else if (held && held.until > now.getTime()) {
      ({ problem } = held);
      retryAfterMs = held.until - now.getTime();
    } else {
      ({ problem, retryAfterMs, waiting } = await fill(pool, provider, unclaimed, log));
      if (problem?.reason === WarmPoolReason.StartFailed) backoff.set(name, { until: now.getTime() + WARM_POOL_RETRY_MS, problem });
      else backoff.delete(name);
    }

    const after = await warmSandboxesOf(db, name);
    const ready = after.filter((row) => row.state === 'ready').length;
    const previous = pool.status;
    const status: WarmPoolStatus = {
      observedGeneration: pool.metadata.generation,
      ready,
      starting: after.filter((row) => row.state === 'starting').length,
      claims: after.filter((row) => row.state === 'claimed').length,
      conditions: setCondition(
        previous?.conditions ?? [],
        problem
          ? { type: WarmPoolCondition.Filled, status: 'False', observedGeneration: pool.metadata.generation, ...problem }
          : ready >= pool.spec.size
            ? { type: WarmPoolCondition.Filled, status: 'True', reason: WarmPoolReason.Filled, message: `${ready} sandboxes ready`, observedGeneration: pool.metadata.generation }
            : {
                type: WarmPoolCondition.Filled,
                status: 'False',
                reason: WarmPoolReason.Filling,
                message: `${ready} of ${pool.spec.size} sandboxes ready${waiting ? `; ${waiting}` : ''}`,
                observedGeneration: pool.metadata.generation,
              },
        now,
      ),
    };
    let wroteVersion: string | undefined;
    if (!isDeepStrictEqual(status, previous)) {
      wroteVersion = await store
        .updateStatus('WarmPool', name, status, { resourceVersion: pool.metadata.resourceVersion })
        .then((written) => written.metadata.resourceVersion)
        .catch((error: unknown) => {
          // A claim or a change of size came meanwhile: the next reconcile writes it.
          if (!isStoreError(error, 'Conflict')) throw error;
          return undefined;
        });
    }
    metrics.pools.set(objectNameToId(name), { compute: pool.spec.compute, size: pool.spec.size, ready });
    const requeueAfterMs = Math.min(retryAfterMs ?? Infinity, problem?.reason === WarmPoolReason.StartFailed ? WARM_POOL_RETRY_MS : WARM_POOL_CHECK_MS);
    return { requeueAfterMs, ...(wroteVersion ? { wroteVersion } : {}) };
  };

  /**
   * Ends the pool's dead and surplus sandboxes and starts what is missing; the problem that kept it
   * from being full, if any, and how soon to look again at sandboxes still on their way (a
   * provider whose start returns before the sandbox runs, as a pod's, says SandboxNotReadyError:
   * the row stays `starting` and the next reconcile asks again).
   */
  async function fill(
    pool: Pool,
    provider: SandboxProvider,
    unclaimed: WarmSandbox[],
    log: Logger,
  ): Promise<{ problem?: { reason: string; message: string }; retryAfterMs?: number; waiting?: string }> {
    const name = pool.metadata.name;
    const live: WarmSandbox[] = [];
    for (const row of unclaimed) {
      // A `starting` row is one a crash interrupted (starts finish within a reconcile): started again below.
      if (row.state === 'ready' && (await provider.state({ provider: provider.name, id: row.id })) !== 'running') {
        log.warn({ sandbox: row.id }, 'a warm sandbox died; it is replaced');
        await endSandbox(provider, row);
        continue;
      }
      live.push(row);
    }
    // Over the size (it was lowered): the newest go first.
    for (const row of live.splice(pool.spec.size).reverse()) await endSandbox(provider, row);

    const toStart = [
      ...live.filter((row) => row.state === 'starting').map((row) => row.id),
      ...Array.from({ length: Math.max(0, pool.spec.size - live.length) }, () => newId('wsb', clock.now())),
    ];
    const failures: string[] = [];
    /** Why sandboxes still on their way are not running yet (a pod Pending, and its reason). */
    const waiting: string[] = [];
    let retryAfterMs: number | undefined;
    for (let at = 0; at < toStart.length; at += STARTS_AT_ONCE) {
      await Promise.all(
        toStart.slice(at, at + STARTS_AT_ONCE).map(async (id) => {
          try {
            if (!live.some((row) => row.id === id)) {
              const { organizationId, mode, compute, browser, definition } = pool.spec;
              await insertWarmSandbox(db, { id, pool: name, shape: { organizationId, mode, provider: provider.name, compute, browser, definition } }, clock.now());
            }
            await provider.startWarm!({ id, compute: pool.spec.compute, browser: pool.spec.browser });
            await markWarmSandboxReady(db, id, clock.now());
            metrics.starts.inc({ provider: provider.name, result: 'started' });
          } catch (error) {
            const since = live.find((row) => row.id === id)?.createdAt.getTime();
            const late = since !== undefined && clock.now().getTime() - since >= startTimeoutMs;
            if (error instanceof SandboxNotReadyError && !late) {
              retryAfterMs = Math.min(retryAfterMs ?? Infinity, error.retryAfterMs);
              waiting.push(error.message);
              return;
            }
            metrics.starts.inc({ provider: provider.name, result: 'failed' });
            // Still not running at its deadline (a pod unschedulable, an image never pulled): ended, and
            // another started after WARM_POOL_RETRY_MS, so a cluster that changes gets its pool filled.
            failures.push(late ? `not started within ${formatDuration(Math.round(startTimeoutMs / 1000))}: ${(error as Error).message}` : (error as Error).message);
            log.warn({ sandbox: id, err: error }, 'starting a warm sandbox failed; retrying');
            await provider.terminate({ provider: provider.name, id }).catch(() => undefined);
            await deleteWarmSandbox(db, id);
          }
        }),
      );
    }
    const later = retryAfterMs === undefined ? {} : { retryAfterMs };
    if (failures.length > 0) return { problem: { reason: WarmPoolReason.StartFailed, message: `${failures.length} sandboxes failed to start: ${failures[0]}` }, ...later };
    return { ...later, ...(waiting.length > 0 ? { waiting: waiting[0] } : {}) };
  }

  async function endSandbox(provider: SandboxProvider, row: WarmSandbox): Promise<void> {
    // The row goes first: from then on no claim can take it.
    if (await deleteWarmSandbox(db, row.id)) await provider.terminate({ provider: provider.name, id: row.id });
  }
}

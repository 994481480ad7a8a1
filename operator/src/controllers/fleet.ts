import {
  appendFleetStreamEvent,
  cancelPendingItems,
  claimNextItems,
  enqueueJob,
  getFleetRecord,
  markFleetEnded,
  markFleetStarted,
  objectNameToId,
  recordEvent,
  renderFleetTask,
  settleFinishedItems,
  tallyFleet,
  withTransaction,
  type Clock,
  type FleetOutcome,
  type FleetTally,
  type Logger,
  type Pool,
  type PoolClient,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { Condition, FleetStatus } from '@berth/crds';
import { Counter, type Registry } from 'prom-client';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { setCondition } from './conditions.js';

export const FleetConditions = {
  /** True once the fleet ended (every item ended, or it was stopped); the reason says how. */
  Finished: 'Finished',
} as const;

export const FleetReasons = {
  Running: 'Running',
  Completed: 'Completed',
  AllFailed: 'AllFailed',
  CostLimit: 'CostLimit',
  SessionLimit: 'SessionLimit',
  Cancelled: 'Cancelled',
  NoItems: 'NoItems',
} as const;

/** How soon a fleet with open items is looked at again without a wake-up (a job's end wakes it at once). */
export const FLEET_POLL_MS = 2_000;

export interface FleetMetrics {
  claimed: Counter;
  settled: Counter<'state'>;
  ended: Counter<'outcome'>;
}

export function createFleetMetrics(registry: Registry): FleetMetrics {
  return {
    claimed: new Counter({ name: 'berth_fleet_items_started_total', help: 'Fleet items given their job (each item once)', registers: [registry] }),
    settled: new Counter({
      name: 'berth_fleet_items_finished_total',
      help: 'Fleet items whose job ended, by the item state it left: completed, failed, cancelled',
      labelNames: ['state'],
      registers: [registry],
    }),
    ended: new Counter({
      name: 'berth_fleets_ended_total',
      help: 'Fleets that ended, by outcome: completed, cost_limit, session_limit, cancelled',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}

export interface FleetReconcilerDeps {
  store: ResourceStore;
  db: Pool;
  clock: Clock;
  metrics: FleetMetrics;
  currency: string;
  /** Cancels the fleet's open jobs (queued and running) in the caller's transaction; returns how many. */
  cancelOpenJobs: (tx: PoolClient, fleetId: string, now: Date) => Promise<number>;
  pollMs?: number;
}

/** What ends a fleet that has not ended, from its spec and its items; undefined while it goes on. */
export function fleetStop(spec: Resource<'Fleet'>['spec'], tally: FleetTally): FleetOutcome | undefined {
  if (spec.cancelled) return 'cancelled';
  // Every item ended: nothing is left to stop, whatever the last ones spent.
  if (tally.pending === 0 && tally.running === 0) return 'completed';
  if (spec.costCap && tally.costCents >= spec.costCap.amount) return 'cost_limit';
  if (tally.sessionLimited > 0) return 'session_limit';
  return undefined;
}

/** The Finished condition from the fleet's outcome and items (pure). */
export function fleetCondition(outcome: FleetOutcome | null, tally: FleetTally, generation: number): Omit<Condition, 'lastTransitionTime'> {
  const total = tally.pending + tally.running + tally.completed + tally.failed + tally.cancelled;
  const counts = `${tally.completed} completed, ${tally.failed} failed, ${tally.cancelled} cancelled of ${total}`;
  const base = { type: FleetConditions.Finished, observedGeneration: generation };
  switch (outcome) {
    case null:
      return { ...base, status: 'False', reason: FleetReasons.Running, message: `${tally.running} running, ${tally.pending} waiting; ${counts}` };
    case 'completed':
      if (total === 0) return { ...base, status: 'True', reason: FleetReasons.NoItems, message: 'the fleet has no items' };
      return tally.completed === 0 && tally.failed > 0
        ? { ...base, status: 'True', reason: FleetReasons.AllFailed, message: `every item failed; ${counts}` }
        : { ...base, status: 'True', reason: FleetReasons.Completed, message: counts };
    case 'cost_limit':
      return { ...base, status: 'True', reason: FleetReasons.CostLimit, message: `the cost cap was reached; the rest cancelled; ${counts}` };
    case 'session_limit':
      return { ...base, status: 'True', reason: FleetReasons.SessionLimit, message: `the session's limits refused an item; the rest cancelled; ${counts}` };
    case 'cancelled':
      return { ...base, status: 'True', reason: FleetReasons.Cancelled, message: `cancelled; ${counts}` };
  }
}

/** The user-visible phase, from the Finished condition alone. */
export function fleetPhase(condition: Pick<Condition, 'status' | 'reason'>): FleetStatus['phase'] {
  if (condition.status !== 'True') return 'running';
  switch (condition.reason) {
    case FleetReasons.AllFailed:
      return 'failed';
    case FleetReasons.CostLimit:
    case FleetReasons.SessionLimit:
      return 'paused';
    case FleetReasons.Cancelled:
      return 'cancelled';
    default:
      return 'completed';
  }
}

const REASON_OF: Partial<Record<FleetOutcome, string>> = { cost_limit: 'cost_limit', session_limit: 'session_limit', cancelled: 'cancelled' };

/**
 * The Fleet reconciler (leader only). Level-triggered on the fleet's spec and its rows: it
 * announces the start once, settles the items whose jobs ended (their events written with the
 * change), stops the fleet when it is cancelled, reached its cost cap or was refused by its
 * session's limits (cancelling the items not ended), claims the next pending items while fewer
 * than `concurrency` are open (the claim and the job in one transaction, see common/src/fleets.ts),
 * announces the end once every item ended, and writes the status. Running it twice, after a
 * crash or on two replicas, runs no item twice and writes no event twice.
 */
export function createFleetReconciler(deps: FleetReconcilerDeps): Reconciler {
  const { store, db, clock, currency, metrics } = deps;

  return async function reconcileFleet(name: string, log: Logger): Promise<ReconcileResult> {
    const fleet = await store.get('Fleet', name);
    if (!fleet || fleet.metadata.deletionTimestamp) return {};
    const { spec } = fleet;
    const fleetId = objectNameToId(name);
    const record = await getFleetRecord(db, fleetId);
    if (!record) {
      log.warn({ fleetId }, 'the fleet has no rows (its creation did not finish); nothing to run');
      return {};
    }
    const scope = { organizationId: spec.organizationId, mode: spec.mode, subjectId: fleetId };
    const money = (cents: number) => ({ amount: cents, currency });

    if (!record.startedAt) {
      await withTransaction(db, async (tx) => {
        const now = clock.now();
        if (!(await markFleetStarted(tx, fleetId, now))) return;
        const data = { fleetId, total: spec.itemCount, concurrency: spec.concurrency };
        await recordEvent(tx, { ...scope, type: 'fleet.started', occurrence: `${fleetId}/fleet.started`, data }, now);
        await appendFleetStreamEvent(tx, fleetId, 'fleet.started', data);
      });
    }

    const settled = await withTransaction(db, async (tx) => {
      const now = clock.now();
      const items = await settleFinishedItems(tx, fleetId);
      for (const item of items) {
        const cost = item.cost ?? money(0);
        if (item.state === 'completed') {
          await recordEvent(
            tx,
            { ...scope, type: 'fleet.item_completed', occurrence: `${fleetId}/fleet.item_completed/${item.id}`, data: { fleetId, itemId: item.id, itemIndex: item.index, output: item.output, cost } },
            now,
          );
          await appendFleetStreamEvent(tx, fleetId, 'item.completed', { itemId: item.id, itemIndex: item.index, cost });
        } else if (item.state === 'failed') {
          await appendFleetStreamEvent(tx, fleetId, 'item.failed', { itemId: item.id, itemIndex: item.index, error: item.error, cost });
        }
      }
      return items;
    });
    for (const item of settled) metrics.settled.inc({ state: item.state });
    if (settled.length > 0) log.info({ fleetId, settled: settled.length }, 'fleet items ended');

    let outcome = record.outcome;
    let tally = await tallyFleet(db, fleetId);
    const stop = outcome ? undefined : fleetStop(spec, tally);
    if (stop) {
      const ended = await withTransaction(db, async (tx) => {
        const now = clock.now();
        if (!(await markFleetEnded(tx, fleetId, stop, now))) return false;
        const cancelled = stop === 'completed' ? 0 : (await cancelPendingItems(tx, fleetId, now)) + (await deps.cancelOpenJobs(tx, fleetId, now));
        const cost = money(tally.costCents);
        const processed = tally.completed + tally.failed;
        if (stop === 'completed') {
          await recordEvent(tx, { ...scope, type: 'fleet.completed', occurrence: `${fleetId}/fleet.end`, data: { fleetId, completed: tally.completed, failed: tally.failed, totalCost: cost } }, now);
          await appendFleetStreamEvent(tx, fleetId, 'fleet.completed', { totalCost: cost, completed: tally.completed, failed: tally.failed });
        } else if (stop === 'cancelled') {
          await appendFleetStreamEvent(tx, fleetId, 'fleet.cancelled', { cancelled, processed, totalCost: cost });
        } else {
          if (stop === 'cost_limit') {
            await recordEvent(
              tx,
              { ...scope, type: 'fleet.cost_limited', occurrence: `${fleetId}/fleet.end`, data: { fleetId, cancelled, processed, cost, costCap: spec.costCap } },
              now,
            );
          }
          await appendFleetStreamEvent(tx, fleetId, 'fleet.paused', { reason: stop, cancelled, processed, totalCost: cost });
        }
        return true;
      });
      if (ended) {
        metrics.ended.inc({ outcome: stop });
        log.info({ fleetId, outcome: stop }, 'fleet ended');
        outcome = stop;
      } else {
        // Another reconcile (a replica during a leader change) ended it first: its outcome stands.
        outcome = (await getFleetRecord(db, fleetId))?.outcome ?? null;
      }
      tally = await tallyFleet(db, fleetId);
    }

    if (!outcome) {
      // A session deleted under the fleet fails each item's job (`not_found`), and so ends the fleet.
      const claimed = await withTransaction(db, async (tx) => {
        const now = clock.now();
        return claimNextItems(
          tx,
          fleetId,
          spec.concurrency,
          async (item) =>
            (
              await enqueueJob(
                tx,
                {
                  organizationId: spec.organizationId,
                  mode: spec.mode,
                  source: 'fleet',
                  sourceId: fleetId,
                  userId: spec.userId,
                  sessionId: spec.sessionId,
                  definitionId: spec.definitionId,
                  input: renderFleetTask(spec.prompt, item.input),
                },
                now,
              )
            ).id,
          now,
        );
      });
      if (claimed.length > 0) {
        metrics.claimed.inc(claimed.length);
        log.info({ fleetId, items: claimed.map((item) => item.index) }, 'fleet items started');
        tally = await tallyFleet(db, fleetId);
      }
    }

    const now = clock.now();
    const condition = fleetCondition(outcome, tally, fleet.metadata.generation);
    const reason = outcome ? REASON_OF[outcome] : undefined;
    const status: FleetStatus = {
      phase: fleetPhase(condition),
      observedGeneration: fleet.metadata.generation,
      conditions: setCondition(fleet.status?.conditions ?? [], condition, now),
      completed: tally.completed,
      failed: tally.failed,
      running: tally.running,
      cancelled: tally.cancelled,
      cost: money(tally.costCents),
      ...(reason ? { reason } : {}),
    };
    if (JSON.stringify(status) !== JSON.stringify(fleet.status)) await store.updateStatus('Fleet', name, status);
    return tally.running > 0 || !outcome ? { requeueAfterMs: deps.pollMs ?? FLEET_POLL_MS } : {};
  };
}

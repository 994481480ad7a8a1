import { recordSnapshotDeleted, type Clock, type Logger, type Queryable, type ResourceStore, type SnapshotStorage } from '@berth/common';
import { objectNameToId } from '@berth/common';
import type { ReconcileResult, Reconciler } from '../runtime/controller.js';
import { ARCHIVE_FINALIZER } from './agent.js';

export interface SnapshotReconcilerDeps {
  store: ResourceStore;
  db: Queryable;
  storage: SnapshotStorage;
  clock: Clock;
}

/**
 * Snapshots are made by the Agent reconciler (the checkpoint has to happen before the
 * agent's compute is released); this one releases what they hold: when a Snapshot is
 * deleted, its archive leaves storage, its storage time is closed, and then it goes.
 */
export function createSnapshotReconciler(deps: SnapshotReconcilerDeps): Reconciler {
  return async function reconcileSnapshot(name: string, log: Logger): Promise<ReconcileResult> {
    const snapshot = await deps.store.get('Snapshot', name);
    if (!snapshot?.metadata.deletionTimestamp) return {};
    if (!snapshot.metadata.finalizers.includes(ARCHIVE_FINALIZER)) return {};
    if (snapshot.status?.location) await deps.storage.delete(snapshot.status.location);
    await recordSnapshotDeleted(deps.db, objectNameToId(name), deps.clock.now());
    await deps.store.removeFinalizer('Snapshot', name, ARCHIVE_FINALIZER);
    log.info({ location: snapshot.status?.location }, 'snapshot deleted; archive released');
    return {};
  };
}

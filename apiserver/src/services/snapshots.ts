import {
  ApiError,
  Labels,
  idToObjectName,
  isStoreError,
  newId,
  objectNameToId,
  type Clock,
  type Resource,
  type ResourceStore,
  type SnapshotLevel,
} from '@berth/common';
import { SANDBOX_FINALIZER, type AgentSpec } from '@berth/crds';
import type { ProviderRegistry } from '@berth/providers';
import type { Principal } from '../http/context.js';
import type { LimitGuard } from '@berth/common';
import { findOwned } from './scope.js';

export type SnapshotState = 'creating' | 'ready' | 'failed' | 'deleting';

export function snapshotView(snapshot: Resource<'Snapshot'>) {
  const state: SnapshotState = snapshot.metadata.deletionTimestamp ? 'deleting' : (snapshot.status?.state ?? 'creating');
  return {
    id: objectNameToId(snapshot.metadata.name),
    agentId: snapshot.spec.agentId,
    sessionId: snapshot.spec.sessionId,
    provider: snapshot.spec.provider,
    type: snapshot.spec.type,
    sizeBytes: snapshot.status?.sizeBytes ?? 0,
    state,
    level: snapshot.status?.level,
    createdAt: snapshot.metadata.creationTimestamp,
  };
}

/**
 * How much of a snapshot a resume brings back: everything (`native`) on the provider that made
 * it natively, when it can restore natively; the /workspace files anywhere else.
 */
export function resumeLevel(snapshot: Resource<'Snapshot'>, provider: string, providers: ProviderRegistry): SnapshotLevel {
  const native =
    provider === snapshot.spec.provider &&
    snapshot.status?.level === 'native' &&
    providers.get(provider)?.capabilities.checkpoint === 'native';
  return native ? 'native' : 'filesystem';
}

export function createSnapshotService(deps: { store: ResourceStore; providers: ProviderRegistry; clock: Clock; limits: LimitGuard }) {
  const { store, providers, clock } = deps;
  const find = (principal: Principal, id: string) => findOwned(store, 'Snapshot', 'snap', principal, id);

  /**
   * A new agent of the source agent's session with its settings, started from the snapshot (a
   * resumed snapshot, or one fork). It counts against the session's limits like a created one.
   */
  async function agentFromSnapshot(
    principal: Principal,
    snapshot: Resource<'Snapshot'>,
    source: Resource<'Agent'>,
    target: { provider: string; region?: string | undefined; level: SnapshotLevel; fork?: boolean },
    what: string,
  ): Promise<string> {
    const snapshotId = objectNameToId(snapshot.metadata.name);
    const agentId = newId('agt', clock.now());
    const { restoreFrom: _restoreFrom, pauseReason: _pauseReason, ...settings } = source.spec;
    const spec: AgentSpec = {
      ...settings,
      desiredState: 'active',
      provider: target.provider,
      ...(target.region !== undefined ? { region: target.region } : {}),
      restoreFrom: { snapshotId, level: target.level, ...(target.fork ? { fork: true } : {}) },
    };
    const session = await store.get('Session', idToObjectName(source.spec.sessionId));
    if (!session) throw new ApiError('conflict', `the session snapshot ${snapshotId} was taken in is gone; the snapshot cannot be resumed`);
    await deps.limits.assertWithin(session, what);
    try {
      await deps.limits.withAgentSlot(session, () =>
        store.create('Agent', {
          name: idToObjectName(agentId),
          labels: {
            [Labels.organization]: principal.organizationId,
            [Labels.mode]: principal.mode,
            [Labels.session]: idToObjectName(source.spec.sessionId),
          },
          ownerReferences: source.metadata.ownerReferences,
          finalizers: [SANDBOX_FINALIZER],
          spec,
          status: { phase: 'booting', observedGeneration: 0, conditions: [] },
        }),
      );
    } catch (error) {
      if (isStoreError(error, 'AlreadyExists')) throw new ApiError('conflict', `agent ${agentId} already exists`);
      throw error;
    }
    return agentId;
  }

  return {
    find,

    /** Newest first; `sessionId`, `agentId` and `state` narrow it down. */
    async list(principal: Principal, filters: { sessionId?: string | undefined; agentId?: string | undefined; state?: SnapshotState | undefined }) {
      const labels: Record<string, string> = { [Labels.organization]: principal.organizationId, [Labels.mode]: principal.mode };
      if (filters.sessionId) labels[Labels.session] = idToObjectName(filters.sessionId);
      if (filters.agentId) labels[Labels.agent] = idToObjectName(filters.agentId);
      const { items } = await store.list('Snapshot', { labels });
      const views = items
        .map(snapshotView)
        .filter((view) => filters.state === undefined || view.state === filters.state)
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : a.id < b.id ? 1 : -1));
      return { data: views };
    },

    async get(principal: Principal, id: string) {
      return snapshotView(await find(principal, id));
    },

    /** A new agent from a ready snapshot, with the source agent's settings; 201 `booting`. */
    async resume(principal: Principal, id: string, body: { provider?: string | undefined; region: string; level?: 'filesystem' | undefined }) {
      const snapshot = await find(principal, id);
      const view = snapshotView(snapshot);
      if (view.state !== 'ready') {
        throw new ApiError('conflict', `snapshot ${id} is ${view.state}; only a ready snapshot can be resumed`, { state: view.state });
      }
      const providerName = body.provider ?? snapshot.spec.provider;
      if (!providers.get(providerName)) {
        const valid = providers.names();
        throw new ApiError('unprocessable_entity', `provider: unknown provider "${providerName}"; this install has ${valid.join(', ')}`, {
          fields: { provider: [`unknown provider; valid: ${valid.join(', ')}`] },
        });
      }
      const source = await store.get('Agent', idToObjectName(snapshot.spec.agentId));
      if (!source) throw new ApiError('conflict', `the agent snapshot ${id} was taken from is gone; the snapshot cannot be resumed`);
      const level = body.level ?? resumeLevel(snapshot, providerName, providers);
      const agentId = await agentFromSnapshot(principal, snapshot, source, { provider: providerName, region: body.region, level }, 'resuming a snapshot');
      return { agentId, provider: providerName, region: body.region, resumeLevel: level, status: 'booting' as const };
    },

    agentFromSnapshot,

    /** Releases the stored state: the archive is deleted and the snapshot can no longer be resumed. */

    async delete(principal: Principal, id: string): Promise<void> {
      const snapshot = await find(principal, id);
      if (snapshotView(snapshot).state === 'creating') {
        throw new ApiError('conflict', `snapshot ${id} is still being created; delete it once it is ready`, { state: 'creating' });
      }
      await store.delete('Snapshot', snapshot.metadata.name).catch((error: unknown) => {
        if (!isStoreError(error, 'NotFound')) throw error;
      });
    },
  };
}

export type SnapshotService = ReturnType<typeof createSnapshotService>;

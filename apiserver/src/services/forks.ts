import { ApiError, idToObjectName, objectNameToId, waitForAgent, type Resource, type ResourceStore } from '@berth/common';
import type { ProviderRegistry } from '@berth/providers';
import type { Principal } from '../http/context.js';
import type { AgentService } from './agents.js';
import { resumeLevel, type SnapshotService } from './snapshots.js';

/** The most agents one fork request makes. */
export const MAX_FORKS = 100;
/** How long a fork waits for its source agent to be checkpointed, and for it to run again after. */
const FORK_WAIT_MS = 120_000;

/**
 * Forks (ADR 45): new agents that continue from one checkpoint of an agent. A running or idle
 * agent is paused (reason `fork`) into a snapshot, the forks are created from it and the agent is
 * resumed from the same checkpoint; a paused agent's pause snapshot is used as it is. Each fork is
 * an agent of the source's session with its settings, started from the snapshot: natively on the
 * provider that made it when it restores natively (processes, memory and files; the same
 * checkpoint restored N times), else its /workspace files.
 */
export function createForkService(deps: { store: ResourceStore; agents: AgentService; snapshots: SnapshotService; providers: ProviderRegistry }) {
  const { store, agents, snapshots, providers } = deps;

  return {
    async fork(principal: Principal, id: string, count: number) {
      let source = await agents.find(principal, id);
      const phase = source.status?.phase ?? 'booting';
      const running = source.spec.desiredState === 'active' && (phase === 'idle' || phase === 'running');
      if (!running && !(phase === 'paused' && source.spec.desiredState === 'paused')) {
        throw new ApiError('conflict', `agent ${id} is ${phase}; only a running, idle or paused agent can be forked`, { status: phase });
      }
      if (running) {
        const paused = await agents.pause(principal, id, FORK_WAIT_MS, 'fork');
        if (paused.status !== 'paused') throw new ApiError('conflict', `agent ${id} could not be checkpointed for the fork (it is ${paused.status})`, { status: paused.status });
        source = await agents.find(principal, id);
      }
      try {
        const snapshotId = source.status?.snapshot;
        const snapshot = snapshotId ? await store.get('Snapshot', idToObjectName(snapshotId)) : undefined;
        if (!snapshot || snapshot.metadata.deletionTimestamp || snapshot.status?.state === 'failed') {
          throw new ApiError('conflict', `agent ${id} has no snapshot to fork from (it was paused before its sandbox started)`, { status: 'paused' });
        }
        const provider = source.status?.provider ?? source.spec.provider;
        const level = resumeLevel(snapshot, provider, providers);
        const forks: string[] = [];
        for (let i = 0; i < count; i++) {
          forks.push(await snapshots.agentFromSnapshot(principal, snapshot, source, { provider, level, fork: true }, 'forking an agent'));
        }
        return { agentId: id, snapshotId: objectNameToId(snapshot.metadata.name), level, agents: forks.map((forkId) => ({ id: forkId, status: 'booting' as const })) };
      } finally {
        if (running) await resumeAfterFork(source);
      }
    },
  };

  /** The forked agent runs on from the checkpoint it was paused into for the fork. */
  async function resumeAfterFork(source: Resource<'Agent'>): Promise<void> {
    const snapshotId = source.status?.snapshot;
    const snapshot = snapshotId ? await store.get('Snapshot', idToObjectName(snapshotId)) : undefined;
    const level = snapshot ? resumeLevel(snapshot, snapshot.spec.provider, providers) : 'filesystem';
    await store.updateSpec('Agent', source.metadata.name, (current) => {
      if (current.spec.desiredState !== 'paused' || current.spec.pauseReason !== 'fork') return undefined;
      const { restoreFrom: _previous, pauseReason: _reason, ...rest } = current.spec;
      return { ...rest, desiredState: 'active', ...(snapshotId ? { restoreFrom: { snapshotId, level } } : {}) };
    });
    await waitForAgent(store, source.metadata.name, FORK_WAIT_MS, (current) => {
      const phase = current?.status?.phase;
      return phase === undefined || phase === 'idle' || phase === 'running' || phase === 'failed' || phase === 'terminated';
    });
  }
}

export type ForkService = ReturnType<typeof createForkService>;

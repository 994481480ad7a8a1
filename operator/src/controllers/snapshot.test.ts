import { describe, expect, it } from 'vitest';
import type { AgentStatus } from '@berth/crds';
import { checkpointOnDisk, neededOnHost } from './snapshot.js';

const snapshot = { metadata: { name: 'snap-01m84afw5dqnmng476xg7e7n70' } } as Parameters<typeof neededOnHost>[0];
const SNAP = 'snap_01m84afw5dqnmng476xg7e7n70';
const OTHER = 'snap_01m84afw5dqnmng476xg7e7n71';

function agent(status: Partial<AgentStatus>) {
  return { status: { phase: 'paused', observedGeneration: 1, conditions: [], ...status } as AgentStatus };
}

describe('neededOnHost: whether a checkpoint kept on the host may still serve a resume there', () => {
  const cases: { name: string; agent: ReturnType<typeof agent> | undefined; needed: boolean }[] = [
    { name: 'the agent is paused into it', agent: agent({ snapshot: SNAP }), needed: true },
    { name: 'the agent is being resumed from it (not restored yet)', agent: agent({ phase: 'paused', snapshot: SNAP, restoredFrom: OTHER }), needed: true },
    { name: 'the agent was restored from it', agent: agent({ phase: 'idle', snapshot: SNAP, restoredFrom: SNAP }), needed: false },
    { name: 'the agent was paused again into another snapshot', agent: agent({ snapshot: OTHER, restoredFrom: SNAP }), needed: false },
    { name: 'the agent was terminated', agent: agent({ phase: 'terminated', snapshot: SNAP }), needed: false },
    { name: 'the agent failed', agent: agent({ phase: 'failed', snapshot: SNAP }), needed: false },
    { name: 'the agent is gone', agent: undefined, needed: false },
  ];
  for (const { name, agent: current, needed } of cases) {
    it(name, () => {
      expect(neededOnHost(snapshot, current)).toBe(needed);
    });
  }
});

describe('checkpointOnDisk: whether a creating snapshot can be archived', () => {
  const made = (level?: 'native' | 'filesystem') =>
    ({ metadata: snapshot.metadata, status: { state: 'creating', observedGeneration: 0, conditions: [], ...(level ? { level } : {}) } }) as Parameters<typeof checkpointOnDisk>[0];
  const cases: { name: string; snapshot: Parameters<typeof checkpointOnDisk>[0]; agent: ReturnType<typeof agent> | undefined; onDisk: boolean }[] = [
    { name: 'made after the checkpoint, with its level', snapshot: made('native'), agent: agent({ phase: 'idle' }), onDisk: true },
    { name: 'made after a files-only checkpoint, its agent gone', snapshot: made('filesystem'), agent: undefined, onDisk: true },
    { name: 'the agent resumed and paused again into another one meanwhile', snapshot: made('native'), agent: agent({ snapshot: OTHER, restoredFrom: SNAP }), onDisk: true },
    { name: 'made before a checkpoint still under way', snapshot: made(), agent: agent({ phase: 'idle' }), onDisk: false },
    { name: 'made before the checkpoint, which the agent then finished', snapshot: made(), agent: agent({ snapshot: SNAP }), onDisk: true },
  ];
  for (const { name, snapshot: current, agent: owner, onDisk } of cases) {
    it(name, () => {
      expect(checkpointOnDisk(current, owner)).toBe(onDisk);
    });
  }
});

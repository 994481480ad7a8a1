import { describe, expect, it } from 'vitest';
import type { AgentStatus } from '@berth/crds';
import { neededOnHost } from './snapshot.js';

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

import { describe, expect, it } from 'vitest';
import { setCondition } from './conditions.js';

const at = (iso: string) => new Date(iso);
const ready = { type: 'SandboxReady', status: 'True' as const, reason: 'Provisioned', message: 'ok', observedGeneration: 1 };

describe('setCondition', () => {
  it('adds a condition with the transition time', () => {
    expect(setCondition([], ready, at('2026-01-01T00:00:00Z'))).toEqual([{ ...ready, lastTransitionTime: '2026-01-01T00:00:00.000Z' }]);
  });

  it('keeps the transition time while the status stays', () => {
    const first = setCondition([], ready, at('2026-01-01T00:00:00Z'));
    const second = setCondition(first, { ...ready, reason: 'SandboxLost', observedGeneration: 2 }, at('2026-01-02T00:00:00Z'));
    expect(second).toEqual([{ ...ready, reason: 'SandboxLost', observedGeneration: 2, lastTransitionTime: '2026-01-01T00:00:00.000Z' }]);
  });

  it('moves the transition time when the status changes, leaving other conditions be', () => {
    const other = { type: 'Other', status: 'False' as const, reason: 'x', message: '', observedGeneration: 1, lastTransitionTime: 't' };
    const first = setCondition([other], ready, at('2026-01-01T00:00:00Z'));
    const second = setCondition(first, { ...ready, status: 'False', reason: 'Terminated' }, at('2026-01-03T00:00:00Z'));
    expect(second[0]).toBe(other);
    expect(second[1]!.lastTransitionTime).toBe('2026-01-03T00:00:00.000Z');
  });
});

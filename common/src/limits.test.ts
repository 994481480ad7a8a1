import { describe, expect, it } from 'vitest';
import type { SessionLimits } from '@berth/crds';
import { limitBreach, periodKey, periodStart, type SessionSpend } from './limits.js';
import type { Resource } from './store/types.js';

const CENT = 1_000_000_000n;

function session(limits: SessionLimits, createdAt = '2026-11-22T08:00:00Z'): Resource<'Session'> {
  return {
    kind: 'Session',
    metadata: { name: 'ses-1', uid: 'u1', resourceVersion: '1', generation: 1, creationTimestamp: createdAt, labels: {}, finalizers: [], ownerReferences: [] },
    spec: { organizationId: 'org', mode: 'live', userId: 'alice', environment: 'production', limits, metadata: {} },
  } as unknown as Resource<'Session'>;
}

const spend = (periodCents: number, computeMinutes = 0): SessionSpend => ({
  periodNanocents: BigInt(periodCents) * CENT,
  totalNanocents: BigInt(periodCents) * CENT,
  computeMinutes,
});

describe('cost periods (UTC)', () => {
  it('start at midnight of the day and on the first of the month', () => {
    const now = new Date('2026-03-01T00:00:30Z');
    expect(periodStart('day', now).toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(periodStart('month', now).toISOString()).toBe('2026-03-01T00:00:00.000Z');
    const late = new Date('2026-02-28T23:59:59.999Z');
    expect(periodStart('day', late).toISOString()).toBe('2026-02-28T00:00:00.000Z');
    expect(periodStart('month', late).toISOString()).toBe('2026-02-01T00:00:00.000Z');
  });

  it('are named by day or month, so an event can fire once per period', () => {
    expect(periodKey('day', new Date('2026-12-31T23:59:59Z'))).toBe('2026-12-31');
    expect(periodKey('day', new Date('2027-01-01T00:00:00Z'))).toBe('2027-01-01');
    expect(periodKey('month', new Date('2028-02-29T12:00:00Z'))).toBe('2028-02');
  });
});

describe('limitBreach', () => {
  const now = new Date('2026-11-22T10:00:00Z');

  it('is nothing below every limit', () => {
    const limits: SessionLimits = { maxCost: { amount: 500, currency: 'usd', period: 'day' }, maxComputeMinutes: 60, maxDuration: '8h' };
    expect(limitBreach(session(limits), spend(499, 59.99), now)).toBeUndefined();
  });

  it('reports the cost limit once the period spend reaches it, named by its period', () => {
    const breach = limitBreach(session({ maxCost: { amount: 500, currency: 'usd', period: 'day' } }), spend(500), now);
    expect(breach).toMatchObject({ limit: 'maxCost', current: 500, max: 500, instance: 'maxCost/500/2026-11-22' });
    expect(breach!.message).toContain('500 usd cents a day');
    const monthly = limitBreach(session({ maxCost: { amount: 500, currency: 'usd', period: 'month' } }), spend(501), now);
    expect(monthly!.instance).toBe('maxCost/500/2026-11');
  });

  it('compares the exact spend: 499.9 cents is not 500 yet', () => {
    const limits: SessionLimits = { maxCost: { amount: 500, currency: 'usd', period: 'day' } };
    expect(limitBreach(session(limits), { ...spend(0), periodNanocents: 500n * CENT - 1n }, now)).toBeUndefined();
    expect(limitBreach(session(limits), { ...spend(0), periodNanocents: 500n * CENT }, now)?.limit).toBe('maxCost');
  });

  it('reports compute minutes and duration, with the limit value in the instance', () => {
    expect(limitBreach(session({ maxComputeMinutes: 10 }), spend(0, 10.004), now)).toMatchObject({
      limit: 'maxComputeMinutes',
      current: 10,
      max: 10,
      instance: 'maxComputeMinutes/10',
    });
    expect(limitBreach(session({ maxDuration: '2h' }), spend(0), now)).toMatchObject({ limit: 'maxDuration', current: 7200, max: 7200, instance: 'maxDuration/7200' });
    expect(limitBreach(session({ maxDuration: '2h' }), spend(0), new Date('2026-11-22T09:59:59Z'))).toBeUndefined();
  });
});

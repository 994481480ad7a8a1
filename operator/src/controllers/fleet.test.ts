import type { FleetTally } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { fleetCondition, fleetPhase, fleetStop } from './fleet.js';

const tally = (fields: Partial<FleetTally>): FleetTally => ({ pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0, costCents: 0, sessionLimited: 0, ...fields });
const spec = (fields: Record<string, unknown> = {}) =>
  ({ organizationId: 'org', mode: 'live', sessionId: 'ses_x', definition: 'd', definitionId: 'adef_x', itemCount: 10, concurrency: 2, ...fields }) as never;

describe('fleetStop', () => {
  it.each([
    ['items still to run', spec(), tally({ pending: 3, running: 2, completed: 5 }), undefined],
    ['every item ended', spec(), tally({ completed: 8, failed: 2 }), 'completed'],
    ['cancel asked wins over everything', spec({ cancelled: true, costCap: { amount: 1, currency: 'usd' } }), tally({ pending: 1, costCents: 5 }), 'cancelled'],
    ['the cap reached', spec({ costCap: { amount: 50, currency: 'usd' } }), tally({ pending: 4, running: 2, costCents: 50 }), 'cost_limit'],
    ['under the cap', spec({ costCap: { amount: 50, currency: 'usd' } }), tally({ pending: 4, running: 2, costCents: 49 }), undefined],
    ['the cap reached by the last items: nothing left to stop', spec({ costCap: { amount: 10, currency: 'usd' } }), tally({ completed: 10, costCents: 12 }), 'completed'],
    ['a session limit refused an item', spec(), tally({ pending: 4, failed: 1, sessionLimited: 1 }), 'session_limit'],
  ])('%s', (_name, fleetSpec, counts, expected) => {
    expect(fleetStop(fleetSpec, counts)).toBe(expected);
  });
});

describe('fleetCondition and fleetPhase', () => {
  it.each([
    [null, tally({ pending: 1, running: 1 }), 'False', 'Running', 'running'],
    ['completed', tally({ completed: 3, failed: 1 }), 'True', 'Completed', 'completed'],
    ['completed', tally({ failed: 4 }), 'True', 'AllFailed', 'failed'],
    ['completed', tally({}), 'True', 'NoItems', 'completed'],
    ['cost_limit', tally({ completed: 2, cancelled: 8 }), 'True', 'CostLimit', 'paused'],
    ['session_limit', tally({ failed: 1, cancelled: 9 }), 'True', 'SessionLimit', 'paused'],
    ['cancelled', tally({ completed: 1, cancelled: 9 }), 'True', 'Cancelled', 'cancelled'],
  ] as const)('%s with %j', (outcome, counts, status, reason, phase) => {
    const condition = fleetCondition(outcome, counts, 3);
    expect(condition).toMatchObject({ type: 'Finished', status, reason, observedGeneration: 3 });
    expect(fleetPhase(condition)).toBe(phase);
  });
});

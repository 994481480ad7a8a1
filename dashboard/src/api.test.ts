import { describe, expect, it } from 'vitest';
import { formatMoney, formatTime, withQuery } from './api.js';

describe('the console client', () => {
  it('leaves out query values that are not given', () => {
    expect(withQuery('/api/secrets', { mode: 'live' })).toBe('/api/secrets?mode=live');
    expect(withQuery('/api/events', { type: 'agent.failed', limit: 5, mode: undefined, cursor: '' })).toBe('/api/events?type=agent.failed&limit=5');
    expect(withQuery('/api/keys', {})).toBe('/api/keys');
  });

  it('shows integer cents in the currency, and a dash for none', () => {
    expect(formatMoney({ amount: 1801, currency: 'usd' })).toBe('$18.01');
    expect(formatMoney({ amount: 5, currency: 'eur' })).toBe('€0.05');
    expect(formatMoney({ amount: 0, currency: 'usd' })).toBe('$0.00');
    expect(formatMoney(null)).toBe('—');
  });

  it('shows times in UTC to the minute', () => {
    expect(formatTime('2026-11-23T17:45:09.123Z')).toBe('2026-11-23 17:45 UTC');
    expect(formatTime(null)).toBe('—');
    expect(formatTime('not a time')).toBe('not a time');
  });
});

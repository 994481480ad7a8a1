import { describe, expect, it } from 'vitest';
import { formatDuration, parseDuration } from './duration.js';

describe('parseDuration', () => {
  it.each([
    ['30s', 30],
    ['5m', 300],
    ['2h', 7200],
    ['1h30m', 5400],
    ['1h0m5s', 3605],
    ['90m', 5400],
    ['0s', 0],
  ])('%s is %i seconds', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '5', '5x', '-5m', '1.5h', '5 m', '30m1h', 'h', 'm5', '1d', '5M', `${'9'.repeat(40)}s`])('rejects %j', (text) => {
    expect(parseDuration(text)).toBeUndefined();
  });
});

describe('formatDuration', () => {
  it.each([
    [30, '30s'],
    [300, '5m'],
    [5400, '1h30m'],
    [86_400, '24h'],
    [3605, '1h5s'],
    [0, '0s'],
  ])('%i seconds is %s', (seconds, text) => {
    expect(formatDuration(seconds)).toBe(text);
    expect(parseDuration(text)).toBe(seconds);
  });

  it('refuses a fraction', () => {
    expect(() => formatDuration(1.5)).toThrow(RangeError);
  });
});

import { describe, expect, it } from 'vitest';
import { PERIODS, periodRange, utcDates, type Period } from './periods.js';

/** Where each period starts, for moments chosen at day, month, year and leap-day boundaries. */
const STARTS: Array<{ now: string; note: string; from: Record<Period, string> }> = [
  {
    now: '2026-03-01T00:00:30Z',
    note: 'half a minute into a month, on a Sunday',
    from: { today: '2026-03-01', week: '2026-02-23', last_7_days: '2026-02-23', last_30_days: '2026-01-31', month: '2026-03-01' },
  },
  {
    now: '2026-12-31T23:59:00Z',
    note: 'the last minute of a year, on a Thursday',
    from: { today: '2026-12-31', week: '2026-12-28', last_7_days: '2026-12-25', last_30_days: '2026-12-02', month: '2026-12-01' },
  },
  {
    now: '2028-02-29T12:00:00Z',
    note: 'a leap day, a Tuesday',
    from: { today: '2028-02-29', week: '2028-02-28', last_7_days: '2028-02-23', last_30_days: '2028-01-31', month: '2028-02-01' },
  },
  {
    now: '2028-03-01T08:00:00Z',
    note: 'the day after a leap day',
    from: { today: '2028-03-01', week: '2028-02-28', last_7_days: '2028-02-24', last_30_days: '2028-02-01', month: '2028-03-01' },
  },
  {
    now: '2026-03-02T00:00:00Z',
    note: 'the very start of a Monday',
    from: { today: '2026-03-02', week: '2026-03-02', last_7_days: '2026-02-24', last_30_days: '2026-02-01', month: '2026-03-01' },
  },
  {
    now: '2026-03-08T23:59:59.999Z',
    note: 'the very end of a Sunday',
    from: { today: '2026-03-08', week: '2026-03-02', last_7_days: '2026-03-02', last_30_days: '2026-02-07', month: '2026-03-01' },
  },
];

describe('periodRange', () => {
  for (const { now, note, from } of STARTS) {
    it.each(PERIODS)(`%s at ${now} (${note}) runs from its first midnight until now`, (period) => {
      expect(periodRange(period, new Date(now))).toEqual({ from: new Date(`${from[period]}T00:00:00Z`), until: new Date(now) });
    });
  }
});

describe('utcDates', () => {
  it('lists one date for a range inside one day', () => {
    expect(utcDates(periodRange('today', new Date('2026-03-01T00:00:30Z')))).toEqual(['2026-03-01']);
  });

  it('counts the day of `until` even at its first instant', () => {
    expect(utcDates({ from: new Date('2026-02-28T00:00:00Z'), until: new Date('2026-03-01T00:00:00Z') })).toEqual([
      '2026-02-28',
      '2026-03-01',
    ]);
  });

  it('lists the seven days of a week that ends on Sunday, oldest first', () => {
    expect(utcDates(periodRange('week', new Date('2026-03-01T00:00:30Z')))).toEqual([
      '2026-02-23',
      '2026-02-24',
      '2026-02-25',
      '2026-02-26',
      '2026-02-27',
      '2026-02-28',
      '2026-03-01',
    ]);
  });

  it('crosses a year and a leap day', () => {
    expect(utcDates(periodRange('last_7_days', new Date('2027-01-02T10:00:00Z')))).toEqual([
      '2026-12-27',
      '2026-12-28',
      '2026-12-29',
      '2026-12-30',
      '2026-12-31',
      '2027-01-01',
      '2027-01-02',
    ]);
    expect(utcDates(periodRange('last_7_days', new Date('2028-03-01T08:00:00Z'))).slice(4)).toEqual(['2028-02-28', '2028-02-29', '2028-03-01']);
  });

  it.each([
    ['last_30_days', '2026-03-01T00:00:30Z', 30, '2026-01-31'],
    ['last_30_days', '2028-03-01T08:00:00Z', 30, '2028-02-01'],
    ['month', '2026-12-31T23:59:00Z', 31, '2026-12-01'],
    ['month', '2028-02-29T12:00:00Z', 29, '2028-02-01'],
    ['month', '2026-03-01T00:00:30Z', 1, '2026-03-01'],
  ] as const)('%s at %s has %i days from %s', (period, now, count, first) => {
    const dates = utcDates(periodRange(period, new Date(now)));
    expect(dates).toHaveLength(count);
    expect(dates[0]).toBe(first);
    expect(dates.at(-1)).toBe(now.slice(0, 10));
  });
});

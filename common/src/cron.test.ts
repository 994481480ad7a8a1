import { describe, expect, it } from 'vitest';
import { CronError, cronTimesBetween, isTimeZone, nextCronTime, normalizeCron, parseCron } from './cron.js';

const next = (expression: string, timeZone: string, after: string) => nextCronTime(expression, timeZone, new Date(after))?.toISOString();

describe('parseCron', () => {
  it.each([
    ['* * * *', 'five fields'],
    ['0 0 * * * *', 'five fields'],
    ['61 * * * *', 'minute'],
    ['* 24 * * *', 'hour'],
    ['* * 0 * *', 'day'],
    ['* * * 13 *', 'month'],
    ['* * * * 8', 'week'],
    ['every day', 'five fields'],
  ])('refuses %j, naming what is wrong (%s)', (expression, named) => {
    expect(() => parseCron(expression)).toThrow(CronError);
    expect(() => parseCron(expression)).toThrow(new RegExp(named));
  });

  it('normalizes the spacing of the fields', () => {
    expect(normalizeCron('  */5   *\t* * *  ')).toBe('*/5 * * * *');
  });

  it('takes ranges, steps, lists and names', () => {
    const fields = parseCron('*/15 9-17 1,15 jan-mar mon-fri');
    expect([...fields.minutes]).toEqual([0, 15, 30, 45]);
    expect([...fields.hours]).toHaveLength(9);
    expect([...fields.daysOfMonth]).toEqual([1, 15]);
    expect([...fields.months]).toEqual([1, 2, 3]);
    expect([...fields.daysOfWeek]).toEqual([1, 2, 3, 4, 5]);
    expect(fields).toMatchObject({ dayOfMonthRestricted: true, dayOfWeekRestricted: true });
  });
});

describe('isTimeZone', () => {
  it.each([['UTC', true], ['Europe/Berlin', true], ['America/New_York', true], ['Mars/Olympus', false], ['', false], ['+02:00x', false]])('%j → %s', (name, valid) => {
    expect(isTimeZone(name)).toBe(valid);
  });
});

describe('nextCronTime', () => {
  it('is strictly after the given time', () => {
    expect(next('*/5 * * * *', 'UTC', '2026-06-01T10:00:00Z')).toBe('2026-06-01T10:05:00.000Z');
    expect(next('*/5 * * * *', 'UTC', '2026-06-01T10:02:30Z')).toBe('2026-06-01T10:05:00.000Z');
  });

  it('evaluates the fields on the wall clock of the zone', () => {
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-06-01T00:00:00Z')).toBe('2026-06-01T00:30:00.000Z'); // 02:30 CEST, 02:00 was `after`
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-01-10T00:00:00Z')).toBe('2026-01-10T01:30:00.000Z'); // 02:30 CET
    expect(next('0 9 * * 1', 'America/New_York', '2026-06-03T00:00:00Z')).toBe('2026-06-08T13:00:00.000Z'); // Monday 09:00 EDT
  });

  it('runs a time the spring change skips once, at the first minute after the gap', () => {
    // 29 March 2026: Berlin goes from 02:00 CET straight to 03:00 CEST (01:00 UTC).
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-03-28T02:00:00Z')).toBe('2026-03-29T01:00:00.000Z');
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-03-29T01:00:00Z')).toBe('2026-03-30T00:30:00.000Z');
    // Every quarter hour of the skipped hour collapses into one run at 03:00, with 03:00's own.
    expect(cronTimesBetween('*/15 * * * *', 'Europe/Berlin', new Date('2026-03-29T00:40:00Z'), new Date('2026-03-29T01:20:00Z'), 10).map((d) => d.toISOString())).toEqual([
      '2026-03-29T00:45:00.000Z',
      '2026-03-29T01:00:00.000Z',
      '2026-03-29T01:15:00.000Z',
    ]);
  });

  it('runs a time the autumn change repeats once, at its first occurrence', () => {
    // 25 October 2026: 03:00 CEST becomes 02:00 CET, so 02:30 is at 00:30 and at 01:30 UTC.
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-10-24T12:00:00Z')).toBe('2026-10-25T00:30:00.000Z');
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-10-25T00:30:00Z')).toBe('2026-10-26T01:30:00.000Z');
    expect(next('30 2 * * *', 'Europe/Berlin', '2026-10-25T01:00:00Z')).toBe('2026-10-26T01:30:00.000Z');
  });

  it('matches either day field when both are restricted, as Vixie cron does', () => {
    // The 13th or any Friday: Friday 5 June 2026 comes before the 13th.
    expect(next('0 0 13 * 5', 'UTC', '2026-06-01T00:00:00Z')).toBe('2026-06-05T00:00:00.000Z');
    expect(next('0 0 13 * *', 'UTC', '2026-06-01T00:00:00Z')).toBe('2026-06-13T00:00:00.000Z');
  });

  it('finds a leap day years ahead; a date that never exists is refused', () => {
    expect(next('0 12 29 2 *', 'UTC', '2026-03-01T00:00:00Z')).toBe('2028-02-29T12:00:00.000Z');
    expect(() => parseCron('0 0 30 2 *')).toThrow(/impossible day of month/);
  });

  it('gives twelve five-minute times in an hour', () => {
    expect(cronTimesBetween('*/5 * * * *', 'Asia/Kolkata', new Date('2026-06-01T10:00:00Z'), new Date('2026-06-01T11:00:00Z'), 100)).toHaveLength(12);
  });
});

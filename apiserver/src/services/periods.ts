/**
 * The reporting periods of the usage routes, all in UTC. A period runs from a midnight up to
 * now: the range is half-open, `from` included and `until` (now) excluded, like every range
 * the usage routes read.
 */
export const PERIODS = ['today', 'week', 'last_7_days', 'last_30_days', 'month'] as const;
export type Period = (typeof PERIODS)[number];

export interface TimeRange {
  from: Date;
  until: Date;
}

const DAY_MS = 86_400_000;

export function startOfUtcDay(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()));
}

/** The start of the billing period `at` falls in: the 1st of its month. */
export function startOfUtcMonth(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), 1));
}

/** Monday 00:00 of the ISO week `at` falls in. */
export function startOfIsoWeek(at: Date): Date {
  const daysSinceMonday = (at.getUTCDay() + 6) % 7;
  return new Date(startOfUtcDay(at).getTime() - daysSinceMonday * DAY_MS);
}

export function periodRange(period: Period, now: Date): TimeRange {
  const today = startOfUtcDay(now);
  const daysBack = (days: number) => new Date(today.getTime() - days * DAY_MS);
  switch (period) {
    case 'today':
      return { from: today, until: now };
    case 'week':
      return { from: startOfIsoWeek(now), until: now };
    case 'last_7_days':
      return { from: daysBack(6), until: now };
    case 'last_30_days':
      return { from: daysBack(29), until: now };
    case 'month':
      return { from: startOfUtcMonth(now), until: now };
  }
}

/** `YYYY-MM-DD` of every UTC day the range touches, oldest first; the day of `until` always counts. */
export function utcDates(range: TimeRange): string[] {
  const dates: string[] = [];
  for (let day = startOfUtcDay(range.from).getTime(); day <= range.until.getTime(); day += DAY_MS) {
    dates.push(new Date(day).toISOString().slice(0, 10));
  }
  return dates;
}

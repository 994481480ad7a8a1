/**
 * Cron expressions of schedules: five fields (minute hour day-of-month month day-of-week),
 * evaluated on the wall clock of an IANA time zone (ADR 23).
 *
 * node-cron parses and validates the fields (ranges, steps, lists, month and weekday names); it
 * cannot say when an expression next matches on a clock it does not own, so `nextCronTime`
 * computes that here from node-cron's expanded field sets and the zone's offsets (Intl):
 * - a wall-clock time that does not exist that day (the hour skipped when clocks go forward) runs
 *   once, at the first minute that exists after it (02:30 in Europe/Berlin on the spring change
 *   runs at 03:00);
 * - a wall-clock time that occurs twice (the hour repeated when clocks go back) runs once, at
 *   its first occurrence;
 * - as in Vixie cron, when both day-of-month and day-of-week are restricted a day matches either.
 */
import cron from 'node-cron';

export interface CronFields {
  minutes: ReadonlySet<number>;
  hours: ReadonlySet<number>;
  daysOfMonth: ReadonlySet<number>;
  months: ReadonlySet<number>;
  /** 0 (Sunday) to 6. */
  daysOfWeek: ReadonlySet<number>;
  /** Whether the day-of-month and day-of-week fields were restricted (not `*`). */
  dayOfMonthRestricted: boolean;
  dayOfWeekRestricted: boolean;
}

export class CronError extends Error {
  override name = 'CronError';
}

const FIELD_NAMES = ['minute', 'hour', 'day-of-month', 'month', 'day-of-week'];

/** The expression as stored: its five fields separated by single spaces. */
export function normalizeCron(expression: string): string {
  return expression.trim().split(/\s+/).join(' ');
}

/** The expression's fields, or a CronError that says which field is wrong and why. */
export function parseCron(expression: string): CronFields {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) throw new CronError(`must have five fields (minute hour day-of-month month day-of-week); it has ${parts.length}`);
  const checked = cron.validateDetailed(parts.join(' '));
  if (!checked.valid || !checked.fields) {
    const problems = checked.errors.map((error) => `${error.field}: ${error.message}`);
    throw new CronError(problems.join('; ') || 'not a cron expression');
  }
  const fields = checked.fields;
  const numbers = (values: (number | string)[], field: number): Set<number> => {
    const out = new Set<number>();
    for (const value of values) {
      if (typeof value !== 'number') throw new CronError(`${FIELD_NAMES[field]}: "${value}" is not supported; use numbers, ranges, steps and names`);
      out.add(value);
    }
    return out;
  };
  // node-cron may count Sunday as 7 as well as 0.
  const daysOfWeek = new Set([...numbers(fields.dayOfWeek, 4)].map((day) => day % 7));
  const result: CronFields = {
    minutes: numbers(fields.minute, 0),
    hours: numbers(fields.hour, 1),
    daysOfMonth: numbers(fields.dayOfMonth, 2),
    months: numbers(fields.month, 3),
    daysOfWeek,
    dayOfMonthRestricted: !isWildcard(parts[2]!),
    dayOfWeekRestricted: !isWildcard(parts[4]!),
  };
  for (const [index, set] of [result.minutes, result.hours, result.daysOfMonth, result.months, result.daysOfWeek].entries()) {
    if (set.size === 0) throw new CronError(`${FIELD_NAMES[index]}: matches nothing`);
  }
  return result;
}

function isWildcard(field: string): boolean {
  return field === '*' || field === '?';
}

/** Whether the name is an IANA time zone this runtime knows. */
export function isTimeZone(name: string): boolean {
  if (name.length === 0 || name.length > 64) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const WALL_MARGIN = 3 * 60 * MINUTE;

/** The wall-clock time of an instant in the zone, as if it were a UTC time, in ms (whole minutes). */
function wallOf(instant: number, timeZone: string): number {
  const parts: Record<string, number> = {};
  for (const part of formatterOf(timeZone).formatToParts(new Date(instant))) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  return Date.UTC(parts.year!, parts.month! - 1, parts.day!, parts.hour!, parts.minute!);
}

/**
 * The instant a wall-clock time runs at: its first occurrence, or for a time the zone skips,
 * the first minute after the skipped ones.
 */
export function instantOfWallTime(wall: number, timeZone: string): number {
  // Offsets a day either side bracket every change of the zone's offset near this time.
  const offsets = [...new Set([wallOf(wall - DAY, timeZone) - (wall - DAY), wallOf(wall + DAY, timeZone) - (wall + DAY), wallOf(wall, timeZone) - wall])];
  const candidates = offsets.map((offset) => wall - offset).sort((a, b) => a - b);
  for (const candidate of candidates) if (wallOf(candidate, timeZone) === wall) return candidate;
  // Skipped: walk from the earliest reading to the first minute whose wall time is after it.
  let instant = candidates[0]!;
  while (wallOf(instant, timeZone) < wall) instant += MINUTE;
  return instant;
}

/** Years searched for a match before an expression is judged to match never (e.g. 30 February). */
const SEARCH_DAYS = 366 * 8;

/**
 * The first instant strictly after `after` at which the expression matches in the zone (see the
 * module comment for the skipped and repeated hour), or undefined if it never matches.
 */
export function nextCronTime(expression: string | CronFields, timeZone: string, after: Date): Date | undefined {
  const fields = typeof expression === 'string' ? parseCron(expression) : expression;
  const afterMs = after.getTime();
  const minutes = [...fields.minutes].sort((a, b) => a - b);
  const hours = [...fields.hours].sort((a, b) => a - b);
  // A wall time a little before `after`'s may still run after it (a skipped time runs late), so
  // the search starts a margin wider than any change of a zone's offset before it.
  const start = wallOf(afterMs, timeZone) - WALL_MARGIN;
  const startDay = Date.UTC(new Date(start).getUTCFullYear(), new Date(start).getUTCMonth(), new Date(start).getUTCDate());
  for (let day = 0; day < SEARCH_DAYS; day++) {
    const date = new Date(startDay + day * DAY);
    if (!dayMatches(fields, date)) continue;
    for (const hour of hours) {
      for (const minute of minutes) {
        const wall = date.getTime() + hour * 60 * MINUTE + minute * MINUTE;
        if (wall < start) continue;
        const instant = instantOfWallTime(wall, timeZone);
        if (instant > afterMs) return new Date(instant);
      }
    }
  }
  return undefined;
}

function dayMatches(fields: CronFields, date: Date): boolean {
  if (!fields.months.has(date.getUTCMonth() + 1)) return false;
  const byMonthDay = fields.daysOfMonth.has(date.getUTCDate());
  const byWeekDay = fields.daysOfWeek.has(date.getUTCDay());
  if (fields.dayOfMonthRestricted && fields.dayOfWeekRestricted) return byMonthDay || byWeekDay;
  return byMonthDay && byWeekDay;
}

/** The matching instants in (after, until], in order, at most `limit` of them. */
export function cronTimesBetween(expression: string | CronFields, timeZone: string, after: Date, until: Date, limit: number): Date[] {
  const fields = typeof expression === 'string' ? parseCron(expression) : expression;
  const times: Date[] = [];
  let cursor = after;
  while (times.length < limit) {
    const next = nextCronTime(fields, timeZone, cursor);
    if (!next || next > until) break;
    times.push(next);
    cursor = next;
  }
  return times;
}

import { parseDuration, type SessionLimits } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { NANOCENTS_PER_CENT, nanocentsToCents } from './money.js';
import type { Resource } from './store/types.js';

/**
 * Session limits, read the same way by the API (which answers 402 while one is reached) and by
 * the operator (which pauses the session's agents when one is reached):
 * - `maxCost`: the session's spend in the current UTC day or month;
 * - `maxComputeMinutes`: sandbox minutes over the session's life;
 * - `maxDuration`: time since the session was created.
 * `maxAgents` is checked when an agent is created, not here.
 */
export type LimitName = 'maxCost' | 'maxComputeMinutes' | 'maxDuration';

export type CostPeriod = 'day' | 'month';

/** Start of the UTC day or month `now` is in. */
export function periodStart(period: CostPeriod, now: Date): Date {
  return period === 'day'
    ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()))
    : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

/** Names the period `now` is in: `2026-11-22` for a day, `2026-11` for a month. */
export function periodKey(period: CostPeriod, now: Date): string {
  const iso = periodStart(period, now).toISOString();
  return period === 'day' ? iso.slice(0, 10) : iso.slice(0, 7);
}

export interface SessionSpend {
  /** Spend in the current maxCost period (all time when the session has no maxCost), exact. */
  periodNanocents: bigint;
  /** Spend over the session's life, exact. */
  totalNanocents: bigint;
  /** Sandbox minutes over the session's life. */
  computeMinutes: number;
}

/** What a session has used, from the ledger. */
export async function sessionSpend(db: Queryable, sessionId: string, limits: SessionLimits, now: Date): Promise<SessionSpend> {
  const since = limits.maxCost ? periodStart(limits.maxCost.period, now) : new Date(0);
  const { rows } = await db.query<{ period: string; total: string; minutes: string }>(
    `SELECT coalesce(sum(amount_nanocents) FILTER (WHERE occurred_at >= $2), 0)::text AS period,
            coalesce(sum(amount_nanocents), 0)::text AS total,
            coalesce(sum(quantity) FILTER (WHERE kind = 'compute'), 0)::text AS minutes
     FROM usage_ledger WHERE session_id = $1`,
    [sessionId, since],
  );
  const row = rows[0]!;
  return { periodNanocents: BigInt(row.period), totalNanocents: BigInt(row.total), computeMinutes: Number(row.minutes) };
}

export interface LimitBreach {
  limit: LimitName;
  /** Where the session stands: cents, minutes or seconds. */
  current: number;
  max: number;
  /** Tells this breach apart from the next one of the same limit (another period, a raised limit). */
  instance: string;
  message: string;
}

/** The first limit the session has reached, if any. */
export function limitBreach(session: Resource<'Session'>, spend: SessionSpend, now: Date): LimitBreach | undefined {
  const { limits } = session.spec;
  if (limits.maxCost) {
    const current = nanocentsToCents(spend.periodNanocents);
    const { amount, currency, period } = limits.maxCost;
    // Exact: the limit is reached when the spend is, not when its rounding is.
    if (spend.periodNanocents >= BigInt(amount) * NANOCENTS_PER_CENT) {
      return {
        limit: 'maxCost',
        current,
        max: amount,
        instance: `maxCost/${amount}/${periodKey(period, now)}`,
        message: `the session's cost limit of ${amount} ${currency} cents a ${period} is reached (${current} spent this ${period})`,
      };
    }
  }
  if (limits.maxComputeMinutes !== undefined) {
    const current = Math.floor(spend.computeMinutes * 100) / 100;
    if (spend.computeMinutes >= limits.maxComputeMinutes) {
      return {
        limit: 'maxComputeMinutes',
        current,
        max: limits.maxComputeMinutes,
        instance: `maxComputeMinutes/${limits.maxComputeMinutes}`,
        message: `the session's limit of ${limits.maxComputeMinutes} compute minutes is reached (${current} used)`,
      };
    }
  }
  if (limits.maxDuration) {
    const max = parseDuration(limits.maxDuration)!;
    const current = Math.floor((now.getTime() - Date.parse(session.metadata.creationTimestamp)) / 1000);
    if (current >= max) {
      return {
        limit: 'maxDuration',
        current,
        max,
        instance: `maxDuration/${max}`,
        message: `the session's duration limit of ${limits.maxDuration} is reached (created ${session.metadata.creationTimestamp})`,
      };
    }
  }
  return undefined;
}

/** Whether the session has limits that spend can reach (maxAgents alone needs no ledger read). */
export function hasSpendLimits(limits: SessionLimits): boolean {
  return limits.maxCost !== undefined || limits.maxComputeMinutes !== undefined || limits.maxDuration !== undefined;
}

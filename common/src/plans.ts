import type { Queryable } from './db/index.js';

export const PLANS = ['free', 'pro', 'enterprise'] as const;
export type Plan = (typeof PLANS)[number];

/** The spec's plan tiers; enterprise is the install's own number. */
export const FREE_RATE_LIMIT = 60;
export const PRO_RATE_LIMIT = 300;
/** The sliding window of every plan, in seconds. */
export const RATE_LIMIT_WINDOW_SECONDS = 60;

/** How an install limits `/v1` requests: the plan of an organization without one, and the enterprise number. */
export interface PlanSettings {
  defaultPlan: Plan;
  enterpriseRateLimit: number;
}

export function planRateLimits(settings: PlanSettings): Record<Plan, number> {
  return { free: FREE_RATE_LIMIT, pro: PRO_RATE_LIMIT, enterprise: settings.enterpriseRateLimit };
}

export interface OrganizationPlan {
  /** The organization's own plan; null follows the install's default. */
  plan: Plan | null;
  /** The plan in force. */
  effectivePlan: Plan;
  requestsPerMinute: number;
  windowSeconds: number;
}

export async function getOrganizationPlan(db: Queryable, organizationId: string, settings: PlanSettings): Promise<OrganizationPlan | undefined> {
  const { rows } = await db.query<{ plan: Plan | null }>('SELECT plan FROM organizations WHERE id = $1', [organizationId]);
  if (!rows[0]) return undefined;
  const effectivePlan = rows[0].plan ?? settings.defaultPlan;
  return {
    plan: rows[0].plan,
    effectivePlan,
    requestsPerMinute: planRateLimits(settings)[effectivePlan],
    windowSeconds: RATE_LIMIT_WINDOW_SECONDS,
  };
}

/** Sets an organization's plan; null returns it to the install's default. */
export async function setOrganizationPlan(db: Queryable, organizationId: string, plan: Plan | null): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE organizations SET plan = $2 WHERE id = $1', [organizationId, plan]);
  return (rowCount ?? 0) > 0;
}

export interface RateLimitDecision {
  plan: Plan;
  limit: number;
  allowed: boolean;
  /** Requests counted in the window, this one included when admitted. */
  used: number;
  /** Milliseconds until the oldest counted request leaves the window. */
  resetMs: number;
  /** Milliseconds until a request would be admitted; 0 when this one was. */
  retryMs: number;
}

/**
 * Counts one request of an API key in its sliding window, in PostgreSQL so that every API
 * server replica shares it (the `rate_limit_take` function of migration 0018: one round trip,
 * serialised per key by its row lock).
 */
export async function takeRateLimit(
  db: Queryable,
  input: { keyId: string; organizationId: string } & RateLimitTake,
): Promise<RateLimitDecision> {
  const { rows } = await db.query<RateLimitRow>(`SELECT ${RATE_LIMIT_COLUMNS} FROM rate_limit_take($1, $2, $3, $4, $5, $6)`, [
    input.keyId,
    input.organizationId,
    ...rateLimitTakeArguments(input),
  ]);
  return toRateLimitDecision(rows[0]!);
}

/** When a request is counted, and under which settings: the arguments of `rate_limit_take` after the key and its organization. */
export interface RateLimitTake {
  now: Date;
  settings: PlanSettings;
}

/** The columns `rate_limit_take` answers, as `toRateLimitDecision` reads them. */
export const RATE_LIMIT_COLUMNS = 'plan, lim, allowed, used, reset_ms, retry_ms';

export interface RateLimitRow {
  plan: Plan;
  lim: number;
  allowed: boolean;
  used: number;
  reset_ms: string;
  retry_ms: string;
}

/** The four arguments of `rate_limit_take` after the key and its organization (`$3`…`$6` of a statement that gives those first). */
export function rateLimitTakeArguments(take: RateLimitTake): unknown[] {
  return [take.now, JSON.stringify(planRateLimits(take.settings)), take.settings.defaultPlan, RATE_LIMIT_WINDOW_SECONDS];
}

export function toRateLimitDecision(row: RateLimitRow): RateLimitDecision {
  return {
    plan: row.plan,
    limit: row.lim,
    allowed: row.allowed,
    used: row.used,
    resetMs: Math.max(0, Number(row.reset_ms)),
    retryMs: Math.max(0, Number(row.retry_ms)),
  };
}

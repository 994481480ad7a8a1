import { ApiError, nanocentsToCents as cents, type Clock, type Pool, type Queryable } from '@berth/common';
import type { Cost, Environment } from '@berth/crds';
import type { Principal } from '../http/context.js';
import { periodRange, startOfUtcMonth, utcDates, type Period, type TimeRange } from './periods.js';

/**
 * Usage and billing reports, read from the usage ledger. PostgreSQL sums the exact nanocents;
 * each sum a report shows is rounded to cents once, and a total is the sum of the rounded
 * parts shown beside it, so the numbers on one report add up.
 */

/** The charges a report reads: one organization's, in a half-open range, optionally narrowed. */
interface LedgerScope {
  organizationId: string;
  range: TimeRange;
  environment?: Environment;
  userId?: string;
}

interface UsageTotals {
  computeNanocents: bigint;
  computeMinutes: number;
  modelNanocents: bigint;
  modelCalls: number;
  inputTokens: number;
  outputTokens: number;
  storageNanocents: bigint;
  storageGbHours: number;
}

/** Who billed the charges: Berth, or the provider directly (the customer brought their own). */
interface PayerTotals {
  berthCompute: bigint;
  berthModel: bigint;
  berthStorage: bigint;
  directCompute: bigint;
  directModel: bigint;
  activeSessions: number;
}

interface DayTotals {
  date: string;
  nanocents: bigint;
  computeMinutes: number;
  modelCalls: number;
  tokens: number;
}

/** One UTC day's charges by kind: what the stacked daily chart draws. */
interface DayKindTotals {
  date: string;
  compute: bigint;
  model: bigint;
  storage: bigint;
}

interface ModelTotals {
  model: string;
  calls: number;
  inputTokens: number;
  outputTokens: number;
  nanocents: bigint;
}

/** What the reports read. A test key reads an empty ledger: test keys record no usage. */
interface UsageReader {
  totals(scope: LedgerScope): Promise<UsageTotals>;
  byPayer(scope: LedgerScope): Promise<PayerTotals>;
  topSpender(scope: LedgerScope): Promise<{ userId: string; nanocents: bigint } | undefined>;
  byDay(scope: LedgerScope): Promise<DayTotals[]>;
  byModel(scope: LedgerScope): Promise<ModelTotals[]>;
  byDayAndKind(scope: LedgerScope): Promise<DayKindTotals[]>;
  topSpenders(scope: LedgerScope, limit: number): Promise<{ userId: string; nanocents: bigint }[]>;
  runningAgents(organizationId: string, environment?: Environment): Promise<number>;
  storedGigabytes(organizationId: string, at: Date): Promise<number>;
}

const IN_SCOPE = `organization_id = $1 AND occurred_at >= $2 AND occurred_at < $3
  AND ($4::text IS NULL OR environment = $4) AND ($5::text IS NULL OR user_id = $5)`;

function scopeValues(scope: LedgerScope): unknown[] {
  return [scope.organizationId, scope.range.from, scope.range.until, scope.environment ?? null, scope.userId ?? null];
}

async function sumUsage(db: Queryable, scope: LedgerScope): Promise<UsageTotals> {
  const { rows } = await db.query<{
    compute_nanocents: string;
    compute_minutes: number;
    model_nanocents: string;
    model_calls: number;
    input_tokens: number;
    output_tokens: number;
    storage_nanocents: string;
    storage_gb_hours: number;
  }>(
    `SELECT coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'compute'), 0)::text AS compute_nanocents,
       round(coalesce(sum(quantity) FILTER (WHERE kind = 'compute'), 0), 2)::float8 AS compute_minutes,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'model'), 0)::text AS model_nanocents,
       count(*) FILTER (WHERE kind = 'model')::int AS model_calls,
       coalesce(sum(input_tokens), 0)::float8 AS input_tokens,
       coalesce(sum(output_tokens), 0)::float8 AS output_tokens,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'storage'), 0)::text AS storage_nanocents,
       round(coalesce(sum(quantity) FILTER (WHERE kind = 'storage'), 0), 3)::float8 AS storage_gb_hours
     FROM usage_ledger WHERE ${IN_SCOPE}`,
    scopeValues(scope),
  );
  const row = rows[0]!;
  return {
    computeNanocents: BigInt(row.compute_nanocents),
    computeMinutes: row.compute_minutes,
    modelNanocents: BigInt(row.model_nanocents),
    modelCalls: row.model_calls,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    storageNanocents: BigInt(row.storage_nanocents),
    storageGbHours: row.storage_gb_hours,
  };
}

/**
 * Bringing your own compute (`byoi_compute`, `byoi_both`) means the compute provider bills the
 * customer directly; bringing your own model keys (`byoi_models`, `byoi_both`) means the model
 * vendor does. Berth bills the rest, and all storage.
 */
async function sumByPayer(db: Queryable, scope: LedgerScope): Promise<PayerTotals> {
  const { rows } = await db.query<{
    berth_compute: string;
    berth_model: string;
    berth_storage: string;
    direct_compute: string;
    direct_model: string;
    active_sessions: number;
  }>(
    `SELECT
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'compute' AND billing_mode IN ('managed', 'byoi_models')), 0)::text AS berth_compute,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'model' AND billing_mode IN ('managed', 'byoi_compute')), 0)::text AS berth_model,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'storage'), 0)::text AS berth_storage,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'compute' AND billing_mode IN ('byoi_compute', 'byoi_both')), 0)::text AS direct_compute,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'model' AND billing_mode IN ('byoi_models', 'byoi_both')), 0)::text AS direct_model,
       count(DISTINCT session_id)::int AS active_sessions
     FROM usage_ledger WHERE ${IN_SCOPE}`,
    scopeValues(scope),
  );
  const row = rows[0]!;
  return {
    berthCompute: BigInt(row.berth_compute),
    berthModel: BigInt(row.berth_model),
    berthStorage: BigInt(row.berth_storage),
    directCompute: BigInt(row.direct_compute),
    directModel: BigInt(row.direct_model),
    activeSessions: row.active_sessions,
  };
}

/** The users with the highest exact cost, highest first; equal costs go to the smallest userId (byte order). */
async function topSpenders(db: Queryable, scope: LedgerScope, limit: number): Promise<{ userId: string; nanocents: bigint }[]> {
  const { rows } = await db.query<{ user_id: string; nanocents: string }>(
    `SELECT user_id, sum(amount_nanocents)::text AS nanocents FROM usage_ledger WHERE ${IN_SCOPE}
     GROUP BY user_id ORDER BY sum(amount_nanocents) DESC, user_id COLLATE "C" LIMIT $6`,
    [...scopeValues(scope), limit],
  );
  return rows.map((row) => ({ userId: row.user_id, nanocents: BigInt(row.nanocents) }));
}

/** Days with charges only, oldest first, each day's exact sums of compute, model and storage charges. */
async function sumByDayAndKind(db: Queryable, scope: LedgerScope): Promise<DayKindTotals[]> {
  const { rows } = await db.query<{ date: string; compute: string; model: string; storage: string }>(
    `SELECT to_char(date_trunc('day', occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS date,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'compute'), 0)::text AS compute,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'model'), 0)::text AS model,
       coalesce(sum(amount_nanocents) FILTER (WHERE kind = 'storage'), 0)::text AS storage
     FROM usage_ledger WHERE ${IN_SCOPE}
     GROUP BY date_trunc('day', occurred_at AT TIME ZONE 'UTC') ORDER BY 1`,
    scopeValues(scope),
  );
  return rows.map((row) => ({ date: row.date, compute: BigInt(row.compute), model: BigInt(row.model), storage: BigInt(row.storage) }));
}

/** Days with charges only, oldest first; a day is a UTC calendar day. */
async function sumByDay(db: Queryable, scope: LedgerScope): Promise<DayTotals[]> {
  const { rows } = await db.query<{ date: string; nanocents: string; compute_minutes: number; model_calls: number; tokens: number }>(
    `SELECT to_char(date_trunc('day', occurred_at AT TIME ZONE 'UTC'), 'YYYY-MM-DD') AS date,
       sum(amount_nanocents)::text AS nanocents,
       round(coalesce(sum(quantity) FILTER (WHERE kind = 'compute'), 0), 2)::float8 AS compute_minutes,
       count(*) FILTER (WHERE kind = 'model')::int AS model_calls,
       sum(input_tokens + output_tokens)::float8 AS tokens
     FROM usage_ledger WHERE ${IN_SCOPE}
     GROUP BY date_trunc('day', occurred_at AT TIME ZONE 'UTC') ORDER BY 1`,
    scopeValues(scope),
  );
  return rows.map((row) => ({
    date: row.date,
    nanocents: BigInt(row.nanocents),
    computeMinutes: row.compute_minutes,
    modelCalls: row.model_calls,
    tokens: row.tokens,
  }));
}

/** Highest exact cost first, equal costs by model name (byte order). Each model row is one call. */
async function sumByModel(db: Queryable, scope: LedgerScope): Promise<ModelTotals[]> {
  const { rows } = await db.query<{ model: string; calls: number; input_tokens: number; output_tokens: number; nanocents: string }>(
    // A model row always names its model; the vendor stands in should one not.
    `SELECT coalesce(model, provider) AS model, count(*)::int AS calls,
       sum(input_tokens)::float8 AS input_tokens, sum(output_tokens)::float8 AS output_tokens,
       sum(amount_nanocents)::text AS nanocents
     FROM usage_ledger WHERE ${IN_SCOPE} AND kind = 'model'
     GROUP BY coalesce(model, provider) ORDER BY sum(amount_nanocents) DESC, coalesce(model, provider) COLLATE "C"`,
    scopeValues(scope),
  );
  return rows.map((row) => ({
    model: row.model,
    calls: row.calls,
    inputTokens: row.input_tokens,
    outputTokens: row.output_tokens,
    nanocents: BigInt(row.nanocents),
  }));
}

/**
 * Sandboxes running now: open compute-meter lifetimes. Narrowed to an environment, a sandbox
 * counts once its session has a charge in that environment (the meter does not record it).
 */
async function countRunningAgents(db: Queryable, organizationId: string, environment?: Environment): Promise<number> {
  const { rows } = await db.query<{ running: number }>(
    `SELECT count(DISTINCT agent_id)::int AS running FROM compute_meter meter
     WHERE organization_id = $1 AND NOT closed
       AND ($2::text IS NULL OR EXISTS (
         SELECT 1 FROM usage_ledger ledger
         WHERE ledger.organization_id = meter.organization_id AND ledger.session_id = meter.session_id AND ledger.environment = $2))`,
    [organizationId, environment ?? null],
  );
  return rows[0]!.running;
}

/** Decimal gigabytes of the snapshot archives stored at that instant, to 3 decimals. */
async function storedGigabytes(db: Queryable, organizationId: string, at: Date): Promise<number> {
  const { rows } = await db.query<{ gb: number }>(
    `SELECT round(coalesce(sum(size_bytes), 0) / 1e9, 3)::float8 AS gb FROM snapshot_storage
     WHERE organization_id = $1 AND mode = 'live' AND stored_from <= $2 AND (deleted_at IS NULL OR deleted_at > $2)`,
    [organizationId, at],
  );
  return rows[0]!.gb;
}

function ledgerReader(db: Queryable): UsageReader {
  return {
    totals: (scope) => sumUsage(db, scope),
    byPayer: (scope) => sumByPayer(db, scope),
    topSpender: async (scope) => (await topSpenders(db, scope, 1))[0],
    topSpenders: (scope, limit) => topSpenders(db, scope, limit),
    byDay: (scope) => sumByDay(db, scope),
    byDayAndKind: (scope) => sumByDayAndKind(db, scope),
    byModel: (scope) => sumByModel(db, scope),
    runningAgents: (organizationId, environment) => countRunningAgents(db, organizationId, environment),
    storedGigabytes: (organizationId, at) => storedGigabytes(db, organizationId, at),
  };
}

const emptyReader: UsageReader = {
  totals: async () => ({
    computeNanocents: 0n,
    computeMinutes: 0,
    modelNanocents: 0n,
    modelCalls: 0,
    inputTokens: 0,
    outputTokens: 0,
    storageNanocents: 0n,
    storageGbHours: 0,
  }),
  byPayer: async () => ({ berthCompute: 0n, berthModel: 0n, berthStorage: 0n, directCompute: 0n, directModel: 0n, activeSessions: 0 }),
  topSpender: async () => undefined,
  topSpenders: async () => [],
  byDay: async () => [],
  byDayAndKind: async () => [],
  byModel: async () => [],
  runningAgents: async () => 0,
  storedGigabytes: async () => 0,
};

export function createUsageService(deps: { pool: Pool; clock: Clock; currency: string }) {
  const { clock } = deps;
  const live = ledgerReader(deps.pool);
  const readerFor = (principal: Principal) => (principal.mode === 'live' ? live : emptyReader);
  const money = (amount: number): Cost => ({ amount, currency: deps.currency });

  /** Every UTC day of the range, oldest first, days without charges included as zeros. */
  async function everyDay(principal: Principal, scope: LedgerScope): Promise<DayTotals[]> {
    const byDate = new Map((await readerFor(principal).byDay(scope)).map((day) => [day.date, day]));
    return utcDates(scope.range).map(
      (date) => byDate.get(date) ?? { date, nanocents: 0n, computeMinutes: 0, modelCalls: 0, tokens: 0 },
    );
  }

  return {
    /**
     * The range form of the summary: charges in [from, until), and the archives stored at
     * `until`. `from` defaults to the start of the current billing period (the 1st of the month,
     * UTC), `until` to now; `from` must come before `until`.
     */
    async rangeSummary(principal: Principal, query: { from?: Date; until?: Date }) {
      const now = clock.now();
      const range = { from: query.from ?? startOfUtcMonth(now), until: query.until ?? now };
      // Without parameters the range is empty only at the first instant of a month: zeros, not an error.
      const given = query.from !== undefined || query.until !== undefined;
      if (given && range.from >= range.until) {
        const from = query.from ? range.from.toISOString() : `${range.from.toISOString()}, the start of the current billing period`;
        const until = query.until ? range.until.toISOString() : `${range.until.toISOString()}, now`;
        const message = `from (${from}) must be before until (${until})`;
        const field = query.from ? 'from' : 'until';
        throw new ApiError('unprocessable_entity', message, { fields: { [field]: [message] } });
      }
      const reader = readerFor(principal);
      const [totals, gb] = await Promise.all([
        reader.totals({ organizationId: principal.organizationId, range }),
        reader.storedGigabytes(principal.organizationId, range.until),
      ]);
      const compute = cents(totals.computeNanocents);
      const models = cents(totals.modelNanocents);
      const storage = cents(totals.storageNanocents);
      return {
        period: { from: range.from.toISOString(), until: range.until.toISOString() },
        compute: { minutes: totals.computeMinutes, cost: money(compute) },
        models: { inputTokens: totals.inputTokens, outputTokens: totals.outputTokens, cost: money(models) },
        storage: { gb, cost: money(storage) },
        total: money(compute + models + storage),
      };
    },

    /** The period form of the summary: who billed what, and activity, for one period and environment. */
    async periodSummary(principal: Principal, query: { period: Period; environment?: Environment }) {
      const scope: LedgerScope = {
        organizationId: principal.organizationId,
        range: periodRange(query.period, clock.now()),
        ...(query.environment ? { environment: query.environment } : {}),
      };
      const reader = readerFor(principal);
      const [payers, top, runningAgents] = await Promise.all([
        reader.byPayer(scope),
        reader.topSpender(scope),
        reader.runningAgents(principal.organizationId, query.environment),
      ]);
      const berth = { compute: cents(payers.berthCompute), model: cents(payers.berthModel), storage: cents(payers.berthStorage) };
      const direct = { compute: cents(payers.directCompute), model: cents(payers.directModel) };
      // No charge is a primitive yet; the key is there so that clients can rely on it.
      const primitives = 0;
      const berthTotal = berth.compute + berth.model + berth.storage + primitives;
      const directTotal = direct.compute + direct.model;
      return {
        totalCost: money(berthTotal + directTotal),
        activeSessions: payers.activeSessions,
        runningAgents,
        topUser: top ? { userId: top.userId, cost: money(cents(top.nanocents)) } : null,
        environment: query.environment ?? 'all',
        berthBilled: {
          compute: money(berth.compute),
          model: money(berth.model),
          storage: money(berth.storage),
          primitives: money(primitives),
          total: money(berthTotal),
        },
        providerDirect: { compute: money(direct.compute), model: money(direct.model), total: money(directTotal) },
      };
    },

    async daily(principal: Principal, period: Period) {
      const range = periodRange(period, clock.now());
      const days = await everyDay(principal, { organizationId: principal.organizationId, range });
      return days.map((day) => ({
        date: day.date,
        cost: money(cents(day.nanocents)),
        computeMinutes: day.computeMinutes,
        modelCalls: day.modelCalls,
        tokens: day.tokens,
      }));
    },

    async user(principal: Principal, userId: string, period: Period) {
      const scope: LedgerScope = { organizationId: principal.organizationId, range: periodRange(period, clock.now()), userId };
      const [totals, days] = await Promise.all([readerFor(principal).totals(scope), everyDay(principal, scope)]);
      const compute = cents(totals.computeNanocents);
      const models = cents(totals.modelNanocents);
      const storage = cents(totals.storageNanocents);
      return {
        compute: { minutes: totals.computeMinutes, cost: money(compute) },
        models: {
          calls: totals.modelCalls,
          tokens: { input: totals.inputTokens, output: totals.outputTokens },
          cost: money(models),
        },
        storage: { gbHours: totals.storageGbHours, cost: money(storage) },
        total: money(compute + models + storage),
        breakdown: days.map((day) => ({ date: day.date, total: money(cents(day.nanocents)) })),
      };
    },

    /** Every UTC day of the period, oldest first, its cost split by kind; each part rounded to cents, the total their sum. */
    async dailyByKind(principal: Principal, period: Period) {
      const range = periodRange(period, clock.now());
      const byDate = new Map((await readerFor(principal).byDayAndKind({ organizationId: principal.organizationId, range })).map((day) => [day.date, day]));
      return {
        data: utcDates(range).map((date) => {
          const day = byDate.get(date);
          const parts = { compute: cents(day?.compute ?? 0n), model: cents(day?.model ?? 0n), storage: cents(day?.storage ?? 0n) };
          return {
            date,
            compute: money(parts.compute),
            model: money(parts.model),
            storage: money(parts.storage),
            total: money(parts.compute + parts.model + parts.storage),
          };
        }),
      };
    },

    /** The users who cost the most in the period, highest first (equal costs by userId). */
    async users(principal: Principal, period: Period, limit: number) {
      const range = periodRange(period, clock.now());
      const users = await readerFor(principal).topSpenders({ organizationId: principal.organizationId, range }, limit);
      return { data: users.map((user) => ({ userId: user.userId, cost: money(cents(user.nanocents)) })) };
    },

    async models(principal: Principal, period: Period) {
      const scope: LedgerScope = { organizationId: principal.organizationId, range: periodRange(period, clock.now()) };
      const models = await readerFor(principal).byModel(scope);
      return {
        data: models.map((model) => ({
          model: model.model,
          calls: model.calls,
          tokens: { input: model.inputTokens, output: model.outputTokens },
          cost: money(cents(model.nanocents)),
        })),
      };
    },
  };
}

export type UsageService = ReturnType<typeof createUsageService>;

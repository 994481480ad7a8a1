import { costSchema, environmentSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { PERIODS, type Period } from '../services/periods.js';
import type { UsageService } from '../services/usage.js';
import { dailyUsageExample, modelUsageExample, rangeSummaryExample, userUsageExample } from './examples.js';

const PERIOD_MEANINGS =
  'UTC, from a midnight until now: `today`; `week` (from Monday); `last_7_days` and `last_30_days` (that many calendar days, today included); `month` (from the 1st)';

const period = z.enum(PERIODS, { error: `must be one of: ${PERIODS.join(', ')}` });
export const periodQuery = (fallback: Period) =>
  z.object({ period: period.default(fallback).describe(`${PERIOD_MEANINGS}; default \`${fallback}\``) }).strict();

const instant = z.iso
  .datetime({ offset: true, error: 'must be an ISO 8601 date-time with a time zone, such as 2026-03-01T00:00:00Z' })
  .transform((text) => new Date(text));

const RANGE_PARAMS = ['from', 'until'] as const;
const PERIOD_PARAMS = ['period', 'environment'] as const;

const summaryQuery = z
  .object({
    from: instant.optional().describe('range form: start, included; default the start of the current billing period (the 1st of the month, 00:00 UTC)'),
    until: instant.optional().describe('range form: end, excluded; default now'),
    period: period.optional().describe(`period form: ${PERIOD_MEANINGS}; default \`month\``),
    environment: z
      .enum(environmentSchema.options, { error: `must be one of: ${environmentSchema.options.join(', ')}` })
      .optional()
      .describe('period form: only charges of sessions in this environment; omit for all'),
  })
  .strict()
  .superRefine((query, context) => {
    const range = RANGE_PARAMS.filter((name) => query[name] !== undefined);
    const periodForm = PERIOD_PARAMS.filter((name) => query[name] !== undefined);
    if (range.length === 0 || periodForm.length === 0) return;
    const message = `${range.join(' and ')} (range form) cannot be combined with ${periodForm.join(' and ')} (period form)`;
    for (const name of [...range, ...periodForm]) context.addIssue({ code: 'custom', path: [name], message });
  });

const cost = costSchema;
const tokenCount = z.number().int().nonnegative();

const rangeSummarySchema = z
  .object({
    period: z
      .object({ from: z.string(), until: z.string() })
      .describe('the range read, ISO 8601: charges at or after `from` and before `until`'),
    compute: z.object({ minutes: z.number().describe('sandbox minutes charged, to 2 decimals'), cost }),
    models: z.object({ inputTokens: tokenCount, outputTokens: tokenCount, cost }),
    storage: z.object({
      gb: z.number().describe('decimal gigabytes (1e9 bytes) of snapshot archives stored at `until`, to 3 decimals'),
      cost: cost.describe('snapshot storage charged in the range (by GB-hour)'),
    }),
    total: cost.describe('compute + models + storage, each rounded to cents first'),
  })
  .meta({ id: 'UsageRangeSummary', description: 'UsageSummary, range form' });

const periodSummarySchema = z
  .object({
    totalCost: cost.describe('berthBilled.total + providerDirect.total'),
    activeSessions: z.number().int().describe('sessions with a charge in the period'),
    runningAgents: z
      .number()
      .int()
      .describe('sandboxes running now; with `environment`, those of sessions that have a charge in that environment'),
    topUser: z
      .object({ userId: z.string(), cost })
      .nullable()
      .describe('the user with the highest cost in the period (equal costs: the smallest userId); null without usage'),
    environment: z.enum([...environmentSchema.options, 'all']).describe('the `environment` filter, or `all`'),
    berthBilled: z
      .object({
        compute: cost.describe('sandboxes Berth provided (managed and byoi_models)'),
        model: cost.describe('model calls on Berth keys (managed and byoi_compute)'),
        storage: cost.describe('snapshot storage'),
        primitives: cost.describe('always 0: no primitive is charged yet'),
        total: cost,
      })
      .describe('what Berth billed'),
    providerDirect: z
      .object({
        compute: cost.describe('sandboxes on your own compute provider (byoi_compute and byoi_both)'),
        model: cost.describe('model calls on your own model keys (byoi_models and byoi_both)'),
        total: cost,
      })
      .describe('what you paid providers directly'),
  })
  .meta({ id: 'UsagePeriodSummary', description: 'UsageSummary, period form' });

const dailyUsageSchema = z
  .object({
    date: z.string().describe('the UTC day, YYYY-MM-DD'),
    cost,
    computeMinutes: z.number().describe('to 2 decimals'),
    modelCalls: z.number().int(),
    tokens: tokenCount.describe('input + output tokens'),
  })
  .meta({ id: 'DailyUsage' });

const dayTotalSchema = z.object({ date: z.string().describe('the UTC day, YYYY-MM-DD'), total: cost });

const userUsageSchema = z
  .object({
  compute: z.object({ minutes: z.number().describe('to 2 decimals'), cost }),
  models: z.object({ calls: z.number().int(), tokens: z.object({ input: tokenCount, output: tokenCount }), cost }),
  storage: z.object({ gbHours: z.number().describe('GB-hours of snapshot archives charged, to 3 decimals'), cost }),
  total: cost.describe('compute + models + storage, each rounded to cents first'),
  breakdown: z.array(dayTotalSchema).describe('every UTC day of the period, oldest first, days without usage included'),
  })
  .meta({ id: 'UserUsage' });

const modelUsageSchema = z
  .object({
    model: z.string().describe('`<vendor>/<model>`'),
    calls: z.number().int(),
    tokens: z.object({ input: tokenCount, output: tokenCount }),
    cost,
  })
  .meta({ id: 'ModelUsage' });

export const AMOUNTS =
  'Amounts are integer cents: each sum shown is rounded once from the exact charges. Test keys record no usage: they get the same shapes with zeros.';

export function usageRoutes(table: RouteTable, usage: UsageService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/v1/usage/summary',
      operationId: 'getUsageSummary',
      tag: 'Usage',
      summary: 'Usage summary',
      description: [
        'Two forms. With `period` or `environment` the **period form** answers: total cost, sessions with charges, sandboxes running now, the top user, and the split between what Berth billed (`berthBilled`) and what you paid providers directly when you brought your own compute or model keys (`providerDirect`). `period` defaults to `month`.',
        'Otherwise (no parameters, or `from` and/or `until`) the **range form** answers: compute minutes, model tokens and storage with their costs for charges at or after `from` and before `until` (ISO 8601 date-times with a time zone; default: the start of the current billing period, the 1st of the month 00:00 UTC, until now). `storage.gb` is the size of the snapshot archives stored at `until`; `storage.cost` is the storage charged in the range. `from` must be before `until`.',
        'Mixing `from`/`until` with `period`/`environment` is 422 `unprocessable_entity`, `details.fields` naming each parameter involved.',
        AMOUNTS,
      ].join('\n\n'),
      query: summaryQuery,
      responses: {
        200: { description: 'the range form, or the period form', schema: z.union([rangeSummarySchema, periodSummarySchema]), example: rangeSummaryExample },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => {
        const { from, until, period, environment } = query;
        const body =
          period !== undefined || environment !== undefined
            ? await usage.periodSummary(principal, { period: period ?? 'month', environment })
            : await usage.rangeSummary(principal, { from, until });
        return { status: 200, body };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/usage/daily',
      operationId: 'getDailyUsage',
      tag: 'Usage',
      summary: 'Usage per day',
      description: `A bare array: one entry per UTC calendar day of the period, oldest first, today included and days without usage as zeros. A day's cost is its charges' sum, rounded once. ${AMOUNTS}`,
      query: periodQuery('last_30_days'),
      responses: { 200: { description: 'one entry per day', schema: z.array(dailyUsageSchema), example: dailyUsageExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await usage.daily(principal, query.period) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/usage/users/:userId',
      operationId: 'getUserUsage',
      tag: 'Usage',
      summary: "A user's usage",
      description: `The usage of one end-user (the sessions' \`userId\`) in the period, with a daily breakdown. A user without usage gets zeros, not 404: there is no list of users. ${AMOUNTS}`,
      params: z.object({ userId: z.string().min(1).max(256).describe("the customer's end-user identifier") }).strict(),
      query: periodQuery('month'),
      responses: { 200: { description: "the user's usage", schema: userUsageSchema, example: userUsageExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await usage.user(principal, params.userId, query.period) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/usage/models',
      operationId: 'getModelUsage',
      tag: 'Usage',
      summary: 'Usage per model',
      description: `Calls, tokens and cost of each model used in the period (one model call is one charge), highest exact cost first, equal costs by model name. Calls on your own model keys are included. ${AMOUNTS}`,
      query: periodQuery('month'),
      responses: { 200: { description: 'the models used', schema: z.object({ data: z.array(modelUsageSchema) }), example: modelUsageExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await usage.models(principal, query.period) }),
    }),
  );
}

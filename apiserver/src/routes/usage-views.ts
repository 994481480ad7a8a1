import { costSchema, modeSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { principalOf } from '../management/acting.js';
import { queryInteger } from '../services/pagination.js';
import type { UsageService } from '../services/usage.js';
import { AMOUNTS, periodQuery } from './usage.js';

/**
 * The dashboard's usage reads that the data plane does not have: the spec's `DailyUsage` has one
 * cost a day and there is no list of users (`/v1/usage/users/:userId` reads one), so these two
 * live under `/api` only, beside the data plane's views.
 */
const mode = { mode: modeSchema.default('live').describe('`live` (default) or `test`: the usage of live keys (test keys record none)') };

const dayByKindSchema = z
  .object({
    date: z.string().describe('the UTC day, YYYY-MM-DD'),
    compute: costSchema.describe('sandbox minutes'),
    model: costSchema.describe('model calls'),
    storage: costSchema.describe('snapshot storage'),
    total: costSchema.describe('compute + model + storage, each rounded to cents first'),
  })
  .meta({ id: 'DailyUsageByKind' });

const userCostSchema = z.object({ userId: z.string().describe("the customer's end-user identifier"), cost: costSchema }).meta({ id: 'UserCost' });

const usd = (amount: number) => ({ amount, currency: 'usd' });

export function usageViewRoutes(table: RouteTable, usage: UsageService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/usage/daily-by-kind',
      operationId: 'dashboardDailyUsageByKind',
      tag: 'Usage',
      summary: 'Cost per day by kind',
      description: `One entry per UTC calendar day of the period, oldest first, today included and days without usage as zeros: the cost of sandboxes (compute), model calls (model) and snapshot storage (storage), for the dashboard's stacked chart. ${AMOUNTS}`,
      permission: 'billing.view',
      query: periodQuery('last_30_days').extend(mode),
      responses: {
        200: {
          description: 'one entry per day',
          schema: z.object({ data: z.array(dayByKindSchema) }),
          example: { data: [{ date: '2026-03-14', compute: usd(12), model: usd(29), storage: usd(0), total: usd(41) }] },
        },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ caller, query }) => ({ status: 200, body: await usage.dailyByKind(principalOf(caller, query.mode), query.period) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/usage/users',
      operationId: 'dashboardTopUsers',
      tag: 'Usage',
      summary: 'The users who cost the most',
      description: `End-users (the sessions' \`userId\`) by their cost in the period, highest first, equal costs by userId; users without charges are not listed. ${AMOUNTS}`,
      permission: 'billing.view',
      query: periodQuery('month').extend({
        ...mode,
        limit: queryInteger({ min: 1, max: 100 }).default(10).describe('at most this many, 1 to 100 (default 10)'),
      }),
      responses: {
        200: {
          description: 'the users, highest cost first',
          schema: z.object({ data: z.array(userCostSchema) }),
          example: { data: [{ userId: 'user_4711', cost: usd(180) }, { userId: 'user_0815', cost: usd(42) }] },
        },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ caller, query }) => ({ status: 200, body: await usage.users(principalOf(caller, query.mode), query.period, query.limit) }),
    }),
  );
}

import { WEBHOOK_EVENTS } from '@berth/common';
import { modeSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { principalOf } from '../management/acting.js';
import type { EventLogService } from '../services/event-log.js';
import { paginationQuery } from '../services/pagination.js';

const eventSchema = z
  .object({
    id: z.string().describe('`evt_…`, the `id` its webhook deliveries carry'),
    event: z.enum(WEBHOOK_EVENTS),
    subjectId: z.string().nullable().describe('what it is about: an agent, a session, a schedule, a trigger'),
    createdAt: z.string(),
    data: z.record(z.string(), z.unknown()).describe('the payload its webhook deliveries carry'),
  })
  .meta({ id: 'LoggedEvent' });

const eventExample = {
  id: 'evt_01m80gqv9d4kjqfcmvs2q4jxem',
  event: 'agent.completed' as const,
  subjectId: 'agt_01m80gqvefwgc4tgw5batt7zt1',
  createdAt: '2026-11-23T16:00:00.000Z',
  data: { agentId: 'agt_01m80gqvefwgc4tgw5batt7zt1', sessionId: 'ses_01m80gqv9d4kjqfcmvs2q4jxem', status: 'completed' },
};

/** The organization's event log, for everyone of its team (view logs). */
export function eventLogRoutes(table: RouteTable, events: EventLogService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/events',
      operationId: 'listEvents',
      tag: 'Logs',
      summary: "The organization's event log",
      description:
        'Lifecycle events (agents started, completed, failed, paused; runs; session limits and budgets; schedules and triggers fired) of live or test keys, newest first, whether or not a webhook subscribes to them. Pass `nextCursor` as `cursor` for the next page.',
      permission: 'observability.view',
      query: paginationQuery.extend({
        mode: modeSchema.default('live').describe('`live` (default) or `test`'),
        type: z.enum(WEBHOOK_EVENTS, { error: `must be one of: ${WEBHOOK_EVENTS.join(', ')}` }).optional().describe('only events of this type'),
      }),
      responses: {
        200: {
          description: 'one page of events',
          schema: z.object({ data: z.array(eventSchema), hasMore: z.boolean(), nextCursor: z.string().optional() }),
          example: { data: [eventExample], hasMore: false },
        },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ caller, query }) => {
        const { mode, ...page } = query;
        return { status: 200, body: await events.list(principalOf(caller, mode), page) };
      },
    }),
  );
}

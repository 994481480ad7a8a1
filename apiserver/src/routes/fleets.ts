import { ApiError, type StreamEvent } from '@berth/common';
import { MAX_FLEET_CONCURRENCY, MAX_FLEET_ITEMS, costSchema, currencySchema, fleetPhaseSchema, freeFormObject } from '@berth/crds';
import { z } from 'zod';
import { openEventStream } from '../http/sse.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { FleetService } from '../services/fleets.js';
import { paginationQuery } from '../services/pagination.js';
import type { StreamHub } from '../services/stream-hub.js';
import { idParam } from './schemas.js';

/** Fleets: request and response schemas, their examples, and the routes. */

/** The largest one item may be, as text or as JSON. */
export const MAX_FLEET_ITEM_BYTES = 8 * 1024;
/** The largest prompt template. */
export const MAX_FLEET_PROMPT_BYTES = 16 * 1024;

const bytesAtMost = (limit: number) => (text: string) => Buffer.byteLength(text) <= limit;

const itemInputSchema = z.union([
  z.string().min(1).refine(bytesAtMost(MAX_FLEET_ITEM_BYTES), `must be at most ${MAX_FLEET_ITEM_BYTES / 1024} KiB`),
  freeFormObject({ maxDepth: 16, maxBytes: MAX_FLEET_ITEM_BYTES }),
]);

const errorSchema = z.object({ code: z.string(), message: z.string() });

export const fleetSchema = z
  .object({
    id: z.string().describe('`flt_…`'),
    name: z.string().nullable().describe('the name given on creation, or null'),
    agent: z.string().describe('the agent definition as given (name or `adef_…` id)'),
    definitionId: z.string().describe('the `adef_…` id `agent` named on creation; each item uses its current version when the item starts'),
    sessionId: z.string().describe('the session every item runs in; its limits apply'),
    prompt: z.string().nullable().describe('the task template, or null (each item is the task as it is)'),
    status: fleetPhaseSchema.describe(
      '`running` until every item ended; then `completed` (some items may have failed) or `failed` (every item failed); `paused` when the cost cap or a session limit stopped it (`reason`), `cancelled` when cancelled. Only `running` changes.',
    ),
    reason: z.enum(['cost_limit', 'session_limit', 'cancelled']).nullable().describe('why it stopped early, or null'),
    concurrency: z.number().int().describe('the most items running at once'),
    costCap: costSchema.nullable().describe('the most the fleet may spend, or null'),
    total: z.number().int().describe('the number of items'),
    completed: z.number().int(),
    failed: z.number().int(),
    cancelled: z.number().int(),
    running: z.number().int().describe('items whose run is queued or under way'),
    pending: z.number().int().describe('items not started yet'),
    cost: costSchema.nullable().describe('spend so far: ended items and what running items spent; null until the operator first looked at it'),
    cancelRequested: z.boolean().describe('true once cancel was asked; `status` becomes `cancelled` when the operator has cancelled the rest'),
    createdAt: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'Fleet', description: 'one agent definition run over many items, a bounded number at a time' });

export const fleetItemSchema = z
  .object({
    id: z.string().describe('`itm_…`'),
    index: z.number().int().describe('its position in `items` on creation, from 0'),
    input: z.union([z.string(), z.record(z.string(), z.unknown())]).describe('the item as given'),
    status: z.enum(['pending', 'running', 'completed', 'failed', 'cancelled']),
    output: z.string().nullable().describe("the run's final answer, once completed"),
    error: errorSchema.nullable().describe('why it failed'),
    cost: costSchema.nullable().describe("the run's cost once it ended"),
    jobId: z.string().nullable().describe('`job_…`: its run (GET /v1/jobs/{id}), once started'),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'FleetItem', description: 'one item of a fleet and its result' });

const fleetPage = z
  .object({ data: z.array(fleetSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('the next page; absent on the last') })
  .meta({ id: 'FleetPage' });
const itemPage = z
  .object({ data: z.array(fleetItemSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('the next page; absent on the last') })
  .meta({ id: 'FleetItemPage' });

export const createFleetBody = z
  .object({
    agent: z.string().min(1).max(200).describe('agent definition name or `adef_…` id; unknown or archived is 422'),
    sessionId: z.string().min(1).max(128).describe('the session (`ses_…`) the items run in; its limits apply to them'),
    items: z
      .array(itemInputSchema)
      .min(1)
      .max(MAX_FLEET_ITEMS)
      .describe(`1 to ${MAX_FLEET_ITEMS} items, each text or a JSON object of at most ${MAX_FLEET_ITEM_BYTES / 1024} KiB (the whole body at most 2 MiB)`),
    prompt: z
      .string()
      .min(1)
      .refine(bytesAtMost(MAX_FLEET_PROMPT_BYTES), `must be at most ${MAX_FLEET_PROMPT_BYTES / 1024} KiB`)
      .refine((text) => /\{\{\s*item(\.[A-Za-z0-9_-]+)?\s*\}\}/.test(text), 'must use {{item}} or {{item.<key>}}')
      .optional()
      .describe('task template: `{{item}}` is the item as text (an object as its JSON), `{{item.<key>}}` a top-level field of an object item'),
    concurrency: z.number().int().min(1).max(MAX_FLEET_CONCURRENCY).optional().describe(`the most items running at once, 1 to ${MAX_FLEET_CONCURRENCY} (default 10)`),
    costCap: z
      .object({ amount: z.number().int('must be an integer number of cents').min(1).describe('integer cents, at least 1'), currency: currencySchema.describe("the install's currency") })
      .strict()
      .optional()
      .describe('the most the fleet may spend; reaching it cancels the rest (`fleet.cost_limited`)'),
    name: z.string().min(1).max(200).optional(),
  })
  .strict();

const FLEET_ID = 'flt_01jq3vf1j3m5p7r9t1v3x5z7b9';
const fleetExample = {
  id: FLEET_ID,
  name: 'classify tickets',
  agent: 'ticket-classifier',
  definitionId: 'adef_01jq3vd5g7j9m1p3r5t7v9x1z3',
  sessionId: 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j',
  prompt: 'Classify this support ticket as bug, question or request: {{item.text}}',
  status: 'running' as const,
  reason: null,
  concurrency: 5,
  costCap: { amount: 500, currency: 'usd' },
  total: 3,
  completed: 1,
  failed: 0,
  cancelled: 0,
  running: 2,
  pending: 0,
  cost: { amount: 3, currency: 'usd' },
  cancelRequested: false,
  createdAt: '2026-03-01T09:30:00.000Z',
};
const createExample = {
  agent: 'ticket-classifier',
  sessionId: 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j',
  name: 'classify tickets',
  prompt: 'Classify this support ticket as bug, question or request: {{item.text}}',
  items: [{ text: 'The export button does nothing.' }, { text: 'How do I add a user?' }, { text: 'Please add dark mode.' }],
  concurrency: 5,
  costCap: { amount: 500, currency: 'usd' },
};
const itemExample = {
  id: 'itm_01jq3vf1k4n6q8s0u2w4y6a8c0',
  index: 0,
  input: { text: 'The export button does nothing.' },
  status: 'completed' as const,
  output: 'bug',
  error: null,
  cost: { amount: 1, currency: 'usd' },
  jobId: 'job_01jq9z0a1c3e5g7j9m1p3r5t7v',
  startedAt: '2026-03-01T09:30:00.140Z',
  finishedAt: '2026-03-01T09:30:04.905Z',
};

const fleetStreamEventSchema = z
  .object({
    event: z.enum(['fleet.started', 'item.completed', 'item.failed', 'fleet.paused', 'fleet.completed', 'fleet.cancelled', 'heartbeat']),
    data: z.string().describe('the payload, as JSON'),
    id: z.string().regex(/^\d+$/).optional().describe('the event id for Last-Event-ID; heartbeats have none'),
    retry: z.number().int().optional().describe('reconnection delay in milliseconds, sent once when the stream opens'),
  })
  .meta({ id: 'FleetStreamEvent', description: 'one event of a fleet stream' });

const STREAM_DESCRIPTION = `Server-sent events of the fleet, from its first (each \`data\` is JSON):
- \`fleet.started\` \`{ fleetId, total, concurrency }\`;
- \`item.completed\` \`{ itemId, itemIndex, cost }\`: an item's run completed (its output: \`GET /v1/fleets/{id}/items\`);
- \`item.failed\` \`{ itemId, itemIndex, error, cost }\`: an item's run failed;
- \`fleet.paused\` \`{ reason, cancelled, processed, totalCost }\`: the cost cap (\`reason: "cost_limit"\`) or a session limit (\`"session_limit"\`) stopped the fleet; the items not ended were cancelled;
- \`fleet.completed\` \`{ totalCost, completed, failed }\`: every item ended;
- \`fleet.cancelled\` \`{ cancelled, processed, totalCost }\`: the fleet was cancelled;
- \`heartbeat\` \`{ t }\` every 15 s, without an id.
No event is sent when an item's agent starts. The stream ends after \`fleet.completed\`, \`fleet.paused\` or \`fleet.cancelled\`; a fleet that already ended sends all its events and ends. A client that reconnects with \`Last-Event-ID\` (header, or \`lastEventId\` query) gets the events after that one.`;

const TERMINAL = new Set(['fleet.completed', 'fleet.paused', 'fleet.cancelled']);
const TAG = 'Fleets';

export function fleetRoutes(table: RouteTable, deps: { fleets: FleetService; hub: StreamHub; heartbeatMs: number }): void {
  const { fleets } = deps;
  const id = idParam('flt', 'fleet');
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/fleets',
      operationId: 'createFleet',
      tag: TAG,
      summary: 'Create a fleet',
      description: `Runs the agent definition once per item, in the given session, at most \`concurrency\` items at a time, in index order. Each item is one run: an agent from the definition's current version gets the item as its task (text as it is, an object as its JSON), or \`prompt\` with the item put in, and is ended when its run ends. The items are kept with their results (\`GET /v1/fleets/{id}/items\`). With \`costCap\`, the fleet stops when its spend reaches the cap: the items not ended are cancelled, \`fleet.cost_limited\` is sent and the stream says \`fleet.paused\`. The session's limits apply to every item; an item they refuse stops the fleet the same way. Up to ${MAX_FLEET_ITEMS} items inline. A bad field is 422 naming it.`,
      body: createFleetBody,
      requestExample: createExample,
      responses: { 201: { description: 'created; it starts within a moment', schema: fleetSchema, example: { ...fleetExample, completed: 0, running: 0, pending: 3, cost: null } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, body }) => ({ status: 201, body: await fleets.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/fleets',
      operationId: 'listFleets',
      tag: TAG,
      summary: 'List fleets',
      description: 'Newest first, in a stable order. Pass the returned `cursor` to get the next page; it is absent on the last page.',
      query: paginationQuery,
      responses: { 200: { description: 'one page of fleets', schema: fleetPage, example: { data: [fleetExample], hasMore: false } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await fleets.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/fleets/:id',
      operationId: 'getFleet',
      tag: TAG,
      summary: 'Get a fleet',
      description: 'The fleet, its counts of items by status and its cost so far.',
      params: id,
      responses: { 200: { description: 'the fleet', schema: fleetSchema, example: fleetExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await fleets.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/fleets/:id/items',
      operationId: 'listFleetItems',
      tag: TAG,
      summary: "List a fleet's items with their results",
      description: 'In index order. Pass the returned `cursor` to get the next page; it is absent on the last page.',
      params: id,
      query: paginationQuery,
      responses: { 200: { description: 'one page of items', schema: itemPage, example: { data: [itemExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await fleets.items(principal, params.id, query) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/fleets/:id/cancel',
      operationId: 'cancelFleet',
      tag: TAG,
      summary: 'Cancel a fleet',
      description:
        'No item starts after this; the operator cancels the items not started and the runs under way, then the fleet is `cancelled`. Answers the fleet as it is now (`cancelRequested: true`). Cancelling a cancelled fleet changes nothing; a fleet that ended otherwise is 409.',
      params: id,
      responses: { 200: { description: 'cancel asked', schema: fleetSchema, example: { ...fleetExample, cancelRequested: true } } },
      errors: ['not_found', 'conflict'],
      handler: async ({ principal, params }) => ({ status: 200, body: await fleets.cancel(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/fleets/:id/stream',
      operationId: 'streamFleet',
      tag: TAG,
      summary: "Stream the fleet's events",
      description: STREAM_DESCRIPTION,
      params: id,
      query: z.object({ lastEventId: z.string().regex(/^\d+$/).optional().describe('same as the Last-Event-ID header') }).strict(),
      responses: {
        200: {
          description: 'an event stream',
          contentType: 'text/event-stream',
          schema: fleetStreamEventSchema,
          example: { id: '42', event: 'item.completed', data: '{"itemId":"itm_01jq3vf1k4n6q8s0u2w4y6a8c0","itemIndex":0,"cost":{"amount":1,"currency":"usd"}}' },
        },
      },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ req, res, principal, params, query }) => {
        await fleets.find(principal, params.id);
        const header = req.get('last-event-id');
        if (header !== undefined && !/^\d+$/.test(header)) {
          throw new ApiError('unprocessable_entity', 'Last-Event-ID must be an event id of this stream', { fields: { 'Last-Event-ID': ['not an event id'] } });
        }
        let stream: ReturnType<typeof openEventStream> | undefined;
        let ended = false;
        const early: StreamEvent[] = [];
        const send = (events: StreamEvent[]) => {
          for (const event of events) {
            if (ended) return;
            stream!.write(event.type, event.data, event.seq);
            if (TERMINAL.has(event.type)) {
              ended = true;
              stream!.end();
            }
          }
        };
        // From the fleet's first event unless the client says where it was.
        const unsubscribe = await deps.hub.subscribe(params.id, header ?? query.lastEventId ?? '0', (events) => {
          if (!stream) early.push(...events);
          else send(events);
        });
        stream = openEventStream(req, res, deps.heartbeatMs);
        send(early.splice(0));
        req.log.info({ fleetId: params.id }, 'fleet stream opened');
        await stream.closed;
        unsubscribe();
      },
    }),
  );
}

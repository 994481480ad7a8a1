import { z } from 'zod';
import { queryInteger } from '../services/pagination.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import { WEBHOOK_EVENTS } from '@berth/common';
import type { WebhookService } from '../services/webhooks.js';
import { idParam, okSchema } from './schemas.js';
import { deliveryExample, webhookExample, webhookTestExample } from './examples.js';

const webhookSchema = z
  .object({
  id: z.string().describe('`wh_…`'),
  url: z.string(),
  events: z.array(z.enum(WEBHOOK_EVENTS)),
  secret: z.string().describe('in full only in the response that created it; after that its first 8 characters and …'),
  createdAt: z.string(),
  })
  .meta({ id: 'Webhook' });

const deliveryState = z.enum(['pending', 'succeeded', 'failed', 'cancelled']);

const deliverySchema = z
  .object({
  id: z.string().describe('`del_…`, sent as X-Svc-Delivery on every attempt'),
  eventId: z.string().nullable().describe('the event delivered (the envelope `id`); null for the sample of /test'),
  event: z.string(),
  state: deliveryState.describe('pending (to be attempted, or retried at nextAttemptAt), succeeded, failed (after 3 retries), cancelled (webhook deleted)'),
  attempts: z.number().int(),
  lastStatus: z.number().int().nullable().describe('HTTP status of the last attempt; null when it got no answer'),
  lastError: z.string().nullable().describe('why the last attempt failed: the status and the start of the body, a timeout, a refused address'),
  lastAttemptAt: z.string().nullable(),
  nextAttemptAt: z.string().nullable(),
  createdAt: z.string(),
  history: z.array(
    z.object({ attempt: z.number().int(), at: z.string(), durationMs: z.number().int(), status: z.number().int().nullable(), error: z.string().nullable() }),
  ),
  })
  .meta({ id: 'WebhookDelivery' });

const SIGNING = 'Each delivery is a POST of `{ id, event, createdAt, data }` with `X-Svc-Signature: sha256=<hex HMAC-SHA256 of the raw body keyed by the secret>` and `X-Svc-Delivery: <delivery id>`.';

export function webhookRoutes(table: RouteTable, webhooks: WebhookService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/webhooks',
      operationId: 'createWebhook',
      tag: 'Webhooks',
      summary: 'Register a webhook',
      description: `Subscribes \`url\` to \`events\`. ${SIGNING} The URL must be https (http only where the install allows it) and must not point at a private, loopback or link-local address unless the install allows it; the address is checked again when each delivery resolves it. The secret is generated when omitted and returned in full only here. Webhooks of a test key get the events of test-key calls.`,
      body: z
        .object({
          url: z.string().min(1).max(2048),
          events: z.array(z.enum(WEBHOOK_EVENTS, { error: `must be one of: ${WEBHOOK_EVENTS.join(', ')}` })).min(1, 'subscribe to at least one event'),
          secret: z.string().min(16, 'at least 16 characters').max(256).optional().describe('default: generated (`whsec_…`)'),
        })
        .strict(),
      requestExample: { url: 'https://hooks.example.com/berth', events: ['agent.completed', 'agent.failed'] },
      responses: {
        201: {
          description: 'the webhook, with its secret in full',
          schema: webhookSchema,
          example: { ...webhookExample, secret: 'whsec_3fa85f6457174562b3fc2c963f66afa6' },
        },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, body }) => ({ status: 201, body: await webhooks.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/webhooks',
      operationId: 'listWebhooks',
      tag: 'Webhooks',
      summary: 'List webhooks',
      description: 'Newest first; secrets masked to their first 8 characters.',
      responses: { 200: { description: 'the webhooks', schema: z.object({ data: z.array(webhookSchema) }), example: { data: [webhookExample] } } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await webhooks.list(principal) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/webhooks/:id',
      operationId: 'getWebhook',
      tag: 'Webhooks',
      summary: 'Get a webhook',
      description: 'Its secret masked to the first 8 characters.',
      params: idParam('wh', 'webhook'),
      responses: { 200: { description: 'the webhook', schema: webhookSchema, example: webhookExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await webhooks.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/webhooks/:id',
      operationId: 'deleteWebhook',
      tag: 'Webhooks',
      summary: 'Delete a webhook',
      description: 'No further events are sent to it; deliveries not made yet are cancelled (their log stays until the webhook is gone).',
      params: idParam('wh', 'webhook'),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await webhooks.delete(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/webhooks/:id/test',
      operationId: 'testWebhook',
      tag: 'Webhooks',
      summary: 'Send a sample event',
      description: `Sends a sample \`agent.completed\` (\`data.test: true\`) once, now, signed like every delivery, and answers with the result (within about 10 s). It is not retried; it appears in the delivery log. ${SIGNING}`,
      params: idParam('wh', 'webhook'),
      responses: {
        200: {
          description: 'what the receiver answered',
          example: webhookTestExample,
          schema: z.object({
            deliveryId: z.string(),
            delivered: z.boolean().describe('true when the receiver answered 2xx within 10 s'),
            status: z.number().int().nullable(),
            error: z.string().nullable(),
            durationMs: z.number().int(),
          }),
        },
      },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await webhooks.test(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/webhooks/:id/deliveries/:deliveryId/resend',
      operationId: 'resendWebhookDelivery',
      tag: 'Webhooks',
      summary: 'Send a delivery again',
      description:
        `Sends a delivery that ended (\`succeeded\` or \`failed\`) once more, now: the same body, signed the same way, with the same \`X-Svc-Delivery\` (receivers deduplicate on the event's \`id\`), and answers with the result (within about 10 s). ` +
        `It is recorded as the delivery's next attempt, and the delivery takes its outcome (\`succeeded\` or \`failed\`); it is not retried. A delivery still \`pending\` (its retries under way), \`cancelled\`, or being resent is 409 \`conflict\` (beyond the spec). ${SIGNING}`,
      params: idParam('wh', 'webhook').extend({ deliveryId: z.string().min(1).max(128).describe('delivery id (`del_…`)') }),
      responses: {
        200: {
          description: 'what the receiver answered',
          example: { ...webhookTestExample, attempt: 5 },
          schema: z.object({
            deliveryId: z.string(),
            attempt: z.number().int().describe("the attempt this was, in the delivery's history"),
            delivered: z.boolean().describe('true when the receiver answered 2xx within 10 s'),
            status: z.number().int().nullable(),
            error: z.string().nullable(),
            durationMs: z.number().int(),
          }),
        },
      },
      errors: ['not_found', 'conflict'],
      handler: async ({ principal, params }) => ({ status: 200, body: await webhooks.resend(principal, params.id, params.deliveryId) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/webhooks/:id/deliveries',
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: "A webhook's delivery log",
      description:
        'Newest first, each delivery with its state, attempts and every attempt\'s status or error, so a failed delivery says why. A delivery is retried 5 s, 30 s and 5 min after failed attempts; after the third retry fails it is `failed`.',
      params: idParam('wh', 'webhook'),
      query: z
        .object({
          limit: queryInteger({ min: 1, max: 200 }).default(50).describe('at most this many, 1 to 200 (default 50)'),
          state: deliveryState.optional(),
        })
        .strict(),
      responses: { 200: { description: 'the deliveries', schema: z.object({ data: z.array(deliverySchema) }), example: { data: [deliveryExample] } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await webhooks.deliveries(principal, params.id, query) }),
    }),
  );
}

import { ApiError, MAX_TRIGGER_BODY_BYTES, TRIGGER_SIGNATURE_HEADER, TRIGGER_TIMESTAMP_HEADER, TRIGGER_TOLERANCE_SECONDS } from '@berth/common';
import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { TriggerService } from '../services/triggers.js';
import { createTriggerExample, fireBodyExample, fireExample, triggerExample } from './examples.js';
import { idParam, okSchema, userIdSchema } from './schemas.js';

const triggerSchema = z
  .object({
    id: z.string().describe('`trg_…`'),
    name: z.string().nullable(),
    type: z.enum(['webhook']),
    agent: z.string().describe('the agent definition (`adef_…`) each fire runs'),
    userId: z.string().describe('the end-user whose session the runs belong to'),
    url: z.string().describe('the public fire URL: `POST` signed requests to it, without an API key'),
    secret: z.string().describe('the signing secret: in full only in the response that created the trigger; after that its first 8 characters and …'),
    createdAt: z.string(),
    lastFiredAt: z.string().nullable().describe('when a fire was last accepted'),
  })
  .meta({ id: 'Trigger' });

const SIGNING =
  `Send \`${TRIGGER_SIGNATURE_HEADER}: <lowercase hex HMAC-SHA256 of the raw body, keyed by the secret>\` (\`sha256=<hex>\` is accepted too). ` +
  `For replay protection, also send \`${TRIGGER_TIMESTAMP_HEADER}: <Unix seconds>\` and sign \`<timestamp>.<raw body>\` instead: ` +
  `such a request is refused when its timestamp is more than ${TRIGGER_TOLERANCE_SECONDS} s from the server's time, or when it was accepted once already.`;

export function triggerRoutes(table: RouteTable, deps: { triggers: TriggerService; publicUrl: string | undefined }): void {
  const { triggers } = deps;
  const base = (req: Parameters<typeof requestOrigin>[0]) => deps.publicUrl ?? requestOrigin(req);
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/triggers',
      operationId: 'createTrigger',
      tag: 'Triggers',
      summary: 'Create a webhook trigger',
      description: `A public URL that, on each correctly signed request, runs the agent definition \`agent\` for \`userId\` with the request's JSON body as its input, as a job (\`GET /v1/jobs/{id}\`). ${SIGNING} The secret is generated and returned in full only here. Type \`event\` (fire on a Berth event) is not available yet: 501.`,
      body: z
        .object({
          agent: z.string().min(1).max(256).describe('the agent definition to run: its name or `adef_…` id'),
          userId: userIdSchema.describe('the end-user the runs are for: their session (made when missing) holds the agents'),
          name: z.string().min(1).max(128).optional().describe('for people'),
          type: z.enum(['webhook', 'event'], { error: 'must be "webhook"' }).describe('`webhook`; `event` answers 501'),
        })
        .strict(),
      requestExample: createTriggerExample,
      responses: { 201: { description: 'the trigger, with its secret in full', schema: triggerSchema, example: { ...triggerExample, secret: 'trgsec_Q2xhc3NpY2FsbHkgc2lnbmVkIGJvZGllcyBtYXR0ZXI' } } },
      errors: ['unprocessable_entity', 'not_implemented'],
      handler: async ({ req, principal, body }) => {
        if (body.type === 'event') {
          throw new ApiError('not_implemented', 'triggers of type "event" are not available yet; create a "webhook" trigger', { fields: { type: ['"event" is not available yet'] } });
        }
        return { status: 201, body: await triggers.create(principal, { ...body, type: body.type }, base(req)) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/triggers',
      operationId: 'listTriggers',
      tag: 'Triggers',
      summary: 'List triggers',
      description: 'Newest first; secrets redacted to their first 8 characters. Deleted triggers are not listed.',
      responses: { 200: { description: 'the triggers', schema: z.object({ data: z.array(triggerSchema) }), example: { data: [triggerExample] } } },
      errors: [],
      handler: async ({ req, principal }) => ({ status: 200, body: await triggers.list(principal, base(req)) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/triggers/:id',
      operationId: 'getTrigger',
      tag: 'Triggers',
      summary: 'Get a trigger',
      description: 'Its secret redacted to the first 8 characters.',
      params: idParam('trg', 'trigger'),
      responses: { 200: { description: 'the trigger', schema: triggerSchema, example: triggerExample } },
      errors: ['not_found'],
      handler: async ({ req, principal, params }) => ({ status: 200, body: await triggers.get(principal, params.id, base(req)) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/triggers/:id',
      operationId: 'deleteTrigger',
      tag: 'Triggers',
      summary: 'Delete a trigger',
      description: 'Its URL stops accepting at once (404); a fire under way when this is called finishes first. Jobs it started before keep running.',
      params: idParam('trg', 'trigger'),
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await triggers.delete(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/triggers/:id/fire',
      operationId: 'fireTrigger',
      tag: 'Triggers',
      summary: 'Fire a trigger',
      description:
        `No API key: the signature is the authorization. ${SIGNING} ` +
        `The raw JSON body (at most ${MAX_TRIGGER_BODY_BYTES / 1024} KiB) is the run's input. Answers 202 at once, with the job it queued (follow it with \`GET /v1/jobs/{jobId}\`); ` +
        'the job is stored before the answer, so it runs even if this server stops right after. Writes `trigger.fired`. ' +
        'A missing or wrong signature, a malformed or stale timestamp: 401 with `details.reason` (`missing_signature`, `bad_signature`, `bad_timestamp`, `stale_timestamp`); ' +
        'a signed request accepted before: 409 (`details.reason: replayed`); an unknown or deleted trigger: 404; a body that is not JSON: 422; ' +
        "a trigger whose agent definition was archived: 409.",
      auth: false,
      params: idParam('trg', 'trigger'),
      headers: [
        { name: TRIGGER_SIGNATURE_HEADER, required: true, description: 'lowercase hex HMAC-SHA256 keyed by the trigger secret, optionally after `sha256=`', pattern: '^(sha256=)?[0-9a-f]{64}$' },
        { name: TRIGGER_TIMESTAMP_HEADER, required: false, description: `Unix time in seconds; when sent, the signature covers \`<timestamp>.<raw body>\` and the request is refused outside ±${TRIGGER_TOLERANCE_SECONDS} s or when replayed`, pattern: '^[0-9]{1,12}$' },
      ],
      rawBody: { limitBytes: MAX_TRIGGER_BODY_BYTES, description: "any JSON value: the run's input, as sent", example: fireBodyExample },
      responses: {
        202: {
          description: 'queued',
          schema: z.object({ ok: z.literal(true), jobId: z.string().describe('`job_…`: follow it with GET /v1/jobs/{id}') }).meta({ id: 'TriggerFired' }),
          example: fireExample,
        },
      },
      errors: ['unauthorized', 'not_found', 'conflict'],
      handler: async ({ req, params }) => {
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const body = await triggers.fire(params.id, raw, { signature: req.get(TRIGGER_SIGNATURE_HEADER), timestamp: req.get(TRIGGER_TIMESTAMP_HEADER) });
        return { status: 202, body };
      },
    }),
  );
}

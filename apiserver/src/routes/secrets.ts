import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { MAX_SECRET_BYTES, SECRET_NAME_PATTERN, SECRET_NAME_RULE } from '@berth/common';
import type { SecretService } from '../services/secrets.js';
import { idParam } from './schemas.js';
import { secretListExample, secretsExample } from './examples.js';
import { okSchema } from './schemas.js';

const secretName = z.string().regex(SECRET_NAME_PATTERN, `must be ${SECRET_NAME_RULE}`);

// Messages never quote a value: they say what is wrong with it.
const secretValues = z
  .record(
    secretName,
    z.string({ error: 'must be a string' }).refine((value) => Buffer.byteLength(value) <= MAX_SECRET_BYTES, `must be at most ${MAX_SECRET_BYTES / 1024} KiB`),
  )
  .refine((values) => Object.keys(values).length > 0, 'give at least one name and value')
  .refine((values) => Object.keys(values).length <= 100, 'at most 100 secrets per request')
  .describe('a flat object from secret name to value; existing names are overwritten');

const secretList = z.object({ data: z.array(z.object({ name: z.string(), createdAt: z.string() })) });
const okCount = z.object({ ok: z.literal(true), count: z.number().int().describe('how many names were written') });
const ok = okSchema;
const nameParam = z.object({ name: z.string().min(1).max(200) }).strict();

const NEVER = 'Values are encrypted at rest (AES-256-GCM) and never returned, logged or quoted in errors.';

export function secretRoutes(table: RouteTable, secrets: SecretService): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/secrets',
      operationId: 'putSecrets',
      tag: 'Secrets',
      summary: 'Store organization secrets',
      description: `Stores each name and value of the body for the whole organization; existing names are overwritten. Agents get the ones they name in \`secrets\` as environment variables. ${NEVER}`,
      body: secretValues,
      requestExample: secretsExample,
      responses: { 200: { description: 'stored', schema: okCount, example: { ok: true, count: 2 } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, body }) => ({ status: 200, body: await secrets.put(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/secrets',
      operationId: 'listSecrets',
      tag: 'Secrets',
      summary: 'List organization secrets',
      description: 'Names and creation times, never values.',
      responses: { 200: { description: 'the secrets', schema: secretList, example: secretListExample } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await secrets.list(principal) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/secrets/:name',
      operationId: 'deleteSecret',
      tag: 'Secrets',
      summary: 'Delete an organization secret',
      description: 'Agents created afterwards cannot name it; running agents keep the value they started with.',
      params: nameParam,
      responses: { 200: { description: 'deleted', schema: ok, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await secrets.delete(principal, params.name) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/sessions/:id/secrets',
      operationId: 'putSessionSecrets',
      tag: 'Secrets',
      summary: 'Store session secrets',
      description: `Like \`POST /v1/secrets\`, for one session: its agents get these, and a session secret wins over an organization secret of the same name. ${NEVER}`,
      params: idParam('ses', 'session'),
      body: secretValues,
      requestExample: { DATABASE_URL: 'postgres://user_4711@db.example.com/sales' },
      responses: { 200: { description: 'stored', schema: okCount, example: { ok: true, count: 1 } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await secrets.put(principal, body, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/sessions/:id/secrets',
      operationId: 'listSessionSecrets',
      tag: 'Secrets',
      summary: 'List session secrets',
      description: "The session's own secrets (not the organization's): names and creation times.",
      params: idParam('ses', 'session'),
      responses: { 200: { description: 'the secrets', schema: secretList, example: secretListExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await secrets.list(principal, params.id) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/sessions/:id/secrets/:name',
      operationId: 'deleteSessionSecret',
      tag: 'Secrets',
      summary: 'Delete a session secret',
      description: 'An organization secret of the same name, if any, applies again to agents created afterwards.',
      params: idParam('ses', 'session').extend({ name: z.string().min(1).max(200) }),
      responses: { 200: { description: 'deleted', schema: ok, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await secrets.delete(principal, params.name, params.id) }),
    }),
  );
}

import type { ApiKeyRecord } from '@berth/common';
import { modeSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { actorOf } from '../management/acting.js';
import type { ApiKeyService } from '../services/api-keys.js';

const apiKeySchema = z
  .object({
    id: z.string().describe('`key_…`'),
    prefix: z.string().describe('the start of the key (`svc_live_` or `svc_test_` and 6 characters): all that is shown after creation'),
    label: z.string(),
    mode: modeSchema,
    createdBy: z.string().nullable().describe('who created it: a user id (`usr_…`), or what created it for the install (`berth keys`, `berth up`); kept for the record only'),
    createdAt: z.string(),
    lastUsedAt: z.string().nullable().describe('the last request it made, to the minute'),
    revokedAt: z.string().nullable().describe('null while it works'),
  })
  .meta({ id: 'ApiKey', description: "an API key of the organization, by its prefix; the full key is never shown again" });

const keyExample = {
  id: 'key_01m80gqv9d4kjqfcmvs2q4jxem',
  prefix: 'svc_live_4Tq9Zb',
  label: 'backend',
  mode: 'live' as const,
  createdBy: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v',
  createdAt: '2026-11-23T16:00:00.000Z',
  lastUsedAt: '2026-11-23T16:42:00.000Z',
  revokedAt: null,
};

const view = (record: ApiKeyRecord) => ({
  id: record.id,
  prefix: record.prefix,
  label: record.label,
  mode: record.mode,
  createdBy: record.createdBy,
  createdAt: record.createdAt,
  lastUsedAt: record.lastUsedAt,
  revokedAt: record.revokedAt,
});

/** API keys on the management plane: everyone sees prefixes; owners and admins create and revoke. */
export function apiKeyRoutes(table: RouteTable, keys: ApiKeyService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/keys',
      operationId: 'listApiKeys',
      tag: 'API keys',
      summary: "List the organization's API keys",
      description: 'Every key of the organization, revoked ones included, oldest first: prefix, label, mode, creator, creation, last use. Never a full key.',
      permission: 'keys.view',
      responses: { 200: { description: 'the keys', schema: z.object({ data: z.array(apiKeySchema) }), example: { data: [keyExample] } } },
      errors: [],
      handler: async ({ caller }) => ({ status: 200, body: { data: (await keys.list(caller.organizationId!)).map(view) } }),
    }),
    defineRoute({
      method: 'post',
      path: '/api/keys',
      operationId: 'createApiKey',
      tag: 'API keys',
      summary: 'Create an API key',
      description:
        'A key of the organization (not of the caller: it keeps working after its creator leaves). The answer holds the full key, shown this once; later only its prefix. Recorded in the audit log.',
      permission: 'keys.manage',
      body: z
        .object({
          label: z.string().trim().min(1, 'give the key a label').max(200).describe('what the key is for, shown in the list'),
          mode: modeSchema.describe('`live` (real sandboxes, billed) or `test` (mock results, never billed)'),
        })
        .strict(),
      requestExample: { label: 'backend', mode: 'live' },
      responses: {
        201: {
          description: 'the key, in full this once',
          schema: apiKeySchema.extend({ key: z.string().describe('the full key: store it now, it is never shown again') }),
          example: { ...keyExample, lastUsedAt: null, key: 'svc_live_4Tq9ZbR2xK8mN3pQ7wL1vY6tH0sD5fG9jA2cE4uB' },
        },
      },
      errors: [],
      handler: async ({ caller, body }) => {
        const { key, record } = await keys.create(caller.organizationId!, actorOf(caller), body);
        return { status: 201, body: { ...view(record), key } };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/api/keys/:keyId',
      operationId: 'revokeApiKey',
      tag: 'API keys',
      summary: 'Revoke an API key',
      description: "The key's next request is refused with 401 `auth/key_revoked`. Revoking a revoked key changes nothing. Recorded in the audit log.",
      permission: 'keys.manage',
      params: z.object({ keyId: z.string().min(1).max(128).describe('`key_…`') }).strict(),
      responses: { 200: { description: 'the key, revoked', schema: apiKeySchema, example: { ...keyExample, revokedAt: '2026-11-23T17:00:00.000Z' } } },
      errors: ['not_found'],
      handler: async ({ caller, params }) => ({ status: 200, body: view(await keys.revoke(caller.organizationId!, actorOf(caller), params.keyId)) }),
    }),
  );
}

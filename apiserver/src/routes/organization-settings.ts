import { PLANS } from '@berth/common';
import { sessionLimitsSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { actorOf } from '../management/acting.js';
import { paginationQuery } from '../services/pagination.js';
import type { OrganizationSettingsService } from '../services/organization-settings.js';

const planName = z.enum(PLANS);

const organizationSchema = z
  .object({ id: z.string().describe('`org_…`'), name: z.string(), createdAt: z.string() })
  .meta({ id: 'Organization' });

const planSchema = z
  .object({
    plan: planName.nullable().describe("the organization's own plan; null follows the install's default"),
    effectivePlan: planName.describe('the plan in force'),
    requestsPerMinute: z.number().int().describe('the rate limit of each API key of the organization on /v1'),
    windowSeconds: z.number().int().describe('the sliding window of the limit'),
    defaultPlan: planName.describe("the install's default plan"),
    plans: z.object({ free: z.number().int(), pro: z.number().int(), enterprise: z.number().int() }).describe('requests per minute per key of each plan on this install'),
  })
  .meta({ id: 'OrganizationPlan' });

const budgetsSchema = z
  .object({
    sessionDefaults: sessionLimitsSchema.describe('the limits a new session gets for those it does not give itself; {} sets none'),
  })
  .meta({ id: 'Budgets' });

const auditEntrySchema = z
  .object({
    id: z.string().describe('`aud_…`'),
    actor: z.object({ type: z.enum(['user', 'system']), id: z.string().describe('a user id, or what acted for the install (`berth keys`)') }),
    action: z.string().describe('`<thing>.<verb>`: `api_key.created`, `plan.changed`, `webhook.deleted`, …'),
    target: z.object({ type: z.string(), id: z.string() }),
    details: z.record(z.string(), z.unknown()).describe('what changed; never a secret'),
    at: z.string(),
  })
  .meta({ id: 'AuditEntry' });

const organizationExample = { id: 'org_01m80gqv9d4kjqfcmvs2q4jxem', name: 'Acme', createdAt: '2026-11-01T09:00:00.000Z' };
const planExample = {
  plan: 'pro' as const,
  effectivePlan: 'pro' as const,
  requestsPerMinute: 300,
  windowSeconds: 60,
  defaultPlan: 'free' as const,
  plans: { free: 60, pro: 300, enterprise: 60000 },
};
const budgetsExample = { sessionDefaults: { maxCost: { amount: 500, currency: 'usd', period: 'day' as const }, maxAgents: 5 } };
const auditExample = {
  id: 'aud_01m80gqv9d4kjqfcmvs2q4jxem',
  actor: { type: 'user' as const, id: 'usr_01m80gqv2b7h3y9k0x1c4r5t6v' },
  action: 'api_key.created',
  target: { type: 'api_key', id: 'key_01m80gqv9d4kjqfcmvs2q4jxem' },
  details: { prefix: 'svc_live_4Tq9Zb', mode: 'live', label: 'backend' },
  at: '2026-11-23T16:00:00.000Z',
};

/** The organization's name, plan and budgets (owners and admins change them), and its audit log (owners and admins read it). */
export function organizationSettingsRoutes(table: RouteTable, settings: OrganizationSettingsService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/api/organization',
      operationId: 'getOrganization',
      tag: 'Organization',
      summary: 'The organization',
      description: 'The organization the signed-in session acts in.',
      permission: 'team.view',
      responses: { 200: { description: 'the organization', schema: organizationSchema, example: organizationExample } },
      errors: [],
      handler: async ({ caller }) => ({ status: 200, body: await settings.organization(caller.organizationId!) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/api/organization',
      operationId: 'updateOrganization',
      tag: 'Organization',
      summary: 'Change the organization settings',
      description: "Renames the organization. Recorded in the audit log.",
      permission: 'organization.update',
      body: z.object({ name: z.string().trim().min(1, 'give a name').max(200) }).strict(),
      requestExample: { name: 'Acme' },
      responses: { 200: { description: 'the organization', schema: organizationSchema, example: organizationExample } },
      errors: [],
      handler: async ({ caller, body }) => ({ status: 200, body: await settings.rename(caller.organizationId!, actorOf(caller), body.name) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/plan',
      operationId: 'getPlan',
      tag: 'Plan and budgets',
      summary: "The organization's plan and rate limit",
      description: 'Free allows 60 requests a minute per API key, Pro 300, Enterprise what the install sets; a sliding window of 60 s per key on /v1.',
      permission: 'billing.view',
      responses: { 200: { description: 'the plan', schema: planSchema, example: planExample } },
      errors: [],
      handler: async ({ caller }) => ({ status: 200, body: await settings.plan(caller.organizationId!) }),
    }),
    defineRoute({
      method: 'put',
      path: '/api/plan',
      operationId: 'changePlan',
      tag: 'Plan and budgets',
      summary: "Change the organization's plan",
      description: "`free`, `pro` or `enterprise`, or null to follow the install's default. Counts from the next /v1 request. Recorded in the audit log.",
      permission: 'billing.manage',
      body: z.object({ plan: planName.nullable() }).strict(),
      requestExample: { plan: 'pro' },
      responses: { 200: { description: 'the plan now', schema: planSchema, example: planExample } },
      errors: [],
      handler: async ({ caller, body }) => ({ status: 200, body: await settings.changePlan(caller.organizationId!, actorOf(caller), body.plan) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/session-defaults',
      operationId: 'getBudgets',
      tag: 'Plan and budgets',
      summary: "The organization's budgets",
      description: 'The default limits of new sessions (`maxCost`, `maxAgents`, `maxComputeMinutes`, `maxDuration`).',
      permission: 'billing.view',
      responses: { 200: { description: 'the budgets', schema: budgetsSchema, example: budgetsExample } },
      errors: [],
      handler: async ({ caller }) => ({ status: 200, body: await settings.budgets(caller.organizationId!) }),
    }),
    defineRoute({
      method: 'put',
      path: '/api/session-defaults',
      operationId: 'setBudgets',
      tag: 'Plan and budgets',
      summary: "Set the organization's budgets",
      description:
        'Replaces the default limits of new sessions: a session created from now on (by POST /v1/sessions, by-user, or a trigger or schedule) gets each limit it does not give itself; sessions that exist keep theirs. `maxCost` is in the install currency. Recorded in the audit log.',
      permission: 'billing.manage',
      body: budgetsSchema.strict(),
      requestExample: budgetsExample,
      responses: { 200: { description: 'the budgets now', schema: budgetsSchema, example: budgetsExample } },
      errors: [],
      handler: async ({ caller, body }) => ({ status: 200, body: await settings.setBudgets(caller.organizationId!, actorOf(caller), body.sessionDefaults) }),
    }),
    defineRoute({
      method: 'get',
      path: '/api/audit-log',
      operationId: 'listAuditLog',
      tag: 'Organization',
      summary: 'The audit log',
      description: 'Management actions on the organization, newest first: who, what, on what, when. Pass `nextCursor` as `cursor` for the next page.',
      permission: 'audit.view',
      query: paginationQuery,
      responses: {
        200: {
          description: 'one page of entries',
          schema: z.object({ data: z.array(auditEntrySchema), hasMore: z.boolean(), nextCursor: z.string().optional() }),
          example: { data: [auditExample], hasMore: false },
        },
      },
      errors: ['unprocessable_entity'],
      handler: async ({ caller, query }) => ({ status: 200, body: await settings.auditLog(caller.organizationId!, query) }),
    }),
  );
}

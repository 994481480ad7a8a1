import { recordAudit, type Clock, type Pool } from '@berth/common';
import { modeSchema } from '@berth/crds';
import { z } from 'zod';
import { validationError } from '../http/errors.js';
import type { RouteSpec, RouteTable } from '../http/route.js';
import { actorOf, principalOf } from '../management/acting.js';
import type { Permission } from '../management/permissions.js';

type AnyRoute = RouteSpec<any, any, any>;

/** What a management change records: the action and what it acted on, from the route's params and answer. */
interface AuditOf {
  action: string;
  target: (context: { params: Record<string, string>; reply: any }) => { type: string; id: string };
  /** Never a secret: a webhook's URL and events, a provider's name. */
  details?: (context: { params: Record<string, string>; body: any; reply: any }) => Record<string, unknown>;
}

interface View {
  method: AnyRoute['method'];
  /** The data-plane route the dashboard's route serves; its path under `/api` drops `/v1`. */
  path: string;
  permission: Permission;
  audit?: AuditOf;
}

/**
 * The data-plane routes the dashboard uses as they are, under `/api` with the role the spec's
 * permission table asks for: the same schemas, examples and services, so the two planes cannot
 * answer differently. Each takes `mode` (live or test data; default live) where a key would
 * carry it.
 */
export const DATA_PLANE_VIEWS: View[] = [
  // Webhooks: owners and admins configure them; everyone reads them and their delivery log.
  {
    method: 'post',
    path: '/v1/webhooks',
    permission: 'webhooks.manage',
    audit: {
      action: 'webhook.created',
      target: ({ reply }) => ({ type: 'webhook', id: reply.id }),
      details: ({ reply }) => ({ url: reply.url, events: reply.events }),
    },
  },
  { method: 'get', path: '/v1/webhooks', permission: 'observability.view' },
  { method: 'get', path: '/v1/webhooks/:id', permission: 'observability.view' },
  {
    method: 'delete',
    path: '/v1/webhooks/:id',
    permission: 'webhooks.manage',
    audit: { action: 'webhook.deleted', target: ({ params }) => ({ type: 'webhook', id: params.id! }) },
  },
  {
    method: 'post',
    path: '/v1/webhooks/:id/test',
    permission: 'webhooks.manage',
    audit: { action: 'webhook.tested', target: ({ params }) => ({ type: 'webhook', id: params.id! }), details: ({ reply }) => ({ delivered: reply.delivered }) },
  },
  { method: 'get', path: '/v1/webhooks/:id/deliveries', permission: 'observability.view' },
  {
    method: 'post',
    path: '/v1/webhooks/:id/deliveries/:deliveryId/resend',
    permission: 'webhooks.manage',
    audit: {
      action: 'webhook.delivery_resent',
      target: ({ params }) => ({ type: 'webhook_delivery', id: params.deliveryId! }),
      details: ({ params, reply }) => ({ webhookId: params.id, attempt: reply.attempt, delivered: reply.delivered }),
    },
  },
  // BYOI providers.
  { method: 'get', path: '/v1/providers', permission: 'providers.view' },
  {
    method: 'put',
    path: '/v1/providers/:provider',
    permission: 'providers.manage',
    audit: {
      action: 'provider.configured',
      target: ({ params }) => ({ type: 'provider', id: params.provider! }),
      details: ({ body }) => ({ credentialRef: body.credentialRef, enabled: body.enabled }),
    },
  },
  {
    method: 'delete',
    path: '/v1/providers/:provider',
    permission: 'providers.manage',
    audit: { action: 'provider.removed', target: ({ params }) => ({ type: 'provider', id: params.provider! }) },
  },
  // Secrets: members set them, owners and admins delete them, everyone sees their names (never values).
  {
    method: 'post',
    path: '/v1/secrets',
    permission: 'secrets.write',
    audit: { action: 'secrets.set', target: () => ({ type: 'secrets', id: 'organization' }), details: ({ body }) => ({ names: Object.keys(body) }) },
  },
  { method: 'get', path: '/v1/secrets', permission: 'secrets.view' },
  {
    method: 'delete',
    path: '/v1/secrets/:name',
    permission: 'secrets.delete',
    audit: { action: 'secret.deleted', target: ({ params }) => ({ type: 'secret', id: params.name! }) },
  },
  // Billing and usage.
  { method: 'get', path: '/v1/usage/summary', permission: 'billing.view' },
  { method: 'get', path: '/v1/usage/daily', permission: 'billing.view' },
  { method: 'get', path: '/v1/usage/users/:userId', permission: 'billing.view' },
  { method: 'get', path: '/v1/usage/models', permission: 'billing.view' },
  // Sessions and agents: members create and change sessions, everyone reads them.
  { method: 'post', path: '/v1/sessions', permission: 'sessions.manage' },
  { method: 'patch', path: '/v1/sessions/:id', permission: 'sessions.manage' },
  { method: 'get', path: '/v1/sessions', permission: 'sessions.view' },
  { method: 'get', path: '/v1/sessions/:id', permission: 'sessions.view' },
  { method: 'get', path: '/v1/sessions/:id/agents', permission: 'sessions.view' },
  { method: 'get', path: '/v1/agents/:id', permission: 'sessions.view' },
  // The agent page: its live stream for everyone who sees agents, its exec console for those who run them.
  { method: 'get', path: '/v1/agents/:id/stream', permission: 'sessions.view' },
  { method: 'post', path: '/v1/agents/:id/exec', permission: 'sessions.manage' },
  // Logs: runs (tasks), jobs of triggers and schedules, a schedule's history.
  { method: 'get', path: '/v1/tasks/:id', permission: 'observability.view' },
  { method: 'get', path: '/v1/jobs/:id', permission: 'observability.view' },
  // Schedules, for the dashboard's schedules page (next run, paused); their history is the line above.
  { method: 'get', path: '/v1/schedules', permission: 'observability.view' },
  { method: 'get', path: '/v1/schedules/:id/history', permission: 'observability.view' },
  // What runs on its own (view logs, as schedules): triggers, workflows with their runs, fleets with their items.
  { method: 'get', path: '/v1/triggers', permission: 'observability.view' },
  { method: 'get', path: '/v1/workflows', permission: 'observability.view' },
  { method: 'get', path: '/v1/workflows/:id', permission: 'observability.view' },
  { method: 'get', path: '/v1/workflows/:id/runs', permission: 'observability.view' },
  { method: 'get', path: '/v1/workflow-runs/:runId', permission: 'observability.view' },
  { method: 'get', path: '/v1/fleets', permission: 'observability.view' },
  { method: 'get', path: '/v1/fleets/:id', permission: 'observability.view' },
  { method: 'get', path: '/v1/fleets/:id/items', permission: 'observability.view' },
  // Channels: their settings with credentials shown by their last characters only, as webhooks' secrets.
  { method: 'get', path: '/v1/channels', permission: 'observability.view' },
  { method: 'get', path: '/v1/channels/:id', permission: 'observability.view' },
  // Snapshots are agents' state: seen with the agents, resumed by those who run agents.
  { method: 'get', path: '/v1/snapshots', permission: 'sessions.view' },
  { method: 'get', path: '/v1/snapshots/:id', permission: 'sessions.view' },
  { method: 'post', path: '/v1/snapshots/:id/resume', permission: 'sessions.manage' },
  // Agent definitions are what agents are given to work with, as knowledge and MCP servers:
  // read by those who run agents, rolled back by owners and admins.
  { method: 'get', path: '/v1/agent-definitions', permission: 'agentResources.view' },
  { method: 'get', path: '/v1/agent-definitions/:id', permission: 'agentResources.view' },
  { method: 'get', path: '/v1/agent-definitions/:id/versions', permission: 'agentResources.view' },
  { method: 'get', path: '/v1/agent-definitions/:id/versions/:version', permission: 'agentResources.view' },
  {
    method: 'post',
    path: '/v1/agent-definitions/:id/rollback',
    permission: 'agentResources.manage',
    audit: {
      action: 'agent_definition.rolled_back',
      target: ({ params }) => ({ type: 'agent_definition', id: params.id! }),
      details: ({ reply }) => ({ version: reply.version }),
    },
  },
];

const modeQuery = {
  mode: modeSchema.default('live').describe('`live` (default) or `test`: the data of live keys or of test keys'),
};

/** Adds the dashboard's form of each data-plane view to the management table. */
export function dataPlaneViewRoutes(management: RouteTable, dataPlane: RouteTable, deps: { pool: Pool; clock: Clock }): void {
  for (const view of DATA_PLANE_VIEWS) {
    const route = dataPlane.list().find((candidate) => candidate.method === view.method && candidate.path === view.path);
    if (!route) throw new Error(`no data-plane route ${view.method.toUpperCase()} ${view.path} to serve under /api`);
    const original = route.query as z.ZodObject | undefined;
    if (original !== undefined && !(original instanceof z.ZodObject)) throw new Error(`${view.path}: its query is not an object`);
    management.add({
      ...route,
      path: route.path.replace(/^\/v1\//, '/api/'),
      // Its own name: tools that key on operation ids (the fuzz tier's bindings) tell the two apart.
      operationId: `dashboard${route.operationId.charAt(0).toUpperCase()}${route.operationId.slice(1)}`,
      permission: view.permission,
      description: `${route.description} The dashboard's form of \`${route.method.toUpperCase()} ${route.path}\`, for a signed-in member: \`mode\` picks live or test data.`,
      // For the document and the first check; the route's own query schema (with its refinements) is applied below.
      query: z.object({ ...(original?.shape ?? {}), ...modeQuery }).strict(),
      async handler(context) {
        const { mode, ...rest } = context.query as { mode: 'live' | 'test' } & Record<string, unknown>;
        let query: unknown = rest;
        if (original) {
          const raw = { ...(context.req.query as Record<string, unknown>) };
          delete raw.mode;
          const parsed = original.safeParse(raw);
          if (!parsed.success) throw validationError(parsed.error, 'query');
          query = parsed.data;
        }
        const reply = await route.handler({ ...context, query, principal: principalOf(context.caller, mode) });
        if (view.audit && reply && reply.status < 300) {
          const params = context.params as Record<string, string>;
          await recordAudit(deps.pool, {
            organizationId: context.caller.organizationId!,
            actor: actorOf(context.caller),
            action: view.audit.action,
            target: view.audit.target({ params, reply: reply.body }),
            details: { mode, ...view.audit.details?.({ params, body: context.body, reply: reply.body }) },
            at: deps.clock.now(),
          });
        }
        return reply;
      },
    });
  }
}

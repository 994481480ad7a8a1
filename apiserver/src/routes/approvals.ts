import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { ApprovalScope, ApprovalService } from '../services/approvals.js';
import { paginationQuery } from '../services/pagination.js';
import { idParam } from './schemas.js';

export const approvalSchema = z
  .object({
    id: z.string().describe('`apr_…`'),
    agentId: z.string(),
    sessionId: z.string(),
    taskId: z.string().describe('the run whose tool call waits'),
    toolCallId: z.string().describe('the tool call, as in the stream\'s `tool_call` event'),
    action: z.string().describe('the tool the model called'),
    parameters: z.unknown().describe("the call's input, with the values of the agent's secrets masked as `[secret:NAME]`"),
    state: z
      .enum(['pending', 'approved', 'denied', 'expired', 'cancelled'])
      .describe('`cancelled`: the run ended (the agent paused or terminated, the run failed) while the call waited'),
    reason: z.string().optional().describe('the reviewer\'s reason'),
    decidedBy: z.string().optional().describe('the API key (`key_…`) or user (`usr_…`) that decided'),
    createdAt: z.string(),
    expiresAt: z.string().describe('the request expires then: the run ends with `approval_expired` and the agent is paused'),
    decidedAt: z.string().optional(),
  })
  .meta({ id: 'Approval', description: 'a tool call that waits for, or got, a decision' });

const approvalPage = z
  .object({ data: z.array(approvalSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('pass as `cursor` for the next page') })
  .meta({ id: 'ApprovalPage' });

const listQuery = paginationQuery.extend({
  state: z.enum(['pending', 'approved', 'denied', 'expired', 'cancelled', 'any']).default('pending').describe('default `pending`: the requests that wait'),
  agentId: z.string().min(1).max(128).optional().describe('only the requests of this agent'),
});

const approveBody = z.object({ reason: z.string().min(1).max(2000).optional().describe('kept with the decision') }).strict();
const denyBody = z
  .object({ reason: z.string().min(1).max(2000).describe('the model receives it as the result of the call') })
  .strict();

const approvalExample = {
  id: 'apr_01m80gqv9d4kjqfcmvs2q4jxem',
  agentId: 'agt_01m80gqv2b7h3y9k0x1c4r5t6v',
  sessionId: 'ses_01m80gqv00000000000000000a',
  taskId: 'task_01m80gqv00000000000000000b',
  toolCallId: 'call_1',
  action: 'exec',
  parameters: { language: 'bash', code: 'curl -H "Authorization: Bearer [secret:GITHUB_TOKEN]" https://api.github.com/user' },
  state: 'pending',
  createdAt: '2026-11-23T16:00:00.000Z',
  expiresAt: '2026-11-23T17:00:00.000Z',
};
const approvedExample = { ...approvalExample, state: 'approved', reason: 'read-only call', decidedBy: 'key_01m80gqv00000000000000000c', decidedAt: '2026-11-23T16:02:00.000Z' };
const deniedExample = { ...approvalExample, state: 'denied', reason: 'use the public endpoint', decidedBy: 'key_01m80gqv00000000000000000c', decidedAt: '2026-11-23T16:02:00.000Z' };

const LIST_DESCRIPTION =
  "Tool calls of the organization's agents that an approval policy (`approvals` on the agent) stopped for a person's decision, newest first; by default the pending ones. Paginated like `GET /v1/sessions`.";
const APPROVE_DESCRIPTION =
  'Approves a pending request: the waiting run runs the call and goes on by itself. Writes `approval.approved` (webhooks and the agent stream). A request that is decided or past its expiry answers 409 `conflict` with `details.state`.';
const DENY_DESCRIPTION =
  "Denies a pending request: the call does not run; the model receives `reason` as the call's result (an error) and goes on. Writes `approval.denied`. A request that is decided or past its expiry answers 409 `conflict` with `details.state`.";

/** The approval routes of both planes: `/v1` with an API key, `/api` for members of the organization (live records). */
export function approvalRoutes(table: RouteTable, management: RouteTable, approvals: ApprovalService): void {
  const planes = [
    {
      table,
      prefix: '/v1',
      operation: '',
      scope: (context: { principal: { organizationId: string; mode: 'live' | 'test'; keyId: string } }): ApprovalScope => ({
        organizationId: context.principal.organizationId,
        mode: context.principal.mode,
      }),
      decidedBy: (context: { principal: { keyId: string } }) => context.principal.keyId,
      view: undefined,
      manage: undefined,
    },
    {
      table: management,
      prefix: '/api',
      operation: 'Member',
      scope: (context: { caller: { organizationId: string | undefined } }): ApprovalScope => ({ organizationId: context.caller.organizationId!, mode: 'live' }),
      decidedBy: (context: { caller: { user: { id: string } } }) => context.caller.user.id,
      view: 'sessions.view' as const,
      manage: 'sessions.manage' as const,
    },
  ];
  for (const plane of planes) {
    const scopeOf = plane.scope as (context: unknown) => ApprovalScope;
    const decidedByOf = plane.decidedBy as (context: unknown) => string;
    const note = plane.prefix === '/api' ? ' The management plane shows the live records; any member may look, members and above decide.' : '';
    plane.table.add(
      defineRoute({
        method: 'get',
        path: `${plane.prefix}/approvals`,
        operationId: `listApprovals${plane.operation}`,
        tag: 'Approvals',
        summary: 'List approval requests',
        description: LIST_DESCRIPTION + note,
        ...(plane.view ? { permission: plane.view } : {}),
        query: listQuery,
        responses: { 200: { description: 'one page of requests', schema: approvalPage, example: { data: [approvalExample], hasMore: false } } },
        errors: ['unprocessable_entity'],
        handler: async (context) => ({ status: 200, body: await approvals.list(scopeOf(context), context.query) }),
      }),
      defineRoute({
        method: 'get',
        path: `${plane.prefix}/approvals/:id`,
        operationId: `getApproval${plane.operation}`,
        tag: 'Approvals',
        summary: 'Get an approval request',
        description: 'One request, pending or decided.' + note,
        ...(plane.view ? { permission: plane.view } : {}),
        params: idParam('apr', 'approval'),
        responses: { 200: { description: 'the request', schema: approvalSchema, example: approvalExample } },
        errors: ['not_found'],
        handler: async (context) => ({ status: 200, body: await approvals.get(scopeOf(context), context.params.id) }),
      }),
      defineRoute({
        method: 'post',
        path: `${plane.prefix}/approvals/:id/approve`,
        operationId: `approve${plane.operation || 'Call'}`,
        tag: 'Approvals',
        summary: 'Approve a tool call',
        description: APPROVE_DESCRIPTION + note,
        ...(plane.manage ? { permission: plane.manage } : {}),
        params: idParam('apr', 'approval'),
        body: approveBody,
        requestExample: { reason: 'read-only call' },
        responses: { 200: { description: 'the request, approved', schema: approvalSchema, example: approvedExample } },
        errors: ['not_found', 'conflict', 'unprocessable_entity'],
        handler: async (context) => ({
          status: 200,
          body: await approvals.decide(scopeOf(context), context.params.id, { state: 'approved', reason: context.body.reason, decidedBy: decidedByOf(context) }),
        }),
      }),
      defineRoute({
        method: 'post',
        path: `${plane.prefix}/approvals/:id/deny`,
        operationId: `deny${plane.operation || 'Call'}`,
        tag: 'Approvals',
        summary: 'Deny a tool call',
        description: DENY_DESCRIPTION + note,
        ...(plane.manage ? { permission: plane.manage } : {}),
        params: idParam('apr', 'approval'),
        body: denyBody,
        requestExample: { reason: 'use the public endpoint' },
        responses: { 200: { description: 'the request, denied', schema: approvalSchema, example: deniedExample } },
        errors: ['not_found', 'conflict', 'unprocessable_entity'],
        handler: async (context) => ({
          status: 200,
          body: await approvals.decide(scopeOf(context), context.params.id, { state: 'denied', reason: context.body.reason, decidedBy: decidedByOf(context) }),
        }),
      }),
    );
  }
}

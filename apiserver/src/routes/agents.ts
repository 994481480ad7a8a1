import { z } from 'zod';
import { ApiError, isLabelSafe } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { AgentDefinitionService } from '../services/agent-definitions.js';
import { BOOT_WAIT_MS, type AgentService } from '../services/agents.js';
import { paginationQuery } from '../services/pagination.js';
import { createAgentFromDefinition } from './agent-from-definition.js';
import { refuseUnenforcedFields } from './unenforced.js';
import {
  agentPage,
  agentSchema,
  createAgentBody,
  emptyBody,
  execBody,
  execResultSchema,
  idParam,
  okSchema,
} from './schemas.js';
import { agentExample, bootingAgentExample, createAgentExample, execExample, execResultExample } from './examples.js';

/** `key:value` as the one-pair filter `{ key: value }`; none when absent. */
function metadataFilter(text: string | undefined): Record<string, string> {
  if (text === undefined) return {};
  const at = text.indexOf(':');
  return { [text.slice(0, at)]: text.slice(at + 1) };
}

/** How long `terminate` waits for the sandbox to be gone before answering anyway. */
const TERMINATE_WAIT_MS = 15_000;

export function agentRoutes(
  table: RouteTable,
  agents: AgentService,
  options: { execTimeoutMs: number; definitions: AgentDefinitionService },
): void {
  const execSeconds = Math.round(options.execTimeoutMs / 1000);
  const bootWaitSeconds = Math.round(Math.min(BOOT_WAIT_MS, options.execTimeoutMs) / 1000);
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/sessions/:id/agents',
      operationId: 'createAgent',
      tag: 'Agents',
      summary: 'Create an agent',
      description:
        'Creates an agent in the session and starts provisioning its sandbox. The agent comes back with status `booting`; poll `GET /v1/agents/{id}` until it is `idle` (an `agent.started` event is written then). ' +
        'Refused with 422: unknown fields, a `timeout` that is not a duration, `storage` (no provider supports it), `browser: true` when no browser-capable template is configured, `gpu` on a provider without GPUs, an unknown `provider`. ' +
        '`knowledge` (`true` or a collection name or id; an unknown collection is 422) gives the model the `knowledge_search` tool; `mcp` (MCP server names or ids, or `*`; an unknown one is 422) gives it the tools of those servers. `lifecycle`, `approvals` and `guardrails` are not enforced yet: supplying any of them (also inside `overrides`) answers 501 `not_implemented` naming the field, rather than storing a policy nothing applies. Timeouts over 24h are capped to 24h. ' +
        "With `definition` (the name or id of an agent definition), the agent's compute, model, instructions (the definition's systemPrompt), tools, browser and timeout come from the definition's current version; `overrides` (agent creation fields) replace them and fields given at the top level replace both. " +
        'Overrides are validated like the same fields at the top level; errors name them `overrides.<field>`. An unknown or archived definition is 422 naming `definition`; `overrides` without `definition` is 422. ' +
        'The agent shows the definition id and version it was made from (`definition`, `definitionVersion`); later updates of the definition do not change it.',
      params: idParam('ses', 'session'),
      body: createAgentBody.extend({ lifecycle: z.unknown().optional().describe('not enforced: supplying it answers 501') }),
      requestExample: createAgentExample,
      responses: { 201: { description: 'the agent, booting', schema: agentSchema, example: { ...bootingAgentExample, costCap: createAgentExample.costCap } } },
      errors: ['not_found', 'unprocessable_entity', 'session_limit_exceeded', 'not_implemented'],
      handler: async ({ req, principal, params, body }) => {
        const { lifecycle, ...input } = body;
        refuseUnenforcedFields(body);
        if (input.definition !== undefined) {
          // The body as sent: only the fields it holds override the definition, not the schema's defaults.
          const request = { ...(req.body as Record<string, unknown>), definition: input.definition, overrides: input.overrides };
          return { status: 201, body: await createAgentFromDefinition({ agents, definitions: options.definitions }, principal, params.id, request) };
        }
        if (input.overrides !== undefined) {
          throw new ApiError('unprocessable_entity', 'overrides: only with definition (they override fields of an agent definition)', {
            fields: { overrides: ['only with definition'] },
          });
        }
        return { status: 201, body: await agents.create(principal, params.id, input) };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/v1/sessions/:id/agents',
      operationId: 'listSessionAgents',
      tag: 'Agents',
      summary: "List a session's agents",
      description:
        'Newest first; paginated like `GET /v1/sessions`. `metadata=key:value` keeps the agents whose `metadata` has that custom pair (string pairs of letters, digits, `-`, `_` and `.`, at most 63 characters each, are indexed as labels; others are kept but cannot be filtered on).',
      params: idParam('ses', 'session'),
      query: paginationQuery.extend({
        metadata: z
          .string()
          .max(200)
          .refine((text) => {
            const [key, ...rest] = text.split(':');
            return rest.length > 0 && isLabelSafe(key!) && isLabelSafe(rest.join(':'));
          }, 'must be key:value, each of letters, digits, -, _ and ., at most 63 characters')
          .optional()
          .describe('a custom pair the agents have, as `key:value`'),
      }),
      responses: { 200: { description: 'one page of agents', schema: agentPage, example: { data: [agentExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({
        status: 200,
        body: await agents.listForSession(principal, params.id, { limit: query.limit, cursor: query.cursor }, metadataFilter(query.metadata)),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id',
      operationId: 'getAgent',
      tag: 'Agents',
      summary: 'Get an agent (status poll)',
      description:
        '`status` is `booting` while the sandbox is provisioned, `idle` when it is ready, `terminated` after terminate, `failed` when provisioning failed or the timeout expired (`error` says why). `conditions` carry the details.',
      params: idParam('agt', 'agent'),
      responses: { 200: { description: 'the agent', schema: agentSchema, example: agentExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await agents.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/exec',
      operationId: 'execInAgent',
      tag: 'Agents',
      summary: 'Run code in the sandbox',
      description:
        `Runs \`code\` synchronously in the agent's sandbox (python 3, TypeScript on Node.js 24 without a build step, or bash) with /workspace as its working directory, and answers with its output and exit code. A non-zero exit code is a normal result, not an error. ` +
        `Runs longer than ${execSeconds} s are killed and answered with 504 \`timeout\`. On an agent that is still booting (just created or resuming), the exec waits for its sandbox, up to ${bootWaitSeconds} s, then runs. A paused, terminated or failed agent (or one that fails or is still booting when the wait ends) answers 409 \`conflict\` with \`details.status\`. stdout and stderr are each cut at 1 MiB with a marker.`,
      params: idParam('agt', 'agent'),
      body: execBody,
      requestExample: execExample,
      responses: { 200: { description: 'the result', schema: execResultSchema, example: execResultExample } },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'session_limit_exceeded', 'timeout', 'provider_error'],
      handler: async ({ principal, params, body }) => ({
        status: 200,
        body: await agents.exec(principal, params.id, body),
      }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/terminate',
      operationId: 'terminateAgent',
      tag: 'Agents',
      summary: 'Terminate an agent',
      description:
        'Irreversible: the sandbox is ended and its files deleted. Answers once the sandbox is gone (or after 15 s, when it is released in the background). Terminating a terminated agent is a no-op.',
      params: idParam('agt', 'agent'),
      body: emptyBody,
      requestExample: {},
      responses: { 200: { description: 'terminated', schema: okSchema, example: { ok: true } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params }) => {
        await agents.terminate(principal, params.id, TERMINATE_WAIT_MS);
        return { status: 200, body: { ok: true } };
      },
    }),
  );
}

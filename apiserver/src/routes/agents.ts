import { z } from 'zod';
import { ApiError, isLabelSafe } from '@berth/common';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { AgentDefinitionService } from '../services/agent-definitions.js';
import { BOOT_WAIT_MS, MAX_GET_WAIT_SECONDS, type AgentService, type AgentWait } from '../services/agents.js';
import { paginationQuery } from '../services/pagination.js';
import { agentPhaseSchema, durationSchema, egressSchema } from '@berth/crds';
import { createAgentFromDefinition } from './agent-from-definition.js';
import {
  agentPage,
  agentSchema,
  backgroundProcessSchema,
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
const backgroundStartedExample = {
  pid: 7,
  argv: ['python3', '-u', '/run/berth/exec/0b7c3e52-2d5f-4a3e-9d0e-5f4c1b2a3d4e.py'],
  startedAt: '2026-11-23T16:58:02.412Z',
  status: 'running' as const,
  exitCode: null,
  endedAt: null,
};

/** Comma-separated agent statuses (`idle,running`), as a list; anything else is 422 naming the field. */
const agentPhasesQuery = z
  .string()
  .max(200)
  .transform((value, context) => {
    const phases = value.split(',').map((phase) => phase.trim());
    const parsed = z.array(agentPhaseSchema).safeParse(phases);
    if (!parsed.success) {
      context.addIssue({ code: 'custom', message: `comma-separated statuses of ${agentPhaseSchema.options.join(', ')}` });
      return z.NEVER;
    }
    return parsed.data;
  });

/** `?waitFor=&waitSeconds=` of an agent's GET and of its create. */
function agentWaitQuery(waitForDescription: string) {
  return z
    .object({
      waitFor: agentPhasesQuery.optional().describe(waitForDescription),
      waitSeconds: z.coerce.number().int().min(1).max(MAX_GET_WAIT_SECONDS).default(30).describe(`longest wait for waitFor, in seconds (1–${MAX_GET_WAIT_SECONDS})`),
    })
    .strict();
}

function agentWait(query: z.infer<ReturnType<typeof agentWaitQuery>>): AgentWait | undefined {
  return query.waitFor === undefined ? undefined : { statuses: query.waitFor, timeoutMs: query.waitSeconds * 1000 };
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
        'Creates an agent in the session and starts provisioning its sandbox. The agent comes back with status `booting`; `GET /v1/agents/{id}?waitFor=idle` answers once it is `idle` (an `agent.started` event is written then). ' +
        'With `waitFor` (a status, or several separated by commas), the call itself waits after the create, as the GET does: it answers 201 with the agent once it has one of them or has ended (`failed`: `error` says why), or when `waitSeconds` (1–60, default 30) have passed with the agent as it is then (`booting`), in one exchange: `?waitFor=idle` answers as soon as the sandbox is ready. ' +
        'Refused with 422: unknown fields, a `timeout` that is not a duration, `storage` (no provider supports it), `browser: true` when no browser-capable template is configured, `gpu` on a provider without GPUs, an unknown `provider`. ' +
        '`knowledge` (`true` or a collection name or id; an unknown collection is 422) gives the model the `knowledge_search` tool; `mcp` (MCP server names or ids, or `*`; an unknown one is 422) gives it the tools of those servers. `egress` (hosts, cidrs, and credentials the egress proxy adds to requests to a host; see docs/egress.md) is validated like any field (422 naming `egress.hosts.0`, `egress.credentials.0.secret`), and a provider that does not enforce egress policies answers 501 naming `egress`. `lifecycle` sets the auto-pause, idle termination, failure and timeout policy: `idle.pauseAfter` pauses it by checkpoint (reason `idle`) after that long without exec, run, stream, terminal, process, file or port traffic (a call in flight holds it awake), and its next such call wakes it (the call waits for the resume); `idle.terminateAfter` terminates it after that long without traffic, paused meanwhile or not (`agent.terminated` with `reason: idle`; longer than `pauseAfter`); `onFailure.restart` recreates a sandbox that died up to that many times (`agent.restarted` each time), then fails the agent; `onTimeout` is `terminate` (the default: at its timeout the sandbox ends and the agent fails with `timeout`) or `pause` (it is paused by checkpoint, reason `timeout`, and `POST /v1/agents/{id}/resume` gives it a new lifetime). A bad value is 422 naming the sub-field, also inside `overrides`. An `approvals` policy or `guardrails` that is not valid answers 422 naming the field (`approvals.rules.0.when.code`). Timeouts over 24h are capped to 24h. ' +
        "With `definition` (the name or id of an agent definition), the agent's compute, model, instructions (the definition's systemPrompt), tools, browser and timeout come from the definition's current version; `overrides` (agent creation fields) replace them and fields given at the top level replace both. " +
        'Overrides are validated like the same fields at the top level; errors name them `overrides.<field>`. An unknown or archived definition is 422 naming `definition`; `overrides` without `definition` is 422. ' +
        'The agent shows the definition id and version it was made from (`definition`, `definitionVersion`); later updates of the definition do not change it.',
      params: idParam('ses', 'session'),
      query: agentWaitQuery('create the agent, then wait until it has this status, or one of these comma-separated ones (or has ended), before answering'),
      body: createAgentBody,
      requestExample: createAgentExample,
      responses: {
        201: { description: 'the agent, booting (or, with waitFor, as it is when the wait ends)', schema: agentSchema, example: { ...bootingAgentExample, costCap: createAgentExample.costCap } },
      },
      errors: ['not_found', 'unprocessable_entity', 'session_limit_exceeded', 'not_implemented'],
      handler: async ({ req, principal, params, query, body }) => {
        const input = body;
        const wait = agentWait(query);
        if (input.definition !== undefined) {
          // The body as sent: only the fields it holds override the definition, not the schema's defaults.
          const request = { ...(req.body as Record<string, unknown>), definition: input.definition, overrides: input.overrides };
          return { status: 201, body: await createAgentFromDefinition({ agents, definitions: options.definitions }, principal, params.id, request, wait) };
        }
        if (input.overrides !== undefined) {
          throw new ApiError('unprocessable_entity', 'overrides: only with definition (they override fields of an agent definition)', {
            fields: { overrides: ['only with definition'] },
          });
        }
        return { status: 201, body: await agents.create(principal, params.id, input, wait) };
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
      path: '/v1/agents',
      operationId: 'listAgents',
      tag: 'Agents',
      summary: 'List agents across sessions',
      description:
        'Every agent of the key\'s organization and mode, newest first, paginated like `GET /v1/sessions`. Filters: `sessionId` (one session), `status` (comma-separated phases: booting, idle, running, paused, terminated, failed). A cursor belongs to its filters: another filter with it is 422.',
      query: paginationQuery.extend({
        sessionId: z.string().min(1).max(128).optional().describe('only the agents of this session (`ses_…`)'),
        status: agentPhasesQuery.optional().describe('comma-separated statuses, e.g. `idle,running`'),
      }),
      responses: { 200: { description: 'one page of agents', schema: agentPage, example: { data: [agentExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, query }) => {
        const { sessionId, status, ...page } = query;
        return { status: 200, body: await agents.list(principal, { sessionId, status }, page) };
      },
    }),
    defineRoute({
      method: 'patch',
      path: '/v1/agents/:id',
      operationId: 'updateAgent',
      tag: 'Agents',
      summary: "Extend an agent's timeout, change its egress policy",
      description:
        "`timeout` replaces the timeout with a longer one (capped at 24h), still measured from when the sandbox started: `expiresAt` moves once the operator sees it (within a second). A shorter timeout is 422; on the Kubernetes provider a running pod's deadline cannot be raised: 501. " +
        "`egress` replaces the agent's egress policy (`hosts`, `cidrs`, `credentials`; see agent creation): a running sandbox gets it once the operator sees it (within a second), for the connections it opens from then on. A pattern that is not valid is 422 naming it (`egress.hosts.0`), a credential whose secret does not exist is 422 naming it (`egress.credentials.0.secret`); a provider that does not enforce egress answers 501. " +
        'Both together are checked first and written at once. A terminated or failed agent is 409.',
      params: idParam('agt', 'agent'),
      body: z
        .object({
          timeout: durationSchema.optional().describe('the new lifetime: 30m, 2h, 1h30m'),
          egress: egressSchema.optional().describe('the new egress policy, replacing the whole of the old one'),
        })
        .strict()
        .refine((body) => body.timeout !== undefined || body.egress !== undefined, { message: 'give timeout, egress or both' }),
      requestExample: { egress: { hosts: ['api.github.com', '*.pypi.org'], credentials: [{ host: 'api.github.com', secret: 'GITHUB_TOKEN' }] } },
      responses: { 200: { description: 'the agent', schema: agentSchema, example: { ...agentExample, timeout: '2h' } } },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'not_implemented'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await agents.update(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id',
      operationId: 'getAgent',
      tag: 'Agents',
      summary: 'Get an agent (status poll)',
      description:
        '`status` is `booting` while the sandbox is provisioned, `idle` when it is ready, `terminated` after terminate, `failed` when provisioning failed or the timeout expired (`error` says why). `conditions` carry the details. ' +
        'With `waitFor` (a status, or several separated by commas: `idle,running`) the call waits, without polling, until the agent has one of them or has ended (`terminated`, `failed`), at most `waitSeconds` (1–60, default 30), and answers the agent as it is then: `GET /v1/agents/{id}?waitFor=idle` right after create answers as soon as the sandbox is ready. A status that is not one of booting, idle, running, paused, terminated, failed is 422 naming `waitFor`.',
      params: idParam('agt', 'agent'),
      query: agentWaitQuery('wait until the agent has this status, or one of these comma-separated ones (or has ended), before answering'),
      responses: { 200: { description: 'the agent', schema: agentSchema, example: agentExample } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await agents.get(principal, params.id, agentWait(query)) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/exec',
      operationId: 'execInAgent',
      tag: 'Agents',
      summary: 'Run code in the sandbox',
      description:
        `Runs \`code\` synchronously in the agent's sandbox (python 3, TypeScript on Node.js 24 without a build step, or bash) with /workspace as its working directory, and answers with its output and exit code. A non-zero exit code is a normal result, not an error. ` +
        `Runs longer than ${execSeconds} s (or \`timeout\` seconds) are killed and answered with 504 \`timeout\`. ` +
        '`env` adds variables, `cwd` sets the working directory (relative to /workspace or absolute under it; leaving /workspace is 422), `stdin` is written to the program\'s input. ' +
        'With `background: true` the program is started and the answer is 202 with its process at once (`pid`); list, signal, wait on it and read its output under `/v1/agents/{id}/processes`. ' +
        'A provider that cannot honour an option answers 501 `not_implemented` naming it. ' +
        `The same exec with its output streamed: \`POST /v1/agents/{id}/exec/stream\`. On an agent that is still booting (just created or resuming), the exec waits for its sandbox, up to ${bootWaitSeconds} s, then runs. A paused, terminated or failed agent (or one that fails or is still booting when the wait ends) answers 409 \`conflict\` with \`details.status\`. stdout and stderr are each cut at 1 MiB with a marker.`,
      params: idParam('agt', 'agent'),
      body: execBody,
      requestExample: execExample,
      responses: {
        200: { description: 'the result', schema: execResultSchema, example: execResultExample },
        202: { description: 'with `background: true`: the process, started', schema: backgroundProcessSchema, example: backgroundStartedExample },
      },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'session_limit_exceeded', 'timeout', 'not_implemented', 'provider_error'],
      handler: async ({ principal, params, body }) =>
        body.background
          ? { status: 202, body: await agents.startBackground(principal, params.id, body) }
          : { status: 200, body: await agents.exec(principal, params.id, body) },
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/sessions/:id',
      operationId: 'endSession',
      tag: 'Sessions',
      summary: "End a session's agents",
      description:
        'Not in the spec: terminates every agent of the session that is not ended yet (as `POST /v1/agents/{id}/terminate` does each, in the background: their sandboxes and files go) and answers with their ids. ' +
        'The session itself stays, with its usage and billing history; new agents may still be created in it. Calling it again ends nothing more.',
      params: idParam('ses', 'session'),
      responses: {
        200: {
          description: 'the agents ended',
          schema: z.object({ ok: z.literal(true), terminated: z.array(z.string()).describe('ids of the agents this call ended') }),
          example: { ok: true, terminated: ['agt_01m80gqvefwgc4tgw5batt7zt1'] },
        },
      },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: { ok: true, terminated: await agents.endSession(principal, params.id) } }),
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

import { ApiError, type StreamEvent } from '@berth/common';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import type { AgentService } from '../services/agents.js';
import type { RunService } from '../services/runs.js';
import type { StreamHub } from '../services/stream-hub.js';
import { idParam } from './schemas.js';
import { runAcceptedExample, runExample, streamExample, taskExample } from './examples.js';

const runBody = z
  .object({ task: z.string().min(1, 'must not be empty').max(100_000).describe('what the agent should do') })
  .strict();

const runAccepted = z.object({ taskId: z.string().describe('`task_…`'), agentId: z.string() }).meta({ id: 'RunAccepted' });

export const taskSchema = z
  .object({
  id: z.string(),
  agentId: z.string(),
  sessionId: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']),
  task: z.string(),
  output: z.string().optional().describe('the final answer, when completed'),
  error: z.object({ code: z.string(), message: z.string() }).passthrough().optional().describe('why it failed or was cancelled'),
  steps: z.number().int().describe('model calls so far'),
  guardrails: z
    .array(
      z.object({
        rule: z.enum(['pii', 'promptInjection', 'denyList', 'maxOutputChars']),
        action: z.enum(['block', 'redact', 'flag']),
        where: z.enum(['input', 'output']),
        kind: z.string().describe('what fired: `email`, `phone`, `card`, `secret_key`, `injection`, `deny_list`, `size`'),
        count: z.number().int().describe('how many matches (for `size`, the length in characters)'),
        source: z.string().describe('`task`, `tool:<name>` or `answer`'),
      }),
    )
    .describe("what the agent's guardrails found during the run, in order (empty when nothing fired); a `block` ends the run with `guardrail_blocked`"),
  usage: z.object({ inputTokens: z.number().int(), outputTokens: z.number().int() }),
  cost: z.object({ amount: z.number().int(), currency: z.string() }).describe('integer cents'),
  createdAt: z.string(),
  startedAt: z.string().optional(),
  finishedAt: z.string().optional(),
  })
  .meta({ id: 'Task', description: 'one run of the agent loop' });

/** One server-sent event; OpenAPI 3.1 has the schema of an event stream describe each event. */
const streamEventSchema = z
  .object({
    event: z.enum([
      'thinking',
      'tool_call',
      'tool_result',
      'output',
      'error',
      'approval.requested',
      'approval.approved',
      'approval.denied',
      'approval.expired',
      'guardrail',
      'heartbeat',
    ]),
    data: z.string().describe('the payload, as JSON'),
    id: z.string().regex(/^\d+$/).optional().describe('the event id for Last-Event-ID; heartbeats have none'),
    retry: z.number().int().optional().describe('reconnection delay in milliseconds, sent once when the stream opens'),
  })
  .meta({ id: 'StreamEvent', description: 'one event of an agent stream' });

const STREAM_DESCRIPTION = `Server-sent events of the agent's runs, as they happen. Events (each \`data\` is JSON and carries \`taskId\`):
- \`thinking\` \`{ text }\`: text the model streams while it works;
- \`tool_call\` \`{ id, tool, input }\`: a tool the model called;
- \`tool_result\` \`{ id, tool, output, exitCode, durationMs, isError }\`: its result (\`output\` cut at 16 KiB; \`exitCode\` for exec, else null);
- \`output\` \`{ text, cost: { amount, currency } }\`: the final answer and the run's cost in integer cents;
- \`approval.requested\` \`{ approvalId, id, tool, parameters, state, expiresAt }\`: the tool call \`id\` waits for a decision (secrets masked in \`parameters\`); \`approval.approved\`, \`approval.denied\` (with \`reason\`) and \`approval.expired\` follow;
- \`guardrail\` \`{ rule, action, where, kind, count, source }\`: a guardrail fired;
- \`error\` \`{ code, message }\`: the run failed (\`provider_error\` with \`upstreamStatus\`, \`step_limit\`, \`budget_exhausted\`, \`session_limit_exceeded\`, \`guardrail_blocked\` with \`rule\`, \`kind\`, \`where\`, \`source\`, \`internal_error\`) or was cancelled (\`cancelled\`, \`agent_unavailable\`, \`approval_expired\`);
- \`heartbeat\` \`{ t }\` every 15 s, without an id.
Connect before \`run\` to receive every event of the run. Every event but heartbeats has an \`id\`; a client that reconnects with \`Last-Event-ID\` (header, or \`lastEventId\` query) gets what it missed, then the rest. Several clients may stream one agent at once.`;

export function runRoutes(
  table: RouteTable,
  deps: { runs: RunService; agents: AgentService; hub: StreamHub; heartbeatMs: number },
): void {
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/agents/:id/run',
      operationId: 'runAgent',
      tag: 'Agents',
      summary: 'Run the agent loop on a task',
      description:
        "Queues the task and answers 202 as soon as it is queued; a runner works on it in the background: the model (the agent's `model`, with `instructions` as system prompt) is called with the tools in `tools`, each tool call runs in the agent's sandbox and its result goes back to the model, until it answers without a tool call. Follow it on `GET /v1/agents/{id}/stream` or poll `GET /v1/tasks/{taskId}`. " +
        'One run at a time per agent: a second `run` while one is queued or running answers 409 `conflict` with `details.taskId`. On an agent that is still booting (just created or resuming), the request waits for it to be ready, up to 60 s (or `BERTH_EXEC_TIMEOUT` when shorter), then queues the task. A paused, terminated or failed agent (or one that fails or is still booting when the wait ends) answers 409 too, with `details.status`. A live agent whose model cannot be called (its vendor has no API key on this install and the organization configured none with `PUT /v1/providers/{vendor}`) answers 422 with `details.fields.model`, and nothing is queued.',
      params: idParam('agt', 'agent'),
      body: runBody,
      requestExample: runExample,
      responses: { 202: { description: 'queued', schema: runAccepted, example: runAcceptedExample } },
      errors: ['not_found', 'unprocessable_entity', 'conflict', 'session_limit_exceeded'],
      handler: async ({ principal, params, body }) => ({ status: 202, body: await deps.runs.start(principal, params.id, body.task) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/tasks/:id',
      operationId: 'getTask',
      tag: 'Agents',
      summary: 'Get a run',
      description: 'The state of a run: `queued`, `running`, then `completed` (with `output`), `failed` or `cancelled` (with `error`), its steps, tokens and cost so far.',
      params: idParam('task', 'task'),
      responses: { 200: { description: 'the run', schema: taskSchema, example: taskExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await deps.runs.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/agents/:id/stream',
      operationId: 'streamAgent',
      tag: 'Agents',
      summary: "Stream the agent's events",
      description: STREAM_DESCRIPTION,
      params: idParam('agt', 'agent'),
      query: z.object({ lastEventId: z.string().regex(/^\d+$/).optional().describe('same as the Last-Event-ID header') }).strict(),
      responses: { 200: { description: 'an event stream', contentType: 'text/event-stream', schema: streamEventSchema, example: streamExample } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ req, res, principal, params, query }) => {
        const agent = await deps.agents.find(principal, params.id);
        const header = req.get('last-event-id');
        if (header !== undefined && !/^\d+$/.test(header)) {
          throw new ApiError('unprocessable_entity', 'Last-Event-ID must be an event id of this stream', { fields: { 'Last-Event-ID': ['not an event id'] } });
        }
        // Subscribed before the headers go out: a client that runs a task once its stream has
        // answered misses none of the task's events.
        let stream: ReturnType<typeof openEventStream> | undefined;
        const early: StreamEvent[] = [];
        const unsubscribe = await deps.hub.subscribe(params.id, header ?? query.lastEventId, (events) => {
          if (!stream) early.push(...events);
          else for (const event of events) stream.write(event.type, event.data, event.seq);
        });
        stream = openEventStream(req, res, deps.heartbeatMs);
        for (const event of early.splice(0)) stream.write(event.type, event.data, event.seq);
        req.log.info({ agentId: params.id, phase: agent.status?.phase }, 'stream opened');
        await stream.closed;
        unsubscribe();
      },
    }),
  );
}

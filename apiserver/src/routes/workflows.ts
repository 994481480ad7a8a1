import { ApiError, TERMINAL_RUN_STATUSES, type WorkflowStreamEvent } from '@berth/common';
import { durationSchema, scheduleInputSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import { paginationQuery } from '../services/pagination.js';
import type { WorkflowStreamHub } from '../services/workflow-stream-hub.js';
import type { WorkflowService } from '../services/workflows.js';
import { idParam, okSchema, userIdSchema } from './schemas.js';

/** Workflows: request and response schemas, their examples, and the routes (ADR 26, docs/workflows.md). */

export const MAX_STEPS = 50;
export const MAX_RETRIES = 10;

const costSchema = z.object({ amount: z.number().int().describe('integer cents'), currency: z.string() });
const errorSchema = z.object({ code: z.string(), message: z.string() });

const stepSchema = z
  .object({
    name: z.string().describe('unique in the workflow; `{{steps.<name>.output}}` refers to it'),
    agent: z.string().describe('the agent definition as given (name or `adef_…` id)'),
    definitionId: z.string().describe('the `adef_…` id `agent` named when the workflow was written; each attempt uses its current version'),
    input: z.string().describe('the template of the step’s task'),
    dependsOn: z.array(z.string()).describe('steps that must have ended before this one starts'),
    retries: z.number().int().describe('further attempts after a failed one'),
    timeout: z.string().nullable().describe('bound of one attempt, from its start to its end; null: the agent’s own timeout only'),
    optional: z.boolean().describe('a failure after its retries ends the run `partial` instead of `failed`'),
  })
  .meta({ id: 'WorkflowStep' });

export const workflowSchema = z
  .object({
    id: z.string().describe('`wf_…`'),
    name: z.string(),
    description: z.string().nullable(),
    version: z.number().int().describe('1 on creation, one more on each update'),
    steps: z.array(stepSchema),
    archived: z.boolean().describe('deleted: readable, cannot run'),
    createdAt: z.string().describe('ISO 8601'),
    updatedAt: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'Workflow', description: 'a named, versioned graph of steps, each running an agent definition' });

const stepRunSchema = z
  .object({
    name: z.string(),
    status: z.enum(['pending', 'running', 'completed', 'failed', 'cancelled']).describe('`pending`: waiting for its dependencies; else the state of its latest attempt'),
    attempts: z.number().int().describe('attempts started so far'),
    jobId: z.string().nullable().describe('`job_…` of the latest attempt'),
    output: z.string().nullable().describe('the output text of the attempt that completed'),
    error: errorSchema.nullable().describe('why the latest attempt failed'),
    cost: costSchema.describe('all its attempts, in integer cents'),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'WorkflowStepRun' });

export const workflowRunSchema = z
  .object({
    id: z.string().describe('`wfr_…`'),
    workflowId: z.string(),
    workflowVersion: z.number().int().describe('the version whose steps the run runs'),
    userId: z.string().describe('the end-user whose default session the steps run in'),
    status: z.enum(['running', 'completed', 'failed', 'partial', 'cancelled']).describe('`completed`, `failed`, `partial` and `cancelled` are final'),
    input: z.unknown().describe('the run’s input as given (text, an object, or null)'),
    output: z.string().nullable().describe('the output of the final step (the last step no other step depends on), once the run ended'),
    error: errorSchema.extend({ step: z.string().optional() }).nullable().describe('why the run failed (with the failing step) or `cancelled`'),
    cost: costSchema.describe('all attempts of all steps so far, in integer cents'),
    steps: z.array(stepRunSchema),
    createdAt: z.string(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'WorkflowRun', description: 'one run of a workflow' });

const workflowPage = z.object({ data: z.array(workflowSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('pass as `cursor` for the next page; absent on the last page') }).meta({ id: 'WorkflowPage' });
const runPage = z.object({ data: z.array(workflowRunSchema), hasMore: z.boolean(), cursor: z.string().optional().describe('pass as `cursor` for the next page; absent on the last page') }).meta({ id: 'WorkflowRunPage' });

export const workflowEstimateSchema = z
  .object({
    estimated: z.object({ min: z.number().int(), max: z.number().int(), currency: z.string() }).describe('integer cents'),
    confidence: z.enum(['low', 'medium', 'high']).describe('`low` under 10 completed runs, `medium` 10 to 99, `high` 100 or more'),
    breakdown: z.array(z.object({ step: z.string(), min: z.number().int(), max: z.number().int(), basedOn: z.number().int() })).describe('per step: its cost in completed runs, or 5 to 50 cents without any'),
    basedOn: z.number().int().describe('completed runs the estimate is based on'),
  })
  .meta({ id: 'WorkflowEstimate' });

const stepBody = z
  .object({
    name: z.string().regex(/^[a-z][a-z0-9_-]{0,62}$/, 'lowercase letters, digits, - and _, starting with a letter, at most 63').describe('unique in the workflow'),
    agent: z.string().min(1).max(200).describe('agent definition name or `adef_…` id; unknown or archived is 422'),
    input: z
      .string()
      .max(64 * 1024)
      .optional()
      .describe('the task, a template: `{{input}}`, `{{input.<field>}}`, `{{steps.<name>.output}}` (a step it depends on); default `{{input}}`'),
    dependsOn: z.array(z.string().min(1).max(63)).max(MAX_STEPS).optional().describe('names of steps that must end first; default none'),
    retries: z.number().int().min(0).max(MAX_RETRIES).optional().describe(`further attempts after a failed one, 0 to ${MAX_RETRIES}; default 0`),
    timeout: durationSchema.optional().describe('bound of one attempt such as `10m`; default none (the agent’s own timeout)'),
    optional: z.boolean().optional().describe('its failure ends the run `partial`, not `failed`; default false'),
  })
  .strict();

const fields = {
  name: z.string().min(1).max(200),
  description: z.string().max(2000).nullable(),
  steps: z.array(stepBody).min(1, 'give at least one step').max(MAX_STEPS, `at most ${MAX_STEPS} steps`),
};

export const createWorkflowBody = z.object({ name: fields.name, description: fields.description.optional(), steps: fields.steps }).strict();
export const updateWorkflowBody = z
  .object({ name: fields.name.optional(), description: fields.description.optional(), steps: fields.steps.optional() })
  .strict()
  .refine((body) => body.name !== undefined || body.description !== undefined || body.steps !== undefined, { message: 'give name, description, steps or several' });

const runBody = z
  .object({
    userId: userIdSchema.describe("the customer's end-user identifier; the steps run in the user's default session"),
    input: scheduleInputSchema.optional().describe('the run’s input: text, or an object (at most 64 KiB); `{{input}}` in a step’s template'),
  })
  .strict();

/** One server-sent event of a run's stream. */
const runStreamEventSchema = z
  .object({
    event: z.enum(['connected', 'started', 'step.completed', 'step.failed', 'run.completed', 'run.failed', 'run.partial', 'run.cancelled', 'heartbeat']),
    data: z.string().describe('the payload, as JSON'),
    id: z.string().regex(/^\d+$/).optional().describe('the event id for Last-Event-ID; `connected` and heartbeats have none'),
    retry: z.number().int().optional().describe('reconnection delay in milliseconds, sent once when the stream opens'),
  })
  .meta({ id: 'WorkflowRunStreamEvent', description: 'one event of a workflow run stream' });

const WORKFLOW_ID = 'wf_01jq3vg2k4n6q8s0u2w4y6a8c0';
const RUN_ID = 'wfr_01jq9z1c3e5g7j9m1p3r5t7v9x';
const stepExample = {
  name: 'research',
  agent: 'researcher',
  definitionId: 'adef_01jq3vd5g7j9m1p3r5t7v9x1z3',
  input: 'Find three facts about {{input.topic}}.',
  dependsOn: [],
  retries: 1,
  timeout: '10m',
  optional: false,
};
const workflowExample = {
  id: WORKFLOW_ID,
  name: 'research-and-write',
  description: 'researches a topic, then writes a summary',
  version: 1,
  steps: [
    stepExample,
    { ...stepExample, name: 'write', agent: 'writer', definitionId: 'adef_01jq3vd6h8k0n2q4s6u8w0y2a4', input: 'Summarise: {{steps.research.output}}', dependsOn: ['research'], retries: 0, timeout: null },
  ],
  archived: false,
  createdAt: '2026-03-01T09:30:00.000Z',
  updatedAt: '2026-03-01T09:30:00.000Z',
};
const createExample = {
  name: 'research-and-write',
  description: 'researches a topic, then writes a summary',
  steps: [
    { name: 'research', agent: 'researcher', input: 'Find three facts about {{input.topic}}.', retries: 1, timeout: '10m' },
    { name: 'write', agent: 'writer', input: 'Summarise: {{steps.research.output}}', dependsOn: ['research'] },
  ],
};
const runExample = {
  id: RUN_ID,
  workflowId: WORKFLOW_ID,
  workflowVersion: 1,
  userId: 'user_4711',
  status: 'completed' as const,
  input: { topic: 'tides' },
  output: 'Tides follow the moon…',
  error: null,
  cost: { amount: 7, currency: 'usd' },
  steps: [
    { name: 'research', status: 'completed' as const, attempts: 1, jobId: 'job_01jq9z1d4f6h8k0n2q4s6u8w0y', output: '1. …', error: null, cost: { amount: 4, currency: 'usd' }, startedAt: '2026-03-02T10:00:00.120Z', finishedAt: '2026-03-02T10:00:31.402Z' },
    { name: 'write', status: 'completed' as const, attempts: 1, jobId: 'job_01jq9z2e5g7j9m1p3r5t7v9x1z', output: 'Tides follow the moon…', error: null, cost: { amount: 3, currency: 'usd' }, startedAt: '2026-03-02T10:00:31.450Z', finishedAt: '2026-03-02T10:00:52.007Z' },
  ],
  createdAt: '2026-03-02T10:00:00.100Z',
  finishedAt: '2026-03-02T10:00:52.030Z',
};
const estimateExample = {
  estimated: { min: 5, max: 9, currency: 'usd' },
  confidence: 'medium' as const,
  breakdown: [
    { step: 'research', min: 3, max: 6, basedOn: 12 },
    { step: 'write', min: 2, max: 3, basedOn: 12 },
  ],
  basedOn: 12,
};
/** One event of the stream (`id: 42`, `event: run.completed`, `data: {...}` on the wire). */
const streamExample = {
  id: '42',
  event: 'run.completed',
  data: `{"runId":"${RUN_ID}","status":"completed","totalCost":{"amount":7,"currency":"usd"},"output":"Tides follow the moon…"}`,
};

const TAG = 'Workflows';
const TEMPLATES =
  'A step’s `input` is a template: `{{input}}` is the run’s input (text as it is, an object as its JSON), `{{input.a.b}}` the value at that path of an object input (nothing when absent), `{{steps.<name>.output}}` the output text of a step it depends on, directly or through others (nothing when that step is optional and failed). Nothing else between `{{` and `}}` is allowed; nothing is evaluated.';
const VALIDATION =
  'Unknown or repeated dependencies, a cycle, a template that names a step it does not depend on, and an unknown or archived agent definition are 422 naming the field (`steps.<i>.dependsOn.<j>`, `steps.<i>.input`, `steps.<i>.agent`). A name in use by another workflow that is not archived is 409.';

const STREAM_DESCRIPTION = `Server-sent events of one run. Events (each \`data\` is JSON):
- \`connected\` \`{ runId, status }\`, first, without an id;
- \`started\` \`{ runId, workflowId, workflowVersion, stepCount }\`;
- \`step.completed\` \`{ runId, stepId, attempt, cost, output }\` (\`stepId\` is the step's name);
- \`step.failed\` \`{ runId, stepId, attempt, error, willRetry }\` for each failed attempt;
- \`run.completed\`, \`run.partial\` \`{ runId, status, totalCost, output }\` (partial adds \`failedSteps\`), \`run.failed\` \`{ runId, status, stepId, error, totalCost }\`, \`run.cancelled\` \`{ runId, status, totalCost }\`: the last event; the stream then ends;
- \`heartbeat\` \`{ t }\` every 15 s, without an id.
If the run has ended when the stream opens (and no \`Last-Event-ID\` is given) the stream is one \`run.<status>\` event, then it ends. A stream opened on a running run sends the run's events from its first (\`started\`), then each as it happens. Every event but \`connected\` and heartbeats has an id; reconnecting with \`Last-Event-ID\` (header, or \`lastEventId\` query) sends what came after it, then the rest (or, for an ended run, up to its last event).`;

export function workflowRoutes(table: RouteTable, deps: { workflows: WorkflowService; hub: WorkflowStreamHub; heartbeatMs: number }): void {
  const { workflows, hub } = deps;
  const id = idParam('wf', 'workflow');
  const runId = z.object({ runId: z.string().min(1).max(128).describe('workflow run id (`wfr_…`)') }).strict();
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/workflows',
      operationId: 'createWorkflow',
      tag: TAG,
      summary: 'Create a workflow',
      description: `A graph of at most ${MAX_STEPS} steps; each runs an agent definition (its current version when the step starts) on its templated input, after the steps it depends on ended. ${TEMPLATES} ${VALIDATION}`,
      body: createWorkflowBody,
      requestExample: createExample,
      responses: { 201: { description: 'created, at version 1', schema: workflowSchema, example: workflowExample } },
      errors: ['unprocessable_entity', 'conflict'],
      handler: async ({ principal, body }) => ({ status: 201, body: await workflows.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/workflows',
      operationId: 'listWorkflows',
      tag: TAG,
      summary: 'List workflows',
      description: 'Newest first, in pages; archived workflows only with `includeArchived=true`. Pass the returned `cursor` for the next page; it is absent on the last.',
      query: paginationQuery.extend({
        includeArchived: z
          .enum(['true', 'false'], { error: 'must be true or false' })
          .default('false')
          .transform((value) => value === 'true')
          .describe('also list archived (deleted) workflows'),
      }),
      responses: { 200: { description: 'one page of workflows', schema: workflowPage, example: { data: [workflowExample], hasMore: false } } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, query }) => ({ status: 200, body: await workflows.list(principal, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/workflows/:id',
      operationId: 'getWorkflow',
      tag: TAG,
      summary: 'Get a workflow',
      description: 'The workflow at its current version, archived or not.',
      params: id,
      responses: { 200: { description: 'the workflow', schema: workflowSchema, example: workflowExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await workflows.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'put',
      path: '/v1/workflows/:id',
      operationId: 'updateWorkflow',
      tag: TAG,
      summary: 'Update a workflow',
      description: `Writes the next version with the fields given (\`steps\` replaces all steps); the others keep their values. Runs under way keep the steps of the version they started with. An archived workflow is 409. ${VALIDATION}`,
      params: id,
      body: updateWorkflowBody,
      requestExample: { description: 'researches a topic, then writes a short summary' },
      responses: { 200: { description: 'the new version', schema: workflowSchema, example: { ...workflowExample, version: 2, description: 'researches a topic, then writes a short summary' } } },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await workflows.update(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/workflows/:id',
      operationId: 'deleteWorkflow',
      tag: TAG,
      summary: 'Delete (archive) a workflow',
      description: 'Archives it: it stays readable with its runs (listed with `includeArchived=true`), runs under way finish, and it cannot run again. Its name can be used again. Archiving twice changes nothing.',
      params: id,
      responses: { 200: { description: 'archived', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await workflows.archive(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/workflows/:id/runs',
      operationId: 'runWorkflow',
      tag: TAG,
      summary: 'Run a workflow',
      description:
        'Starts a run of the current version and answers at once (status `running`); the operator runs the steps in the user’s default session (a test key’s on the mock provider and model, with no usage) and sends `workflow.started`, `workflow.step_completed`, then `workflow.completed` or `workflow.failed`. Follow it on `GET /v1/workflow-runs/{runId}/stream`. A failed attempt is retried up to the step’s `retries`; a required step that still fails fails the run (steps under way are stopped); an optional one ends the run `partial` once the others are done. An archived workflow is 409.',
      params: id,
      body: runBody,
      requestExample: { userId: 'user_4711', input: { topic: 'tides' } },
      responses: { 201: { description: 'started', schema: workflowRunSchema, example: { ...runExample, status: 'running' as const, output: null, cost: { amount: 0, currency: 'usd' }, finishedAt: null, steps: runExample.steps.map((step) => ({ ...step, status: 'pending' as const, attempts: 0, jobId: null, output: null, cost: { amount: 0, currency: 'usd' }, startedAt: null, finishedAt: null })) } } },
      errors: ['not_found', 'unprocessable_entity', 'conflict'],
      handler: async ({ principal, params, body }) => ({ status: 201, body: await workflows.run(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/workflows/:id/runs',
      operationId: 'listWorkflowRuns',
      tag: TAG,
      summary: 'List the runs of a workflow',
      description: 'Newest first, in pages, each with its steps. Pass the returned `cursor` for the next page; it is absent on the last.',
      params: id,
      query: paginationQuery,
      responses: { 200: { description: 'one page of runs', schema: runPage, example: { data: [runExample], hasMore: false } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, query }) => ({ status: 200, body: await workflows.listRuns(principal, params.id, query) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/workflow-runs/:runId',
      operationId: 'getWorkflowRun',
      tag: TAG,
      summary: 'Get a workflow run',
      description: 'The run with each step’s status, attempts, output, error and cost.',
      params: runId,
      responses: { 200: { description: 'the run', schema: workflowRunSchema, example: runExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await workflows.getRun(principal, params.runId) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/workflow-runs/:runId/cancel',
      operationId: 'cancelWorkflowRun',
      tag: TAG,
      summary: 'Cancel a workflow run',
      description: 'Ends a running run `cancelled`: steps not started never start, and steps under way are stopped (their agents are ended). A run that ended already is 409 with `details.status`.',
      params: runId,
      responses: { 200: { description: 'cancelled', schema: workflowRunSchema, example: { ...runExample, status: 'cancelled' as const, output: null, error: { code: 'cancelled', message: 'the run was cancelled' } } } },
      errors: ['not_found', 'conflict'],
      handler: async ({ principal, params }) => ({ status: 200, body: await workflows.cancelRun(principal, params.runId) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/workflows/:id/estimate',
      operationId: 'estimateWorkflow',
      tag: TAG,
      summary: 'Estimate the cost of a run',
      description:
        'From the workflow’s completed runs (status `completed`): `estimated` is the min and max of their costs, `basedOn` their number, `confidence` `low` under 10, `medium` for 10 to 99, `high` for 100 or more. With none: stepCount × 5 to stepCount × 50 cents, confidence `low`. `breakdown` gives each step’s min and max over its completed attempts in those runs (5 to 50 cents for a step without any).',
      params: id,
      responses: { 200: { description: 'the estimate', schema: workflowEstimateSchema, example: estimateExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await workflows.estimate(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/workflow-runs/:runId/stream',
      operationId: 'streamWorkflowRun',
      tag: TAG,
      summary: 'Stream a workflow run',
      description: STREAM_DESCRIPTION,
      params: runId,
      query: z.object({ lastEventId: z.string().regex(/^\d{1,18}$/).optional().describe('same as the Last-Event-ID header') }).strict(),
      responses: { 200: { description: 'an event stream', contentType: 'text/event-stream', schema: runStreamEventSchema, example: streamExample } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ req, res, principal, params, query }) => {
        const header = req.get('last-event-id');
        if (header !== undefined && !/^\d{1,18}$/.test(header)) {
          throw new ApiError('unprocessable_entity', 'Last-Event-ID must be an event id of this stream', { fields: { 'Last-Event-ID': ['not an event id'] } });
        }
        const lastEventId = header ?? query.lastEventId;
        const run = await workflows.runStatus(principal, params.runId);
        if (TERMINAL_RUN_STATUSES.includes(run.status)) {
          // Ended before the stream opened: its one run.<status> event, or, resuming, what came
          // after Last-Event-ID up to that event; then the stream ends.
          const events = lastEventId === undefined ? [await workflows.endEvent(params.runId)] : await workflows.eventsAfter(params.runId, lastEventId);
          const stream = openEventStream(req, res, deps.heartbeatMs);
          for (const event of events) if (event) stream.write(event.type, event.data, event.seq);
          res.end();
          return;
        }
        let stream: ReturnType<typeof openEventStream> | undefined;
        let finished = false;
        const early: WorkflowStreamEvent[] = [];
        const send = (event: WorkflowStreamEvent) => {
          if (finished) return;
          stream!.write(event.type, event.data, event.seq);
          if (event.type.startsWith('run.')) {
            finished = true;
            res.end();
          }
        };
        const unsubscribe = await hub.subscribe(params.runId, lastEventId, (events) => {
          if (!stream) early.push(...events);
          else for (const event of events) send(event);
        });
        stream = openEventStream(req, res, deps.heartbeatMs);
        stream.write('connected', { runId: params.runId, status: run.status });
        for (const event of early.splice(0)) send(event);
        if (!finished) await Promise.race([stream.closed, new Promise<void>((resolve) => res.once('finish', resolve))]);
        unsubscribe();
      },
    }),
  );
}

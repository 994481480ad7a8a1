import { z } from 'zod';
import { costSchema } from '@berth/crds';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { JobService } from '../services/jobs.js';
import { jobExample } from './examples.js';
import { idParam } from './schemas.js';

const jobSchema = z
  .object({
    id: z.string().describe('`job_…`'),
    state: z
      .enum(['queued', 'running', 'completed', 'failed', 'cancelled'])
      .describe('queued → running → completed | failed (`timeout` when a workflow step ran past its timeout); cancelled when its schedule was deleted before it started, or its workflow run or fleet was cancelled'),
    source: z
      .object({ type: z.enum(['trigger', 'schedule', 'workflow', 'fleet']), id: z.string().describe('`trg_…`, `sched_…`, `wfr_…` (a step of that workflow run) or `flt_…`') })
      .describe('what started it'),
    agent: z.string().describe('the agent definition (`adef_…`) it runs, at its current version when the job starts'),
    userId: z.string(),
    input: z.unknown().describe('the input as given: the JSON body of a fire, the input of a schedule; sent to the model as text'),
    sessionId: z.string().nullable().describe("the session it runs in: the user's default one, or the one its source gave (a fleet's)"),
    agentId: z.string().nullable().describe('the agent it created (GET /v1/agents/{id})'),
    taskId: z.string().nullable().describe('its run (GET /v1/tasks/{id}, GET /v1/agents/{agentId}/stream)'),
    output: z.string().nullable().describe("the run's final answer, once completed"),
    error: z.object({ code: z.string(), message: z.string() }).nullable().describe('why it failed'),
    cost: costSchema.describe("the run's cost in cents: so far while it runs, final once it ended"),
    createdAt: z.string(),
    startedAt: z.string().nullable(),
    finishedAt: z.string().nullable(),
  })
  .meta({ id: 'Job' });

export function jobRoutes(table: RouteTable, jobs: JobService): void {
  table.add(
    defineRoute({
      method: 'get',
      path: '/v1/jobs/:id',
      operationId: 'getJob',
      tag: 'Jobs',
      summary: 'Follow a job',
      description:
        "One run of an agent definition started by a trigger's fire (its `jobId`), a schedule, a step of a workflow run or an item of a fleet: its state, the session, agent and task it made (poll this, or stream the agent), the output or error, and the cost.",
      params: idParam('job', 'job'),
      responses: { 200: { description: 'the job', schema: jobSchema, example: jobExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await jobs.get(principal, params.id) }),
    }),
  );
}

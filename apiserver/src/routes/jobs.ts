import { z } from 'zod';
import { costSchema } from '@berth/crds';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { JobService } from '../services/jobs.js';
import { jobExample } from './examples.js';
import { idParam } from './schemas.js';

const jobSchema = z
  .object({
    id: z.string().describe('`job_…`'),
    state: z.enum(['queued', 'running', 'completed', 'failed', 'cancelled']).describe('queued → running → completed | failed; cancelled when its schedule was deleted before it started'),
    source: z.object({ type: z.enum(['trigger', 'schedule', 'workflow', 'fleet']), id: z.string().describe('`trg_…`, `sched_…`, `wfr_…` or `flt_…`') }).describe('what started it'),
    agent: z.string().describe('the agent definition (`adef_…`) it runs, at its current version when the job starts'),
    userId: z.string(),
    input: z.unknown().describe('the input as given: the JSON body of a fire, the input of a schedule; sent to the model as text'),
    sessionId: z.string().nullable().describe("the user's session, once the job started"),
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
        "One run of an agent definition started by a trigger's fire (its `jobId`) or a schedule: its state, the session, agent and task it made (poll this, or stream the agent), the output or error, and the cost.",
      params: idParam('job', 'job'),
      responses: { 200: { description: 'the job', schema: jobSchema, example: jobExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await jobs.get(principal, params.id) }),
    }),
  );
}

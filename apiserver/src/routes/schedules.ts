import { scheduleInputSchema } from '@berth/crds';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { ScheduleService } from '../services/schedules.js';
import { idParam, okSchema } from './schemas.js';

/** Schedules: request and response schemas, their examples, and the routes. */

const nullableString = (description: string) => z.string().nullable().describe(description);

export const scheduleSchema = z
  .object({
    id: z.string().describe('`sched_…`'),
    name: z.string().nullable().describe('the name given on creation, or null'),
    agent: z.string().describe('the agent definition as given (name or `adef_…` id)'),
    definitionId: z.string().describe('the `adef_…` id `agent` named when it was written; each run uses its current version'),
    userId: z.string().describe('the end-user whose default session each run uses'),
    cron: z.string().describe('five fields: minute hour day-of-month month day-of-week'),
    timezone: z.string().describe('IANA time zone the cron is evaluated in'),
    input: z.union([z.string(), z.record(z.string(), z.unknown())]).nullable().describe('the task of each run; an object is sent to the model as its JSON'),
    paused: z.boolean(),
    nextRunAt: nullableString('ISO 8601: the next matching time that will run; null while paused'),
    lastRunAt: nullableString('ISO 8601: the matching time of the latest run, or null'),
    createdAt: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'Schedule', description: 'runs an agent from a definition at every matching time of a cron expression' });

const costSchema = z.object({ amount: z.number().int().describe('integer cents'), currency: z.string() });

export const scheduleExecutionSchema = z
  .object({
    id: z.string().describe('`exec_…`'),
    scheduleId: z.string(),
    scheduledFor: z.string().describe('ISO 8601: the matching time this execution is for'),
    firedAt: nullableString('ISO 8601: when the operator queued the run; null for a missed time'),
    startedAt: nullableString('ISO 8601: when the run began to be set up (session, agent)'),
    finishedAt: nullableString('ISO 8601: when the run ended'),
    status: z
      .enum(['missed', 'queued', 'running', 'completed', 'failed', 'cancelled'])
      .describe('`missed`: due while no operator ran, found after the grace window (15 minutes) and not run; else the state of its run'),
    jobId: z.string().nullable().describe('`job_…`: the job that runs it'),
    sessionId: z.string().nullable(),
    agentId: z.string().nullable().describe('the agent created for the run, ended when the run ends'),
    taskId: z.string().nullable().describe('the run (`GET /v1/tasks/:id`)'),
    cost: costSchema.nullable().describe('the run’s cost once it ended (models and compute); 0 for test keys'),
    error: z.object({ code: z.string(), message: z.string() }).nullable(),
  })
  .meta({ id: 'ScheduleExecution', description: 'one matching time of a schedule that came due, and its run' });

const scheduleList = z.object({ data: z.array(scheduleSchema) }).meta({ id: 'ScheduleList' });
const executionList = z.object({ data: z.array(scheduleExecutionSchema) }).meta({ id: 'ScheduleHistory' });

const fields = {
  agent: z.string().min(1).max(200).describe('agent definition name or `adef_…` id; unknown or archived is 422'),
  userId: z.string().min(1).max(256).describe("the customer's end-user identifier; runs use the user's default session"),
  name: z.string().min(1).max(200),
  cron: z.string().min(1).max(200).describe('five fields: minute hour day-of-month month day-of-week (ranges, steps, lists, names)'),
  timezone: z.string().min(1).max(64).describe('IANA time zone such as "Europe/Berlin"; default UTC'),
  input: scheduleInputSchema.describe('the task of each run: text, or an object sent to the model as its JSON (at most 64 KiB)'),
};

export const createScheduleBody = z
  .object({
    agent: fields.agent,
    userId: fields.userId,
    name: fields.name.optional(),
    cron: fields.cron,
    timezone: fields.timezone.optional(),
    input: fields.input.optional(),
  })
  .strict();

export const updateScheduleBody = z
  .object({
    agent: fields.agent.optional(),
    userId: fields.userId.optional(),
    name: fields.name.optional(),
    cron: fields.cron.optional(),
    timezone: fields.timezone.optional(),
    input: fields.input.optional(),
  })
  .strict();

const SCHEDULE_ID = 'sched_01jq3vf1j3m5p7r9t1v3x5z7b9';
const scheduleExample = {
  id: SCHEDULE_ID,
  name: 'nightly report',
  agent: 'sales-reporter',
  definitionId: 'adef_01jq3vd5g7j9m1p3r5t7v9x1z3',
  userId: 'user_4711',
  cron: '30 2 * * *',
  timezone: 'Europe/Berlin',
  input: { report: 'sales', period: 'yesterday' },
  paused: false,
  nextRunAt: '2026-03-02T01:30:00.000Z',
  lastRunAt: null,
  createdAt: '2026-03-01T09:30:00.000Z',
};
const createExample = {
  agent: 'sales-reporter',
  userId: 'user_4711',
  name: 'nightly report',
  cron: '30 2 * * *',
  timezone: 'Europe/Berlin',
  input: { report: 'sales', period: 'yesterday' },
};
const executionExample = {
  id: 'exec_01jq9z0a1b2c3d4e5f6g7h8j9k',
  scheduleId: SCHEDULE_ID,
  scheduledFor: '2026-03-02T01:30:00.000Z',
  firedAt: '2026-03-02T01:30:00.112Z',
  startedAt: '2026-03-02T01:30:00.140Z',
  finishedAt: '2026-03-02T01:30:41.905Z',
  status: 'completed' as const,
  jobId: 'job_01jq9z0a1c3e5g7j9m1p3r5t7v',
  sessionId: 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j',
  agentId: 'agt_01jq9z0a2d4f6h8k0n2q4s6u8w',
  taskId: 'task_01jq9z0b3e5g7j9m1p3r5t7v9x',
  cost: { amount: 4, currency: 'usd' },
  error: null,
};

const TAG = 'Schedules';
const CRON_RULES =
  'The cron expression has five fields (minute hour day-of-month month day-of-week) and is evaluated on the wall clock of `timezone`: a time the clocks skip runs once at the first minute after the gap, a time they repeat runs once.';

export function scheduleRoutes(table: RouteTable, schedules: ScheduleService): void {
  const id = idParam('sched', 'schedule');
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/schedules',
      operationId: 'createSchedule',
      tag: TAG,
      summary: 'Create a schedule',
      description: `At every matching time the operator gets or creates the user's default session, creates an agent from the definition's current version, runs \`input\` as its task, records the execution and sends \`schedule.fired\`. The first run is at the next matching time after now. ${CRON_RULES} An invalid cron, an unknown time zone or an unknown or archived definition is 422 naming the field.`,
      body: createScheduleBody,
      requestExample: createExample,
      responses: { 201: { description: 'created', schema: scheduleSchema, example: scheduleExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ principal, body }) => ({ status: 201, body: await schedules.create(principal, body) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/schedules',
      operationId: 'listSchedules',
      tag: TAG,
      summary: 'List schedules',
      description: 'Every schedule of the key’s organization and mode, newest first; no status filter.',
      responses: { 200: { description: 'the schedules', schema: scheduleList, example: { data: [scheduleExample] } } },
      errors: [],
      handler: async ({ principal }) => ({ status: 200, body: await schedules.list(principal) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/schedules/:id',
      operationId: 'getSchedule',
      tag: TAG,
      summary: 'Get a schedule',
      description: 'The schedule with its next and last run.',
      params: id,
      responses: { 200: { description: 'the schedule', schema: scheduleSchema, example: scheduleExample } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await schedules.get(principal, params.id) }),
    }),
    defineRoute({
      method: 'put',
      path: '/v1/schedules/:id',
      operationId: 'updateSchedule',
      tag: TAG,
      summary: 'Update a schedule',
      description: `The fields of creation; omitted fields keep their stored value. A new cron or time zone moves \`nextRunAt\` to its next matching time after now. ${CRON_RULES}`,
      params: id,
      body: updateScheduleBody,
      requestExample: { cron: '0 6 * * 1-5', timezone: 'America/New_York' },
      responses: { 200: { description: 'updated', schema: scheduleSchema, example: { ...scheduleExample, cron: '0 6 * * 1-5', timezone: 'America/New_York', nextRunAt: '2026-03-02T11:00:00.000Z' } } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ principal, params, body }) => ({ status: 200, body: await schedules.update(principal, params.id, body) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/schedules/:id',
      operationId: 'deleteSchedule',
      tag: TAG,
      summary: 'Delete a schedule',
      description: 'Cancels all future runs: no matching time fires any more, and runs queued but not started are cancelled. A run already under way finishes.',
      params: id,
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await schedules.delete(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/schedules/:id/pause',
      operationId: 'pauseSchedule',
      tag: TAG,
      summary: 'Pause a schedule',
      description: 'Suspends firing; `nextRunAt` becomes null. Pausing a paused schedule changes nothing.',
      params: id,
      responses: { 200: { description: 'paused', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await schedules.pause(principal, params.id) }),
    }),
    defineRoute({
      method: 'post',
      path: '/v1/schedules/:id/resume',
      operationId: 'resumeSchedule',
      tag: TAG,
      summary: 'Resume a schedule',
      description: 'Fires again from the next matching time after now; the times that passed while it was paused do not run (no catch-up burst). Resuming a schedule that is not paused changes nothing.',
      params: id,
      responses: { 200: { description: 'resumed', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await schedules.resume(principal, params.id) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/schedules/:id/history',
      operationId: 'getScheduleHistory',
      tag: TAG,
      summary: 'Executions of a schedule',
      description: 'The latest 100 matching times that came due, newest first, each with the state, cost and ids of its run; missed times too.',
      params: id,
      responses: { 200: { description: 'the executions', schema: executionList, example: { data: [executionExample] } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await schedules.history(principal, params.id) }),
    }),
  );
}

import { z } from 'zod';
import { conditionSchema, freeFormObject, modeSchema } from './common.js';

export const SCHEDULE_KIND = 'Schedule';

/** Five cron fields: minute hour day-of-month month day-of-week. */
export const CRON_PATTERN_SOURCE = '^\\S+( \\S+){4}$';

/** Runs an agent on a cron schedule, in a timezone (UTC unless given). */
export const scheduleSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  /** Agent definition name or id to instantiate on each run. */
  agent: z.string().min(1),
  userId: z.string().min(1),
  name: z.string().optional(),
  cron: z.string().regex(new RegExp(CRON_PATTERN_SOURCE), 'must have five fields: minute hour day-of-month month day-of-week'),
  timezone: z.string().default('UTC'),
  input: freeFormObject({ maxDepth: 16, maxBytes: 64 * 1024 }).optional(),
  paused: z.boolean().default(false),
});
export type ScheduleSpec = z.infer<typeof scheduleSpecSchema>;

export const scheduleStatusSchema = z.object({
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  nextRunAt: z.string().optional(),
  lastRunAt: z.string().optional(),
});
export type ScheduleStatus = z.infer<typeof scheduleStatusSchema>;

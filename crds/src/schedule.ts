import { z } from 'zod';
import { conditionSchema, freeFormObject, modeSchema } from './common.js';

export const SCHEDULE_KIND = 'Schedule';

/** Five cron fields: minute hour day-of-month month day-of-week. */
export const CRON_PATTERN_SOURCE = '^\\S+( \\S+){4}$';

/** The largest `input` a schedule keeps, as text or as JSON. */
export const MAX_SCHEDULE_INPUT_BYTES = 64 * 1024;

/** What a schedule's run gets as its task: text, or an object sent to the model as its JSON. */
export const scheduleInputSchema = z.union([
  z.string().min(1).refine((text) => Buffer.byteLength(text) <= MAX_SCHEDULE_INPUT_BYTES, `must be at most ${MAX_SCHEDULE_INPUT_BYTES / 1024} KiB`),
  freeFormObject({ maxDepth: 16, maxBytes: MAX_SCHEDULE_INPUT_BYTES }),
]);

/** Runs an agent on a cron schedule, in a timezone (UTC unless given). */
export const scheduleSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  /** Agent definition name or id to instantiate on each run, as the client gave it. */
  agent: z.string().min(1),
  /** The definition `agent` named when the schedule was written: each run uses its current version. */
  definitionId: z.string(),
  userId: z.string().min(1),
  name: z.string().optional(),
  cron: z.string().regex(new RegExp(CRON_PATTERN_SOURCE), 'must have five fields: minute hour day-of-month month day-of-week'),
  timezone: z.string().default('UTC'),
  input: scheduleInputSchema.optional(),
  paused: z.boolean().default(false),
  /**
   * Matching times from this instant on count (RFC 3339): set on creation, on resume and when
   * the cron or the time zone changes, so none of those runs the times before it.
   */
  activeSince: z.string(),
});
export type ScheduleSpec = z.infer<typeof scheduleSpecSchema>;

export const scheduleStatusSchema = z.object({
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  /** The next matching time that will run (absent while paused). */
  nextRunAt: z.string().optional(),
  /** The matching time of the latest run. */
  lastRunAt: z.string().optional(),
});
export type ScheduleStatus = z.infer<typeof scheduleStatusSchema>;

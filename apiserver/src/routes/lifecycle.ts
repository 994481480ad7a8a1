import { MAX_LIFECYCLE_RESTARTS, ON_TIMEOUT_VALUES, durationSchema, parseDuration, type Lifecycle } from '@berth/crds';
import { z } from 'zod';

/**
 * `lifecycle` as agent creation takes it (ADR 45), every sub-field enforced: a bad value is 422
 * naming the sub-field (`lifecycle.idle.terminateAfter`), also inside `overrides`.
 */
export const lifecycleBody = z
  .object({
    idle: z
      .object({
        pauseAfter: durationSchema
          .optional()
          .describe('pause the agent by checkpoint after this long without exec, run, stream, terminal, process, file or port traffic (30s, 10m, 2h); its next such call wakes it'),
        terminateAfter: durationSchema
          .optional()
          .describe('terminate the agent after this long without traffic, whether it was paused by `pauseAfter` meanwhile or not (longer than `pauseAfter` when both are given); `agent.terminated` says `reason: idle`'),
      })
      .strict()
      .optional(),
    onFailure: z
      .object({
        restart: z
          .number()
          .int('must be a whole number of restarts')
          .min(0)
          .max(MAX_LIFECYCLE_RESTARTS, `must be at most ${MAX_LIFECYCLE_RESTARTS}`)
          .describe(`recreate a sandbox that died (killed, out of memory, its host restarted) up to this many times (0–${MAX_LIFECYCLE_RESTARTS}), then fail the agent`),
      })
      .strict()
      .optional(),
    onTimeout: z
      .enum(ON_TIMEOUT_VALUES)
      .optional()
      .describe('what the agent\'s `timeout` does: `terminate` (the default) ends its sandbox and fails it with `timeout`; `pause` pauses it by checkpoint (reason `timeout`), to be resumed with `POST /v1/agents/{id}/resume` for a new lifetime'),
  })
  .strict()
  .superRefine((value, context) => {
    if (value.idle && value.idle.pauseAfter === undefined && value.idle.terminateAfter === undefined) {
      context.addIssue({ code: 'custom', path: ['idle', 'pauseAfter'], message: 'required (or terminateAfter): the time without traffic after which the agent is paused' });
    }
    const pauseAfter = value.idle?.pauseAfter === undefined ? undefined : parseDuration(value.idle.pauseAfter);
    const terminateAfter = value.idle?.terminateAfter === undefined ? undefined : parseDuration(value.idle.terminateAfter);
    if (pauseAfter !== undefined && terminateAfter !== undefined && terminateAfter <= pauseAfter) {
      context.addIssue({ code: 'custom', path: ['idle', 'terminateAfter'], message: `must be longer than pauseAfter (${value.idle!.pauseAfter}): the agent is paused first` });
    }
    if (value.idle === undefined && value.onFailure === undefined && value.onTimeout === undefined) {
      context.addIssue({ code: 'custom', path: [], message: 'give idle, onFailure, onTimeout or several' });
    }
  })
  .transform((value): Lifecycle => value)
  .describe('auto-pause, idle termination, failure and timeout policy: `{ idle: { pauseAfter, terminateAfter }, onFailure: { restart }, onTimeout }` (see docs/warm-pools-and-lifecycle.md)');

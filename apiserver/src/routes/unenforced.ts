import { ApiError } from '@berth/common';
import { MAX_LIFECYCLE_RESTARTS, durationSchema, type Lifecycle } from '@berth/crds';
import { z } from 'zod';

/**
 * Sub-fields of `lifecycle` that Berth does not enforce (ADR 45). They are refused with 501 naming
 * the sub-field rather than stored and ignored: an agent created with a policy must not run
 * without it. `idle.pauseAfter` and `onFailure.restart` are enforced.
 */
export const UNENFORCED_LIFECYCLE_FIELDS = {
  'idle.terminateAfter': 'ending an idle agent',
  onTimeout: 'a policy at the agent\'s timeout other than ending it',
} as const;

const unenforced = z.unknown().optional().describe('not enforced: supplying it answers 501 naming it');

/**
 * `lifecycle` as agent creation takes it: what is enforced, validated (422 naming the sub-field),
 * and the named sub-fields that are not (501, see `refuseUnenforcedFields`); stored as the
 * resource's `lifecycle` without them.
 */
export const lifecycleBody = z
  .object({
    idle: z
      .object({
        pauseAfter: durationSchema
          .optional()
          .describe('pause the agent by checkpoint after this long without exec, run, stream, terminal, process, file or port traffic (30s, 10m, 2h); its next such call wakes it'),
        terminateAfter: unenforced,
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
    onTimeout: unenforced,
  })
  .strict()
  .superRefine((value, context) => {
    if (value.idle && value.idle.pauseAfter === undefined && value.idle.terminateAfter === undefined) {
      context.addIssue({ code: 'custom', path: ['idle', 'pauseAfter'], message: 'required: the time without traffic after which the agent is paused' });
    }
    if (value.idle === undefined && value.onFailure === undefined && value.onTimeout === undefined) {
      context.addIssue({ code: 'custom', path: [], message: 'give idle, onFailure or both' });
    }
  })
  .transform((value): Lifecycle => ({
    ...(value.idle?.pauseAfter !== undefined ? { idle: { pauseAfter: value.idle.pauseAfter } } : {}),
    ...(value.onFailure !== undefined ? { onFailure: value.onFailure } : {}),
  }))
  .describe('auto-pause and failure policy: `{ idle: { pauseAfter }, onFailure: { restart } }` (see docs/warm-pools-and-lifecycle.md)');

/** The value at a dotted path of `value`, if it is an object there. */
function at(value: unknown, path: string): unknown {
  let current = value;
  for (const part of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[part];
  }
  return current;
}

/** Throws 501 `not_implemented` for the first unenforced lifecycle sub-field present; `prefix` names where it was written (`overrides.`). */
export function refuseUnenforcedFields(fields: Record<string, unknown> | undefined, prefix = ''): void {
  for (const [path, what] of Object.entries(UNENFORCED_LIFECYCLE_FIELDS)) {
    if (at(fields?.lifecycle, path) === undefined) continue;
    const name = `${prefix}lifecycle.${path}`;
    throw new ApiError('not_implemented', `${name}: ${what} is not enforced yet; remove "${name}" (lifecycle.idle.pauseAfter and lifecycle.onFailure.restart are)`, {
      fields: { [name]: ['not implemented'] },
    });
  }
}

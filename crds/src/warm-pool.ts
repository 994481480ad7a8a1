import { z } from 'zod';
import { computeSchema, conditionSchema, modeSchema } from './common.js';

export const WARM_POOL_KIND = 'WarmPool';

/** The most sandboxes one pool keeps ready. */
export const MAX_WARM_POOL_SIZE = 50;

/**
 * Sandboxes kept started ahead of the agents that will take them (ADR 45), per organization and
 * shape: compute, browser, and optionally one agent definition. Agent creation claims one that
 * fits and the pool's reconciler starts another. The sandboxes themselves are rows of PostgreSQL
 * (`warm_sandboxes`): a claim is one row update, which two creations cannot both win.
 */
export const warmPoolSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  /** The provider whose sandboxes the pool holds (one of this install's). */
  provider: z.string(),
  compute: computeSchema,
  browser: z.boolean(),
  /** Only agents made from this definition (`adef_…`) claim from the pool; without it, any agent of its shape. */
  definition: z.string().optional(),
  /** How many unclaimed sandboxes the reconciler keeps (starting or ready). */
  size: z.number().int().min(0).max(MAX_WARM_POOL_SIZE),
});
export type WarmPoolSpec = z.infer<typeof warmPoolSpecSchema>;

export const warmPoolStatusSchema = z.object({
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  /** Unclaimed sandboxes ready to be claimed. */
  ready: z.number().int().nonnegative(),
  /** Unclaimed sandboxes being started. */
  starting: z.number().int().nonnegative(),
  /** Sandboxes claimed by agents since the pool was made. */
  claims: z.number().int().nonnegative(),
});
export type WarmPoolStatus = z.infer<typeof warmPoolStatusSchema>;

export const WarmPoolCondition = {
  /** True when `ready` equals `size`. */
  Filled: 'Filled',
} as const;

export const WarmPoolReason = {
  Filled: 'Filled',
  Filling: 'Filling',
  /** The pool's provider cannot keep sandboxes warm (or is not configured here). */
  Unsupported: 'Unsupported',
  StartFailed: 'StartFailed',
} as const;

/** The finalizer that keeps a pool until its unclaimed sandboxes are ended. */
export const WARM_SANDBOXES_FINALIZER = 'berth.dev/warm-sandboxes';

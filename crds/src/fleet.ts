import { z } from 'zod';
import { conditionSchema, costSchema, modeSchema } from './common.js';

export const FLEET_KIND = 'Fleet';

/**
 * `running` while items are still to run; `completed` when every item ended (some may have
 * failed); `failed` when every item failed; `paused` when the cost cap or a session limit stopped
 * it (the rest cancelled; `status.reason` says which); `cancelled` when cancelled. All but
 * `running` are final.
 */
export const fleetPhaseSchema = z.enum(['running', 'paused', 'completed', 'failed', 'cancelled']);

/** The most items one fleet takes; they are sent inline on creation. */
export const MAX_FLEET_ITEMS = 1000;
/** The most concurrent items of one fleet. */
export const MAX_FLEET_CONCURRENCY = 100;

/**
 * Many items through one agent definition, a bounded number at a time. The items themselves
 * live in PostgreSQL (they can be far larger than an object in etcd may be).
 */
export const fleetSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  /** The session every item's agent runs in: its limits apply to the fleet. */
  sessionId: z.string(),
  /** The session's user, whom every item's job runs for. */
  userId: z.string().min(1),
  /** Agent definition name or id each item runs on, as the client gave it. */
  definition: z.string().min(1),
  /** The `adef_…` id `definition` named on creation: each item uses its current version when it starts. */
  definitionId: z.string().min(1),
  name: z.string().optional(),
  /** Task template: `{{item}}` is the item as text, `{{item.<key>}}` a top-level field of an object item. */
  prompt: z.string().optional(),
  itemCount: z.number().int().nonnegative().max(MAX_FLEET_ITEMS),
  concurrency: z.number().int().positive().max(MAX_FLEET_CONCURRENCY).default(10),
  costCap: costSchema.optional(),
  /** Set by the cancel route: the reconciler cancels the items not yet ended. */
  cancelled: z.boolean().optional(),
});
export type FleetSpec = z.infer<typeof fleetSpecSchema>;

export const fleetStatusSchema = z.object({
  phase: fleetPhaseSchema,
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  completed: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  /** Items whose job is open now (queued or running). */
  running: z.number().int().nonnegative().optional(),
  /** Items cancelled (by cancel, the cost cap or a session limit) before they ended. */
  cancelled: z.number().int().nonnegative().optional(),
  cost: costSchema.optional(),
  /** Why a final fleet stopped early: `cost_limit`, `session_limit`, `cancelled`. */
  reason: z.string().optional(),
});
export type FleetStatus = z.infer<typeof fleetStatusSchema>;

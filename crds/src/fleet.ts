import { z } from 'zod';
import { conditionSchema, costSchema, modeSchema } from './common.js';

export const FLEET_KIND = 'Fleet';

export const fleetPhaseSchema = z.enum(['running', 'paused', 'completed', 'failed', 'cancelled']);

/**
 * Many items through one agent definition, a bounded number at a time. The items themselves
 * live in PostgreSQL (they can be far larger than an object in etcd may be).
 */
export const fleetSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  sessionId: z.string(),
  /** Agent definition name or id each item runs on. */
  definition: z.string().min(1),
  itemCount: z.number().int().nonnegative(),
  concurrency: z.number().int().positive().default(10),
  costCap: costSchema.optional(),
});
export type FleetSpec = z.infer<typeof fleetSpecSchema>;

export const fleetStatusSchema = z.object({
  phase: fleetPhaseSchema,
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  completed: z.number().int().nonnegative(),
  failed: z.number().int().nonnegative(),
  cost: costSchema.optional(),
  reason: z.string().optional(),
});
export type FleetStatus = z.infer<typeof fleetStatusSchema>;

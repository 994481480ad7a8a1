import { z } from 'zod';
import { costSchema, durationSchema, environmentSchema, metadataSchema, modeSchema } from './common.js';

export const SESSION_KIND = 'Session';

export const costPeriodSchema = z.enum(['day', 'month']);

/**
 * Per-session ceilings. `maxDuration` is the duration ceiling the spec names
 * without a field: how long, from the session's creation, its agents may run.
 */
export const sessionLimitsSchema = z
  .object({
    maxCost: costSchema.extend({ period: costPeriodSchema }).strict(),
    maxAgents: z.number().int().positive(),
    maxComputeMinutes: z.number().int().positive(),
    maxDuration: durationSchema,
  })
  .partial()
  .strict();
export type SessionLimits = z.infer<typeof sessionLimitsSchema>;

export const sessionSpecSchema = z.object({
  organizationId: z.string(),
  mode: modeSchema,
  userId: z.string().min(1).max(256),
  environment: environmentSchema,
  limits: sessionLimitsSchema,
  metadata: metadataSchema,
});
export type SessionSpec = z.infer<typeof sessionSpecSchema>;

export const sessionStatusSchema = z.object({
  phase: z.enum(['active', 'ended']).optional(),
});
export type SessionStatus = z.infer<typeof sessionStatusSchema>;

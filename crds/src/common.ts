import { z } from 'zod';
import { DURATION_PATTERN_SOURCE, parseDuration } from './duration.js';

/** Lowercase ISO 4217 currency code, as the spec writes money: `{ amount, currency: 'usd' }`. */
export const currencySchema = z
  .string()
  .regex(/^[a-z]{3}$/, 'must be a lowercase three-letter currency code such as "usd"');

/** Money is integer cents everywhere. */
export const costSchema = z
  .object({
    amount: z.number().int('must be an integer number of cents').nonnegative(),
    currency: currencySchema,
  })
  .strict();
export type Cost = z.infer<typeof costSchema>;

/** The longest duration any field takes (a year): longer values are mistakes, not plans. */
export const MAX_DURATION_SECONDS = 366 * 24 * 3600;

export const durationSchema = z
  .string()
  .min(2, 'must be a duration such as "30s", "5m", "2h" or "1h30m"')
  .max(32)
  .regex(new RegExp(DURATION_PATTERN_SOURCE), 'must be a duration such as "30s", "5m", "2h" or "1h30m"')
  .refine((text) => (parseDuration(text) ?? 0) > 0, 'must be longer than zero')
  .refine((text) => (parseDuration(text) ?? 0) <= MAX_DURATION_SECONDS, `must be at most ${MAX_DURATION_SECONDS / 3600}h (a year)`);

export const computeSchema = z.enum(['python', 'node', 'go']);
export type Compute = z.infer<typeof computeSchema>;

export const environmentSchema = z.enum(['production', 'staging', 'development']);
export type Environment = z.infer<typeof environmentSchema>;

/** Whether a resource belongs to live keys or to test keys; the two never see each other's data. */
export const modeSchema = z.enum(['live', 'test']);
export type Mode = z.infer<typeof modeSchema>;

/** String-to-string pairs the customer attaches; bounded so one record cannot grow without limit. */
export const metadataSchema = z
  .record(
    z.string().min(1).max(64, 'metadata keys are at most 64 characters'),
    z.string().max(512, 'metadata values are at most 512 characters'),
  )
  .refine((record) => Object.keys(record).length <= 50, 'at most 50 metadata keys');

/** A Kubernetes-style condition; `status.phase` is derived from these. */
export const conditionSchema = z.object({
  type: z.string(),
  status: z.enum(['True', 'False', 'Unknown']),
  reason: z.string(),
  message: z.string(),
  lastTransitionTime: z.string(),
  observedGeneration: z.number().int(),
});
export type Condition = z.infer<typeof conditionSchema>;

/** Models are addressed as `<vendor>/<model>`, e.g. `openai/gpt-4o-mini` or `anthropic/claude-sonnet-4-5`. */
export const modelSchema = z
  .string()
  .max(200)
  .regex(/^[a-z0-9][a-z0-9-]*\/\S+$/, 'must be <vendor>/<model>, e.g. openai/gpt-4o-mini');

/** How deep and how large a free-form object (metadata rules, policies, overrides, configs) may be. */
export interface FreeFormBounds {
  maxDepth: number;
  maxBytes: number;
}

export const FREE_FORM_BOUNDS: FreeFormBounds = { maxDepth: 8, maxBytes: 16 * 1024 };

/** Nesting depth of a JSON value: 0 for a scalar, 1 for a flat object or array. Iterative, so no input overflows the stack. */
export function jsonDepth(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (node === null || typeof node !== 'object') continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return deepest;
}

/**
 * An object whose inner structure is the customer's: any JSON, but bounded in depth and in
 * size, so one record cannot grow without limit or nest deeper than anything reads it.
 */
export function freeFormObject(bounds: FreeFormBounds = FREE_FORM_BOUNDS) {
  return z
    .record(z.string(), z.unknown())
    .refine((value) => jsonDepth(value) <= bounds.maxDepth, `must nest at most ${bounds.maxDepth} levels deep`)
    .refine(
      (value) => Buffer.byteLength(JSON.stringify(value)) <= bounds.maxBytes,
      `must be at most ${bounds.maxBytes / 1024} KiB of JSON`,
    );
}

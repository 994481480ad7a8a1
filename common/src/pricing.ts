import { z } from 'zod';
import { dollarsToNanocents } from './money.js';

/**
 * The prices Berth charges, besides model tokens (BERTH_MODEL_PRICES): compute per minute by
 * provider, compute type and GPU type, and snapshot storage per GB-hour. Amounts are dollars as
 * decimal strings, so that no price is a float; they become integer nanocents once, here.
 */
const dollars = z.string().regex(/^\d+(\.\d{1,11})?$/, 'dollars as a decimal string with at most eleven decimals, e.g. "0.0010"');

const computeRateSchema = z
  .object({
    python: dollars,
    node: dollars,
    go: dollars,
    /** Browser agents (Chromium in the sandbox), instead of their compute type's price. */
    browser: dollars,
    /** Added per minute for an agent with this `gpu` type. */
    gpu: z.record(z.string().regex(/^[a-z0-9][a-z0-9-]*$/), dollars),
  })
  .partial()
  .strict();
export type ComputeRate = z.infer<typeof computeRateSchema>;

/** Provider name (or `*` for every provider) → per-minute prices. */
export const computePricesSchema = z.record(z.string().regex(/^(\*|[a-z0-9][a-z0-9-]*)$/, 'keys are provider names or *'), computeRateSchema);
export type ComputePrices = z.infer<typeof computePricesSchema>;

/** Illustrative list prices an install replaces with its own: $0.06 an hour for a sandbox of 1 CPU. */
export const DEFAULT_COMPUTE_PRICES: ComputePrices = {
  '*': {
    python: '0.0010',
    node: '0.0010',
    go: '0.0010',
    browser: '0.0020',
    gpu: { t4: '0.0100', l4: '0.0135', a10g: '0.0200', a100: '0.0600', h100: '0.1000' },
  },
};

/** Per GB-hour of snapshot archive kept (decimal gigabytes): about $0.11 a GB-month. */
export const DEFAULT_STORAGE_PRICE = '0.00015';

export interface ComputeUse {
  provider: string;
  compute: string;
  browser: boolean;
  gpu?: string | undefined;
}

/**
 * Nanocents per minute of one sandbox: the provider's entry over the `*` entry, the browser
 * price for browser agents else the compute type's, plus the GPU type's. Unpriced is free.
 */
export function computeNanocentsPerMinute(prices: ComputePrices, use: ComputeUse): bigint {
  const fallback = prices['*'] ?? {};
  const own = prices[use.provider] ?? {};
  const rate = { ...fallback, ...own, gpu: { ...fallback.gpu, ...own.gpu } };
  const base = use.browser ? rate.browser : rate[use.compute as 'python' | 'node' | 'go'];
  const gpu = use.gpu ? rate.gpu[use.gpu] : undefined;
  return (base ? dollarsToNanocents(base) : 0n) + (gpu ? dollarsToNanocents(gpu) : 0n);
}

export const MS_PER_MINUTE = 60_000n;
export const MS_PER_HOUR = 3_600_000n;
export const BYTES_PER_GB = 1_000_000_000n;

/**
 * What `elapsedMs` of a lifetime costs in total at `perMinute`, rounded down to a nanocent.
 * Meters charge the difference between two totals, so rounding never accumulates.
 */
export function computeTotalNanocents(perMinute: bigint, elapsedMs: number): bigint {
  return (perMinute * BigInt(Math.max(0, Math.floor(elapsedMs)))) / MS_PER_MINUTE;
}

/** What keeping `sizeBytes` for `elapsedMs` costs in total at `perGbHour`, rounded down. */
export function storageTotalNanocents(perGbHour: bigint, sizeBytes: number, elapsedMs: number): bigint {
  return (perGbHour * BigInt(sizeBytes) * BigInt(Math.max(0, Math.floor(elapsedMs)))) / (BYTES_PER_GB * MS_PER_HOUR);
}

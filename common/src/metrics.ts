import { collectDefaultMetrics, Registry } from 'prom-client';

/** One registry per process (or per app in tests), never prom-client's global one. */
export function createMetricsRegistry(options: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'berth_' });
  return registry;
}

/** Buckets from 1 ms to 2 min: sandbox operations span that range. */
export const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';

/**
 * prom-client's default metrics that are gauges named like counters (`_total`): Prometheus
 * tooling (`promtool check metrics`) rejects them, and `nodejs_active_handles`,
 * `nodejs_active_requests` and `nodejs_active_resources` carry the same counts by type.
 */
const GAUGES_NAMED_TOTAL = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

export interface MetricsRegistryOptions {
  /** Process and Node.js metrics under their usual names (`process_*`, `nodejs_*`); default on. */
  defaultMetrics?: boolean;
  /** Berth's version, for `berth_build_info`. */
  version?: string;
}

/**
 * One registry per process (or per app in tests), never prom-client's global one. Default
 * metrics keep their standard names, so dashboards and alerts written for any Node.js
 * service work unchanged; Berth's own metrics are `berth_*`.
 */
export function createMetricsRegistry(options: MetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry });
    for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);
  }
  new Gauge({
    name: 'berth_build_info',
    help: 'Always 1; its labels say which Berth (version) runs on which Node.js (node_version)',
    labelNames: ['version', 'node_version'],
    registers: [registry],
  }).set({ version: options.version ?? 'unknown', node_version: process.versions.node }, 1);
  return registry;
}

/** Buckets from 1 ms to 2 min: sandbox operations span that range. */
export const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];

/** What the egress proxy counts (ADR 46); the local provider takes it, so that it needs no prom-client. */
export interface EgressMetrics {
  /** A connection or request the proxy decided on: `decision` allowed or denied, `kind` connect (a tunnel) or http. */
  requests: { inc(labels: { decision: 'allowed' | 'denied'; kind: 'connect' | 'http' }): void };
  /** A request to which the proxy added a bound credential. */
  injected: { inc(): void };
  /** A connection to the egress gateway from an address that is no gateway-bound sandbox pod (ADR 52). */
  unknownSources: { inc(): void };
}

export function createEgressMetrics(registry: Registry): EgressMetrics {
  return {
    requests: new Counter({
      name: 'berth_egress_requests_total',
      help: "Connections (CONNECT) and plain HTTP requests from sandboxes that the egress proxy allowed or denied by the agent's policy",
      labelNames: ['decision', 'kind'],
      registers: [registry],
    }),
    injected: new Counter({
      name: 'berth_egress_credentials_injected_total',
      help: 'Requests to which the egress proxy added a credential bound to their host',
      registers: [registry],
    }),
    unknownSources: new Counter({
      name: 'berth_egress_unknown_sources_total',
      help: 'Requests to the egress gateway from an address that is no sandbox pod bound to it (all of them: something masquerades pod addresses)',
      registers: [registry],
    }),
  };
}

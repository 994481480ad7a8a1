import type { Clock, Logger, Queryable, ResourceStore } from '@berth/common';
import type { Registry } from 'prom-client';
import { createAgentMetrics, createAgentReconciler } from './controllers/agent.js';
import type { ProviderRegistry } from './providers/registry.js';
import { Controller, createControllerMetrics } from './runtime/controller.js';

export interface OperatorDeps {
  store: ResourceStore;
  db: Queryable;
  providers: ProviderRegistry;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  workers?: number;
}

export interface Operator {
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** The operator's controllers; one per kind that has something to reconcile. */
export function createOperator(deps: OperatorDeps): Operator {
  const controllerMetrics = createControllerMetrics(deps.metrics);
  const agents = new Controller({
    kind: 'Agent',
    store: deps.store,
    log: deps.log.child({ controller: 'agent' }),
    metrics: controllerMetrics,
    workers: deps.workers ?? 4,
    reconcile: createAgentReconciler({
      store: deps.store,
      db: deps.db,
      providers: deps.providers,
      clock: deps.clock,
      metrics: createAgentMetrics(deps.metrics),
    }),
  });
  return {
    start: () => agents.start(),
    stop: () => agents.stop(),
  };
}

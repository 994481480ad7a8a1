import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { DEFAULT_COMPUTE_PRICES, silentLogger, type Clock, type Pool, type ResourceStore } from '../../common/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createOperator, type Operator } from '../../operator/src/operator.js';
import { Runner } from '../../operator/src/runner/runner.js';
import { ModelRouter } from '../../operator/src/runner/models/router.js';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import type { ProviderRegistry } from '../../providers/src/registry.js';

/**
 * The operator's controllers, its job executor and runner workers in this process, on a test's
 * database and store: what an operator replica does, for tests that start, kill and replace one.
 */
export interface InProcessOperator {
  operator: Operator;
  runner: Runner;
  metrics: Registry;
  stop(): Promise<void>;
}

export async function startInProcessOperator(options: {
  pool: Pool;
  store: ResourceStore;
  connectionString: string;
  providers: ProviderRegistry;
  clock: Clock;
  identity: string;
}): Promise<InProcessOperator> {
  const metrics = new Registry();
  const models = new ModelRouter(loadConfig({}));
  const operator = createOperator({
    store: options.store,
    db: options.pool,
    connectionString: options.connectionString,
    providers: options.providers,
    clock: options.clock,
    log: silentLogger,
    metrics,
    models,
    defaultModel: 'openai/gpt-4o-mini',
    identity: options.identity,
    jobPollMs: 200,
    snapshots: new DirectoryStorage(mkdtempSync(join(tmpdir(), 'berth-snapshots-'))),
    billing: { computePrices: DEFAULT_COMPUTE_PRICES, storagePrice: '0.10', currency: 'usd', sessionCostStep: 100, intervalMs: 60_000 },
  });
  const runner = new Runner({
    pool: options.pool,
    connectionString: options.connectionString,
    store: options.store,
    providers: options.providers,
    models,
    clock: options.clock,
    log: silentLogger,
    metrics,
    identity: options.identity,
    workers: 1,
    maxSteps: 10,
    modelTimeoutMs: 10_000,
    toolTimeoutMs: 10_000,
    currency: 'usd',
    pollMs: 200,
  });
  await operator.start();
  await runner.start();
  return {
    operator,
    runner,
    metrics,
    async stop() {
      await runner.stop();
      await operator.stop();
    },
  };
}

import { existsSync } from 'node:fs';
import { hostname } from 'node:os';
import { PostgresResourceStore, createMetricsRegistry, resolveSecrets, systemClock, type BerthConfig, type Logger, type SecretBox } from '@berth/common';
import { ModelRouter, Runner, byoiModelEndpoints, type RunnerOptions } from '@berth/operator';
import { ProviderRegistry, createLocalProvider } from '@berth/providers';
import { openDatabase } from './database.js';
import { CliError } from './keys.js';
import { loadSecretBox, secretsKeyFile } from './secrets.js';
import { untilSignalled } from './lifecycle.js';
import { API_VERSION } from '../app.js';

/** The runner workers as configured: in `berth up` and in every operator replica. */
export function createRunner(
  config: BerthConfig,
  deps: Pick<RunnerOptions, 'pool' | 'connectionString' | 'store' | 'providers' | 'models' | 'clock' | 'log' | 'metrics'> & { secretBox?: SecretBox | undefined },
): Runner {
  const { secretBox, ...parts } = deps;
  return new Runner({
    ...parts,
    // Reviewers of approvals see the call's input with these values masked.
    ...(secretBox
      ? {
          secrets: (agent) =>
            resolveSecrets(deps.pool, secretBox, { organizationId: agent.spec.organizationId, mode: agent.spec.mode, sessionId: agent.spec.sessionId }, agent.spec.secrets ?? []),
        }
      : {}),
    log: deps.log.child({ component: 'runner' }),
    identity: process.env.POD_NAME || `${hostname()}-${process.pid}`,
    workers: config.runnerWorkers,
    maxSteps: config.runMaxSteps,
    modelTimeoutMs: config.modelTimeout,
    toolTimeoutMs: config.execTimeout,
    currency: config.currency,
    computePrices: config.computePrices,
    leaseMs: config.runnerLease,
    pollMs: config.runnerPoll,
  });
}

/**
 * `berth runner`: runner workers alone, beside a `berth up` that shares their database
 * (DATABASE_URL) and data directory (its sandboxes): more runs at once, or a runner that can
 * die without taking the API with it.
 */
export async function runnerCommand(config: BerthConfig, log: Logger, out: (line: string) => void): Promise<void> {
  if (!config.databaseUrl) throw new CliError('berth runner shares the database of a berth up: set DATABASE_URL');
  if (!config.secretsKey && !existsSync(secretsKeyFile(config.dataDir))) {
    throw new CliError(`berth runner reads organizations' model keys (BYOI) with the secrets key of its berth up: set BERTH_SECRETS_KEY or share its data directory (${secretsKeyFile(config.dataDir)})`);
  }
  const secretBox = await loadSecretBox(config, { generate: false });
  const database = await openDatabase(config, log);
  const clock = systemClock;
  const metrics = createMetricsRegistry({ version: API_VERSION });
  const store = new PostgresResourceStore(database.pool, { connectionString: database.connectionString, clock, log, metrics });
  const providers = new ProviderRegistry([createLocalProvider(config, log)], config.defaultProvider ?? 'local');
  const runner = createRunner(config, {
    pool: database.pool,
    connectionString: database.connectionString,
    store,
    providers,
    models: new ModelRouter(config, process.env, byoiModelEndpoints(database.pool, secretBox, config.modelProviders, config.byoiAllowPrivate)),
    clock,
    log,
    metrics,
    secretBox,
  });
  await runner.start();
  out(`berth runner started with ${config.runnerWorkers} workers on ${config.dataDir}`);
  await untilSignalled(log);
  await runner.stop();
  await store.close();
  await database.close();
  log.info('stopped');
}

import { hostname } from 'node:os';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  PostgresResourceStore,
  createEgressMetrics,
  createMetricsRegistry,
  findOwner,
  systemClock,
  type BerthConfig,
  type Logger,
} from '@berth/common';
import { DirectoryStorage, ModelRouter, byoiModelEndpoints } from '@berth/operator';
import { ProviderRegistry, byoiSource, createLocalProvider } from '@berth/providers';
import { bootstrap } from './bootstrap.js';
import { signInLinkUrl } from './admin.js';
import { embeddedOwnerLink } from '../management/sign-in.js';
import { configuredApp, configuredChannelReplySender, configuredOperator, configuredProviderProtocol, configuredWebhookSender } from './parts.js';
import { loadSecretBox } from './secrets.js';
import { openDatabase } from './database.js';
import { createRunner } from './runner.js';
import { CliError } from './keys.js';
import { createApiServer } from '../http/server.js';
import { drain, listen, untilSignalled } from './lifecycle.js';
import { API_VERSION } from '../app.js';

/** One `berth up` per data directory: a second one would fight the first over its database and sandboxes. */
async function lockDataDir(dataDir: string): Promise<() => Promise<void>> {
  await mkdir(dataDir, { recursive: true });
  const pidFile = join(dataDir, 'berth.pid');
  if (existsSync(pidFile)) {
    const pid = Number(readFileSync(pidFile, 'utf8').trim());
    let alive = false;
    try {
      alive = Number.isInteger(pid) && pid > 0 && pid !== process.pid && (process.kill(pid, 0), true);
    } catch {
      alive = false;
    }
    if (alive) throw new CliError(`berth is already running on ${dataDir} (pid ${pid})`);
  }
  await writeFile(pidFile, `${process.pid}\n`);
  return () => rm(pidFile, { force: true });
}

/**
 * Embedded mode: API server, operator controllers and the local gVisor provider in one
 * process, on the embedded PostgreSQL unless DATABASE_URL is set. Resolves when stopped.
 */
export async function up(config: BerthConfig, log: Logger, out: (line: string) => void): Promise<void> {
  const unlock = await lockDataDir(config.dataDir);
  const clock = systemClock;
  const secretBox = await loadSecretBox(config, { generate: true });
  const database = await openDatabase(config, log);
  const metrics = createMetricsRegistry({ version: API_VERSION });
  const store = new PostgresResourceStore(database.pool, { connectionString: database.connectionString, clock, log, metrics });
  const { organization, newKeys } = await bootstrap(database.pool);
  // The first owner signs in with a one-time link, printed below; later ones come from `berth admin login`.
  const ownerLink = (await findOwner(database.pool, organization.id)) ? undefined : await embeddedOwnerLink(database.pool, organization.id, clock.now());

  const local = createLocalProvider(config, log, { egressMetrics: createEgressMetrics(metrics) });
  const runscVersion = await local.runtimeVersion().catch((error: unknown) => {
    throw new CliError(`the local provider needs gVisor's runsc (${config.runsc}): ${(error as Error).message}. Run \`make setup\` or set BERTH_RUNSC.`);
  });
  // The first sandbox should not wait for its image: start building it now if it is missing.
  local.prepareImages().catch((error: unknown) => log.error({ err: error }, 'could not build the sandbox image'));

  const providers = new ProviderRegistry([local], config.defaultProvider ?? 'local').useByoi(
    byoiSource({ pool: database.pool, box: secretBox, config, log }),
  );
  const models = new ModelRouter(config, process.env, byoiModelEndpoints(database.pool, secretBox, config.modelProviders, config.byoiAllowPrivate));
  const identity = `${hostname()}-${process.pid}`;
  const operator = configuredOperator(config, { store, pool: database.pool, providers, clock, log, metrics, secretBox, models, identity, connectionString: database.connectionString });
  await operator.start();
  const webhooks = configuredWebhookSender(config, { pool: database.pool, clock, log, metrics }, identity);
  webhooks.start();
  const channelReplies = configuredChannelReplySender(config, { pool: database.pool, clock, log, metrics, secretBox }, identity);
  channelReplies.start();
  let operatorRunning = true;
  const runner = createRunner(config, { pool: database.pool, connectionString: database.connectionString, store, providers, models, clock, log, metrics, secretBox });
  await runner.start();

  // Other Berth installs may run sandboxes here, through the remote provider protocol.
  const protocol = configuredProviderProtocol(config, local, new DirectoryStorage(join(config.dataDir, 'remote-archives')), log);
  const mounts = protocol ? [{ path: '/provider/v1', router: protocol }] : [];
  const app = configuredApp(
    config,
    { store, pool: database.pool, providers, clock, log, metrics, secretBox, models, connectionString: database.connectionString },
    { mounts, ready: () => operatorRunning },
  );
  const server = createApiServer(app.express, app.upgrade);
  const port = await listen(server, config.port, config.host);
  const host = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  const baseUrl = config.publicUrl ?? `http://${host.includes(':') ? `[${host}]` : host}:${port}`;

  const banner = [
    `Berth is running at ${baseUrl}`,
    `  data directory  ${config.dataDir}`,
    `  database        ${database.kind === 'embedded' ? `embedded PostgreSQL in ${join(config.dataDir, 'postgres')}` : 'DATABASE_URL'}`,
    `  sandboxes       local provider, gVisor ${runscVersion}`,
    `  API docs        ${baseUrl}/v1/openapi.json    metrics ${baseUrl}/metrics`,
  ];
  if (newKeys) {
    banner.push(
      '',
      'First start: created two API keys. They are shown only now; keep them safe.',
      `  live key: ${newKeys.live}`,
      `  test key: ${newKeys.test}`,
      'More with `berth keys create`.',
    );
  }
  if (ownerLink) {
    banner.push(
      '',
      'Sign in to the management API as the owner with this one-time link (valid 24 hours; `berth admin login` prints a new one):',
      `  sign-in link: ${signInLinkUrl(config.dashboardUrl ?? baseUrl, ownerLink.token)}`,
    );
  }
  banner.push('', 'Press Ctrl-C to stop.');
  out(banner.join('\n'));

  await untilSignalled(log);
  // In order: no new requests, requests in flight finish, controllers finish their
  // reconciles, then the database goes. Sandboxes keep running; the next start adopts them.
  await drain(server);
  await app.close();
  operatorRunning = false;
  await runner.stop();
  await operator.stop();
  await local.close();
  await webhooks.stop();
  await channelReplies.stop();
  await store.close();
  await database.close();
  await unlock();
  log.info('stopped');
}

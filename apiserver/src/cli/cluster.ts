import { createServer } from 'node:http';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEgressMetrics, createMetricsRegistry, systemClock, type BerthConfig, type Logger } from '@berth/common';
import { KubernetesResourceStore, loadKubeConfig } from '@berth/common/kubernetes';
import { ModelRouter, agentSecrets, byoiModelEndpoints, createSnapshotStorage, egressPolicySource } from '@berth/operator';
import { ProviderRegistry, byoiSource, egressProxyOptions } from '@berth/providers';
import { LeaderElector } from '@berth/operator/kubernetes';
import { EgressGateway, createKubernetesProvider } from '@berth/providers/kubernetes';
import express from 'express';
import type { Registry } from 'prom-client';
import { bootstrap } from './bootstrap.js';
import { openDatabase } from './database.js';
import { configuredApp, configuredChannelReplySender, configuredOperator, configuredProviderProtocol, configuredWebhookSender } from './parts.js';
import { loadSecretBox } from './secrets.js';
import { createRunner } from './runner.js';
import { CliError } from './keys.js';
import { createApiServer } from '../http/server.js';
import { drain, listen, untilSignalled } from './lifecycle.js';
import { API_VERSION } from '../app.js';

/** What both cluster processes share: the database, the Kubernetes client, the store and the provider. */
async function clusterParts(config: BerthConfig, log: Logger) {
  const secretBox = await loadSecretBox(config, { generate: false });
  if (!config.databaseUrl) throw new CliError('cluster mode needs DATABASE_URL (the chart sets it)');
  const database = await openDatabase(config, log);
  const kubeConfig = loadKubeConfig();
  const store = new KubernetesResourceStore(kubeConfig, { namespace: config.namespace, log });
  const kubernetes = createKubernetesProvider(config, kubeConfig, log);
  const providers = new ProviderRegistry([kubernetes], config.defaultProvider ?? 'kubernetes').useByoi(
    byoiSource({ pool: database.pool, box: secretBox, config, log }),
  );
  const models = new ModelRouter(config, process.env, byoiModelEndpoints(database.pool, secretBox, config.modelProviders, config.byoiAllowPrivate));
  return { database, kubeConfig, store, providers, models, secretBox };
}

/** `/healthz`, `/readyz` and `/metrics` of the operator, on their own port; and the remote provider protocol when tokens are set. */
function healthServer(metrics: Registry, ready: () => boolean, provider?: express.Router) {
  const app = express();
  app.disable('x-powered-by');
  if (provider) app.use('/provider/v1', provider);
  app.get('/healthz', (_req, res) => void res.json({ ok: true }));
  app.get('/readyz', (_req, res) => void res.status(ready() ? 200 : 503).json({ ok: ready() }));
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', metrics.contentType);
    res.send(await metrics.metrics());
  });
  return createServer(app);
}

/**
 * `/metrics` of the API server on a port of its own, so that a NetworkPolicy can open it to the
 * monitoring namespace alone and scrapes never queue behind API requests. The API port keeps
 * serving /metrics too: it is part of the API (and the only one in embedded mode).
 */
function metricsServer(metrics: Registry) {
  const app = express();
  app.disable('x-powered-by');
  app.get('/metrics', async (_req, res) => {
    res.setHeader('Content-Type', metrics.contentType);
    res.send(await metrics.metrics());
  });
  return createServer(app);
}

/**
 * `berth operator`: the controllers against the cluster's API server. With leader election,
 * replicas wait for the Lease and only the leader reconciles; a leader that cannot renew it
 * exits, so that its pod restarts as a follower rather than reconcile beside a new leader.
 */
export async function operatorCommand(config: BerthConfig, log: Logger, out: (line: string) => void): Promise<void> {
  if (config.nodeAgentPort !== undefined && config.nodeAgentToken === undefined) {
    throw new CliError('BERTH_NODE_AGENT_PORT is set without BERTH_NODE_AGENT_TOKEN: the operator could not call the node agents');
  }
  const { database, kubeConfig, store, providers, models, secretBox } = await clusterParts(config, log);
  await bootstrap(database.pool, { createKeys: false });
  const metrics = createMetricsRegistry({ version: API_VERSION });
  // Runners work on every replica; only the controllers wait for leadership.
  const runner = createRunner(config, {
    pool: database.pool,
    connectionString: database.connectionString,
    store,
    providers,
    models,
    clock: systemClock,
    log,
    metrics,
    secretBox,
  });
  await runner.start();
  // Every replica sends webhooks, leader or not: deliveries are claimed one sender at a time.
  const webhooks = configuredWebhookSender(config, { pool: database.pool, clock: systemClock, log, metrics }, process.env.POD_NAME || `${hostname()}-${process.pid}`);
  webhooks.start();
  // So does every replica send channel replies: each is claimed by one sender at a time.
  const channelReplies = configuredChannelReplySender(config, { pool: database.pool, clock: systemClock, log, metrics, secretBox }, process.env.POD_NAME || `${hostname()}-${process.pid}`);
  channelReplies.start();
  const identity = process.env.POD_NAME || `${hostname()}-${process.pid}`;
  const operator = configuredOperator(config, { store, pool: database.pool, providers, clock: systemClock, log, metrics, secretBox, models, identity, connectionString: database.connectionString });
  let stopElection: () => Promise<void> = async () => undefined;
  // The operator serves the remote provider protocol on its own provider, for other installs.
  const served = configuredProviderProtocol(
    config,
    providers.get(providers.defaultProvider)!,
    createSnapshotStorage({ ...config, snapshotDir: join(tmpdir(), 'berth-remote-archives') }),
    log,
  );
  const server = healthServer(metrics, () => true, served);
  const port = await listen(server, config.metricsPort, config.host);
  out(`berth operator ${identity} in namespace ${config.namespace}; health and metrics on ${config.host}:${port}`);
  // The egress gateway (ADR 52) is served by every replica, leader or not: it reads the policies from the Agents.
  let gateway: EgressGateway | undefined;
  if (config.egressGatewayPort !== undefined) {
    gateway = new EgressGateway({
      kubeConfig,
      namespace: config.sandboxNamespace ?? config.namespace,
      port: config.egressGatewayPort,
      host: config.egressGatewayHost ?? config.host,
      log: log.child({ component: 'egress-gateway' }),
      proxy: egressProxyOptions(config, log, createEgressMetrics(metrics)),
      policyOf: egressPolicySource(store, agentSecrets(database.pool, secretBox)),
    });
    const gatewayPort = await gateway.start();
    out(`berth operator ${identity}: egress gateway on ${config.egressGatewayHost ?? config.host}:${gatewayPort}`);
  }

  // Leadership may arrive while the process is already stopping (the old leader stopped at the
  // same time and released the lease): then the controllers must not start, or their watches
  // would keep the process alive after it stopped.
  let stopping = false;
  let starting: Promise<void> | undefined;
  const start = async () => {
    if (stopping) return;
    starting = operator.start();
    await starting;
  };
  let lost = false;
  const lostLeadership = new Promise<void>((resolve) => {
    if (!config.leaderElection) return;
    const elector = new LeaderElector({ kubeConfig, namespace: config.namespace, name: 'berth-operator', identity, log });
    stopElection = () => elector.stop();
    void elector.run({
      onStartedLeading: start,
      onStoppedLeading: () => {
        lost = true;
        resolve();
      },
    });
  });
  if (!config.leaderElection) await start();
  await Promise.race([untilSignalled(log), lostLeadership]);

  stopping = true;
  await runner.stop();
  await webhooks.stop();
  await channelReplies.stop();
  // Reconciling ends before the lease is released, so two replicas never reconcile at once.
  if (starting) {
    await starting.catch(() => undefined);
    await operator.stop();
  }
  await stopElection();
  await gateway?.stop();
  await drain(server, 2_000);
  await store.close();
  await database.close();
  log.info('stopped');
  if (lost) process.exitCode = 1;
}

/** `berth apiserver`: the HTTP API, writing custom resources; stateless, any number of replicas. */
export async function apiserverCommand(config: BerthConfig, log: Logger, out: (line: string) => void): Promise<void> {
  const { database, store, providers, models, secretBox } = await clusterParts(config, log);
  await bootstrap(database.pool, { createKeys: false });
  await store.sync(['Session', 'Agent', 'Schedule', 'Fleet', 'WarmPool']);
  const metrics = createMetricsRegistry({ version: API_VERSION });
  const app = configuredApp(config, {
    store,
    pool: database.pool,
    providers,
    clock: systemClock,
    log,
    metrics,
    secretBox,
    models,
    connectionString: database.connectionString,
  });
  const server = createApiServer(app.express, app.upgrade);
  const port = await listen(server, config.port, config.host);
  const metricsListener = metricsServer(metrics);
  const metricsPort = await listen(metricsListener, config.metricsPort, config.host);
  out(`berth apiserver listening on ${config.host}:${port}, resources in namespace ${config.namespace}; metrics on ${config.host}:${metricsPort}`);
  await untilSignalled(log);
  await drain(metricsListener, 2_000);
  await drain(server);
  await app.close();
  await store.close();
  await database.close();
  log.info('stopped');
}

import { ConfigError, createEmbedder, type BerthConfig, type Clock, type Logger, type Pool, type ResourceStore, type SandboxProvider, type SecretBox, type SnapshotStorage } from '@berth/common';
import { ChannelReplySender, WebhookSender, createOperator, createSnapshotStorage, type ModelRouter, type Operator } from '@berth/operator';
import { remoteProviderRouter, type ProviderRegistry } from '@berth/providers';
import { createApp, type App, type AppDeps } from '../app.js';
import type { Router } from 'express';
import type { Registry } from 'prom-client';

/** What `berth up` and `berth operator` build alike from the configuration. */
interface Deps {
  store: ResourceStore;
  pool: Pool;
  providers: ProviderRegistry;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  secretBox: SecretBox;
}

/** The HTTP API, as configured; `extra` holds what only one of the two processes has. */
export function configuredApp(
  config: BerthConfig,
  deps: Deps & { models: ModelRouter; connectionString: string },
  extra: Pick<AppDeps, 'mounts' | 'ready'> = {},
): App {
  return createApp({
    pool: deps.pool,
    store: deps.store,
    providers: deps.providers,
    clock: deps.clock,
    log: deps.log,
    metrics: deps.metrics,
    models: deps.models,
    connectionString: deps.connectionString,
    execTimeoutMs: config.execTimeout,
    warmSandboxesMax: config.warmSandboxesMax,
    defaultModel: config.defaultModel,
    defaultEgress: config.egressAllow,
    currency: config.currency,
    streamHeartbeatMs: config.streamHeartbeat,
    channels: { limits: config.channelLimits, replyTimeoutMs: config.channelReplyTimeout },
    webhookPolicy: { allowHttp: config.webhookAllowHttp, allowPrivate: config.webhookAllowPrivate },
    ...(config.embeddings ? { embedder: createEmbedder(config.embeddings) } : {}),
    byoiPolicy: { allowHttp: config.byoiAllowHttp, allowPrivate: config.byoiAllowPrivate },
    secretBox: deps.secretBox,
    plans: { defaultPlan: config.defaultPlan, enterpriseRateLimit: config.enterpriseRateLimit },
    ...(config.publicUrl ? { publicUrl: config.publicUrl } : {}),
    ...(config.e2bDomain ? { e2bDomain: config.e2bDomain } : {}),
    management: managementSettings(config),
    ...extra,
  });
}

/** Sign-in to the management plane, as configured: an OpenID Connect provider needs all three of issuer, client id and secret. */
export function managementSettings(config: BerthConfig): NonNullable<AppDeps['management']> {
  const { oidcIssuer: issuer, oidcClientId: clientId, oidcClientSecret: clientSecret } = config;
  if (issuer && (!clientId || !clientSecret)) {
    throw new ConfigError('BERTH_OIDC_ISSUER is set: BERTH_OIDC_CLIENT_ID and BERTH_OIDC_CLIENT_SECRET are needed too');
  }
  if (issuer && issuer.startsWith('http:') && !config.oidcAllowHttp) {
    throw new ConfigError('BERTH_OIDC_ISSUER is http://: use https://, or set BERTH_OIDC_ALLOW_HTTP=true for development');
  }
  const dashboardUrl = (config.dashboardUrl ?? config.publicUrl)?.replace(/\/+$/, '');
  return {
    signup: config.signup,
    ...(issuer && clientId && clientSecret ? { oidc: { issuer, clientId, clientSecret, allowHttp: config.oidcAllowHttp } } : {}),
    ...(dashboardUrl ? { dashboardUrl } : {}),
  };
}

/** The controllers and the billing pass, as configured. */
export function configuredOperator(config: BerthConfig, deps: Deps & { connectionString: string; models: ModelRouter; identity: string }): Operator {
  return createOperator({
    store: deps.store,
    db: deps.pool,
    connectionString: deps.connectionString,
    providers: deps.providers,
    clock: deps.clock,
    log: deps.log,
    metrics: deps.metrics,
    workers: config.controllerWorkers,
    models: deps.models,
    defaultModel: config.defaultModel,
    defaultEgress: config.egressAllow,
    identity: deps.identity,
    snapshots: createSnapshotStorage(config),
    secretBox: deps.secretBox,
    warmStartTimeoutMs: config.warmStartTimeout,
    billing: {
      computePrices: config.computePrices,
      storagePrice: config.storagePrice,
      currency: config.currency,
      sessionCostStep: config.sessionCostStep,
      intervalMs: config.meterInterval,
    },
  });
}

/** The webhook sender of this process (every process may run one: deliveries are claimed). */
export function configuredWebhookSender(config: BerthConfig, deps: Pick<Deps, 'pool' | 'clock' | 'log' | 'metrics'>, identity: string): WebhookSender {
  return new WebhookSender({
    pool: deps.pool,
    clock: deps.clock,
    log: deps.log.child({ component: 'webhooks' }),
    metrics: deps.metrics,
    identity,
    allowPrivate: config.webhookAllowPrivate,
  });
}

/** The sender of Slack and email channel replies of this process (every process may run one: replies are claimed). */
export function configuredChannelReplySender(
  config: BerthConfig,
  deps: Pick<Deps, 'pool' | 'clock' | 'log' | 'metrics' | 'secretBox'>,
  identity: string,
): ChannelReplySender {
  return new ChannelReplySender({
    pool: deps.pool,
    clock: deps.clock,
    log: deps.log.child({ component: 'channel-replies' }),
    metrics: deps.metrics,
    box: deps.secretBox,
    identity,
    slackApiUrl: config.slackApiUrl,
    sendgridApiUrl: config.sendgridApiUrl,
  });
}

/** The remote provider protocol on `provider`, when BERTH_PROVIDER_TOKENS allows anyone to use it. */
export function configuredProviderProtocol(config: BerthConfig, provider: SandboxProvider, scratch: SnapshotStorage, log: Logger): Router | undefined {
  if (config.providerTokens.length === 0) return undefined;
  return remoteProviderRouter({ provider, tokens: config.providerTokens, scratch, log: log.child({ component: 'remote-provider' }) });
}

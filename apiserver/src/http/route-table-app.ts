import { loadConfig, silentLogger, systemClock, type Pool, type ResourceStore } from '@berth/common';
import { ModelRouter } from '@berth/operator';
import type { ProviderRegistry } from '@berth/providers';
import { Registry } from 'prom-client';
import { createApp, type App } from '../app.js';

/**
 * The app for its route table only (the OpenAPI document, the SDK's types): nothing is called, so
 * the database and providers are never reached. `close()` it when done.
 */
export function routeTableApp(): App {
  return createApp({
    pool: {} as Pool,
    store: {} as ResourceStore,
    providers: {} as ProviderRegistry,
    clock: systemClock,
    log: silentLogger,
    metrics: new Registry(),
    models: new ModelRouter(loadConfig({})),
    connectionString: 'postgres://unused',
    execTimeoutMs: 120_000,
    defaultModel: 'openai/gpt-4o-mini',
    currency: 'usd',
    plans: { defaultPlan: 'free', enterpriseRateLimit: 60_000 },
  });
}

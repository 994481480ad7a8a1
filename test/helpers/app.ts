import type { AddressInfo } from 'node:net';
import type { Mode } from '../../crds/src/common.js';
import { PostgresResourceStore, createApiKey, createPool, migrate, silentLogger, type Clock, type Pool } from '../../common/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createApp, type App, type AppDeps } from '../../apiserver/src/app.js';
import { createApiServer } from '../../apiserver/src/http/server.js';
import type { ProviderRegistry } from '../../providers/src/registry.js';
import { ModelRouter } from '../../operator/src/runner/models/router.js';
import { Registry } from 'prom-client';
import { apiClient, type ApiClient } from './http.js';
import { createTestDatabase } from './postgres.js';

/**
 * The HTTP API in this process, on a fresh database of the run's PostgreSQL server, with the
 * store and clock a test gives it: for tests that drive controllers or time by hand.
 */
export interface TestApi {
  databaseUrl: string;
  pool: Pool;
  store: PostgresResourceStore;
  app: App;
  baseUrl: string;
  /** A client with a new API key of the organization and mode. */
  client(organizationId: string, mode: Mode): Promise<{ api: ApiClient; keyId: string }>;
  /** The same API again, with other settings (say, another webhook policy), on the same database. */
  another(overrides: Partial<AppDeps>): Promise<{ app: App; baseUrl: string }>;
  close(): Promise<void>;
}

async function listen(app: App): Promise<{ baseUrl: string; close(): void }> {
  const server = createApiServer(app.express).listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  return { baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() };
}

export async function startTestApi(options: { clock: Clock; providers: ProviderRegistry; app?: Partial<AppDeps> }): Promise<TestApi> {
  const databaseUrl = await createTestDatabase();
  const pool = createPool(databaseUrl);
  await migrate(pool);
  const store = new PostgresResourceStore(pool, { connectionString: databaseUrl, clock: options.clock, log: silentLogger });
  const deps: AppDeps = {
    pool,
    store,
    providers: options.providers,
    clock: options.clock,
    log: silentLogger,
    metrics: new Registry(),
    models: new ModelRouter(loadConfig({})),
    connectionString: databaseUrl,
    execTimeoutMs: 5_000,
    defaultModel: 'openai/gpt-4o-mini',
    currency: 'usd',
    // Organizations the tests create have no plan of their own: enterprise keeps them unthrottled.
    plans: { defaultPlan: 'enterprise', enterpriseRateLimit: 60_000 },
    ...options.app,
  };
  const started: { app: App; close(): void }[] = [];
  const start = async (overrides: Partial<AppDeps>) => {
    const app = createApp({ ...deps, metrics: new Registry(), ...overrides });
    const server = await listen(app);
    started.push({ app, close: server.close });
    return { app, baseUrl: server.baseUrl };
  };
  const first = await start({});
  return {
    databaseUrl,
    pool,
    store,
    app: first.app,
    baseUrl: first.baseUrl,
    async client(organizationId, mode) {
      const { key, record } = await createApiKey(pool, { organizationId, mode });
      return { api: apiClient(first.baseUrl, key), keyId: record.id };
    },
    another: start,
    async close() {
      for (const { app, close } of started) {
        close();
        await app.close();
      }
      await store.close();
      await pool.end();
    },
  };
}

/**
 * `make bench` (rate limits): what the per-key rate limit adds to a request, beside a floor
 * measured in the same run on the same database:
 *
 *   limited      GET /v1/sessions/:id through an API whose keys are limited (the key's window
 *                taken and written in PostgreSQL: one more round trip)
 *   floor        the same request to the same API built without the limiter
 *
 * Both APIs run in this process on one embedded PostgreSQL, as `berth up` would hold it; the
 * requests alternate so that the machine's noise falls on both alike. The key is on the
 * enterprise plan with a limit it never reaches, so every limited request is admitted (the
 * common case; a refused request costs the same round trip and no handler).
 * BENCH_RUNS requests of each (default 2000).
 */
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { PostgresResourceStore, createApiKey, createOrganization, createPool, migrate, setOrganizationPlan, silentLogger, systemClock } from '../../common/src/index.js';
import { loadConfig } from '../../common/src/config.js';
import { createApp, type AppDeps } from '../../apiserver/src/app.js';
import { startEmbeddedPostgres } from '../../apiserver/src/embedded/postgres.js';
import { createApiServer } from '../../apiserver/src/http/server.js';
import { ModelRouter } from '../../operator/src/runner/models/router.js';
import { MockProvider } from '../../providers/src/mock.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { apiClient } from '../helpers/http.js';
import { tempDir } from '../helpers/berth.js';
import { removeDataDir } from '../helpers/runsc.js';
import { percentile } from './floor-table.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 2000);

async function timed(run: () => Promise<{ status: number; headers: Headers; body: unknown }>, limited: boolean): Promise<number> {
  const started = performance.now();
  const { status, headers, body } = await run();
  const elapsed = performance.now() - started;
  if (status !== 200) throw new Error(`expected 200, got ${status}: ${JSON.stringify(body)}`);
  if ((headers.get('ratelimit-limit') !== null) !== limited) throw new Error(`expected ${limited ? '' : 'no '}RateLimit headers`);
  return elapsed;
}

async function main(): Promise<void> {
  const dataDir = tempDir('berth-bench-rate-limit-');
  const postgres = await startEmbeddedPostgres(dataDir, silentLogger);
  const pool = createPool(postgres.connectionString);
  const store = new PostgresResourceStore(pool, { connectionString: postgres.connectionString, clock: systemClock, log: silentLogger });
  const servers: { close(): void }[] = [];
  const apps: { close(): Promise<void> }[] = [];
  try {
    await migrate(pool);
    const deps: AppDeps = {
      pool,
      store,
      providers: new ProviderRegistry([new MockProvider({ computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' })], 'mock'),
      clock: systemClock,
      log: silentLogger,
      metrics: new Registry(),
      models: new ModelRouter(loadConfig({})),
      connectionString: postgres.connectionString,
      execTimeoutMs: 5_000,
      defaultModel: 'openai/gpt-4o-mini',
      currency: 'usd',
      plans: { defaultPlan: 'free', enterpriseRateLimit: 10_000_000 },
    };
    const listen = async (overrides: Partial<AppDeps>) => {
      const app = createApp({ ...deps, metrics: new Registry(), ...overrides });
      apps.push(app);
      const server = createApiServer(app.express).listen(0, '127.0.0.1');
      await new Promise((resolve) => server.once('listening', resolve));
      servers.push(server);
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    };
    const limitedUrl = await listen({});
    const floorUrl = await listen({ limitRequests: false });

    const organization = await createOrganization(pool, 'bench');
    await setOrganizationPlan(pool, organization.id, 'enterprise');
    const { key } = await createApiKey(pool, { organizationId: organization.id, mode: 'test' });
    const limited = apiClient(limitedUrl, key);
    const floor = apiClient(floorUrl, key);
    const created = await floor.post('/v1/sessions', { userId: 'bench' });
    if (created.status !== 201) throw new Error(`could not create the session: ${created.status} ${JSON.stringify(created.body)}`);
    const session = created.body;
    const path = `/v1/sessions/${session.id}`;

    for (let i = 0; i < Math.min(50, RUNS); i++) {
      await timed(() => limited.get(path), true);
      await timed(() => floor.get(path), false);
    }
    const limitedSamples: number[] = [];
    const floorSamples: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      limitedSamples.push(await timed(() => limited.get(path), true));
      floorSamples.push(await timed(() => floor.get(path), false));
    }

    const p50 = percentile(limitedSamples, 50);
    const floor50 = percentile(floorSamples, 50);
    console.log(`\nrate limit, ${RUNS} requests each (floor measured in the same run; the machine is shared, numbers are noisy)`);
    console.log(`${'measure'.padEnd(26)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}   ${'floor'.padEnd(26)}${'p50 ms'.padStart(9)}${'p95 ms'.padStart(9)}${'p50 ratio'.padStart(11)}`);
    console.log(
      `${'GET, limited'.padEnd(26)}${p50.toFixed(2).padStart(9)}${percentile(limitedSamples, 95).toFixed(2).padStart(9)}   ${'GET, no limiter'.padEnd(26)}${floor50.toFixed(2).padStart(9)}${percentile(floorSamples, 95).toFixed(2).padStart(9)}${`${(p50 / floor50).toFixed(2)}x`.padStart(11)}`,
    );
    console.log(`cost of the limiter per request (p50 difference): ${(p50 - floor50).toFixed(2)} ms`);
  } finally {
    for (const server of servers) server.close();
    for (const app of apps) await app.close();
    await store.close();
    await pool.end();
    await postgres.stop();
    removeDataDir(dataDir);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

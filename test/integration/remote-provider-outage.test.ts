import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, PostgresResourceStore, idToObjectName, silentLogger } from '../../common/src/index.js';
import { SANDBOX_FINALIZER } from '../../crds/src/finalizers.js';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir, runscContainers } from '../helpers/runsc.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * A BYOI remote provider that goes off the network while its agents are deleted: the sandbox
 * must be ended there before the Agent's finalizer goes, however long that takes. The remote
 * is a second real `berth up` behind a real TCP proxy the test takes down and brings back; the
 * home install restarts during the outage, so it has to reach the provider anew.
 */
const TOKEN = 'remote-provider-token-outage-0123';
let home: BerthProcess;
let homeDataDir: string;
let homeEnv: Record<string, string>;
let remote: BerthProcess;
let proxy: TcpProxy;
let liveKey: string;
let live: ApiClient;
let db: pg.Pool;
let store: PostgresResourceStore;
let sessionId: string;

beforeAll(async () => {
  const [homeDb, remoteDb] = await Promise.all([createTestDatabase(), createTestDatabase()]);
  db = new pg.Pool({ connectionString: homeDb });
  store = new PostgresResourceStore(db, { connectionString: homeDb, clock: new ManualClock('2026-05-01T09:00:00Z'), log: silentLogger });
  homeDataDir = tempDir('berth-home-');
  homeEnv = { DATABASE_URL: homeDb, BERTH_BYOI_ALLOW_HTTP: 'true', BERTH_BYOI_ALLOW_PRIVATE: 'true' };
  [home, remote] = await Promise.all([
    startBerth({ dataDir: homeDataDir, env: homeEnv }),
    startBerth({ env: { DATABASE_URL: remoteDb, BERTH_PROVIDER_TOKENS: TOKEN } }),
  ]);
  proxy = await startTcpProxy(remote.baseUrl);
  liveKey = home.liveKey!;
  live = home.api(liveKey);
  expect((await live.post('/v1/secrets', { REMOTE_TOKEN: TOKEN })).status).toBe(200);
  const put = await live.raw('/v1/providers/faraway', {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ credentialRef: 'REMOTE_TOKEN', config: { endpoint: `${proxy.url}/provider/v1` } }),
  });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  sessionId = (await live.post('/v1/sessions', { userId: 'outage' })).body.id;
});
afterAll(async () => {
  await proxy.close();
  for (const berth of [home, remote]) {
    expect(await berth.stop()).toBe(0);
    removeDataDir(berth.dataDir);
  }
  await store.close();
  await db.end();
});

async function idleAgent(): Promise<string> {
  const created = await live.post(`/v1/sessions/${sessionId}/agents`, { provider: 'faraway', timeout: '30m' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const id = created.body.id as string;
  await eventually(async () => ((await live.get(`/v1/agents/${id}`)).body.status === 'idle' ? true : undefined), { what: `agent ${id} idle`, timeoutMs: 60_000 });
  expect(runscContainers(remote.dataDir).map((container) => container.id)).toContain(id);
  return id;
}

describe('deleting agents of a remote provider that is unreachable', () => {
  it('keeps the finalizer and the agent while the endpoint is down, and ends the sandbox there once it is back', async () => {
    const id = await idleAgent();
    const name = idToObjectName(id);
    await proxy.down();
    // An operator restart during the outage: the provider has to be reached anew.
    expect(await home.stop()).toBe(0);
    home = await startBerth({ dataDir: homeDataDir, env: homeEnv });
    live = home.api(liveKey);

    await store.delete('Agent', name); // as `kubectl delete agent` would
    const condition = await eventually(
      async () => {
        const agent = await store.get('Agent', name);
        if (!agent) throw new Error('the agent is gone: its finalizer went while its sandbox still runs on the remote');
        const condition = agent?.status?.conditions.find((entry) => entry.type === 'SandboxReady');
        return condition?.reason === 'ReleaseFailed' ? condition : undefined;
      },
      { what: 'the release failure in a condition', timeoutMs: 30_000 },
    );
    expect(condition.message).toContain('unavailable');
    await new Promise((resolve) => setTimeout(resolve, 3_000)); // several retries later
    const still = await store.get('Agent', name);
    expect(still?.metadata.deletionTimestamp).toBeDefined();
    expect(still?.metadata.finalizers).toContain(SANDBOX_FINALIZER);
    expect(runscContainers(remote.dataDir).map((container) => container.id)).toContain(id);
    const samples = parsePrometheus(await (await fetch(`${home.baseUrl}/metrics`)).text());
    expect(metricValue(samples, 'berth_sandbox_release_failures_total', { provider: 'faraway' })).toBeGreaterThanOrEqual(1);

    await proxy.up();
    await eventually(async () => ((await store.get('Agent', name)) === undefined ? true : undefined), {
      what: 'the agent gone once its sandbox is ended',
      timeoutMs: 90_000,
    });
    expect(runscContainers(remote.dataDir).map((container) => container.id)).not.toContain(id);
  });

  it('lets the finalizer go when the provider no longer knows the sandbox', async () => {
    const id = await idleAgent();
    const ended = await fetch(`${remote.baseUrl}/provider/v1/sandboxes/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(ended.status).toBe(200);
    expect(runscContainers(remote.dataDir).map((container) => container.id)).not.toContain(id);
    await store.delete('Agent', idToObjectName(id));
    await eventually(async () => ((await store.get('Agent', idToObjectName(id))) === undefined ? true : undefined), {
      what: 'the agent gone',
      timeoutMs: 30_000,
    });
  });
});

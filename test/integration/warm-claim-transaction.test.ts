import { chmodSync, existsSync, lstatSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../common/src/config.js';
import { createLogger } from '../../common/src/log.js';
import { PostgresResourceStore, claimWarmSandbox, createOrganization, isStoreError, listEvents, systemClock } from '../../common/src/index.js';
import type { SandboxRef } from '../../crds/src/index.js';
import { createAgentMetrics, createAgentReconciler } from '../../operator/src/controllers/agent.js';
import { createWarmPoolMetrics, createWarmPoolReconciler } from '../../operator/src/controllers/warm-pool.js';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import { createLocalProvider, type LocalProvider } from '../../providers/src/local/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { removeDataDir, runscContainers } from '../helpers/runsc.js';

/**
 * The warm claim of the local provider commits with the agent's status write, in one transaction
 * (ADR 45): the Agent and WarmPool reconcilers in this process, against the real PostgreSQL store,
 * with real gVisor sandboxes. A claim that does not commit leaves the warm sandbox unclaimed in
 * the database, and no agent other than the one it was handed to ever gets it: the sandbox may hold
 * that agent's secrets.
 */
const log = createLogger({ level: 'warn', name: 'warm-claim-transaction-test' });
const SECRET = 'uncommitted-secret-4b1d';
let testApi: TestApi;
let pool: pg.Pool;
let store: PostgresResourceStore;
let api: ApiClient;
let dataDir: string;
let sessionId: string;
let poolName: string;
const poolChanges: string[] = [];

function reconcilers(provider: LocalProvider) {
  const providers = new ProviderRegistry([provider], 'local');
  const snapshots = new DirectoryStorage(join(dataDir, 'snapshots'));
  return {
    agent: createAgentReconciler({
      store,
      db: pool,
      providers,
      clock: systemClock,
      metrics: createAgentMetrics(new Registry()),
      snapshots,
      currency: 'usd',
      warmPools: { metrics: createWarmPoolMetrics(new Registry()), onPoolChange: (name) => poolChanges.push(name) },
    }),
    pool: createWarmPoolReconciler({ store, db: pool, providers, clock: systemClock, metrics: createWarmPoolMetrics(new Registry()) }),
  };
}

let provider: LocalProvider;
let reconcile: ReturnType<typeof reconcilers>;

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'berth-warm-claim-'));
  chmodSync(dataDir, 0o755);
  provider = createLocalProvider({ ...loadConfig({}), dataDir }, log);
  testApi = await startTestApi({ clock: systemClock, providers: new ProviderRegistry([provider], 'local') });
  ({ pool, store } = testApi);
  reconcile = reconcilers(provider);
  const organization = await createOrganization(pool, 'warm-claim');
  api = (await testApi.client(organization.id, 'live')).api;
  sessionId = (await api.post('/v1/sessions', { userId: 'warm-claim' })).body.id;
  const created = await api.post('/v1/warm-pools', { compute: 'python', size: 2 });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  poolName = (created.body.id as string).replace('_', '-');
  await reconcile.pool(poolName, log);
  expect(await readyRows()).toHaveLength(2);
});

afterAll(async () => {
  await testApi?.close();
  if (dataDir) removeDataDir(dataDir);
});

async function newAgent() {
  const response = await api.post(`/v1/sessions/${sessionId}/agents`, { timeout: '1h' });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return { id: response.body.id as string, name: (response.body.id as string).replace('_', '-') };
}

/** The pool's ready rows, oldest first, as another connection sees them (what a crash would leave). */
async function readyRows(): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>("SELECT id FROM warm_sandboxes WHERE pool = $1 AND state = 'ready' ORDER BY created_at, id", [poolName]);
  return rows.map((row) => row.id);
}

async function rowState(id: string): Promise<string | undefined> {
  const { rows } = await pool.query<{ state: string }>('SELECT state FROM warm_sandboxes WHERE id = $1', [id]);
  return rows[0]?.state;
}

const running = (id: string) => runscContainers(dataDir).some((container) => container.id === id && container.status === 'running');
const linkOf = (agentId: string) => join(dataDir, 'sandboxes', agentId);
const hasLink = (agentId: string) => {
  try {
    return lstatSync(linkOf(agentId)).isSymbolicLink();
  } catch {
    return false;
  }
};

async function envOf(ref: SandboxRef, on: LocalProvider = provider): Promise<string> {
  const result = await on.exec(ref, { language: 'bash', code: 'echo "${WARM_TOKEN:-none}"', timeoutMs: 30_000 });
  return result.stdout;
}

describe('a warm claim on the local provider', () => {
  it('is not in the database until the status write commits, and a status write that loses its race ends the handed-over sandbox', async () => {
    const agent = await newAgent();
    const [oldest, other] = await readyRows();
    // Another writer holds the agent's row: the reconcile's status write waits for it, its claim made and handed over.
    const blocker = await pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query("SELECT 1 FROM resources WHERE kind = 'Agent' AND name = $1 FOR UPDATE", [agent.name]);
      const reconciled = reconcile.agent(agent.name, log).then(
        () => undefined,
        (error: unknown) => error,
      );
      await eventually(async () => (hasLink(agent.id) ? true : undefined), { timeoutMs: 30_000, intervalMs: 10, what: 'the hand-over' });
      // Handed over, not committed: to every other connection (and after a crash now) the sandbox is unclaimed.
      expect(await rowState(oldest!)).toBe('ready');
      await blocker.query("UPDATE resources SET resource_version = nextval('resource_version_seq') WHERE kind = 'Agent' AND name = $1", [agent.name]);
      await blocker.query('COMMIT');
      const error = await reconciled;
      expect(isStoreError(error, 'Conflict'), String(error)).toBe(true);
    } finally {
      blocker.release();
    }
    // The claim rolled back, and the sandbox it handed over was ended: its row gone first (no other
    // agent can claim it), its container and the agent's name for it gone, the pool asked to refill.
    expect(await rowState(oldest!)).toBeUndefined();
    expect(running(oldest!)).toBe(false);
    expect(existsSync(join(dataDir, 'sandboxes', oldest!))).toBe(false);
    expect(hasLink(agent.id)).toBe(false);
    expect(poolChanges).toContain(poolName);
    expect((await store.get('Agent', agent.name))!.status?.sandbox).toBeUndefined();
    expect(await listEvents(pool, { subjectId: agent.id })).toEqual([]);

    // The next reconcile claims the other sandbox, and commits it with the agent idle and its event.
    await reconcile.agent(agent.name, log);
    const idle = (await store.get('Agent', agent.name))!;
    expect(idle.status).toMatchObject({ phase: 'idle', sandbox: { provider: 'local', id: other } });
    expect(await rowState(other!)).toBe('claimed');
    expect((await listEvents(pool, { subjectId: agent.id })).map((event) => event.type)).toEqual(['agent.started']);
    expect((await provider.exec(idle.status!.sandbox!, { language: 'bash', code: 'echo claimed', timeoutMs: 30_000 })).stdout).toBe('claimed\n');
    await reconcile.pool(poolName, log);
    expect(await readyRows()).toHaveLength(2);
  });

  it('after a crash between the hand-over and the commit, gives the sandbox to no other agent and ends it; its agent claims another', async () => {
    const crashed = await newAgent();
    const [handedOver, next] = await readyRows();
    // What a crash right before the commit leaves: the claim made and the sandbox handed over (with
    // the agent's secret) in a transaction whose connection then dies.
    const tx = await store.beginTransaction();
    const claimed = await claimWarmSandbox(tx.client, { organizationId: (await store.get('Agent', crashed.name))!.spec.organizationId, mode: 'live', provider: 'local', compute: 'python', browser: false }, crashed.id, new Date());
    expect(claimed.sandbox?.id).toBe(handedOver);
    await provider.claimWarm({ provider: 'local', id: handedOver! }, { agentId: crashed.id, sessionId, timeoutSeconds: 3600, compute: 'python', browser: false, env: { WARM_TOKEN: SECRET } });
    const backend = (tx.client as unknown as { processID: number }).processID;
    tx.client.release(true);
    // The server ends the transaction with its connection: the row's lock goes, the claim with it.
    await eventually(
      async () => ((await pool.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [backend])).rowCount === 0 ? true : undefined),
      { timeoutMs: 10_000, intervalMs: 20, what: 'the transaction to end with its connection' },
    );
    expect(await rowState(handedOver!)).toBe('ready');
    expect(hasLink(crashed.id)).toBe(true);

    // A new process: its provider reads the agent's link back from disk.
    const restarted = createLocalProvider({ ...loadConfig({}), dataDir }, log);
    const after = reconcilers(restarted);

    // Another agent's claim takes the oldest ready row, that sandbox: refused, ended, and its row gone; it starts cold.
    const other = await newAgent();
    await after.agent(other.name, log);
    const otherAgent = (await store.get('Agent', other.name))!;
    expect(otherAgent.status?.phase).toBe('idle');
    expect(otherAgent.status!.sandbox!.id).not.toBe(handedOver);
    expect(await envOf(otherAgent.status!.sandbox!, restarted)).toBe('none\n');
    expect(await rowState(handedOver!)).toBeUndefined();
    expect(running(handedOver!)).toBe(false);

    // The crashed agent's reconcile claims the next sandbox; its earlier link gives way.
    await after.agent(crashed.name, log);
    const crashedAgent = (await store.get('Agent', crashed.name))!;
    expect(crashedAgent.status).toMatchObject({ phase: 'idle', sandbox: { provider: 'local', id: next } });
    expect(await rowState(next!)).toBe('claimed');
    expect(await envOf(crashedAgent.status!.sandbox!, restarted)).toBe('none\n');
    expect((await listEvents(pool, { subjectId: crashed.id })).map((event) => event.type)).toEqual(['agent.started']);
  });
});

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_COMPUTE_PRICES,
  ManualClock,
  idToObjectName,
  createOrganization,
  recordUsage,
  sessionSpend,
  silentLogger,
} from '../../common/src/index.js';
import type { PostgresResourceStore } from '../../common/src/index.js';
import { BillingLoop } from '../../operator/src/billing/loop.js';
import { ComputeMeter } from '../../operator/src/billing/meter.js';
import { createAgentMetrics, createAgentReconciler, snapshotIdFor } from '../../operator/src/controllers/agent.js';
import { createSnapshotMetrics, createSnapshotReconciler } from '../../operator/src/controllers/snapshot.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { ScriptedProvider } from '../helpers/fake-providers.js';
import type { ApiClient } from '../helpers/http.js';

/**
 * Metering, limits and budgets against a real PostgreSQL, with time on a manual clock: the
 * billing loop as the operator runs it, the Agent reconciler with a provider standing in for
 * compute, and the API answering from what they leave.
 */
const CENT = 1_000_000_000n;
const MINUTE = 60_000;
/** $0.0010 a minute (python), $0.0100 a minute more with a t4: the built-in list prices. */
const PRICES = { compute: DEFAULT_COMPUTE_PRICES, storagePerGbHour: '0.00015', currency: 'usd' };

let api: TestApi;
let pool: pg.Pool;
let store: PostgresResourceStore;
let live: ApiClient;
let test: ApiClient;
let organizationId: string;
const clock = new ManualClock('2026-05-31T20:00:00Z');
const providers = new ProviderRegistry([new ScriptedProvider({ name: 'fake', capabilities: { gpuTypes: ['t4'] }, execResult: { stdout: 'ok\n' } })], 'fake');
let reconcileAgent: ReturnType<typeof createAgentReconciler>;
let reconcileSnapshot: ReturnType<typeof createSnapshotReconciler>;
/**
 * One reconcile of the agent, as the operator's controllers would follow it: a pause it started
 * is stored by the Snapshot reconciler, and the agent's next reconcile is paused.
 */
async function reconcile(name: string, log: typeof silentLogger): Promise<void> {
  await reconcileAgent(name, log);
  const agent = (await store.get('Agent', name))!;
  if (agent.spec.desiredState !== 'paused' || agent.status?.phase === 'paused' || !agent.status?.sandbox) return;
  await reconcileSnapshot(idToObjectName(snapshotIdFor(agent)), log);
  await reconcileAgent(name, log);
}
/** Agents whose reconcile a billing pass asked for (their spend moved past their status.cost). */
const woken = new Set<string>();

/** A billing loop as a (re)started operator has it: nothing in memory from before. */
function billingLoop(): BillingLoop {
  return new BillingLoop({
    store,
    pool,
    clock,
    log: silentLogger,
    metrics: new Registry(),
    prices: () => PRICES,
    storageKind: 'directory',
    sessionCostStep: 100,
    intervalMs: 15_000,
    onSpendChange: (agentName) => woken.add(agentName),
  });
}

beforeAll(async () => {
  api = await startTestApi({ clock, providers });
  ({ pool, store } = api);
  const snapshots = new DirectoryStorage(mkdtempSync(join(tmpdir(), 'berth-snapshots-')));
  reconcileAgent = createAgentReconciler({
    store,
    db: pool,
    providers,
    clock,
    metrics: createAgentMetrics(new Registry()),
    snapshots,
    meter: new ComputeMeter(pool, () => PRICES),
    currency: 'usd',
  });
  reconcileSnapshot = createSnapshotReconciler({ store, db: pool, storage: snapshots, providers, clock, metrics: createSnapshotMetrics(new Registry()) });
  organizationId = (await createOrganization(pool, 'billing')).id;
  live = (await api.client(organizationId, 'live')).api;
  test = (await api.client(organizationId, 'test')).api;
});
afterAll(async () => {
  await api.close();
});

async function newSession(limits: Record<string, unknown> = {}, client = live) {
  const response = await client.post('/v1/sessions', { userId: `user-${Math.random().toString(36).slice(2, 8)}`, limits });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body as { id: string; userId: string };
}

/** An agent created through the API and brought to idle by one reconcile. */
async function readyAgent(sessionId: string, body: Record<string, unknown> = {}, client = live) {
  const response = await client.post(`/v1/sessions/${sessionId}/agents`, { timeout: '24h', ...body });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  const id = response.body.id as string;
  const name = id.replace('_', '-');
  await reconcile(name, silentLogger);
  expect((await store.get('Agent', name))!.status!.phase).toBe(client === live ? 'idle' : 'idle');
  return { id, name };
}

async function computeRows(agentId: string) {
  const { rows } = await pool.query<{ quantity: string; amount_nanocents: string; occurred_at: Date }>(
    "SELECT quantity::text, amount_nanocents::text, occurred_at FROM usage_ledger WHERE agent_id = $1 AND kind = 'compute' ORDER BY id",
    [agentId],
  );
  const minutes = rows.reduce((sum, row) => sum + Number(row.quantity), 0);
  const nanocents = rows.reduce((sum, row) => sum + BigInt(row.amount_nanocents), 0n);
  return { rows, minutes, nanocents };
}

/** The session's billing events and its agents' pause events, in the order they were written. */
async function sessionEvents(sessionId: string) {
  const { rows } = await pool.query<{ type: string; data: Record<string, any> }>(
    `SELECT type, data FROM events WHERE data->>'sessionId' = $1
       AND type IN ('budget.threshold', 'budget.exhausted', 'session.limit_reached', 'session.cost_threshold', 'agent.paused')
     ORDER BY seq`,
    [sessionId],
  );
  return rows;
}

async function charge(sessionId: string, userId: string, nanocents: bigint, key: string) {
  await recordUsage(pool, {
    organizationId,
    sessionId,
    userId,
    environment: 'production',
    kind: 'model',
    provider: 'openai',
    model: 'openai/gpt-4o-mini',
    inputTokens: 100,
    outputTokens: 10,
    amountNanocents: nanocents,
    currency: 'usd',
    billingMode: 'managed',
    dedupeKey: key,
    at: clock.now(),
  });
}

const pause = async (name: string, reason: 'requested' | 'session_limit' | 'cost_cap' = 'requested') => {
  await store.updateSpec('Agent', name, (current) => ({ ...current.spec, desiredState: 'paused', pauseReason: reason }));
  await reconcile(name, silentLogger);
};

describe('compute metering', () => {
  it('meters a sandbox running 10 minutes as 10 minutes across an operator restart, and its release to the millisecond', async () => {
    clock.set('2026-05-31T20:00:00Z');
    const session = await newSession();
    const { id, name } = await readyAgent(session.id);

    clock.advance(4 * MINUTE);
    expect((await billingLoop().tick()).computeCharges).toBe(1);
    expect((await computeRows(id)).minutes).toBe(4);

    // The operator restarts; the sandbox kept running meanwhile.
    clock.advance(6 * MINUTE);
    const restarted = billingLoop();
    expect((await restarted.tick()).computeCharges).toBe(1);
    await restarted.tick(); // the same moment again: nothing new
    let metered = await computeRows(id);
    expect(metered.rows).toHaveLength(2);
    expect(metered.minutes).toBe(10);
    expect(metered.nanocents).toBe(10n * 100_000_000n); // 10 minutes at $0.0010 = 1 cent, exactly
    expect(metered.rows.map((row) => row.occurred_at.toISOString())).toEqual(['2026-05-31T20:04:00.000Z', '2026-05-31T20:10:00.000Z']);
    // The pass asked for the agent's reconcile, which reads the spend and shows it: the reconciler
    // is the one writer of the status.
    expect(woken).toContain(name);
    expect((await live.get(`/v1/agents/${id}`)).body.cost).toBeUndefined();
    await reconcile(name, silentLogger);
    expect((await live.get(`/v1/agents/${id}`)).body.cost).toEqual({ amount: 1, currency: 'usd' });
    woken.clear();
    await restarted.tick();
    expect(woken).toEqual(new Set()); // nothing new to show

    // Less than a minute unmetered is left for later, until the sandbox goes.
    clock.advance(30_000);
    expect((await restarted.tick()).computeCharges).toBe(0);
    await pause(name);
    metered = await computeRows(id);
    expect(metered.minutes).toBe(10.5);
    expect(metered.nanocents).toBe(1_050_000_000n);
    expect((await store.get('Agent', name))!.status!.computeEndedAt).toBe('2026-05-31T20:10:30.000Z');

    // Released: later passes charge nothing more.
    clock.advance(10 * MINUTE);
    await billingLoop().tick();
    expect((await computeRows(id)).minutes).toBe(10.5);
    expect((await sessionSpend(pool, session.id, {}, clock.now())).computeMinutes).toBe(10.5);
  });

  it('charges a GPU sandbox the compute price plus the GPU price, per minute', async () => {
    const session = await newSession();
    const { id } = await readyAgent(session.id, { gpu: 't4' });
    clock.advance(3 * MINUTE);
    await billingLoop().tick();
    expect((await computeRows(id)).nanocents).toBe(3n * 1_100_000_000n);
  });

  it('meters nothing for test keys', async () => {
    const session = await newSession({}, test);
    const { id } = await readyAgent(session.id, {}, test);
    clock.advance(5 * MINUTE);
    await billingLoop().tick();
    expect((await computeRows(id)).rows).toEqual([]);
  });
});

describe('storage metering', () => {
  it('charges an archive per GB-hour, an hour at a time, and the rest when it is deleted', async () => {
    const session = await newSession();
    const storedFrom = clock.now();
    await pool.query(
      `INSERT INTO snapshot_storage (snapshot_id, organization_id, mode, session_id, agent_id, user_id, environment, size_bytes, stored_from)
       VALUES ('snap_billing1', $1, 'live', $2, 'agt_x', $3, 'development', 2000000000, $4)`,
      [organizationId, session.id, session.userId, storedFrom],
    );
    const rows = async () =>
      (
        await pool.query<{ quantity: string; amount_nanocents: string; environment: string; provider: string }>(
          "SELECT quantity::text, amount_nanocents::text, environment, provider FROM usage_ledger WHERE kind = 'storage' AND session_id = $1 ORDER BY id",
          [session.id],
        )
      ).rows;
    clock.advance(30 * MINUTE);
    await billingLoop().tick();
    expect(await rows()).toEqual([]);
    clock.advance(120 * MINUTE);
    await billingLoop().tick();
    expect(await rows()).toHaveLength(1);
    await pool.query("UPDATE snapshot_storage SET deleted_at = $1 WHERE snapshot_id = 'snap_billing1'", [new Date(storedFrom.getTime() + 180 * MINUTE)]);
    clock.advance(60 * MINUTE);
    await billingLoop().tick();
    await billingLoop().tick();
    const charged = await rows();
    expect(charged.map((row) => Number(row.quantity))).toEqual([5, 1]); // 2 GB × 2.5 h, then 2 GB × 0.5 h
    expect(charged.every((row) => row.environment === 'development' && row.provider === 'directory')).toBe(true);
    // 6 GB-hours at $0.00015 = 0.09 cents
    expect(charged.reduce((sum, row) => sum + BigInt(row.amount_nanocents), 0n)).toBe(90_000_000n);
  });
});

describe('exact sums', () => {
  it('sums 1,000 charges of a third of a cent exactly, and rounds once', async () => {
    const session = await newSession();
    for (let i = 0; i < 1000; i++) await charge(session.id, session.userId, 333_333_333n, `${session.id}/third/${i}`);
    const spend = await sessionSpend(pool, session.id, {}, clock.now());
    expect(spend.totalNanocents).toBe(333_333_333_000n);
    const { rows } = await pool.query<{ count: string }>('SELECT count(*)::text FROM usage_ledger WHERE session_id = $1', [session.id]);
    expect(rows[0]!.count).toBe('1000');
  });
});

describe('maxAgents', () => {
  it('refuses the agent beyond the limit with 402, and counts ended agents out', async () => {
    const session = await newSession({ maxAgents: 2 });
    const first = await readyAgent(session.id);
    await readyAgent(session.id);
    const refused = await live.post(`/v1/sessions/${session.id}/agents`, {});
    expect(refused.status).toBe(402);
    expect(refused.body.error).toMatchObject({
      code: 'session_limit_exceeded',
      details: { sessionId: session.id, limit: 'maxAgents', current: 2, max: 2 },
    });
    await live.post(`/v1/sessions/${session.id}/agents`, {});
    const reached = (await sessionEvents(session.id)).filter((event) => event.type === 'session.limit_reached');
    expect(reached.map((event) => event.data)).toEqual([
      { sessionId: session.id, userId: session.userId, limit: 'maxAgents', current: 2, max: 2, pausedAgents: [] },
    ]);
    await store.updateSpec('Agent', first.name, (current) => ({ ...current.spec, desiredState: 'terminated' }));
    await reconcile(first.name, silentLogger);
    expect((await live.post(`/v1/sessions/${session.id}/agents`, {})).status).toBe(201);
  });

  it('holds exactly under concurrent creations', async () => {
    const session = await newSession({ maxAgents: 3 });
    const statuses = await Promise.all(Array.from({ length: 8 }, () => live.post(`/v1/sessions/${session.id}/agents`, {}).then((r) => r.status)));
    expect(statuses.filter((status) => status === 201)).toHaveLength(3);
    expect(statuses.filter((status) => status === 402)).toHaveLength(5);
  });
});

describe('maxCost', () => {
  it('fires each threshold once, then pauses the running agents and writes the events in order, once', async () => {
    clock.set('2026-05-31T21:00:00Z');
    const session = await newSession({ maxCost: { amount: 100, currency: 'usd', period: 'day' } });
    const a = await readyAgent(session.id);
    const b = await readyAgent(session.id);
    const loop = billingLoop();

    await charge(session.id, session.userId, 50n * CENT, `${session.id}/1`);
    await loop.tick();
    await loop.tick();
    await charge(session.id, session.userId, 35n * CENT, `${session.id}/2`);
    await loop.tick();
    let events = await sessionEvents(session.id);
    expect(events.map((event) => [event.type, event.data.threshold])).toEqual([
      ['budget.threshold', 50],
      ['budget.threshold', 80],
    ]);
    expect(events[1]!.data).toEqual({
      sessionId: session.id,
      userId: session.userId,
      threshold: 80,
      currentCost: { amount: 85, currency: 'usd' },
      maxCost: { amount: 100, currency: 'usd' },
      percentage: 85,
      period: 'day',
    });
    // Below the limit, everything still works.
    expect((await live.post(`/v1/agents/${a.id}/exec`, { language: 'bash', code: 'true' })).status).toBe(200);

    await charge(session.id, session.userId, 15n * CENT, `${session.id}/3`);
    const result = await loop.tick();
    expect(result.agentsPaused).toBe(2);
    for (const agent of [a, b]) {
      expect((await store.get('Agent', agent.name))!.spec).toMatchObject({ desiredState: 'paused', pauseReason: 'session_limit' });
      await reconcile(agent.name, silentLogger);
      expect((await live.get(`/v1/agents/${agent.id}`)).body).toMatchObject({ status: 'paused', pauseReason: 'session_limit' });
    }
    await loop.tick();
    await billingLoop().tick();
    // A dollar spent is also a session.cost_threshold (its own test is below).
    const all = await sessionEvents(session.id);
    expect(all.filter((event) => event.type === 'session.cost_threshold')).toHaveLength(1);
    events = all.filter((event) => event.type !== 'session.cost_threshold');
    expect(events.map((event) => event.type)).toEqual([
      'budget.threshold',
      'budget.threshold',
      'budget.threshold',
      'session.limit_reached',
      'budget.exhausted',
      'agent.paused',
      'agent.paused',
    ]);
    expect(events[2]!.data).toMatchObject({ threshold: 100, percentage: 100, currentCost: { amount: 100, currency: 'usd' } });
    const pausedAgents = [a.id, b.id].sort();
    expect({ ...events[3]!.data, pausedAgents: [...events[3]!.data.pausedAgents].sort() }).toEqual({
      sessionId: session.id,
      userId: session.userId,
      limit: 'maxCost',
      current: 100,
      max: 100,
      message: expect.stringContaining('100 usd cents a day'),
      pausedAgents,
    });
    expect({ ...events[4]!.data, pausedAgents: [...events[4]!.data.pausedAgents].sort() }).toEqual({
      sessionId: session.id,
      userId: session.userId,
      finalCost: { amount: 100, currency: 'usd' },
      maxCost: { amount: 100, currency: 'usd' },
      pausedAgents,
    });
    expect(events.slice(5).map((event) => event.data.reason)).toEqual(['session_limit', 'session_limit']);

    // Until the period rolls over: 402 for what would spend.
    for (const [path, body] of [
      [`/v1/agents/${a.id}/resume`, undefined],
      [`/v1/agents/${a.id}/exec`, { language: 'bash', code: 'true' }],
      [`/v1/agents/${a.id}/run`, { task: 'more' }],
      [`/v1/sessions/${session.id}/agents`, {}],
    ] as const) {
      const response = await live.post(path, body);
      expect(response.status, path).toBe(402);
      expect(response.body.error, path).toMatchObject({ code: 'session_limit_exceeded', details: { limit: 'maxCost', current: 100, max: 100 } });
    }

    // A new UTC day is a new period.
    clock.set('2026-06-01T00:00:01Z');
    const next = await live.post(`/v1/sessions/${session.id}/agents`, {});
    expect(next.status).toBe(201);
  });

  it('lets calls through again once the limit is raised', async () => {
    clock.set('2026-06-01T08:00:00Z');
    const session = await newSession({ maxCost: { amount: 10, currency: 'usd', period: 'month' } });
    await charge(session.id, session.userId, 10n * CENT, `${session.id}/all`);
    expect((await live.post(`/v1/sessions/${session.id}/agents`, {})).status).toBe(402);
    const raised = await live.patch(`/v1/sessions/${session.id}`, { limits: { maxCost: { amount: 20, currency: 'usd', period: 'month' } } });
    expect(raised.status).toBe(200);
    expect(raised.body.limits).toEqual({ maxCost: { amount: 20, currency: 'usd', period: 'month' } });
    expect((await live.post(`/v1/sessions/${session.id}/agents`, {})).status).toBe(201);
    const bad = await live.patch(`/v1/sessions/${session.id}`, { limits: { maxCost: { amount: 2.5, currency: 'usd', period: 'month' } } });
    expect(bad.status).toBe(422);
    expect((await live.patch(`/v1/sessions/${session.id}`, {})).status).toBe(422);
  });
});

describe('maxComputeMinutes and maxDuration', () => {
  it('pauses the session once its sandboxes used its compute minutes', async () => {
    const session = await newSession({ maxComputeMinutes: 5 });
    const agent = await readyAgent(session.id);
    clock.advance(6 * MINUTE);
    await billingLoop().tick();
    expect((await store.get('Agent', agent.name))!.spec.pauseReason).toBe('session_limit');
    const [reached] = (await sessionEvents(session.id)).filter((event) => event.type === 'session.limit_reached');
    expect(reached!.data).toMatchObject({ limit: 'maxComputeMinutes', current: 6, max: 5, pausedAgents: [agent.id] });
  });

  it('pauses the session when its duration is up, and refuses new agents', async () => {
    const session = await newSession({ maxDuration: '1h' });
    const agent = await readyAgent(session.id);
    clock.advance(59 * MINUTE);
    await billingLoop().tick();
    expect((await store.get('Agent', agent.name))!.spec.desiredState).toBe('active');
    clock.advance(MINUTE);
    await billingLoop().tick();
    expect((await store.get('Agent', agent.name))!.spec).toMatchObject({ desiredState: 'paused', pauseReason: 'session_limit' });
    const refused = await live.post(`/v1/sessions/${session.id}/agents`, {});
    expect(refused.body.error).toMatchObject({ code: 'session_limit_exceeded', details: { limit: 'maxDuration', max: 3600 } });
  });
});

describe('costCap and cost thresholds', () => {
  it('pauses an agent whose compute spent its cost cap, and budget.exhausted names it', async () => {
    const session = await newSession();
    const agent = await readyAgent(session.id, { costCap: { amount: 1, currency: 'usd' } });
    clock.advance(9 * MINUTE);
    await billingLoop().tick();
    expect((await store.get('Agent', agent.name))!.spec.desiredState).toBe('active');
    clock.advance(MINUTE);
    await billingLoop().tick();
    expect((await store.get('Agent', agent.name))!.spec).toMatchObject({ desiredState: 'paused', pauseReason: 'cost_cap' });
    await reconcile(agent.name, silentLogger);
    const events = await sessionEvents(session.id);
    expect(events.map((event) => event.type)).toEqual(['budget.exhausted', 'agent.paused']);
    expect(events[0]!.data).toEqual({
      sessionId: session.id,
      userId: session.userId,
      agentId: agent.id,
      limit: 'costCap',
      finalCost: { amount: 1, currency: 'usd' },
      maxCost: { amount: 1, currency: 'usd' },
      pausedAgents: [agent.id],
    });
    expect(events[1]!.data.reason).toBe('cost_cap');
  });

  it('writes session.cost_threshold at each new dollar of a session', async () => {
    const session = await newSession();
    await charge(session.id, session.userId, 99n * CENT, `${session.id}/a`);
    await billingLoop().tick();
    expect(await sessionEvents(session.id)).toEqual([]);
    await charge(session.id, session.userId, 2n * CENT, `${session.id}/b`);
    await billingLoop().tick();
    await charge(session.id, session.userId, 150n * CENT, `${session.id}/c`);
    await billingLoop().tick();
    await billingLoop().tick();
    const events = await sessionEvents(session.id);
    expect(events.map((event) => event.data)).toEqual([
      { sessionId: session.id, userId: session.userId, threshold: { amount: 100, currency: 'usd' }, currentCost: { amount: 101, currency: 'usd' } },
      { sessionId: session.id, userId: session.userId, threshold: { amount: 200, currency: 'usd' }, currentCost: { amount: 251, currency: 'usd' } },
    ]);
  });
});

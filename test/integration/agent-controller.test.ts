import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirectoryStorage } from '../../operator/src/snapshots/directory.js';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { SANDBOX_FINALIZER } from '../../crds/src/finalizers.js';
import {
  ManualClock,
  PostgresResourceStore,
  ProviderError,
  SandboxNotReadyError,
  UnsupportedRequestError,
  createOrganization,
  idToObjectName,
  insertTask,
  listEvents,
  silentLogger,
} from '../../common/src/index.js';
import { LEASE_RECHECK_MARGIN_MS, PROVISION_DEADLINE_MS, createAgentMetrics, createAgentReconciler, snapshotIdFor } from '../../operator/src/controllers/agent.js';
import { createSnapshotMetrics, createSnapshotReconciler } from '../../operator/src/controllers/snapshot.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { ScriptedProvider } from '../helpers/fake-providers.js';
import type { ApiClient } from '../helpers/http.js';

/**
 * The Agent reconciler against the real PostgreSQL store, with time on a manual clock and
 * a scripted provider standing in for compute elsewhere, plus the API answering from the
 * states the reconciler leaves.
 */
let testApi: TestApi;
let pool: pg.Pool;
let store: PostgresResourceStore;
let api: ApiClient;
const clock = new ManualClock('2026-05-01T09:00:00Z');
const provider = new ScriptedProvider();
const providers = new ProviderRegistry([provider], 'scripted');
let reconcile: ReturnType<typeof createAgentReconciler>;
let reconcileSnapshot: ReturnType<typeof createSnapshotReconciler>;
/** Agents whose reconcile the Snapshot reconciler asked for. */
const agentsWoken: string[] = [];
let sessionId: string;

beforeAll(async () => {
  testApi = await startTestApi({ clock, providers });
  ({ pool, store } = testApi);
  const snapshots = new DirectoryStorage(mkdtempSync(join(tmpdir(), 'berth-snapshots-')));
  reconcile = createAgentReconciler({ store, db: pool, providers, clock, metrics: createAgentMetrics(new Registry()), snapshots, currency: 'usd' });
  reconcileSnapshot = createSnapshotReconciler({
    store,
    db: pool,
    storage: snapshots,
    providers,
    clock,
    metrics: createSnapshotMetrics(new Registry()),
    onAgentChange: (agentName) => agentsWoken.push(agentName),
  });
  const organization = await createOrganization(pool, 'test');
  api = (await testApi.client(organization.id, 'live')).api;
  sessionId = (await api.post('/v1/sessions', { userId: 'controller' })).body.id;
});
afterAll(async () => {
  await testApi.close();
});
beforeEach(() => {
  provider.nextProvisionError = undefined;
});

async function newAgent(body: Record<string, unknown> = {}) {
  const response = await api.post(`/v1/sessions/${sessionId}/agents`, body);
  expect(response.status).toBe(201);
  return { id: response.body.id as string, name: (response.body.id as string).replace('_', '-') };
}

describe('the Agent reconciler', () => {
  it('lets exec on a booting agent wait for its sandbox; 409 when it fails meanwhile or is still booting when the wait ends', async () => {
    const ready = await newAgent();
    const waiting = api.post(`/v1/agents/${ready.id}/exec`, { language: 'bash', code: 'true' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await reconcile(ready.name, silentLogger);
    expect((await waiting).status).toBe(200);

    const failing = await newAgent();
    provider.nextProvisionError = new UnsupportedRequestError('scripted', 'no such compute here');
    const refused = api.post(`/v1/agents/${failing.id}/exec`, { language: 'bash', code: 'true' });
    await new Promise((resolve) => setTimeout(resolve, 300));
    await reconcile(failing.name, silentLogger);
    expect((await refused).body.error).toMatchObject({ code: 'conflict', details: { status: 'failed' } });

    // The test API's exec timeout (5 s) bounds the wait; nothing reconciles this one.
    const { id } = await newAgent();
    const started = Date.now();
    const response = await api.post(`/v1/agents/${id}/exec`, { language: 'bash', code: 'true' });
    expect(response.status).toBe(409);
    expect(response.body.error).toMatchObject({ code: 'conflict', details: { status: 'booting' } });
    expect(response.body.error.message).toContain('still booting after 5 s');
    expect(Date.now() - started).toBeGreaterThanOrEqual(4_900);
  });

  it('provisions, moves to idle and writes agent.started once; a second reconcile writes nothing', async () => {
    const { id, name } = await newAgent({ timeout: '5m' });
    const result = await reconcile(name, silentLogger);
    expect(result.requeueAfterMs).toBe(30_000);
    const agent = await store.get('Agent', name);
    expect(agent!.status).toMatchObject({
      phase: 'idle',
      observedGeneration: 1,
      sandbox: { provider: 'scripted', id },
      startedAt: '2026-05-01T09:00:00.000Z',
      expiresAt: '2026-05-01T09:05:00.000Z',
    });
    await reconcile(name, silentLogger);
    expect((await store.get('Agent', name))!.metadata.resourceVersion).toBe(agent!.metadata.resourceVersion);
    expect((await listEvents(pool, { subjectId: id })).map((event) => event.type)).toEqual(['agent.started']);
    expect((await api.get(`/v1/agents/${id}`)).body.status).toBe('idle');
  });

  it('ends the sandbox when the clock passes expiresAt and fails the agent', async () => {
    const { id, name } = await newAgent({ timeout: '2m' });
    await reconcile(name, silentLogger);
    clock.advance(60_000);
    expect((await reconcile(name, silentLogger)).requeueAfterMs).toBe(30_000);
    clock.advance(61_000);
    await reconcile(name, silentLogger);
    const agent = (await api.get(`/v1/agents/${id}`)).body;
    expect(agent).toMatchObject({ status: 'failed', error: { code: 'timeout' } });
    expect(provider.terminations).toContain(id);
    expect((await listEvents(pool, { subjectId: id })).map((event) => event.type)).toEqual(['agent.started', 'agent.failed']);
  });

  it('reports a sandbox that is on its way as Provisioning and asks to be called again', async () => {
    const { id, name } = await newAgent();
    provider.nextProvisionError = new SandboxNotReadyError('scripted', 'building sandbox image base', 3_000);
    expect(await reconcile(name, silentLogger)).toMatchObject({ requeueAfterMs: 3_000 });
    const agent = (await api.get(`/v1/agents/${id}`)).body;
    expect(agent.status).toBe('booting');
    expect(agent.conditions[0]).toMatchObject({ reason: 'Provisioning', status: 'False', message: 'building sandbox image base' });
  });

  it('has a resume from a snapshot still being archived wait for it, on a provider that keeps no checkpoint of it', async () => {
    const { id, name } = await newAgent();
    const agent = (await store.get('Agent', name))!;
    const snapshotId = 'snap_01m84b8rkt4ayjqkyg2qm7rpvh';
    const snapshotName = snapshotId.replace('_', '-');
    // Made by the local provider on another host: only its archive can bring it here.
    await store.create('Snapshot', {
      name: snapshotName,
      labels: {},
      ownerReferences: [{ kind: 'Agent', name, uid: agent.metadata.uid, controller: true }],
      finalizers: [],
      spec: { organizationId: agent.spec.organizationId, mode: 'live', agentId: id, sessionId, provider: 'local', type: 'pause' },
      status: { state: 'creating', observedGeneration: 0, conditions: [], level: 'native' },
    });
    await store.updateSpec('Agent', name, (current) => ({ ...current.spec, restoreFrom: { snapshotId, level: 'filesystem' } }));

    expect(await reconcile(name, silentLogger)).toMatchObject({ requeueAfterMs: 1_000 });
    const waiting = (await api.get(`/v1/agents/${id}`)).body;
    expect(waiting.status).toBe('booting');
    expect(waiting.conditions[0]).toMatchObject({ reason: 'Provisioning', message: `waiting for the archive of snapshot ${snapshotId}` });
    expect(provider.sandboxes.has(id)).toBe(false);

    const snapshot = (await store.get('Snapshot', snapshotName))!;
    await store.updateStatus('Snapshot', snapshotName, { ...snapshot.status!, state: 'ready', sizeBytes: 10, location: snapshotId, sha256: 'a'.repeat(64) });
    await reconcile(name, silentLogger);
    const resumed = (await api.get(`/v1/agents/${id}`)).body;
    expect(resumed.status).toBe('idle');
    expect(resumed.conditions[0]).toMatchObject({ reason: 'Restored', message: expect.stringContaining(snapshotId) });
  });

  it('pauses on a provider that keeps no checkpoint: the agent waits, pausing, while the Snapshot reconciler stores the archive', async () => {
    const { id, name } = await newAgent();
    await reconcile(name, silentLogger);
    await store.updateSpec('Agent', name, (current) => ({ ...current.spec, desiredState: 'paused' }));
    await reconcile(name, silentLogger);
    const pausing = (await store.get('Agent', name))!;
    const snapshotId = snapshotIdFor(pausing);
    const snapshotName = idToObjectName(snapshotId);
    // The Agent reconcile created the snapshot and left its sandbox alone.
    expect(pausing.status).toMatchObject({ phase: 'idle', sandbox: { id } });
    expect(pausing.status!.conditions).toContainEqual(expect.objectContaining({ type: 'Paused', status: 'False', reason: 'Pausing' }));
    expect(provider.sandboxes.has(id)).toBe(true);
    expect((await store.get('Snapshot', snapshotName))!.status).toMatchObject({ state: 'creating' });

    clock.advance(1_000);
    await reconcileSnapshot(snapshotName, silentLogger);
    const snapshot = (await store.get('Snapshot', snapshotName))!;
    expect(snapshot.status).toMatchObject({ state: 'ready', level: 'filesystem', location: snapshotId, readyAt: clock.now().toISOString() });
    expect(provider.sandboxes.has(id)).toBe(false);
    expect(agentsWoken).toContain(name);

    clock.advance(1_000);
    await reconcile(name, silentLogger);
    const paused = (await store.get('Agent', name))!;
    expect(paused.status).toMatchObject({ phase: 'paused', snapshot: snapshotId, computeEndedAt: snapshot.status!.readyAt });
    expect(paused.status!.sandbox).toBeUndefined();
    const events = await listEvents(pool, { subjectId: id, type: 'agent.paused' });
    expect(events.map((event) => event.data)).toEqual([expect.objectContaining({ snapshotId, level: 'filesystem', sizeBytes: snapshot.status!.sizeBytes })]);
    // Nothing left to do: neither reconcile writes again.
    const versions = [paused.metadata.resourceVersion, snapshot.metadata.resourceVersion];
    await reconcileSnapshot(snapshotName, silentLogger);
    await reconcile(name, silentLogger);
    expect([(await store.get('Agent', name))!.metadata.resourceVersion, (await store.get('Snapshot', snapshotName))!.metadata.resourceVersion]).toEqual(versions);
  });

  it('retries a failing provision with backoff, then fails the agent after the deadline', async () => {
    const { id, name } = await newAgent();
    provider.nextProvisionError = new ProviderError('scripted', 'the node is on fire');
    await expect(reconcile(name, silentLogger)).rejects.toThrow('the node is on fire');
    const retrying = (await api.get(`/v1/agents/${id}`)).body;
    expect(retrying.status).toBe('booting');
    expect(retrying.conditions[0]).toMatchObject({ reason: 'ProvisionFailed', message: expect.stringContaining('retrying') });
    clock.advance(PROVISION_DEADLINE_MS + 1);
    await reconcile(name, silentLogger);
    expect((await api.get(`/v1/agents/${id}`)).body).toMatchObject({ status: 'failed', error: { code: 'provider_error' } });
  });

  it('fails at once, with agent.failed, when the provider refuses the request', async () => {
    const { id, name } = await newAgent();
    provider.nextProvisionError = new UnsupportedRequestError('scripted', 'storage: not supported');
    await reconcile(name, silentLogger);
    expect((await api.get(`/v1/agents/${id}`)).body).toMatchObject({
      status: 'failed',
      error: { code: 'unsupported_request', message: 'storage: not supported' },
    });
    const events = await listEvents(pool, { subjectId: id });
    expect(events.map((event) => [event.type, event.data.error])).toEqual([['agent.failed', { code: 'unsupported_request', message: 'storage: not supported' }]]);
  });

  it('recreates a sandbox that disappeared, marking SandboxLost', async () => {
    const { id, name } = await newAgent();
    await reconcile(name, silentLogger);
    provider.sandboxes.delete(id);
    await reconcile(name, silentLogger);
    const agent = (await api.get(`/v1/agents/${id}`)).body;
    expect(agent.status).toBe('idle');
    expect(agent.conditions[0]).toMatchObject({ status: 'True', reason: 'SandboxLost' });
    expect(provider.sandboxes.get(id)).toBe('running');
  });

  it('ends a sandbox on terminate even when its provision was never recorded in the status', async () => {
    const { id, name } = await newAgent();
    await provider.provision({ agentId: id, sessionId, timeoutSeconds: 60, compute: 'python', browser: false, env: {} });
    await store.updateSpec('Agent', name, (current) => ({ ...current.spec, desiredState: 'terminated' }));
    await reconcile(name, silentLogger);
    expect((await api.get(`/v1/agents/${id}`)).body.status).toBe('terminated');
    expect(provider.sandboxes.has(id)).toBe(false);
  });

  it('releases the sandbox of a deleted agent and removes its finalizer', async () => {
    const { id, name } = await newAgent();
    await reconcile(name, silentLogger);
    expect((await store.get('Agent', name))!.metadata.finalizers).toEqual([SANDBOX_FINALIZER]);
    await store.delete('Agent', name);
    expect((await store.get('Agent', name))!.metadata.deletionTimestamp).toBeDefined();
    await reconcile(name, silentLogger);
    expect(await store.get('Agent', name)).toBeUndefined();
    expect(provider.terminations).toContain(id);
  });

  it('derives running and idle from the task alone: held, lease run out, ended', async () => {
    const { id, name } = await newAgent();
    await reconcile(name, silentLogger);
    const runningOf = async () => {
      const agent = (await store.get('Agent', name))!;
      return { phase: agent.status!.phase, running: agent.status!.conditions.find((condition) => condition.type === 'Running')!.reason };
    };
    expect(await runningOf()).toEqual({ phase: 'idle', running: 'NoRun' });

    const task = await insertTask(pool, { id: `task_${id.slice(4)}`, organizationId: 'org', mode: 'live', sessionId, agentId: id, input: 'x' });
    await reconcile(name, silentLogger);
    expect(await runningOf()).toEqual({ phase: 'idle', running: 'RunQueued' });

    // A runner claims it under a 5 s lease: the reconcile comes back when the lease would end.
    await pool.query("UPDATE tasks SET state = 'running', attempt = 1, claimed_by = 'r1', lease_expires_at = now() + interval '5 seconds' WHERE id = $1", [task.id]);
    const held = await reconcile(name, silentLogger);
    expect(await runningOf()).toEqual({ phase: 'running', running: 'RunInProgress' });
    expect(held.requeueAfterMs).toBeGreaterThan(3_000);
    expect(held.requeueAfterMs).toBeLessThanOrEqual(5_000 + LEASE_RECHECK_MARGIN_MS);

    // The runner died: its lease ran out and nobody took the task over.
    await pool.query("UPDATE tasks SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [task.id]);
    const lost = await reconcile(name, silentLogger);
    expect(await runningOf()).toEqual({ phase: 'idle', running: 'RunnerLost' });
    expect(lost.requeueAfterMs).toBe(30_000);

    await pool.query("UPDATE tasks SET state = 'completed', lease_expires_at = NULL, finished_at = now() WHERE id = $1", [task.id]);
    await reconcile(name, silentLogger);
    expect(await runningOf()).toEqual({ phase: 'idle', running: 'NoRun' });
    const settled = (await store.get('Agent', name))!.metadata.resourceVersion;
    await reconcile(name, silentLogger);
    expect((await store.get('Agent', name))!.metadata.resourceVersion).toBe(settled);
    expect((await api.get(`/v1/agents/${id}`)).body.status).toBe('idle');
  });

  it('does not write a status computed from a stale read', async () => {
    const { name } = await newAgent();
    const stale = await store.get('Agent', name);
    await store.updateSpec('Agent', name, (current) => ({ ...current.spec, desiredState: 'terminated' }));
    await expect(
      store.updateStatus('Agent', name, { ...stale!.status!, phase: 'idle' }, { resourceVersion: stale!.metadata.resourceVersion }),
    ).rejects.toThrow(/Conflict/);
    await reconcile(name, silentLogger);
    expect((await store.get('Agent', name))!.status!.phase).toBe('terminated');
  });
});

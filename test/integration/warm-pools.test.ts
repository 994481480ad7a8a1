import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { checkpointedContainerGone, removeDataDir, runscContainers } from '../helpers/runsc.js';

/**
 * Warm pools with real gVisor sandboxes: a pool keeps sandboxes started, an agent claims one and
 * gets its secrets after the claim, the pool refills, an agent that does not fit starts cold, and
 * deleting the pool ends its unclaimed sandboxes.
 */
let berth: BerthProcess;
let live: ApiClient;
let sessionId: string;
const SECRET = 'warm-secret-7f3a9c';

beforeAll(async () => {
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'warm' })).body.id;
  expect((await live.post('/v1/secrets', { WARM_TOKEN: SECRET })).status).toBe(200);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error.code).toBe(code);
}

const warmContainers = () => runscContainers(berth.dataDir).filter((container) => container.id.startsWith('wsb_') && container.status === 'running');
const runscExec = (id: string, argv: string[]) => execFileSync('runsc', [`--root=${join(berth.dataDir, 'runsc')}`, 'exec', id, ...argv], { encoding: 'utf8' });
const exec = (id: string, code: string) => live.post(`/v1/agents/${id}/exec`, { language: 'bash', code });
const samples = async () => parsePrometheus(await (await fetch(`${berth.baseUrl}/metrics`)).text());

async function poolWhen(id: string, wanted: (pool: any) => boolean, what: string) {
  return eventually(async () => {
    const pool = (await live.get(`/v1/warm-pools/${id}`)).body;
    return wanted(pool) ? pool : undefined;
  }, { timeoutMs: 90_000, intervalMs: 100, what });
}

async function idle(id: string) {
  return eventually(async () => {
    const agent = (await live.get(`/v1/agents/${id}`)).body;
    return agent.status === 'idle' ? agent : undefined;
  }, { timeoutMs: 90_000, intervalMs: 20, what: `agent ${id} to be idle` });
}

describe('warm pool values', () => {
  it('answers 422 for bad values and an unknown definition, and 404 for an unknown pool', async () => {
    for (const body of [{ size: -1 }, { size: 51 }, { size: 1.5 }, {}, { size: 1, compute: 'cobol' }, { size: 1, colour: 'red' }, { size: 1, provider: 'nowhere' }]) {
      expectError(await live.post('/v1/warm-pools', body), 422, 'unprocessable_entity');
    }
    const unknown = await live.post('/v1/warm-pools', { size: 1, definition: 'no-such-definition' });
    expectError(unknown, 422, 'unprocessable_entity');
    expect(unknown.body.error.details.fields).toHaveProperty('definition');
    // Past the install's cap on an organization's warm sandboxes (BERTH_WARM_SANDBOXES_MAX, 20 by default).
    const capped = await live.post('/v1/warm-pools', { size: 21 });
    expectError(capped, 422, 'unprocessable_entity');
    expect(capped.body.error.details.fields).toEqual({ size: ['at most 20'] });
    expectError(await live.get('/v1/warm-pools/wpl_01m80gqv9d4kjqfcmvs2q4jxem'), 404, 'not_found');
    expect((await live.get('/v1/warm-pools')).body).toEqual({ data: [], hasMore: false });
  });
});

describe('a warm pool of python sandboxes', () => {
  let pool: any;
  let claimedSandbox: string;
  let agentId: string;
  let poolSandboxesBefore: string[];

  beforeAll(async () => {
    const created = await live.post('/v1/warm-pools', { compute: 'python', size: 2 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    pool = created.body;
    expect(pool).toMatchObject({ id: expect.stringMatching(/^wpl_/), provider: 'local', compute: 'python', browser: false, size: 2, claims: 0 });
  });

  it('starts size sandboxes, without any agent secret in them', async () => {
    const filled = await poolWhen(pool.id, (current) => current.ready === 2, 'the pool to fill');
    expect(filled.conditions[0]).toMatchObject({ type: 'Filled', status: 'True' });
    poolSandboxesBefore = warmContainers().map((container) => container.id);
    expect(poolSandboxesBefore).toHaveLength(2);
    for (const id of poolSandboxesBefore) expect(runscExec(id, ['env'])).not.toContain(SECRET);
    expectError(await live.post('/v1/warm-pools', { compute: 'python', size: 1 }), 409, 'conflict');
  });

  it('gives a new agent a ready sandbox; its secret arrives after the claim, through the launcher', async () => {
    const created = await live.post(`/v1/sessions/${sessionId}/agents`, { secrets: ['WARM_TOKEN'], timeout: '1h' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    agentId = created.body.id;
    // One GET that the server answers once the agent is idle (no polling).
    const waited = await live.get(`/v1/agents/${agentId}?waitFor=idle&waitSeconds=30`);
    expect(waited.status, JSON.stringify(waited.body)).toBe(200);
    expect(waited.body.status).toBe('idle');
    const agent = await idle(agentId);
    expect(agent.conditions[0].message).toMatch(/claimed from warm pool wpl_/);
    // A status it does not reach: the answer comes after waitSeconds, with the agent as it is.
    const started = Date.now();
    const notPaused = await live.get(`/v1/agents/${agentId}?waitFor=paused&waitSeconds=1`);
    expect(notPaused.body.status).toBe('idle');
    expect(Date.now() - started).toBeGreaterThanOrEqual(1_000);
    // Several statuses: answered at once when it has one of them.
    const listed = Date.now();
    const either = await live.get(`/v1/agents/${agentId}?waitFor=paused,idle&waitSeconds=30`);
    expect(either.body.status).toBe('idle');
    expect(Date.now() - listed).toBeLessThan(1_000);
    for (const query of ['waitFor=sleeping', 'waitFor=idle,sleeping', 'waitFor=idle,', 'waitFor=', 'waitFor=idle&waitSeconds=0', 'waitFor=idle&waitSeconds=61', 'waitFor=idle&colour=red']) {
      const refused = await live.get(`/v1/agents/${agentId}?${query}`);
      expect(refused.status, query).toBe(422);
      expect(refused.body.error.code).toBe('unprocessable_entity');
      if (query.startsWith('waitFor=') && !query.includes('&')) expect(refused.body.error.details.fields, query).toHaveProperty('waitFor');
    }
    // No sandbox of the agent's own: it runs in one the pool had started.
    const containers = runscContainers(berth.dataDir).map((container) => container.id);
    expect(containers).not.toContain(agentId);
    const result = await exec(agentId, 'echo "$WARM_TOKEN"');
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body.stdout).toBe(`${SECRET}\n`);
    // The claimed sandbox is one of the two the pool had started (the one the agent's file is in);
    // the other, still unclaimed, never got the secret.
    expect((await exec(agentId, 'echo kept > /workspace/note && echo ok')).body.stdout).toBe('ok\n');
    const withNote = poolSandboxesBefore.filter((id) => runscExec(id, ['sh', '-c', 'cat /workspace/note 2>/dev/null || true']).includes('kept'));
    expect(withNote).toHaveLength(1);
    claimedSandbox = withNote[0]!;
    const other = poolSandboxesBefore.find((id) => id !== claimedSandbox)!;
    expect(runscExec(other, ['env'])).not.toContain(SECRET);
  });

  it('refills after the claim, and counts it', async () => {
    const refilled = await poolWhen(pool.id, (current) => current.ready === 2 && current.claims === 1, 'the pool to refill');
    expect(refilled.starting).toBe(0);
    expect(warmContainers().map((container) => container.id)).toEqual(expect.arrayContaining([claimedSandbox]));
    expect(warmContainers()).toHaveLength(3);
    const metrics = await samples();
    expect(metricValue(metrics, 'berth_warm_pool_claims_total', { provider: 'local', compute: 'python' })).toBe(1);
    expect(metricValue(metrics, 'berth_warm_pool_claim_duration_seconds_count', { provider: 'local' })).toBe(1);
    expect(metricValue(metrics, 'berth_warm_pool_size', { pool: pool.id, compute: 'python' })).toBe(2);
    expect(metricValue(metrics, 'berth_warm_pool_ready', { pool: pool.id, compute: 'python' })).toBe(2);
  });

  it('lets the claimed agent pause and resume natively under its own id, its files kept', async () => {
    const paused = await live.post(`/v1/agents/${agentId}/pause`);
    expect(paused.body.status, JSON.stringify(paused.body)).toBe('paused');
    await checkpointedContainerGone(berth.dataDir, claimedSandbox);
    const resumed = await live.post(`/v1/agents/${agentId}/resume`);
    expect(resumed.body.status, JSON.stringify(resumed.body)).toBe('idle');
    const after = await exec(agentId, 'cat /workspace/note; echo "$WARM_TOKEN"');
    expect(after.body.stdout).toBe(`kept\n${SECRET}\n`);
  });

  it('starts an agent that does not fit (another compute) cold, and counts the miss', async () => {
    const created = await live.post(`/v1/sessions/${sessionId}/agents`, { compute: 'node', timeout: '10m' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const agent = await idle(created.body.id);
    expect(agent.conditions[0].message).not.toMatch(/warm pool/);
    expect(runscContainers(berth.dataDir).map((container) => container.id)).toContain(created.body.id);
    expect((await live.get(`/v1/warm-pools/${pool.id}`)).body).toMatchObject({ ready: 2, claims: 1 });
    expect(metricValue(await samples(), 'berth_warm_pool_misses_total', { provider: 'local', compute: 'node' })).toBe(1);
    await live.post(`/v1/agents/${created.body.id}/terminate`);
  });

  it('ends the claimed sandbox with its agent: no container and no directory left of it', async () => {
    expect((await live.post(`/v1/agents/${agentId}/terminate`)).status).toBe(200);
    const sandboxes = join(berth.dataDir, 'sandboxes');
    await eventually(async () => (!existsSync(join(sandboxes, claimedSandbox)) && !existsSync(join(sandboxes, agentId)) ? true : undefined), { what: 'the claimed sandbox to go' });
    const ids = runscContainers(berth.dataDir).map((container) => container.id);
    expect(ids).not.toContain(agentId);
    expect(ids).not.toContain(claimedSandbox);
  });

  it('shrinks when resized, and ends its unclaimed sandboxes when deleted', async () => {
    expectError(await live.patch(`/v1/warm-pools/${pool.id}`, { size: 21 }), 422, 'unprocessable_entity');
    const resized = await live.patch(`/v1/warm-pools/${pool.id}`, { size: 1 });
    expect(resized.body.size).toBe(1);
    await poolWhen(pool.id, (current) => current.ready === 1, 'the pool to shrink');
    expect(warmContainers()).toHaveLength(1);
    const remaining = warmContainers()[0]!.id;

    const deleted = await live.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' });
    expect(deleted.status, JSON.stringify(deleted.body)).toBe(200);
    expectError(await live.get(`/v1/warm-pools/${pool.id}`), 404, 'not_found');
    expect(warmContainers()).toEqual([]);
    const left = readdirSync(join(berth.dataDir, 'sandboxes')).filter((name) => name.startsWith('wsb_'));
    expect(left).not.toContain(remaining);
    expect(left).toEqual([]);
  });
});

describe('a warm pool of one definition', () => {
  it('gives its sandboxes to agents of that definition only', async () => {
    const definition = await live.post('/v1/agent-definitions', { name: 'warm-def' });
    expect(definition.status, JSON.stringify(definition.body)).toBe(201);
    const created = await live.post('/v1/warm-pools', { definition: 'warm-def', size: 1 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const pool = created.body;
    expect(pool.definition).toBe(definition.body.id);
    await poolWhen(pool.id, (current) => current.ready === 1, 'the pool to fill');

    const plain = await live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '10m' });
    expect((await idle(plain.body.id)).conditions[0].message).not.toMatch(/warm pool/);
    const defined = await live.post(`/v1/sessions/${sessionId}/agents`, { definition: 'warm-def', timeout: '10m' });
    expect(defined.status, JSON.stringify(defined.body)).toBe(201);
    expect((await idle(defined.body.id)).conditions[0].message).toBe(`the sandbox is running (claimed from warm pool ${pool.id})`);
    expect((await exec(defined.body.id, 'echo hi')).body).toMatchObject({ stdout: 'hi\n', exitCode: 0 });

    for (const id of [plain.body.id, defined.body.id]) await live.post(`/v1/agents/${id}/terminate`);
    expect((await live.raw(`/v1/warm-pools/${pool.id}`, { method: 'DELETE' })).status).toBe(200);
    expect(warmContainers()).toEqual([]);
  });
});

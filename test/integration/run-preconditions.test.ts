import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * What exec and run need before they go ahead, against a real `berth up` with real gVisor
 * sandboxes: a booting agent is waited for, and a run whose model has no key is refused at once.
 */
const PLATFORM_KEY = 'sk-platform-0123456789';
const CUSTOMER_KEY = 'sk-customer-0123456789';
let platform: FakeModelServer;
let customer: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let sessionId: string;

beforeAll(async () => {
  platform = await startFakeOpenAI(() => ({ text: 'done by the platform key' }), { apiKey: PLATFORM_KEY });
  customer = await startFakeOpenAI(() => ({ text: 'done by the customer key' }), { apiKey: CUSTOMER_KEY });
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({
        openai: { api: 'openai', baseUrl: platform.baseUrl, apiKeyEnv: 'TEST_PLATFORM_KEY' },
        // A vendor this install knows but holds no key for: organizations bring their own.
        keyless: { api: 'openai', baseUrl: platform.baseUrl, apiKeyEnv: 'TEST_KEYLESS_KEY' },
      }),
      TEST_PLATFORM_KEY: PLATFORM_KEY,
      TEST_KEYLESS_KEY: '',
      BERTH_BYOI_ALLOW_HTTP: 'true',
      BERTH_BYOI_ALLOW_PRIVATE: 'true',
    },
  });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'preconditions' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
  await Promise.all([platform.close(), customer.close()]);
});

async function createAgent(body: Record<string, unknown> = {}) {
  const response = await live.post(`/v1/sessions/${sessionId}/agents`, { timeout: '10m', ...body });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  expect(response.body.status).toBe('booting');
  return response.body.id as string;
}

const finished = (taskId: string) => taskFinished(live, taskId);

describe('exec and run on an agent that is still booting', () => {
  let agentId: string;

  it('exec right after create waits for the sandbox and answers with the result', async () => {
    agentId = await createAgent();
    const result = await live.post(`/v1/agents/${agentId}/exec`, { language: 'python', code: 'print(6 * 7)' });
    expect(result.status, JSON.stringify(result.body)).toBe(200);
    expect(result.body).toMatchObject({ stdout: '42\n', exitCode: 0 });
  });

  it('run right after create waits and queues the task', async () => {
    const id = await createAgent();
    const run = await live.post(`/v1/agents/${id}/run`, { task: 'say done' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    expect(await finished(run.body.taskId)).toMatchObject({ status: 'completed', output: 'done by the platform key' });
    await live.post(`/v1/agents/${id}/terminate`);
  });

  it('still answers 409 at once for a terminated agent', async () => {
    await live.post(`/v1/agents/${agentId}/terminate`);
    const started = Date.now();
    const exec = await live.post(`/v1/agents/${agentId}/exec`, { language: 'bash', code: 'true' });
    expect(exec.status).toBe(409);
    expect(exec.body.error).toMatchObject({ code: 'conflict', details: { status: 'terminated' } });
    const run = await live.post(`/v1/agents/${agentId}/run`, { task: 'x' });
    expect(run.body.error).toMatchObject({ code: 'conflict', details: { status: 'terminated' } });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});

describe('run with a model whose vendor has no key', () => {
  let agentId: string;

  it('is refused at once with 422 naming model, and nothing is queued or called', async () => {
    agentId = await createAgent({ model: 'keyless/small' });
    await eventually(async () => ((await live.get(`/v1/agents/${agentId}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
    const before = platform.requests.length;
    const run = await live.post(`/v1/agents/${agentId}/run`, { task: 'anything' });
    expect(run.status, JSON.stringify(run.body)).toBe(422);
    expect(run.body.error.code).toBe('unprocessable_entity');
    expect(run.body.error.details.fields.model[0]).toContain('TEST_KEYLESS_KEY is not set');
    expect(run.body.error.details.fields.model[0]).toContain('PUT /v1/providers/keyless');
    const { rows } = await db.query('SELECT count(*)::int AS n FROM tasks WHERE agent_id = $1', [agentId]);
    expect(rows[0].n).toBe(0);
    expect(platform.requests.length).toBe(before);
  });

  it('runs once the organization configures its own key for the vendor', async () => {
    expect((await live.post('/v1/secrets', { KEYLESS_KEY: CUSTOMER_KEY })).status).toBe(200);
    const put = await live.raw('/v1/providers/keyless', {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ credentialRef: 'KEYLESS_KEY', config: { baseUrl: customer.baseUrl } }),
    });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const run = await live.post(`/v1/agents/${agentId}/run`, { task: 'anything' });
    expect(run.status, JSON.stringify(run.body)).toBe(202);
    expect(await finished(run.body.taskId)).toMatchObject({ status: 'completed', output: 'done by the customer key' });
    expect(customer.apiKeys()).toContain(CUSTOMER_KEY);
    await live.post(`/v1/agents/${agentId}/terminate`);
  });
});

import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Metadata extraction end to end: a real berth process and sandbox, and a local OpenAI-compatible
 * model whose answers do or do not hold the JSON the agent's extraction schema asks for.
 */
const schema = {
  type: 'object',
  properties: { sentiment: { type: 'string', enum: ['positive', 'negative'] }, priority: { type: 'integer', minimum: 1, maximum: 3 } },
  required: ['sentiment', 'priority'],
  additionalProperties: false,
};

function taskOf(body: any): string {
  return body.messages.find((message: any) => message.role === 'user').content;
}
const askedForJson = (body: any) => body.messages.filter((message: any) => message.role === 'user').length > 1;

const scenarios: Record<string, (body: any) => FakeTurn> = {
  // The answer is the JSON itself.
  'classify: I love it': () => ({ text: '```json\n{"sentiment":"positive","priority":3}\n```', usage: { input: 100, output: 20 } }),
  // Prose first; the request for JSON gets it.
  'classify: it broke': (body) =>
    askedForJson(body)
      ? { text: '{"sentiment":"negative","priority":1}', usage: { input: 300, output: 15 } }
      : { text: 'The customer is unhappy: the product broke. Urgent.', usage: { input: 200, output: 30 } },
  // Never valid JSON of the schema.
  'classify: meh': (body) => (askedForJson(body) ? { text: '{"sentiment":"neutral"}' } : { text: 'It is hard to say.' }),
};

let openai: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;
let sessionId: string;

beforeAll(async () => {
  openai = await startFakeOpenAI((body: any) => scenarios[taskOf(body)]?.(body) ?? { status: 400, error: 'no scenario' });
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' } }),
      TEST_OPENAI_KEY: 'sk-test-openai',
    },
  });
  live = berth.api(berth.liveKey);
  sessionId = (await live.post('/v1/sessions', { userId: 'extraction-user' })).body.id;
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
  await openai.close();
});

async function classifier() {
  const created = await live.post(`/v1/sessions/${sessionId}/agents`, {
    model: 'openai/gpt-4o-mini',
    metadata: { team: 'support', extract: { schema, instructions: 'priority 1 is the most urgent' } },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  await eventually(async () => ((await live.get(`/v1/agents/${created.body.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
  return created.body;
}

async function run(agentId: string, task: string) {
  const started = await live.post(`/v1/agents/${agentId}/run`, { task });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  return taskFinished(live, started.body.taskId);
}

async function completedEvent(taskId: string) {
  const { rows } = await db.query("SELECT data FROM events WHERE type = 'agent.completed' AND data->>'taskId' = $1", [taskId]);
  return rows[0]?.data;
}

describe('metadata extraction', () => {
  let agent: any;
  beforeAll(async () => {
    agent = await classifier();
  });

  it('keeps the custom pairs and the rules on the agent', () => {
    expect(agent.metadata).toEqual({ team: 'support', extract: { schema, instructions: 'priority 1 is the most urgent' } });
  });

  it('takes the metadata from an answer that holds it, with no further model call', async () => {
    const before = openai.requests.length;
    const task = await run(agent.id, 'classify: I love it');
    expect(task).toMatchObject({ status: 'completed', metadata: { sentiment: 'positive', priority: 3 }, steps: 1 });
    expect(task.metadataError).toBeUndefined();
    expect(openai.requests.length - before).toBe(1);
    expect((await completedEvent(task.id)).metadata).toEqual({ sentiment: 'positive', priority: 3 });
  });

  it('asks the model once more for JSON, charging that call, when the answer is prose', async () => {
    const task = await run(agent.id, 'classify: it broke');
    expect(task).toMatchObject({
      status: 'completed',
      output: 'The customer is unhappy: the product broke. Urgent.',
      metadata: { sentiment: 'negative', priority: 1 },
      steps: 2,
      usage: { inputTokens: 500, outputTokens: 45 },
    });
    const request = openai.requests.filter((body: any) => taskOf(body) === 'classify: it broke').at(-1) as any;
    expect(request.tools ?? []).toEqual([]);
    const ask = request.messages.at(-1);
    expect(ask.role).toBe('user');
    // The schema as stored (key order is the database's).
    expect(JSON.parse(ask.content.split('\n')[1])).toEqual(schema);
    expect(ask.content).toContain('priority 1 is the most urgent');
    const { rows } = await db.query("SELECT count(*)::int AS calls FROM usage_ledger WHERE task_id = $1 AND kind = 'model'", [task.id]);
    expect(rows[0].calls).toBe(2);
    expect((await completedEvent(task.id)).metadata).toEqual({ sentiment: 'negative', priority: 1 });
  });

  it('completes the run with metadataError when neither answer matches', async () => {
    const task = await run(agent.id, 'classify: meh');
    expect(task.status).toBe('completed');
    expect(task.metadata).toBeUndefined();
    expect(task.metadataError).toMatchObject({ code: 'extraction_failed', issues: expect.arrayContaining([expect.stringMatching(/^sentiment: /), expect.stringMatching(/^priority: /)]) });
    expect((await completedEvent(task.id)).metadataError.code).toBe('extraction_failed');
    const metrics = parsePrometheus(await fetch(`${berth.baseUrl}/metrics`).then((response) => response.text()));
    expect(metricValue(metrics, 'berth_metadata_extractions_total', { result: 'ok' })).toBe(2);
    expect(metricValue(metrics, 'berth_metadata_extractions_total', { result: 'failed' })).toBe(1);
  });

  it('refuses an invalid extraction schema with 422 naming the field, and creates no agent', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'bad-rules-user' })).body;
    const response = await live.post(`/v1/sessions/${session.id}/agents`, { metadata: { extract: { schema: { type: 'object', properties: { a: { type: 'banana' } } } } } });
    expect([response.status, response.body.error.code, response.body.error.details.fields]).toEqual([
      422,
      'unprocessable_entity',
      { 'metadata.extract.schema': ['metadata.extract.schema.properties.a.type: unknown type "banana"'] },
    ]);
    expect((await live.get(`/v1/sessions/${session.id}/agents`)).body.data).toEqual([]);
  });

  it('keeps custom pairs as labels that the agent list filters by', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'labels-user' })).body;
    const create = async (metadata: Record<string, unknown>) => (await live.post(`/v1/sessions/${session.id}/agents`, { metadata })).body.id as string;
    const support = await create({ team: 'support', tier: 'gold' });
    const sales = await create({ team: 'sales', note: 'a long note with spaces, kept but not a label' });
    const list = async (query: string) => (await live.get(`/v1/sessions/${session.id}/agents?${query}`)).body.data.map((agent: any) => agent.id).sort();
    expect(await list('metadata=team:support')).toEqual([support]);
    expect(await list('metadata=team:sales')).toEqual([sales]);
    expect(await list('metadata=tier:gold')).toEqual([support]);
    expect(await list('metadata=team:nobody')).toEqual([]);
    expect(await list('')).toEqual([support, sales].sort());
    const bad = await live.get(`/v1/sessions/${session.id}/agents?metadata=${encodeURIComponent('note:a long note')}`);
    expect([bad.status, Object.keys(bad.body.error.details.fields)]).toEqual([422, ['metadata']]);
    for (const id of [support, sales]) await live.post(`/v1/agents/${id}/terminate`, {});
  });
});

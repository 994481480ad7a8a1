import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, startRawServer, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Knowledge end to end: collections and sources through the API, a real berth process and
 * sandbox, and a local OpenAI-compatible model that calls `knowledge_search` and answers with
 * what the tool gave it.
 */
const HANDBOOK = [
  'Shipping. Orders leave the warehouse within two working days. Parcels to islands take longer.',
  'Refunds. A customer who returns an item is refunded within 14 days of the return reaching us; the original shipping fee is not refunded.',
  'Warranty. Electronics carry a two-year warranty covering manufacturing defects, not accidental damage.',
].join('\n\n');

function taskOf(body: any): string {
  return body.messages.find((message: any) => message.role === 'user').content;
}

const script = (body: any): FakeTurn => {
  const task = taskOf(body);
  const toolMessages = body.messages.filter((message: any) => message.role === 'tool');
  if (toolMessages.length === 0) return { text: '', toolCalls: [{ name: 'knowledge_search', input: { query: task } }] };
  // The answer quotes what the search gave, so the test sees the tool result reached the model.
  return { text: `From the handbook: ${toolMessages.at(-1).content}` };
};

let openai: FakeModelServer;
let pages: Awaited<ReturnType<typeof startRawServer>>;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;

beforeAll(async () => {
  openai = await startFakeOpenAI(script);
  pages = await startRawServer((req, res) => {
    if (req.url === '/warranty.html') {
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
      res.end('<html><head><style>p{}</style><script>var x = "ignored";</script></head><body><h1>Extended warranty</h1><p>An extended warranty of five years can be bought for appliances.</p></body></html>');
      return;
    }
    res.writeHead(404).end('not here');
  });
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' } }),
      TEST_OPENAI_KEY: 'sk-test-openai',
      // The documents' web server of this test is on loopback.
      BERTH_WEBHOOK_ALLOW_HTTP: 'true',
      BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
    },
  });
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
  await Promise.all([openai.close(), pages.close()]);
});

async function readyAgent(sessionId: string, body: Record<string, unknown>) {
  const agent = await live.post(`/v1/sessions/${sessionId}/agents`, { model: 'openai/gpt-4o-mini', timeout: '30m', ...body });
  expect(agent.status, JSON.stringify(agent.body)).toBe(201);
  await eventually(async () => ((await live.get(`/v1/agents/${agent.body.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
  return agent.body;
}

async function run(agentId: string, task: string) {
  const started = await live.post(`/v1/agents/${agentId}/run`, { task });
  expect(started.status, JSON.stringify(started.body)).toBe(202);
  return taskFinished(live, started.body.taskId);
}

describe('collections and sources', () => {
  let collection: any;

  beforeAll(async () => {
    const created = await live.post('/v1/knowledge/collections', { name: 'handbook', description: 'the support handbook' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    collection = created.body;
  });

  it('creates a collection, unique by name, found by id or name', async () => {
    expect(collection).toEqual({
      id: expect.stringMatching(/^kcol_[0-9a-z]{26}$/),
      name: 'handbook',
      description: 'the support handbook',
      sourceCount: 0,
      chunkCount: 0,
      storageBytes: 0,
      createdAt: expect.any(String),
    });
    expect((await live.get(`/v1/knowledge/collections/handbook`)).body.id).toBe(collection.id);
    expect((await live.get(`/v1/knowledge/collections/${collection.id}`)).body.name).toBe('handbook');
    const again = await live.post('/v1/knowledge/collections', { name: 'handbook' });
    expect([again.status, again.body.error.code]).toEqual([409, 'conflict']);
    const bad = await live.post('/v1/knowledge/collections', { name: 'no spaces allowed' });
    expect([bad.status, Object.keys(bad.body.error.details.fields)]).toEqual([422, ['name']]);
    expect((await berth.api(berth.testKey).get(`/v1/knowledge/collections/${collection.id}`)).status).toBe(404);
  });

  it('indexes a text source and writes knowledge.sync_completed with chunk count and storage used', async () => {
    const added = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, { type: 'text', name: 'Handbook', text: HANDBOOK });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    expect(added.body).toMatchObject({ id: expect.stringMatching(/^ksrc_/), type: 'text', name: 'Handbook', state: 'synced', chunkCount: 1, bytes: Buffer.byteLength(HANDBOOK) });
    const { rows } = await db.query("SELECT data FROM events WHERE type = 'knowledge.sync_completed' AND data->>'sourceId' = $1", [added.body.id]);
    expect(rows.map((row) => row.data)).toEqual([
      {
        collectionId: collection.id,
        sourceId: added.body.id,
        chunkCount: 1,
        storageBytes: Buffer.byteLength(HANDBOOK),
        collectionChunkCount: 1,
        collectionStorageBytes: Buffer.byteLength(HANDBOOK),
      },
    ]);
  });

  it('indexes an uploaded file and a fetched page as their text', async () => {
    const file = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, {
      type: 'file',
      name: 'returns.md',
      content: Buffer.from('# Returns\n\nReturns are accepted for 30 days with the receipt.').toString('base64'),
    });
    expect(file.status, JSON.stringify(file.body)).toBe(201);
    expect(file.body).toMatchObject({ type: 'file', name: 'returns.md', state: 'synced', chunkCount: 1 });
    const page = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, { type: 'url', url: `${pages.url}/warranty.html`, name: 'Extended warranty' });
    expect(page.status, JSON.stringify(page.body)).toBe(201);
    expect(page.body).toMatchObject({ type: 'url', url: `${pages.url}/warranty.html`, state: 'synced', chunkCount: 1 });
    const { rows } = await db.query('SELECT content FROM knowledge_chunks WHERE source_id = $1', [page.body.id]);
    expect(rows).toEqual([{ content: 'Extended warranty\n\nAn extended warranty of five years can be bought for appliances.' }]);
    const listed = await live.get(`/v1/knowledge/collections/${collection.id}/sources?limit=2`);
    expect(listed.body.data.map((source: any) => source.type)).toEqual(['text', 'file']);
    expect(listed.body.hasMore).toBe(true);
    const next = await live.get(`/v1/knowledge/collections/${collection.id}/sources?limit=2&cursor=${encodeURIComponent(listed.body.cursor)}`);
    expect(next.body.data.map((source: any) => source.id)).toEqual([page.body.id]);
    expect((await live.get(`/v1/knowledge/collections/${collection.id}`)).body).toMatchObject({ sourceCount: 3, chunkCount: 3 });
  });

  it('writes a URL that cannot be fetched as a failed source with knowledge.sync_failed', async () => {
    const failed = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, { type: 'url', url: `${pages.url}/gone` });
    expect(failed.status).toBe(201);
    expect(failed.body).toMatchObject({ state: 'failed', error: 'answered 404', chunkCount: 0, name: `${pages.url}/gone` });
    const { rows } = await db.query("SELECT data FROM events WHERE type = 'knowledge.sync_failed'");
    expect(rows.map((row) => row.data)).toEqual([{ collectionId: collection.id, sourceId: failed.body.id, error: { code: 'fetch_failed', message: 'answered 404' } }]);
    expect((await live.raw(`/v1/knowledge/collections/${collection.id}/sources/${failed.body.id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await live.raw(`/v1/knowledge/collections/${collection.id}/sources/${failed.body.id}`, { method: 'DELETE' })).status).toBe(404);
  });

  it('refuses a binary upload and a bad source type without writing anything', async () => {
    const binary = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, {
      type: 'file',
      name: 'logo.png',
      content: Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01]).toString('base64'),
    });
    expect([binary.status, binary.body.error.details.fields]).toEqual([422, { content: ['not UTF-8 text'] }]);
    const unknown = await live.post(`/v1/knowledge/collections/${collection.id}/sources`, { type: 'ftp', url: 'ftp://example.com' });
    expect(unknown.status).toBe(422);
    expect((await live.get(`/v1/knowledge/collections/${collection.id}`)).body.sourceCount).toBe(3);
  });

  it('lets the model search the collection through knowledge_search', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'knowledge-user' })).body;
    const agent = await readyAgent(session.id, { knowledge: 'handbook', tools: ['exec'] });
    expect(agent.knowledge).toBe('handbook');
    const task = await run(agent.id, 'how long does a refund take');
    expect(task.status).toBe('completed');
    expect(task.output).toContain('refunded within 14 days of the return');
    expect(task.output).toContain('[1] Handbook (passage 1)');
    const request = openai.requests.find((body: any) => taskOf(body) === 'how long does a refund take') as any;
    expect(request.tools.map((tool: any) => tool.function.name)).toEqual(['exec', 'knowledge_search']);
    // Stemmed words match (warranties → warranty), and the fetched page is searched like the rest.
    const warranty = await run(agent.id, 'extended warranties for appliances');
    expect(warranty.output).toContain('Extended warranty (passage 1)');
    const nothing = await run(agent.id, 'submarine');
    expect(nothing.output).toContain('no passages in collection "handbook" match: submarine');
    const metrics = parsePrometheus((await fetch(`${berth.baseUrl}/metrics`).then((response) => response.text())) as string);
    expect(metricValue(metrics, 'berth_knowledge_searches_total', { result: 'hits' })).toBeGreaterThanOrEqual(2);
    expect(metricValue(metrics, 'berth_knowledge_searches_total', { result: 'empty' })).toBeGreaterThanOrEqual(1);
    expect(metricValue(metrics, 'berth_knowledge_syncs_total', { type: 'url', result: 'failed' })).toBe(1);
  });
});

describe('knowledge on agent creation', () => {
  it('gives `true` the session default collection, made on first use', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'default-collection-user' })).body;
    const agent = await readyAgent(session.id, { knowledge: true });
    const listed = (await live.get('/v1/knowledge/collections?limit=100')).body.data;
    const own = listed.find((collection: any) => collection.sessionId === session.id);
    expect(own).toMatchObject({ name: `session-${session.id}`, sourceCount: 0 });
    await live.post(`/v1/knowledge/collections/${own.id}/sources`, { type: 'text', text: 'The office door code is changed every Monday.' });
    const task = await run(agent.id, 'door code');
    expect(task.output).toContain('changed every Monday');
    // A second agent of the session shares the collection.
    await readyAgent(session.id, { knowledge: true });
    expect((await live.get('/v1/knowledge/collections?limit=100')).body.data.filter((collection: any) => collection.sessionId === session.id)).toHaveLength(1);
  });

  it('refuses an unknown collection and knowledge_search named in tools, with 422 naming the field', async () => {
    const session = (await live.post('/v1/sessions', { userId: 'bad-knowledge-user' })).body;
    const unknown = await live.post(`/v1/sessions/${session.id}/agents`, { knowledge: 'no-such-collection' });
    expect([unknown.status, unknown.body.error.details.fields]).toEqual([422, { knowledge: ['unknown collection'] }]);
    const named = await live.post(`/v1/sessions/${session.id}/agents`, { tools: ['knowledge_search'] });
    expect([named.status, Object.keys(named.body.error.details.fields)]).toEqual([422, ['tools']]);
    expect((await live.get(`/v1/sessions/${session.id}/agents`)).body.data).toEqual([]);
  });

  it('tells the model when its collection was deleted during its life', async () => {
    await live.post('/v1/knowledge/collections', { name: 'short-lived' });
    const session = (await live.post('/v1/sessions', { userId: 'deleted-collection-user' })).body;
    const agent = await readyAgent(session.id, { knowledge: 'short-lived' });
    expect((await live.raw('/v1/knowledge/collections/short-lived', { method: 'DELETE' })).status).toBe(200);
    expect((await live.get('/v1/knowledge/collections/short-lived')).status).toBe(404);
    const task = await run(agent.id, 'anything at all');
    expect(task.output).toContain('the knowledge collection of this agent no longer exists');
  });
});

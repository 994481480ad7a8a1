import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { startFakeEmbeddings, type FakeEmbeddingsServer } from '../helpers/fake-embeddings.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, taskFinished, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Knowledge search with embeddings (BERTH_EMBEDDINGS): a local OpenAI-compatible embeddings
 * server whose vectors put "reimbursement" near "refunded", so a query no chunk shares a word
 * with still finds its passage, ahead of full-text matches.
 */
function taskOf(body: any): string {
  return body.messages.find((message: any) => message.role === 'user').content;
}

const script = (body: any): FakeTurn => {
  const tool = body.messages.filter((message: any) => message.role === 'tool').at(-1);
  if (tool) return { text: `Found: ${tool.content}` };
  return { text: '', toolCalls: [{ name: 'knowledge_search', input: { query: taskOf(body), limit: 1 } }] };
};

let openai: FakeModelServer;
let embeddings: FakeEmbeddingsServer;
let berth: BerthProcess;
let live: ApiClient;
let db: pg.Pool;

beforeAll(async () => {
  openai = await startFakeOpenAI(script);
  embeddings = await startFakeEmbeddings();
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: openai.baseUrl, apiKeyEnv: 'TEST_OPENAI_KEY' } }),
      TEST_OPENAI_KEY: 'sk-test-openai',
      BERTH_EMBEDDINGS: JSON.stringify({ baseUrl: embeddings.baseUrl, model: 'fake-embed-1', apiKeyEnv: 'TEST_EMBEDDINGS_KEY' }),
      TEST_EMBEDDINGS_KEY: 'sk-embed',
    },
  });
  live = berth.api(berth.liveKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
  await db.end();
  await Promise.all([openai.close(), embeddings.close()]);
});

describe('knowledge with embeddings', () => {
  let collectionId: string;

  beforeAll(async () => {
    collectionId = (await live.post('/v1/knowledge/collections', { name: 'policies' })).body.id;
    for (const [name, text] of [
      ['Shipping', 'Orders leave the warehouse within two working days.'],
      ['Returns', 'A customer who sends an item back is refunded within 14 days.'],
      ['Warranty', 'Electronics carry a two-year warranty covering manufacturing defects.'],
    ]) {
      const added = await live.post(`/v1/knowledge/collections/${collectionId}/sources`, { type: 'text', name, text });
      expect(added.body.state, JSON.stringify(added.body)).toBe('synced');
    }
  });

  it('embeds every chunk with the configured model and key', async () => {
    const { rows } = await db.query('SELECT embedding_model, array_length(embedding, 1) AS dimensions FROM knowledge_chunks WHERE collection_id = $1', [collectionId]);
    expect(rows).toEqual(Array.from({ length: 3 }, () => ({ embedding_model: 'fake-embed-1', dimensions: 32 })));
    expect(embeddings.requests.every((request) => request.model === 'fake-embed-1' && request.authorization === 'Bearer sk-embed')).toBe(true);
  });

  it('finds a passage by meaning when no word matches', async () => {
    // No chunk holds "reimbursement": full-text search alone finds nothing for it.
    const { rows } = await db.query("SELECT count(*)::int AS n FROM knowledge_chunks WHERE search @@ plainto_tsquery('english', 'reimbursement')");
    expect(rows[0].n).toBe(0);
    const session = (await live.post('/v1/sessions', { userId: 'embeddings-user' })).body;
    const agent = (await live.post(`/v1/sessions/${session.id}/agents`, { model: 'openai/gpt-4o-mini', knowledge: 'policies' })).body;
    await eventually(async () => ((await live.get(`/v1/agents/${agent.id}`)).body.status === 'idle' ? true : undefined), { what: 'agent idle' });
    const started = await live.post(`/v1/agents/${agent.id}/run`, { task: 'reimbursement' });
    const task = await taskFinished(live, started.body.taskId);
    expect(task.output).toBe('Found: [1] Returns (passage 1)\nA customer who sends an item back is refunded within 14 days.');
    expect(embeddings.requests.some((request) => request.input.length === 1 && request.input[0] === 'reimbursement')).toBe(true);
  });

  it('fails the sync of a source the embeddings endpoint refuses, with knowledge.sync_failed', async () => {
    const added = await live.post(`/v1/knowledge/collections/${collectionId}/sources`, { type: 'text', name: 'Bad', text: 'POISON pill' });
    expect(added.body).toMatchObject({ state: 'failed', chunkCount: 0, error: expect.stringContaining('embedding failed: the embeddings endpoint answered 500') });
    const { rows } = await db.query("SELECT data FROM events WHERE type = 'knowledge.sync_failed'");
    expect(rows.map((row) => row.data.error.code)).toEqual(['embedding_failed']);
    expect(rows[0].data.sourceId).toBe(added.body.id);
  });
});

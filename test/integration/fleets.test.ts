import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, type ApiClient, type ApiResponse } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse, runEvents } from '../helpers/sse.js';

/**
 * Fleets over HTTP against a real `berth up` (live key: gVisor sandboxes, the fake OpenAI server
 * as the model). What the tests check is seen from outside Berth: the fake model server counts the
 * calls in flight at once and the calls made for each item (each item's task names it).
 */
let model: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let liveKey: string;
let db: pg.Pool;
let databaseUrl: string;
let sessionId: string;
const dataDir = tempDir('berth-fleets-');

/** Model calls per item key (`<fleet tag>-<n>`), calls in flight per fleet tag, and the most at once. */
const calls = new Map<string, number>();
const inFlight = new Map<string, Set<string>>();
const mostInFlight = new Map<string, number>();
/** How long the model takes to answer, by fleet tag. */
const delays: Record<string, number> = { wide: 400, cap: 300, kill: 1_500 };
/** Tokens each answer reports, by fleet tag: `cap` costs 20 cents a call at the prices below. */
const usage: Record<string, { input: number; output: number }> = { cap: { input: 20_000, output: 0 } };

const script = async (body: any): Promise<FakeTurn> => {
  const task = String(body.messages.filter((message: any) => message.role === 'user').at(-1)?.content ?? '');
  const key = /\b([a-z]+)-(\d+)\b/.exec(task)?.[0] ?? task;
  const tag = key.split('-')[0]!;
  calls.set(key, (calls.get(key) ?? 0) + 1);
  const open = inFlight.get(tag) ?? new Set<string>();
  inFlight.set(tag, open);
  open.add(key);
  mostInFlight.set(tag, Math.max(mostInFlight.get(tag) ?? 0, open.size));
  try {
    await sleep(delays[tag] ?? 100);
  } finally {
    open.delete(key);
  }
  return { text: `done ${key}`, usage: usage[tag] ?? { input: 10, output: 5 } };
};

const env = () => ({
  DATABASE_URL: databaseUrl,
  BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
  BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '10.00', output: '10.00' } }),
  BERTH_RUNNER_LEASE: '3s',
});

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ dataDir, env: env() });
  liveKey = berth.liveKey!;
  live = berth.api(liveKey);
  const definition = await live.post('/v1/agent-definitions', { name: 'summariser', model: 'openai/gpt-4o-mini', systemPrompt: 'Summarise the item.', timeout: '10m' });
  expect(definition.status).toBe(201);
  sessionId = (await live.post('/v1/sessions', { userId: 'fleet-owner' })).body.id;
});
afterAll(async () => {
  await berth?.stop();
  removeDataDir(dataDir);
  await db?.end();
  await model?.close();
});

function expectRefused(response: ApiResponse, status: number, code: string, field?: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error).toMatchObject({ code, requestId: expect.stringMatching(/^req_/) });
  if (field) expect(Object.keys(response.body.error.details.fields)).toContain(field);
}

function fleetEnded(id: string, client = live, timeoutMs = 180_000): Promise<any> {
  return eventually(
    async () => {
      const fleet = (await client.get(`/v1/fleets/${id}`)).body;
      return fleet.status !== 'running' && fleet.running === 0 ? fleet : undefined;
    },
    { timeoutMs, intervalMs: 250, what: `fleet ${id} to end` },
  );
}

async function allItems(id: string): Promise<any[]> {
  const items: any[] = [];
  let cursor: string | undefined;
  do {
    const page = (await live.get(`/v1/fleets/${id}/items?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)).body;
    items.push(...page.data);
    cursor = page.hasMore ? page.cursor : undefined;
  } while (cursor);
  return items;
}

const fleetRows = async (id: string) => Number((await db.query('SELECT count(*) FROM fleet_items WHERE fleet_id = $1', [id])).rows[0].count);

describe('bad input', () => {
  it('is refused with 422 naming the field, and writes nothing', async () => {
    const good = { agent: 'summariser', sessionId, items: ['one'] };
    const before = Number((await db.query('SELECT count(*) FROM fleets')).rows[0].count);
    expectRefused(await live.post('/v1/fleets', { ...good, items: [] }), 422, 'unprocessable_entity', 'items');
    expectRefused(await live.post('/v1/fleets', { ...good, items: [1] }), 422, 'unprocessable_entity', 'items.0');
    expectRefused(await live.post('/v1/fleets', { ...good, items: Array.from({ length: 1001 }, (_, i) => `x${i}`) }), 422, 'unprocessable_entity', 'items');
    expectRefused(await live.post('/v1/fleets', { ...good, agent: undefined }), 422, 'unprocessable_entity', 'agent');
    expectRefused(await live.post('/v1/fleets', { ...good, agent: 'no-such-definition' }), 422, 'unprocessable_entity', 'agent');
    expectRefused(await live.post('/v1/fleets', { ...good, sessionId: 'ses_01jq3v9k2m8x7c4d5e6f7g8h9j' }), 422, 'unprocessable_entity', 'sessionId');
    expectRefused(await live.post('/v1/fleets', { ...good, concurrency: 0 }), 422, 'unprocessable_entity', 'concurrency');
    expectRefused(await live.post('/v1/fleets', { ...good, costCap: { amount: 1.5, currency: 'usd' } }), 422, 'unprocessable_entity', 'costCap.amount');
    expectRefused(await live.post('/v1/fleets', { ...good, costCap: { amount: 100, currency: 'eur' } }), 422, 'unprocessable_entity', 'costCap.currency');
    expectRefused(await live.post('/v1/fleets', { ...good, prompt: 'no placeholder' }), 422, 'unprocessable_entity', 'prompt');
    expectRefused(await live.post('/v1/fleets', { ...good, surprise: true }), 422, 'unprocessable_entity');
    expect(Number((await db.query('SELECT count(*) FROM fleets')).rows[0].count)).toBe(before);

    const missing = 'flt_01jq3vf1j3m5p7r9t1v3x5z7b9';
    expectRefused(await live.get(`/v1/fleets/${missing}`), 404, 'not_found');
    expectRefused(await live.get(`/v1/fleets/${missing}/items`), 404, 'not_found');
    expectRefused(await live.post(`/v1/fleets/${missing}/cancel`, {}), 404, 'not_found');
    expectRefused(await live.get(`/v1/fleets/${missing}/stream`), 404, 'not_found');
    // Another mode's fleet is not the caller's.
    const created = await live.post('/v1/fleets', { ...good, items: ['bad-0'] });
    expect(created.status).toBe(201);
    expectRefused(await berth.api(berth.testKey).get(`/v1/fleets/${created.body.id}`), 404, 'not_found');
    expectRefused(await live.get(`/v1/fleets/${created.body.id}/items?cursor=forged`), 422, 'unprocessable_entity', 'cursor');
    await fleetEnded(created.body.id);
  });
});

describe('a fleet of 50 items at concurrency 5', () => {
  it('never has more than 5 running, runs each item once and keeps every result', async () => {
    const items = Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? `wide-${i}` : { name: `wide-${i}`, words: i }));
    const created = await live.post('/v1/fleets', { agent: 'summariser', sessionId, items, concurrency: 5, name: 'wide', prompt: 'Summarise {{item.name}}{{item}}' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ id: expect.stringMatching(/^flt_/), status: 'running', total: 50, concurrency: 5, sessionId, name: 'wide', cancelRequested: false });
    const id = created.body.id as string;
    const stream = await openSse(`${berth.baseUrl}/v1/fleets/${id}/stream`, liveKey);

    // Sampled from outside too: the session's agents that are not ended.
    let mostAgents = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const agents = (await live.get(`/v1/sessions/${sessionId}/agents?limit=100`)).body.data ?? [];
        mostAgents = Math.max(mostAgents, agents.filter((agent: any) => agent.status === 'running').length);
        await sleep(100);
      }
    })();
    const fleet = await fleetEnded(id);
    sampling = false;
    await sampler;

    expect(fleet).toMatchObject({ status: 'completed', reason: null, completed: 50, failed: 0, cancelled: 0, running: 0, pending: 0 });
    expect(mostInFlight.get('wide')).toBeLessThanOrEqual(5);
    expect(mostInFlight.get('wide')).toBeGreaterThanOrEqual(2);
    expect(mostAgents).toBeLessThanOrEqual(5);
    for (let i = 0; i < 50; i++) expect(calls.get(`wide-${i}`), `model calls for item ${i}`).toBe(1);

    const results = await allItems(id);
    expect(results.map((item) => item.index)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(results[0]).toMatchObject({ id: expect.stringMatching(/^itm_/), input: 'wide-0', status: 'completed', output: 'done wide-0', error: null, jobId: expect.stringMatching(/^job_/) });
    expect(results[1]).toMatchObject({ input: { name: 'wide-1', words: 1 }, status: 'completed', output: 'done wide-1' });
    // The prompt put the item in: the object's field, and a string item as itself.
    const job = (await live.get(`/v1/jobs/${results[1].jobId}`)).body;
    expect(job).toMatchObject({ source: { type: 'fleet', id }, sessionId, input: 'Summarise wide-1{"name":"wide-1","words":1}' });

    const events = await stream.waitFor((seen) => seen.some((event) => event.event === 'fleet.completed'));
    stream.close();
    const names = runEvents(events).map((event) => event.event);
    expect(names[0]).toBe('fleet.started');
    expect(names.filter((name) => name === 'item.completed')).toHaveLength(50);
    expect(names.at(-1)).toBe('fleet.completed');
    expect(runEvents(events)[0]!.data).toEqual({ fleetId: id, total: 50, concurrency: 5 });
    const totalCost = runEvents(events).at(-1)!.data.totalCost;
    expect(totalCost).toEqual(fleet.cost);

    // Replay after an event id: only what followed it.
    const third = runEvents(events)[3]!;
    const replay = await openSse(`${berth.baseUrl}/v1/fleets/${id}/stream`, liveKey, { 'Last-Event-ID': third.id! });
    const replayed = await replay.waitFor((seen) => seen.some((event) => event.event === 'fleet.completed'));
    replay.close();
    expect(runEvents(replayed).map((event) => event.id)).toEqual(runEvents(events).slice(4).map((event) => event.id));

    const { rows } = await db.query("SELECT type, count(*)::int AS n FROM events WHERE subject_id = $1 GROUP BY type ORDER BY type", [id]);
    expect(rows).toEqual([
      { type: 'fleet.completed', n: 1 },
      { type: 'fleet.item_completed', n: 50 },
      { type: 'fleet.started', n: 1 },
    ]);
    const listed = (await live.get('/v1/fleets?limit=100')).body;
    expect(listed.data.map((one: any) => one.id)).toContain(id);
  });
});

describe('a fleet that reaches its cost cap', () => {
  it('stops starting items, cancels the rest and says so in an event and on its stream', async () => {
    const items = Array.from({ length: 12 }, (_, i) => `cap-${i}`);
    const created = await live.post('/v1/fleets', { agent: 'summariser', sessionId, items, concurrency: 2, costCap: { amount: 50, currency: 'usd' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const stream = await openSse(`${berth.baseUrl}/v1/fleets/${id}/stream`, liveKey);
    const fleet = await fleetEnded(id);

    expect(fleet).toMatchObject({ status: 'paused', reason: 'cost_limit' });
    // Each call costs 20 cents, charged when the call ends: the cap of 50 is reached by the third
    // call, whether its item's run had ended or was still open (then it is cancelled).
    expect(fleet.completed).toBeGreaterThanOrEqual(1);
    expect(fleet.completed + fleet.failed).toBeLessThan(12);
    expect(fleet.cancelled).toBeGreaterThan(0);
    expect(fleet.completed + fleet.failed + fleet.cancelled).toBe(12);
    expect(fleet.cost.amount).toBeGreaterThanOrEqual(50);
    const started = [...calls.keys()].filter((key) => key.startsWith('cap-')).length;
    // Items start only while the spend seen is under the cap: three calls reach it, and at most
    // `concurrency` more can be under way when the third one's charge is written.
    expect(started).toBeLessThanOrEqual(5);
    const results = await allItems(id);
    expect(results.filter((item) => item.status === 'cancelled')).toHaveLength(fleet.cancelled);
    expect(results.filter((item) => item.status === 'cancelled' && item.jobId === null).length).toBeGreaterThan(0);

    const events = await stream.waitFor((seen) => seen.some((event) => event.event === 'fleet.paused'));
    stream.close();
    const paused = events.find((event) => event.event === 'fleet.paused')!;
    expect(paused.data).toMatchObject({ reason: 'cost_limit' });
    expect(events.some((event) => event.event === 'fleet.completed')).toBe(false);
    const { rows } = await db.query("SELECT data FROM events WHERE subject_id = $1 AND type = 'fleet.cost_limited'", [id]);
    expect(rows).toHaveLength(1);
    expect(rows[0].data).toMatchObject({ fleetId: id, costCap: { amount: 50, currency: 'usd' }, cancelled: expect.any(Number), processed: expect.any(Number) });
    expect(rows[0].data.cancelled).toBeGreaterThan(0);
    // Cancelling a fleet that ended otherwise is a conflict.
    expectRefused(await live.post(`/v1/fleets/${id}/cancel`, {}), 409, 'conflict');
  });
});

describe("the session's limits", () => {
  it('apply to the items: one the limits refuse stops the fleet like the cost cap', async () => {
    const limited = (await live.post('/v1/sessions', { userId: 'fleet-limited', limits: { maxAgents: 1 } })).body;
    const items = Array.from({ length: 6 }, (_, i) => `limit-${i}`);
    const created = await live.post('/v1/fleets', { agent: 'summariser', sessionId: limited.id, items, concurrency: 3 });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const id = created.body.id as string;
    const fleet = await fleetEnded(id);
    expect(fleet).toMatchObject({ status: 'paused', reason: 'session_limit' });
    expect(fleet.completed + fleet.failed + fleet.cancelled).toBe(6);
    expect(fleet.failed).toBeGreaterThanOrEqual(1);
    expect(fleet.cancelled).toBeGreaterThanOrEqual(1);
    const refused = (await allItems(id)).find((item) => item.status === 'failed');
    expect(refused.error.code).toBe('session_limit_exceeded');
    const stream = await openSse(`${berth.baseUrl}/v1/fleets/${id}/stream`, liveKey);
    const events = await stream.waitFor((seen) => seen.some((event) => event.event === 'fleet.paused'));
    stream.close();
    expect(events.find((event) => event.event === 'fleet.paused')!.data).toMatchObject({ reason: 'session_limit' });
  });
});

describe('cancel', () => {
  it('cancels the items not ended; the fleet ends cancelled', async () => {
    const items = Array.from({ length: 10 }, (_, i) => `stop-${i}`);
    const created = await live.post('/v1/fleets', { agent: 'summariser', sessionId, items, concurrency: 1 });
    const id = created.body.id as string;
    await eventually(async () => ((calls.get('stop-0') ?? 0) > 0 ? true : undefined), { what: 'the first item to reach the model' });
    const cancelled = await live.post(`/v1/fleets/${id}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.cancelRequested).toBe(true);
    const fleet = await fleetEnded(id);
    expect(fleet).toMatchObject({ status: 'cancelled', reason: 'cancelled' });
    expect(fleet.cancelled).toBeGreaterThanOrEqual(8);
    expect((await live.post(`/v1/fleets/${id}/cancel`, {})).status).toBe(200);
    // A stream opened after the end replays the fleet and ends.
    const stream = await openSse(`${berth.baseUrl}/v1/fleets/${id}/stream`, liveKey);
    const events = await stream.waitFor((seen) => seen.some((event) => event.event === 'fleet.cancelled'));
    stream.close();
    expect(events[0]!.event).toBe('fleet.started');
  });
});

describe('the process killed mid-fleet', () => {
  // Its own waits (four items done, a restart, the fleet's end) add up to more than the tier's default timeout.
  it('is replaced by a new one that finishes the fleet with no item run twice', async () => {
    const items = Array.from({ length: 20 }, (_, i) => `kill-${i}`);
    const created = await live.post('/v1/fleets', { agent: 'summariser', sessionId, items, concurrency: 4 });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    await eventually(async () => ((await live.get(`/v1/fleets/${id}`)).body.completed >= 4 ? true : undefined), { timeoutMs: 120_000, what: 'four items done' });
    expect(await berth.stop('SIGKILL')).toBe(null);
    // The run that takes over repeats a step the dead process had not committed: a model call in
    // flight at the kill, or one answered whose step was not written yet. Those items may be asked
    // once more; an item whose step was committed, or that was not asked yet, is asked once.
    const askedAtKill = new Set([...calls.keys()].filter((key) => key.startsWith('kill-')));
    const { rows: committed } = await db.query(
      `SELECT i.index FROM fleet_items i JOIN jobs j ON j.id = i.job_id JOIN tasks t ON t.id = j.task_id
       WHERE i.fleet_id = $1 AND (t.steps > 0 OR t.state = 'completed')`,
      [id],
    );
    const committedAtKill = new Set(committed.map((row) => `kill-${row.index}`));

    berth = await startBerth({ dataDir, env: env() });
    live = berth.api(liveKey);
    const fleet = await fleetEnded(id, live, 240_000);
    expect(fleet).toMatchObject({ status: 'completed', completed: 20, failed: 0, cancelled: 0 });
    expect(mostInFlight.get('kill')).toBeLessThanOrEqual(4);
    for (let i = 0; i < 20; i++) {
      const key = `kill-${i}`;
      if (askedAtKill.has(key) && !committedAtKill.has(key)) expect(calls.get(key), key).toBeLessThanOrEqual(2);
      else expect(calls.get(key), key).toBe(1);
    }
    // One job, one agent and one run per item.
    const { rows } = await db.query(
      `SELECT i.index, count(DISTINCT j.id)::int AS jobs, count(DISTINCT t.id)::int AS runs, count(DISTINCT t.agent_id)::int AS agents
       FROM fleet_items i JOIN jobs j ON j.source_id = i.fleet_id AND j.id = i.job_id LEFT JOIN tasks t ON t.id = j.task_id
       WHERE i.fleet_id = $1 GROUP BY i.index ORDER BY i.index`,
      [id],
    );
    expect(rows).toEqual(Array.from({ length: 20 }, (_, index) => ({ index, jobs: 1, runs: 1, agents: 1 })));
    expect(Number((await db.query("SELECT count(*) FROM jobs WHERE source = 'fleet' AND source_id = $1", [id])).rows[0].count)).toBe(20);
    expect(await fleetRows(id)).toBe(20);
    const { rows: ends } = await db.query("SELECT count(*)::int AS n FROM events WHERE subject_id = $1 AND type = 'fleet.item_completed'", [id]);
    expect(ends[0].n).toBe(20);
  }, 420_000);
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import type { ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

let berth: BerthProcess;
let live: ApiClient;
let test: ApiClient;

beforeAll(async () => {
  berth = await startBerth({ env: { DATABASE_URL: await createTestDatabase() } });
  live = berth.api(berth.liveKey);
  test = berth.api(berth.testKey);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(berth.dataDir);
});

function expectError(response: { status: number; body: any }, status: number, code: string) {
  expect(response.status).toBe(status);
  expect(response.body.error).toMatchObject({ code, message: expect.any(String), details: expect.any(Object) });
  expect(response.body.error.requestId).toMatch(/^req_[0-9a-z]{26}$/);
}

describe('POST /v1/sessions', () => {
  it('creates a session with defaults', async () => {
    const response = await live.post('/v1/sessions', { userId: 'user-1' });
    expect(response.status).toBe(201);
    expect(response.body).toEqual({
      id: expect.stringMatching(/^ses_[0-9a-z]{26}$/),
      userId: 'user-1',
      environment: 'production',
      limits: {},
      metadata: {},
      createdAt: expect.any(String),
    });
    expect(Date.parse(response.body.createdAt)).not.toBeNaN();
  });

  it('keeps environment, limits and metadata', async () => {
    const body = {
      userId: 'user-2',
      environment: 'staging',
      limits: { maxCost: { amount: 500, currency: 'usd', period: 'day' }, maxAgents: 3, maxComputeMinutes: 60, maxDuration: '8h' },
      metadata: { plan: 'pro', team: 'core' },
    };
    const created = await live.post('/v1/sessions', body);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject(body);
    const fetched = await live.get(`/v1/sessions/${created.body.id}`);
    expect(fetched.status).toBe(200);
    expect(fetched.body).toEqual(created.body);
  });

  it.each([
    ['no userId', {}, 'userId'],
    ['empty userId', { userId: '' }, 'userId'],
    ['userId not a string', { userId: 42 }, 'userId'],
    ['unknown environment', { userId: 'u', environment: 'qa' }, 'environment'],
    ['unknown field', { userId: 'u', colour: 'blue' }, 'body'],
    ['fractional maxCost', { userId: 'u', limits: { maxCost: { amount: 1.5, currency: 'usd', period: 'day' } } }, 'limits.maxCost.amount'],
    ['upper-case currency', { userId: 'u', limits: { maxCost: { amount: 100, currency: 'USD', period: 'day' } } }, 'limits.maxCost.currency'],
    ['unknown cost period', { userId: 'u', limits: { maxCost: { amount: 100, currency: 'usd', period: 'year' } } }, 'limits.maxCost.period'],
    ['zero maxAgents', { userId: 'u', limits: { maxAgents: 0 } }, 'limits.maxAgents'],
    ['bad maxDuration', { userId: 'u', limits: { maxDuration: 'forever' } }, 'limits.maxDuration'],
    ['unknown limit', { userId: 'u', limits: { maxTokens: 5 } }, 'limits'],
    ['metadata value not a string', { userId: 'u', metadata: { n: 1 } }, 'metadata.n'],
  ])('rejects %s with 422 and the field', async (_name, body, field) => {
    const response = await live.post('/v1/sessions', body);
    expectError(response, 422, 'unprocessable_entity');
    expect(Object.keys(response.body.error.details.fields)).toContain(field);
  });

  it('writes nothing when the body is invalid', async () => {
    const before = await live.get('/v1/sessions?limit=100');
    await live.post('/v1/sessions', { userId: 'never', environment: 'nope' });
    const after = await live.get('/v1/sessions?limit=100');
    expect(after.body.data.map((s: any) => s.id)).toEqual(before.body.data.map((s: any) => s.id));
  });
});

describe('POST /v1/sessions/by-user/:userId', () => {
  it('creates once (201), then returns the same session unchanged (200)', async () => {
    const first = await live.post('/v1/sessions/by-user/carol', { metadata: { tier: 'gold' }, limits: { maxAgents: 2 } });
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({ userId: 'carol', metadata: { tier: 'gold' }, limits: { maxAgents: 2 } });
    const second = await live.post('/v1/sessions/by-user/carol', { metadata: { tier: 'silver' } });
    expect(second.status).toBe(200);
    expect(second.body).toEqual(first.body);
    const bare = await live.raw('/v1/sessions/by-user/carol', { method: 'POST' });
    expect(bare.status).toBe(200);
    expect(bare.body.id).toBe(first.body.id);
  });

  it('returns the session POST /v1/sessions created for that user', async () => {
    const created = await live.post('/v1/sessions', { userId: 'dave' });
    const found = await live.post('/v1/sessions/by-user/dave', {});
    expect(found.status).toBe(200);
    expect(found.body.id).toBe(created.body.id);
  });

  it('gives 25 concurrent callers one session', async () => {
    const responses = await Promise.all(Array.from({ length: 25 }, () => live.post('/v1/sessions/by-user/erin', {})));
    const ids = new Set(responses.map((response) => response.body.id));
    expect(ids.size).toBe(1);
    expect(responses.filter((response) => response.status === 201)).toHaveLength(1);
    expect(responses.filter((response) => response.status === 200)).toHaveLength(24);
    const all = await live.get('/v1/sessions?limit=100');
    expect(all.body.data.filter((session: any) => session.userId === 'erin')).toHaveLength(1);
  });

  it('decodes the user id from the path', async () => {
    const response = await live.post(`/v1/sessions/by-user/${encodeURIComponent('user@example.com/a b')}`, {});
    expect(response.status).toBe(201);
    expect(response.body.userId).toBe('user@example.com/a b');
  });

  it('rejects fields other than limits and metadata', async () => {
    expectError(await live.post('/v1/sessions/by-user/frank', { userId: 'x' }), 422, 'unprocessable_entity');
  });
});

describe('GET /v1/sessions', () => {
  it('pages through every session once, newest first, with a stable order', async () => {
    const own = await berth.api(berth.testKey);
    const created: string[] = [];
    for (let i = 0; i < 23; i++) created.push((await own.post('/v1/sessions', { userId: `pager-${i}` })).body.id);
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const response = await own.get(`/v1/sessions?limit=10${cursor ? `&cursor=${cursor}` : ''}`);
      expect(response.status).toBe(200);
      pages++;
      seen.push(...response.body.data.map((session: any) => session.id));
      if (response.body.hasMore) {
        expect(response.body.cursor).toEqual(expect.any(String));
        expect(response.body.data).toHaveLength(10);
      } else {
        expect(response.body).not.toHaveProperty('cursor');
      }
      cursor = response.body.cursor;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...created].reverse());
  });

  it('defaults to 20 a page', async () => {
    const response = await test.get('/v1/sessions');
    expect(response.body.data).toHaveLength(20);
    expect(response.body.hasMore).toBe(true);
  });

  it.each([['limit=0'], ['limit=101'], ['limit=abc'], ['limit=1.5'], ['cursor=garbage'], ['page=2']])('rejects %s with 422', async (query) => {
    expectError(await live.get(`/v1/sessions?${query}`), 422, 'unprocessable_entity');
  });
});

describe('GET /v1/sessions/:id', () => {
  it('is 404 not_found for an unknown or malformed id', async () => {
    expectError(await live.get('/v1/sessions/ses_01m80gqv9d4kjqfcmvs2q4jxem'), 404, 'not_found');
    expectError(await live.get('/v1/sessions/not-an-id'), 404, 'not_found');
  });

  it('keeps live and test data apart', async () => {
    const liveSession = await live.post('/v1/sessions', { userId: 'isolated' });
    expectError(await test.get(`/v1/sessions/${liveSession.body.id}`), 404, 'not_found');
    const testList = await test.get('/v1/sessions?limit=100');
    expect(testList.body.data.map((session: any) => session.id)).not.toContain(liveSession.body.id);
    const testOwn = await test.post('/v1/sessions/by-user/isolated', {});
    expect(testOwn.status).toBe(201);
    expect(testOwn.body.id).not.toBe(liveSession.body.id);
  });
});

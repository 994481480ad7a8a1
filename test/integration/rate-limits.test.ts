import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, createApiKey, createOrganization, createPool, revokeApiKey, setOrganizationPlan, type Plan, type Pool } from '../../common/src/index.js';
import { MockProvider } from '../../providers/src/mock.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { startBerth, type BerthProcess } from '../helpers/berth.js';
import { apiClient, type ApiClient, type ApiResponse } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * The data plane's rate limit per API key: in process on a moved clock (exact windows and
 * Retry-After), then across two real `berth up` processes sharing one database.
 */

function expectRateLimited(response: ApiResponse, retryAfter: number) {
  expect(response.status).toBe(429);
  expect(response.body.error).toMatchObject({ code: 'rate_limited', details: { retryAfter, limit: 60, plan: 'free', windowSeconds: 60 } });
  expect(response.headers.get('retry-after')).toBe(String(retryAfter));
  expect(response.headers.get('ratelimit-remaining')).toBe('0');
}

describe('in process, on a moved clock', () => {
  // A whole second: every request of a burst falls in the same second of the window.
  const clock = new ManualClock('2026-05-01T09:00:00.000Z');
  let api: TestApi;
  let organizationId: string;

  beforeAll(async () => {
    api = await startTestApi({
      clock,
      providers: new ProviderRegistry([new MockProvider({ computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' })], 'mock'),
      app: { plans: { defaultPlan: 'free', enterpriseRateLimit: 500 } },
    });
    organizationId = (await createOrganization(api.pool, 'limited')).id;
  });
  afterAll(async () => {
    await api.close();
  });

  const burst = async (client: ApiClient, count: number) => {
    const responses: ApiResponse[] = [];
    for (let i = 0; i < count; i++) responses.push(await client.get('/v1/sessions'));
    return responses;
  };

  it('admits 60 requests a minute on the free plan, with the headers on each, and refuses the 61st until the first leaves the window', async () => {
    const { api: client } = await api.client(organizationId, 'live');
    const admitted = await burst(client, 60);
    expect(admitted.map((response) => response.status)).toEqual(Array(60).fill(200));
    expect(admitted.map((response) => Number(response.headers.get('ratelimit-remaining')))).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));
    for (const response of admitted) {
      expect(response.headers.get('ratelimit-limit')).toBe('60');
      expect(response.headers.get('ratelimit-reset')).toBe('60');
      expect(response.headers.get('ratelimit-policy')).toBe('60;w=60');
    }

    expectRateLimited(await client.get('/v1/sessions'), 60);
    // A refused request is not counted, and any route of the key is refused (a 404 route too).
    clock.advance(20_000);
    expectRateLimited(await client.get('/v1/sessions/ses_00000000000000000000000000'), 40);
    clock.advance(39_999);
    expectRateLimited(await client.get('/v1/sessions'), 1);

    // The whole burst leaves the window at once: 60 more are admitted, then the 61st is refused again.
    clock.advance(1);
    const again = await burst(client, 60);
    expect(again.map((response) => response.status)).toEqual(Array(60).fill(200));
    expectRateLimited(await client.get('/v1/sessions'), 60);
  });

  it('slides: requests spread over the minute leave the window one second at a time', async () => {
    clock.set('2026-05-01T10:00:00.000Z');
    const { api: client } = await api.client(organizationId, 'live');
    // 30 at 10:00:00, 30 at 10:00:30.
    expect((await burst(client, 30)).every((response) => response.status === 200)).toBe(true);
    clock.advance(30_000);
    expect((await burst(client, 30)).every((response) => response.status === 200)).toBe(true);
    clock.advance(500);
    expectRateLimited(await client.get('/v1/sessions'), 30);
    // At 10:01:00 the first 30 leave: 30 more fit, and the next waits for those of 10:00:30.
    clock.set('2026-05-01T10:01:00.000Z');
    const next = await burst(client, 30);
    expect(next.every((response) => response.status === 200)).toBe(true);
    expect(next.at(-1)!.headers.get('ratelimit-reset')).toBe('30');
    expectRateLimited(await client.get('/v1/sessions'), 30);
  });

  it('keeps one window per key: another key of the organization has its own 60', async () => {
    clock.set('2026-05-01T11:00:00.000Z');
    const first = (await api.client(organizationId, 'live')).api;
    const second = (await api.client(organizationId, 'test')).api;
    await burst(first, 60);
    expectRateLimited(await first.get('/v1/sessions'), 60);
    const other = await second.get('/v1/sessions');
    expect(other.status).toBe(200);
    expect(other.headers.get('ratelimit-remaining')).toBe('59');
  });

  it.each<[Plan | null, number]>([
    [null, 60],
    ['free', 60],
    ['pro', 300],
    ['enterprise', 500],
  ])('limits plan %s to %i requests a minute', async (plan, limit) => {
    clock.set('2026-05-01T12:00:00.000Z');
    const organization = await createOrganization(api.pool, `plan-${plan}`);
    if (plan) await setOrganizationPlan(api.pool, organization.id, plan);
    const { api: client } = await api.client(organization.id, 'live');
    const responses = await burst(client, limit);
    expect(responses.filter((response) => response.status === 200)).toHaveLength(limit);
    expect(responses[0]!.headers.get('ratelimit-limit')).toBe(String(limit));
    const refused = await client.get('/v1/sessions');
    expect(refused.status).toBe(429);
    expect(refused.body.error.details).toMatchObject({ plan: plan ?? 'free', limit, retryAfter: 60 });
  });

  it('counts a plan change at the next request', async () => {
    clock.set('2026-05-01T13:00:00.000Z');
    const organization = await createOrganization(api.pool, 'upgraded');
    const { api: client } = await api.client(organization.id, 'live');
    await burst(client, 60);
    expect((await client.get('/v1/sessions')).status).toBe(429);
    await setOrganizationPlan(api.pool, organization.id, 'pro');
    const upgraded = await client.get('/v1/sessions');
    expect(upgraded.status).toBe(200);
    expect(upgraded.headers.get('ratelimit-remaining')).toBe(String(300 - 61));
  });

  it('answers a request without a valid key before any limit, and without the headers', async () => {
    const response = await apiClient(api.baseUrl, 'svc_live_0000000000000000000000000000000000000000').get('/v1/sessions');
    expect(response.status).toBe(401);
    expect(response.headers.get('ratelimit-limit')).toBeNull();
  });

  it('counts the request of a key found in the same statement, and not that of a revoked key', async () => {
    clock.set('2026-05-01T14:00:00.000Z');
    const { api: client, keyId } = await api.client(organizationId, 'live');
    const window = async () => (await api.pool.query<{ counts: number[] }>('SELECT counts FROM rate_limit_windows WHERE key_id = $1', [keyId])).rows[0]?.counts;
    expect((await client.get('/v1/sessions')).headers.get('ratelimit-remaining')).toBe('59');
    expect(await window()).toEqual([1]);
    await revokeApiKey(api.pool, keyId, clock.now());
    const refused = await client.get('/v1/sessions');
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('auth/key_revoked');
    expect(refused.headers.get('ratelimit-limit')).toBeNull();
    expect(await window()).toEqual([1]);
  });

  it('counts limited and admitted requests by plan', async () => {
    const metrics = await (await fetch(`${api.baseUrl}/metrics`)).text();
    const value = (plan: string, result: string) =>
      Number(new RegExp(`^berth_rate_limit_requests_total\\{plan="${plan}",result="${result}"\\} (\\d+)`, 'm').exec(metrics)?.[1]);
    expect(value('free', 'limited')).toBeGreaterThanOrEqual(10);
    expect(value('free', 'admitted')).toBeGreaterThanOrEqual(300);
    expect(value('pro', 'admitted')).toBe(301);
    expect(value('enterprise', 'limited')).toBe(1);
  });
});

describe('two berth processes sharing one database', () => {
  let databaseUrl: string;
  let pool: Pool;
  const processes: BerthProcess[] = [];

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, BERTH_DEFAULT_PLAN: 'free', BERTH_LOG_LEVEL: 'warn' };
    processes.push(await startBerth({ env }));
    processes.push(await startBerth({ env }));
    pool = createPool(databaseUrl);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    for (const berth of processes) {
      expect(await berth.stop()).toBe(0);
      removeDataDir(berth.dataDir);
    }
  });

  it('refuses the 61st request of a minute on the free plan, whichever process each request reached', async () => {
    const organization = await createOrganization(pool, 'free');
    const { key } = await createApiKey(pool, { organizationId: organization.id, mode: 'test' });
    const clients = processes.map((berth) => berth.api(key));
    const firstSentAt = Date.now();
    const remaining: number[] = [];
    for (let i = 0; i < 60; i++) {
      const response = await clients[i % 2]!.get('/v1/sessions');
      expect(response.status).toBe(200);
      remaining.push(Number(response.headers.get('ratelimit-remaining')));
    }
    // One window for both: the count goes down by one at each request, alternating processes.
    expect(remaining).toEqual(Array.from({ length: 60 }, (_, i) => 59 - i));

    for (const client of clients) {
      const sentAt = Date.now();
      const refused = await client.get('/v1/sessions');
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('rate_limited');
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(refused.body.error.details.retryAfter).toBe(retryAfter);
      // The first request's whole second leaves the window 60 s after it began.
      const latest = Math.ceil((Math.floor(firstSentAt / 1000) * 1000 + 60_000 - sentAt) / 1000);
      expect(retryAfter).toBeLessThanOrEqual(Math.max(latest, 1) + 1);
      expect(retryAfter).toBeGreaterThanOrEqual(latest - 1);
      expect(retryAfter).toBeGreaterThan(50);
    }
  });

  it('admits exactly 60 of 80 requests sent at once to both processes', async () => {
    const organization = await createOrganization(pool, 'burst');
    const { key } = await createApiKey(pool, { organizationId: organization.id, mode: 'test' });
    const clients = processes.map((berth) => berth.api(key));
    const statuses = await Promise.all(Array.from({ length: 80 }, (_, i) => clients[i % 2]!.get('/v1/sessions').then((response) => response.status)));
    expect(statuses.filter((status) => status === 200)).toHaveLength(60);
    expect(statuses.filter((status) => status === 429)).toHaveLength(20);
  });

  it('leaves the first organization of the install (enterprise) unthrottled', async () => {
    const live = processes[0]!.api(processes[0]!.liveKey);
    const statuses = new Set<number>();
    for (let i = 0; i < 80; i++) statuses.add((await live.get('/v1/sessions')).status);
    expect([...statuses]).toEqual([200]);
    const response = await processes[1]!.api(processes[0]!.liveKey).get('/v1/sessions');
    expect(response.headers.get('ratelimit-limit')).toBe('60000');
  });
});

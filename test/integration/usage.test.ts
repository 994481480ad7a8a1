import type pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Environment } from '../../crds/src/common.js';
import { ManualClock, createOrganization, type BillingMode } from '../../common/src/index.js';
import { MockProvider } from '../../providers/src/mock.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import type { ApiClient, ApiResponse } from '../helpers/http.js';

/**
 * The usage routes against a real PostgreSQL ledger: charges are written straight into
 * `usage_ledger` at chosen times, the clock is set, and every report is checked whole.
 */

let api: TestApi;
let pool: pg.Pool;
let live: ApiClient;
let test: ApiClient;
let other: ApiClient;
let organizationId: string;
let otherOrganizationId: string;
const clock = new ManualClock('2026-03-10T12:00:00Z');

const usd = (amount: number) => ({ amount, currency: 'usd' });
const CENT = 1_000_000_000n;
const PERIODS_MESSAGE = 'must be one of: today, week, last_7_days, last_30_days, month';

interface Charge {
  organizationId?: string;
  sessionId: string;
  userId: string;
  environment?: Environment;
  kind: 'model' | 'compute' | 'storage';
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
  quantity?: string;
  nanocents: bigint;
  billingMode?: BillingMode;
  at: string;
}

let dedupe = 0;
async function charge(...charges: Charge[]): Promise<void> {
  for (const entry of charges) {
    await pool.query(
      `INSERT INTO usage_ledger (organization_id, session_id, user_id, environment, kind, provider, model,
         input_tokens, output_tokens, quantity, amount_nanocents, currency, billing_mode, occurred_at, dedupe_key)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 'usd', $12, $13, $14)`,
      [
        entry.organizationId ?? organizationId,
        entry.sessionId,
        entry.userId,
        entry.environment ?? 'production',
        entry.kind,
        entry.model?.split('/')[0] ?? 'local',
        entry.model ?? null,
        entry.inputTokens ?? 0,
        entry.outputTokens ?? 0,
        entry.quantity ?? '0',
        entry.nanocents.toString(),
        entry.billingMode ?? 'managed',
        entry.at,
        `usage-test/${dedupe++}`,
      ],
    );
  }
}

async function get(client: ApiClient, path: string): Promise<ApiResponse> {
  const response = await client.get(path);
  expect(response.status, JSON.stringify(response.body)).toBe(200);
  return response;
}

function expect422(response: ApiResponse, fields: Record<string, string[]>): void {
  expect(response.status).toBe(422);
  expect(response.body.error.code).toBe('unprocessable_entity');
  expect(response.body.error.details.fields).toEqual(fields);
}

/** Every day from `first` to `last`, with the given days' values and zeros elsewhere. */
function days<T>(first: string, last: string, known: Record<string, T>, zero: (date: string) => T): T[] {
  const result: T[] = [];
  for (let day = new Date(`${first}T00:00:00Z`); day <= new Date(`${last}T00:00:00Z`); day = new Date(day.getTime() + 86_400_000)) {
    const date = day.toISOString().slice(0, 10);
    result.push(known[date] ?? zero(date));
  }
  return result;
}
const zeroDay = (date: string) => ({ date, cost: usd(0), computeMinutes: 0, modelCalls: 0, tokens: 0 });

beforeAll(async () => {
  const mock = new MockProvider({ computes: ['python'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' });
  api = await startTestApi({ clock, providers: new ProviderRegistry([mock], mock.name) });
  pool = api.pool;
  organizationId = (await createOrganization(pool, 'usage')).id;
  otherOrganizationId = (await createOrganization(pool, 'other')).id;
  live = (await api.client(organizationId, 'live')).api;
  test = (await api.client(organizationId, 'test')).api;
  other = (await api.client(otherOrganizationId, 'live')).api;

  await charge(
    // alice, production: Berth's compute and model, a call on her own model key, and storage.
    { sessionId: 'ses_alice', userId: 'alice', kind: 'compute', quantity: '10.004', nanocents: 20_400_000_000n, at: '2026-03-02T10:00:00Z' },
    { sessionId: 'ses_alice', userId: 'alice', kind: 'model', model: 'openai/gpt-4o-mini', inputTokens: 1000, outputTokens: 200, nanocents: 1_500_000_000n, at: '2026-03-02T10:01:00Z' },
    { sessionId: 'ses_alice', userId: 'alice', kind: 'model', model: 'anthropic/claude-sonnet-4', inputTokens: 5000, outputTokens: 1000, nanocents: 30n * CENT, billingMode: 'byoi_models', at: '2026-03-09T23:59:59.999Z' },
    { sessionId: 'ses_alice', userId: 'alice', kind: 'storage', quantity: '2.5', nanocents: 700_000_000n, at: '2026-03-05T00:00:00Z' },
    // February: outside the month, inside the last 30 days.
    { sessionId: 'ses_alice', userId: 'alice', kind: 'compute', quantity: '3', nanocents: 6n * CENT, at: '2026-02-28T23:59:59Z' },
    // bob, staging: his own compute provider, his own model keys, or both.
    { sessionId: 'ses_bob', userId: 'bob', environment: 'staging', kind: 'compute', quantity: '5.001', nanocents: 10n * CENT, billingMode: 'byoi_compute', at: '2026-03-10T00:00:00Z' },
    { sessionId: 'ses_bob', userId: 'bob', environment: 'staging', kind: 'model', model: 'openai/gpt-4o-mini', inputTokens: 300, outputTokens: 100, nanocents: 1n * CENT, billingMode: 'byoi_both', at: '2026-03-10T01:00:00Z' },
    { sessionId: 'ses_bob', userId: 'bob', environment: 'staging', kind: 'compute', quantity: '1', nanocents: 2n * CENT, billingMode: 'byoi_both', at: '2026-03-10T02:00:00Z' },
    { sessionId: 'ses_bob', userId: 'bob', environment: 'staging', kind: 'model', model: 'anthropic/claude-sonnet-4', inputTokens: 10, outputTokens: 10, nanocents: 4n * CENT, billingMode: 'byoi_compute', at: '2026-03-10T03:00:00Z' },
    // Another organization, with a user of the same name: never visible to the first.
    { organizationId: otherOrganizationId, sessionId: 'ses_other', userId: 'alice', kind: 'compute', quantity: '100', nanocents: 999n * CENT, at: '2026-03-05T00:00:00Z' },
    { organizationId: otherOrganizationId, sessionId: 'ses_other', userId: 'alice', kind: 'model', model: 'openai/gpt-4o-mini', inputTokens: 7, outputTokens: 7, nanocents: 77n * CENT, at: '2026-03-06T00:00:00Z' },
  );
  // carol, development: 1,000 calls of 0.4 cents each, which must sum to exactly 400 cents.
  await pool.query(
    `INSERT INTO usage_ledger (organization_id, session_id, user_id, environment, kind, provider, model,
       input_tokens, output_tokens, amount_nanocents, currency, billing_mode, occurred_at, dedupe_key)
     SELECT $1, 'ses_carol', 'carol', 'development', 'model', 'google', 'google/gemini-2.5-flash', 10, 5, 400000000, 'usd', 'managed',
       timestamptz '2026-03-08T12:00:00Z' + i * interval '1 second', 'carol/' || i
     FROM generate_series(1, 1000) AS i`,
    [organizationId],
  );
  await pool.query(
    `INSERT INTO compute_meter (agent_id, started_at, organization_id, session_id, metered_ms, closed) VALUES
       ('agt_alice', '2026-03-10T11:00:00Z', $1, 'ses_alice', 0, false),
       ('agt_bob', '2026-03-10T11:00:00Z', $1, 'ses_bob', 0, false),
       ('agt_done', '2026-03-09T11:00:00Z', $1, 'ses_alice', 60000, true),
       ('agt_other', '2026-03-10T11:00:00Z', $2, 'ses_other', 0, false)`,
    [organizationId, otherOrganizationId],
  );
  await pool.query(
    `INSERT INTO snapshot_storage (snapshot_id, organization_id, mode, session_id, agent_id, size_bytes, stored_from, deleted_at) VALUES
       ('snap_kept', $1, 'live', 'ses_alice', 'agt_alice', 1500000000, '2026-03-01T00:00:00Z', NULL),
       ('snap_gone', $1, 'live', 'ses_alice', 'agt_alice', 250000000, '2026-03-03T00:00:00Z', '2026-03-06T00:00:00Z'),
       ('snap_test', $1, 'test', 'ses_test', 'agt_test', 1000000000, '2026-03-01T00:00:00Z', NULL),
       ('snap_other', $2, 'live', 'ses_other', 'agt_other', 9000000000, '2026-03-01T00:00:00Z', NULL)`,
    [organizationId, otherOrganizationId],
  );
});

afterAll(async () => {
  await api.close();
});

describe('in March, on 2026-03-10 at noon', () => {
  beforeEach(() => clock.set('2026-03-10T12:00:00Z'));

  describe('GET /v1/usage/summary, range form', () => {
    it('defaults to the current billing period until now', async () => {
      const { body } = await get(live, '/v1/usage/summary');
      expect(body).toEqual({
        period: { from: '2026-03-01T00:00:00.000Z', until: '2026-03-10T12:00:00.000Z' },
        // 10.004 + 5.001 + 1 minutes; 20.4 + 10 + 2 cents.
        compute: { minutes: 16.01, cost: usd(32) },
        // 1.5 + 30 + 1 + 4 + 1,000 × 0.4 = 436.5 cents, rounded half up once.
        models: { inputTokens: 16_310, outputTokens: 6_310, cost: usd(437) },
        // Only the archive still stored now; 0.7 cents of storage charged.
        storage: { gb: 1.5, cost: usd(1) },
        total: usd(470),
      });
    });

    it('reads charges at or after `from` and before `until`, and the archives stored at `until`', async () => {
      const { body } = await get(live, '/v1/usage/summary?from=2026-03-02T10:00:00Z&until=2026-03-05T00:00:00Z');
      expect(body).toEqual({
        period: { from: '2026-03-02T10:00:00.000Z', until: '2026-03-05T00:00:00.000Z' },
        compute: { minutes: 10, cost: usd(20) },
        models: { inputTokens: 1000, outputTokens: 200, cost: usd(2) },
        storage: { gb: 1.75, cost: usd(0) },
        total: usd(22),
      });
    });

    it('takes `from` alone (until now) and `until` alone (from the start of the month)', async () => {
      const from = await get(live, '/v1/usage/summary?from=2026-02-01T00:00:00%2B01:00');
      expect(from.body).toEqual({
        period: { from: '2026-01-31T23:00:00.000Z', until: '2026-03-10T12:00:00.000Z' },
        compute: { minutes: 19.01, cost: usd(38) },
        models: { inputTokens: 16_310, outputTokens: 6_310, cost: usd(437) },
        storage: { gb: 1.5, cost: usd(1) },
        total: usd(476),
      });
      const until = await get(live, '/v1/usage/summary?until=2026-03-05T00:00:00Z');
      expect(until.body.period).toEqual({ from: '2026-03-01T00:00:00.000Z', until: '2026-03-05T00:00:00.000Z' });
      expect(until.body.total).toEqual(usd(22));
    });

    it('refuses a range that does not run forwards, and dates that are not ISO 8601 date-times', async () => {
      const backwards = await live.get('/v1/usage/summary?from=2026-03-05T00:00:00Z&until=2026-03-01T00:00:00Z');
      expect422(backwards, { from: ['from (2026-03-05T00:00:00.000Z) must be before until (2026-03-01T00:00:00.000Z)'] });
      expect422(await live.get('/v1/usage/summary?from=2026-03-05T00:00:00Z&until=2026-03-05T00:00:00Z'), {
        from: ['from (2026-03-05T00:00:00.000Z) must be before until (2026-03-05T00:00:00.000Z)'],
      });
      expect422(await live.get('/v1/usage/summary?from=2026-04-01T00:00:00Z'), {
        from: ['from (2026-04-01T00:00:00.000Z) must be before until (2026-03-10T12:00:00.000Z, now)'],
      });
      expect422(await live.get('/v1/usage/summary?until=2026-02-15T00:00:00Z'), {
        until: ['from (2026-03-01T00:00:00.000Z, the start of the current billing period) must be before until (2026-02-15T00:00:00.000Z)'],
      });
      const iso = ['must be an ISO 8601 date-time with a time zone, such as 2026-03-01T00:00:00Z'];
      for (const bad of ['yesterday', '2026-03-01', '2026-03-01T00:00:00', '2026-02-30T00:00:00Z']) {
        expect422(await live.get(`/v1/usage/summary?from=${bad}`), { from: iso });
      }
      expect422(await live.get('/v1/usage/summary?from=2026-03-01T00:00:00Z&from=2026-03-02T00:00:00Z'), { from: iso });
      expect422(await live.get('/v1/usage/summary?since=2026-03-01T00:00:00Z'), { query: ['unknown field: since'] });
    });

    it('refuses a query that mixes the two forms, naming each parameter involved', async () => {
      const message = 'from (range form) cannot be combined with period (period form)';
      expect422(await live.get('/v1/usage/summary?from=2026-03-01T00:00:00Z&period=week'), { from: [message], period: [message] });
      const both = 'from and until (range form) cannot be combined with period and environment (period form)';
      expect422(
        await live.get('/v1/usage/summary?from=2026-03-01T00:00:00Z&until=2026-03-02T00:00:00Z&period=week&environment=staging'),
        { from: [both], until: [both], period: [both], environment: [both] },
      );
      const untilEnvironment = 'until (range form) cannot be combined with environment (period form)';
      expect422(await live.get('/v1/usage/summary?until=2026-03-02T00:00:00Z&environment=staging'), {
        until: [untilEnvironment],
        environment: [untilEnvironment],
      });
    });
  });

  describe('GET /v1/usage/summary, period form', () => {
    it('splits what Berth billed from what providers billed directly', async () => {
      const { body } = await get(live, '/v1/usage/summary?period=month');
      expect(body).toEqual({
        totalCost: usd(470),
        activeSessions: 3,
        runningAgents: 2,
        topUser: { userId: 'carol', cost: usd(400) },
        environment: 'all',
        berthBilled: {
          compute: usd(20), // alice's managed compute
          model: usd(406), // 1.5 (managed) + 4 (bob's own compute, Berth's model) + 400 (carol)
          storage: usd(1),
          primitives: usd(0),
          total: usd(427),
        },
        providerDirect: {
          compute: usd(12), // bob's own compute: byoi_compute and byoi_both
          model: usd(31), // alice's byoi_models and bob's byoi_both calls
          total: usd(43),
        },
      });
    });

    it('narrows everything to one environment', async () => {
      const { body } = await get(live, '/v1/usage/summary?environment=staging');
      expect(body).toEqual({
        totalCost: usd(17),
        activeSessions: 1,
        runningAgents: 1,
        topUser: { userId: 'bob', cost: usd(17) },
        environment: 'staging',
        berthBilled: { compute: usd(0), model: usd(4), storage: usd(0), primitives: usd(0), total: usd(4) },
        providerDirect: { compute: usd(12), model: usd(1), total: usd(13) },
      });
    });

    it('answers zeros and no top user for a period without charges, still counting running sandboxes', async () => {
      const { body } = await get(live, '/v1/usage/summary?period=today&environment=production');
      expect(body).toEqual({
        totalCost: usd(0),
        activeSessions: 0,
        runningAgents: 1,
        topUser: null,
        environment: 'production',
        berthBilled: { compute: usd(0), model: usd(0), storage: usd(0), primitives: usd(0), total: usd(0) },
        providerDirect: { compute: usd(0), model: usd(0), total: usd(0) },
      });
    });

    it('refuses an unknown period or environment, naming the allowed values', async () => {
      expect422(await live.get('/v1/usage/summary?period=year'), { period: [PERIODS_MESSAGE] });
      expect422(await live.get('/v1/usage/summary?environment=qa'), { environment: ['must be one of: production, staging, development'] });
    });
  });

  describe('GET /v1/usage/daily', () => {
    it('is a bare array of the last 30 days by default, oldest first, with empty days as zeros', async () => {
      const { body } = await get(live, '/v1/usage/daily');
      expect(Array.isArray(body)).toBe(true);
      expect(body).toEqual(
        days(
          '2026-02-09',
          '2026-03-10',
          {
            '2026-02-28': { date: '2026-02-28', cost: usd(6), computeMinutes: 3, modelCalls: 0, tokens: 0 },
            '2026-03-02': { date: '2026-03-02', cost: usd(22), computeMinutes: 10, modelCalls: 1, tokens: 1200 },
            '2026-03-05': { date: '2026-03-05', cost: usd(1), computeMinutes: 0, modelCalls: 0, tokens: 0 },
            '2026-03-08': { date: '2026-03-08', cost: usd(400), computeMinutes: 0, modelCalls: 1000, tokens: 15_000 },
            '2026-03-09': { date: '2026-03-09', cost: usd(30), computeMinutes: 0, modelCalls: 1, tokens: 6000 },
            '2026-03-10': { date: '2026-03-10', cost: usd(17), computeMinutes: 6, modelCalls: 2, tokens: 420 },
          },
          zeroDay,
        ),
      );
      expect(body).toHaveLength(30);
    });

    it('puts a charge at 23:59:59.999 on its day and one at midnight on the next', async () => {
      const { body } = await get(live, '/v1/usage/daily?period=last_7_days');
      expect(body.map((day: { date: string }) => day.date)).toEqual([
        '2026-03-04',
        '2026-03-05',
        '2026-03-06',
        '2026-03-07',
        '2026-03-08',
        '2026-03-09',
        '2026-03-10',
      ]);
      expect(body.slice(-2)).toEqual([
        { date: '2026-03-09', cost: usd(30), computeMinutes: 0, modelCalls: 1, tokens: 6000 },
        { date: '2026-03-10', cost: usd(17), computeMinutes: 6, modelCalls: 2, tokens: 420 },
      ]);
      expect((await get(live, '/v1/usage/daily?period=today')).body).toEqual([
        { date: '2026-03-10', cost: usd(17), computeMinutes: 6, modelCalls: 2, tokens: 420 },
      ]);
    });

    it('refuses an unknown period, naming the allowed values', async () => {
      expect422(await live.get('/v1/usage/daily?period=last_90_days'), { period: [PERIODS_MESSAGE] });
    });
  });

  describe('GET /v1/usage/users/:userId', () => {
    it("reports one user's month with a daily breakdown", async () => {
      const { body } = await get(live, '/v1/usage/users/alice');
      expect(body).toEqual({
        compute: { minutes: 10, cost: usd(20) },
        models: { calls: 2, tokens: { input: 6000, output: 1200 }, cost: usd(32) },
        storage: { gbHours: 2.5, cost: usd(1) },
        total: usd(53),
        breakdown: days('2026-03-01', '2026-03-10', {
          '2026-03-02': { date: '2026-03-02', total: usd(22) },
          '2026-03-05': { date: '2026-03-05', total: usd(1) },
          '2026-03-09': { date: '2026-03-09', total: usd(30) },
        }, (date) => ({ date, total: usd(0) })),
      });
    });

    it('takes a period', async () => {
      const { body } = await get(live, '/v1/usage/users/alice?period=last_30_days');
      expect(body.compute).toEqual({ minutes: 13, cost: usd(26) });
      expect(body.total).toEqual(usd(59));
      expect(body.breakdown).toHaveLength(30);
      expect(body.breakdown[19]).toEqual({ date: '2026-02-28', total: usd(6) });
    });

    it('answers zeros for a user without usage', async () => {
      const { body } = await get(live, '/v1/usage/users/nobody?period=today');
      expect(body).toEqual({
        compute: { minutes: 0, cost: usd(0) },
        models: { calls: 0, tokens: { input: 0, output: 0 }, cost: usd(0) },
        storage: { gbHours: 0, cost: usd(0) },
        total: usd(0),
        breakdown: [{ date: '2026-03-10', total: usd(0) }],
      });
    });

    it('refuses an unknown period', async () => {
      expect422(await live.get('/v1/usage/users/alice?period=quarter'), { period: [PERIODS_MESSAGE] });
    });
  });

  describe('GET /v1/usage/models', () => {
    it('lists the models used, highest cost first', async () => {
      const { body } = await get(live, '/v1/usage/models');
      expect(body).toEqual({
        data: [
          { model: 'google/gemini-2.5-flash', calls: 1000, tokens: { input: 10_000, output: 5000 }, cost: usd(400) },
          { model: 'anthropic/claude-sonnet-4', calls: 2, tokens: { input: 5010, output: 1010 }, cost: usd(34) },
          // 1.5 + 1 cents: 2.5, rounded half up once.
          { model: 'openai/gpt-4o-mini', calls: 2, tokens: { input: 1300, output: 300 }, cost: usd(3) },
        ],
      });
    });

    it('refuses an unknown period', async () => {
      expect422(await live.get('/v1/usage/models?period=all'), { period: [PERIODS_MESSAGE] });
    });
  });

  describe('scoping', () => {
    it("shows another organization only its own charges, archives and sandboxes", async () => {
      expect((await get(other, '/v1/usage/summary')).body).toEqual({
        period: { from: '2026-03-01T00:00:00.000Z', until: '2026-03-10T12:00:00.000Z' },
        compute: { minutes: 100, cost: usd(999) },
        models: { inputTokens: 7, outputTokens: 7, cost: usd(77) },
        storage: { gb: 9, cost: usd(0) },
        total: usd(1076),
      });
      expect((await get(other, '/v1/usage/summary?period=month')).body).toMatchObject({
        activeSessions: 1,
        runningAgents: 1,
        topUser: { userId: 'alice', cost: usd(1076) },
      });
      expect((await get(other, '/v1/usage/users/alice')).body.total).toEqual(usd(1076));
      expect((await get(other, '/v1/usage/models')).body).toEqual({
        data: [{ model: 'openai/gpt-4o-mini', calls: 1, tokens: { input: 7, output: 7 }, cost: usd(77) }],
      });
    });

    it('gives a test key the same shapes with zeros, never the live ledger', async () => {
      expect((await get(test, '/v1/usage/summary')).body).toEqual({
        period: { from: '2026-03-01T00:00:00.000Z', until: '2026-03-10T12:00:00.000Z' },
        compute: { minutes: 0, cost: usd(0) },
        models: { inputTokens: 0, outputTokens: 0, cost: usd(0) },
        storage: { gb: 0, cost: usd(0) },
        total: usd(0),
      });
      expect((await get(test, '/v1/usage/summary?period=week')).body).toEqual({
        totalCost: usd(0),
        activeSessions: 0,
        runningAgents: 0,
        topUser: null,
        environment: 'all',
        berthBilled: { compute: usd(0), model: usd(0), storage: usd(0), primitives: usd(0), total: usd(0) },
        providerDirect: { compute: usd(0), model: usd(0), total: usd(0) },
      });
      expect((await get(test, '/v1/usage/daily?period=week')).body).toEqual(days('2026-03-09', '2026-03-10', {}, zeroDay));
      expect((await get(test, '/v1/usage/users/alice?period=today')).body).toEqual({
        compute: { minutes: 0, cost: usd(0) },
        models: { calls: 0, tokens: { input: 0, output: 0 }, cost: usd(0) },
        storage: { gbHours: 0, cost: usd(0) },
        total: usd(0),
        breakdown: [{ date: '2026-03-10', total: usd(0) }],
      });
      expect((await get(test, '/v1/usage/models')).body).toEqual({ data: [] });
      // A test key is validated like a live one.
      expect422(await test.get('/v1/usage/models?period=year'), { period: [PERIODS_MESSAGE] });
    });
  });
});

describe('across the turn of the month', () => {
  beforeAll(async () => {
    // Two users, and two models, with equal costs on April 1st.
    await charge(
      { sessionId: 'ses_zed', userId: 'zed', kind: 'model', model: 'openai/gpt-4o-mini', inputTokens: 1, outputTokens: 1, nanocents: 5n * CENT, at: '2026-04-01T00:00:00Z' },
      { sessionId: 'ses_amy', userId: 'amy', kind: 'model', model: 'anthropic/claude-sonnet-4', inputTokens: 2, outputTokens: 2, nanocents: 5n * CENT, at: '2026-04-01T00:00:10Z' },
    );
  });

  it('starts the month, the billing period and the day afresh at midnight UTC', async () => {
    clock.set('2026-04-01T00:00:30Z');
    expect((await get(live, '/v1/usage/summary')).body).toEqual({
      period: { from: '2026-04-01T00:00:00.000Z', until: '2026-04-01T00:00:30.000Z' },
      compute: { minutes: 0, cost: usd(0) },
      models: { inputTokens: 3, outputTokens: 3, cost: usd(10) },
      storage: { gb: 1.5, cost: usd(0) },
      total: usd(10),
    });
    expect((await get(live, '/v1/usage/daily?period=month')).body).toEqual([
      { date: '2026-04-01', cost: usd(10), computeMinutes: 0, modelCalls: 2, tokens: 6 },
    ]);
    const lastThirty = (await get(live, '/v1/usage/daily')).body;
    expect(lastThirty).toHaveLength(30);
    expect(lastThirty[0].date).toBe('2026-03-03');
    expect(lastThirty.slice(-3)).toEqual([
      zeroDay('2026-03-30'),
      zeroDay('2026-03-31'),
      { date: '2026-04-01', cost: usd(10), computeMinutes: 0, modelCalls: 2, tokens: 6 },
    ]);
  });

  it('breaks ties by the smallest userId and by model name', async () => {
    clock.set('2026-04-01T00:00:30Z');
    expect((await get(live, '/v1/usage/summary?period=month')).body).toMatchObject({
      totalCost: usd(10),
      activeSessions: 2,
      topUser: { userId: 'amy', cost: usd(5) },
    });
    expect((await get(live, '/v1/usage/models')).body.data.map((model: { model: string }) => model.model)).toEqual([
      'anthropic/claude-sonnet-4',
      'openai/gpt-4o-mini',
    ]);
  });

  it('answers an empty range, not an error, at the very first instant of a month', async () => {
    clock.set('2026-04-01T00:00:00Z');
    expect((await get(live, '/v1/usage/summary')).body).toEqual({
      period: { from: '2026-04-01T00:00:00.000Z', until: '2026-04-01T00:00:00.000Z' },
      compute: { minutes: 0, cost: usd(0) },
      models: { inputTokens: 0, outputTokens: 0, cost: usd(0) },
      storage: { gb: 1.5, cost: usd(0) },
      total: usd(0),
    });
  });
});

describe('the OpenAPI document', () => {
  it('lists the four usage routes with their parameters', async () => {
    const { body } = await get(live, '/v1/openapi.json');
    for (const path of ['/v1/usage/summary', '/v1/usage/daily', '/v1/usage/users/{userId}', '/v1/usage/models']) {
      expect(body.paths[path]?.get, path).toBeDefined();
    }
    const summary = body.paths['/v1/usage/summary'].get;
    expect(summary.parameters.map((parameter: { name: string }) => parameter.name)).toEqual(['from', 'until', 'period', 'environment']);
    expect(summary.responses['422']).toBeDefined();
    expect(body.paths['/v1/usage/daily'].get.parameters).toEqual([
      expect.objectContaining({ name: 'period', in: 'query', required: false, schema: expect.objectContaining({ default: 'last_30_days' }) }),
    ]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../common/src/index.js';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually, type ApiClient } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * A schedule of a test key in a real `berth up`, on the real clock: it fires at the next minute,
 * the run completes on the mock model, `schedule.fired` reaches a webhook receiver signed, and a
 * process killed with SIGKILL and started again fires each minute once.
 */
let receiver: WebhookReceiver;
let berth: BerthProcess | undefined;
let databaseUrl: string;
let testKey: string;
let api: ApiClient;
let scheduleId: string;
let secret: string;
const dataDir = tempDir('berth-schedules-');
const env = () => ({ DATABASE_URL: databaseUrl, BERTH_WEBHOOK_ALLOW_HTTP: 'true', BERTH_WEBHOOK_ALLOW_PRIVATE: 'true' });

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  databaseUrl = await createTestDatabase();
  berth = await startBerth({ dataDir, env: env() });
  testKey = berth.testKey!;
  api = berth.api(testKey);
});
afterAll(async () => {
  if (berth) expect(await berth.stop()).toBe(0);
  removeDataDir(dataDir);
  await receiver.close();
});

const history = async () => (await api.get(`/v1/schedules/${scheduleId}/history`)).body.data as any[];

describe('a schedule in a berth up process', () => {
  it('fires at the next minute, runs on the mock model, and sends schedule.fired signed', async () => {
    secret = (await api.post('/v1/webhooks', { url: receiver.url, events: ['schedule.fired'] })).body.secret;
    expect((await api.post('/v1/agent-definitions', { name: 'minutely', systemPrompt: 'Count.' })).status).toBe(201);
    const created = await api.post('/v1/schedules', { agent: 'minutely', userId: 'process-user', cron: '* * * * *', input: 'count to three' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    scheduleId = created.body.id;
    const [first] = await eventually(async () => {
      const entries = await history();
      return entries.some((entry) => entry.status === 'completed') ? entries : undefined;
    }, { what: 'the first run completed', timeoutMs: 100_000, intervalMs: 1_000 });
    expect(first).toMatchObject({ status: 'completed', scheduledFor: created.body.nextRunAt, cost: { amount: 0, currency: 'usd' } });
    expect((await api.get(`/v1/tasks/${first.taskId}`)).body).toMatchObject({ status: 'completed', task: 'count to three' });

    const delivery = await eventually(async () => receiver.received.find((entry) => JSON.parse(entry.body).event === 'schedule.fired'), { what: 'schedule.fired delivered' });
    expect(verifySignature(secret, Buffer.from(delivery.body), delivery.headers['x-svc-signature'] as string)).toBe(true);
    expect(JSON.parse(delivery.body).data).toMatchObject({ scheduleId, executionId: first.id, jobId: first.jobId, scheduledFor: first.scheduledFor, userId: 'process-user' });
  });

  it('fires each minute once across a SIGKILL and a restart', async () => {
    expect(await berth!.stop('SIGKILL')).toBe(null);
    berth = await startBerth({ dataDir, env: env() });
    api = berth.api(testKey);
    const before = (await history()).length;
    const entries = await eventually(async () => {
      const now = await history();
      return now.length > before && now[0].status === 'completed' ? now : undefined;
    }, { what: 'a run after the restart', timeoutMs: 100_000, intervalMs: 1_000 });
    const times = entries.map((entry) => entry.scheduledFor);
    expect(new Set(times).size).toBe(times.length);
    expect(entries.every((entry) => entry.status !== 'missed')).toBe(true);
    // Deliveries are at least once: one the SIGKILL cut short after the receiver had it is sent
    // again once its claim expires, as the same event (same id and time). Each event is one time.
    const fired = new Map<string, string>();
    for (const entry of receiver.received) {
      const body = JSON.parse(entry.body);
      if (body.event !== 'schedule.fired') continue;
      if (fired.has(body.id)) expect(body.data.scheduledFor).toBe(fired.get(body.id));
      fired.set(body.id, body.data.scheduledFor);
    }
    expect(new Set(fired.values()).size).toBe(fired.size);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../common/src/index.js';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { eventually } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { removeDataDir } from '../helpers/runsc.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';

/**
 * The sender in a real `berth up`, killed (SIGKILL) between two attempts of a delivery: the
 * process started next continues the retry schedule from PostgreSQL, with the same delivery id.
 */
let receiver: WebhookReceiver;
let received: WebhookReceiver['received'];
let receiverUrl: string;
let berth: BerthProcess | undefined;
let databaseUrl: string;
const dataDir = tempDir('berth-webhooks-');
const env = () => ({ DATABASE_URL: databaseUrl, BERTH_WEBHOOK_ALLOW_HTTP: 'true', BERTH_WEBHOOK_ALLOW_PRIVATE: 'true' });

beforeAll(async () => {
  // The first attempt fails, the retries succeed.
  receiver = await startWebhookReceiver((n) => (n === 1 ? 500 : 200));
  ({ received, url: receiverUrl } = receiver);
  databaseUrl = await createTestDatabase();
});
afterAll(async () => {
  if (berth) expect(await berth.stop()).toBe(0);
  removeDataDir(dataDir);
  await receiver.close();
});

describe('webhook delivery across a killed process', () => {
  it('retries 5 s later from the next process, with the same delivery id and nothing sent twice', async () => {
    berth = await startBerth({ dataDir, env: env() });
    const key = berth.liveKey!;
    const live = berth.api(key);
    const hook = (await live.post('/v1/webhooks', { url: receiverUrl, events: ['agent.started'] })).body;
    const session = (await live.post('/v1/sessions', { userId: 'hooked' })).body;
    const agent = (await live.post(`/v1/sessions/${session.id}/agents`, { timeout: '10m' })).body;
    await eventually(async () => (received.length >= 1 ? true : undefined), { what: 'the first attempt', timeoutMs: 60_000 });
    // Killed between attempts: once the first one's outcome is recorded. (Killed during an
    // attempt, the delivery would wait for its claim to expire, 60 s, before another sender retries.)
    await eventually(
      async () => {
        const [delivery] = (await live.get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
        return delivery?.attempts === 1 ? true : undefined;
      },
      { what: 'the first attempt recorded' },
    );
    expect(await berth.stop('SIGKILL')).toBe(null);

    berth = await startBerth({ dataDir, env: env() });
    await eventually(async () => (received.length >= 2 ? true : undefined), { what: 'the retry', timeoutMs: 30_000 });
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(received).toHaveLength(2);
    const [first, second] = received;
    expect(second!.headers['x-svc-delivery']).toBe(first!.headers['x-svc-delivery']);
    expect(second!.at - first!.at).toBeGreaterThanOrEqual(5_000);
    expect(JSON.parse(second!.body)).toMatchObject({ event: 'agent.started', data: { agentId: agent.id, sessionId: session.id } });
    expect(verifySignature(hook.secret, second!.body, second!.headers['x-svc-signature'] as string)).toBe(true);

    const [delivery] = (await berth.api(key).get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
    expect(delivery).toMatchObject({ id: first!.headers['x-svc-delivery'], state: 'succeeded', attempts: 2, lastStatus: 200 });
    expect(delivery.history.map((attempt: { status: number }) => attempt.status)).toEqual([500, 200]);
    await berth.api(key).post(`/v1/agents/${agent.id}/terminate`);
  }, 120_000);
});

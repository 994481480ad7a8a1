import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type pg from 'pg';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManualClock,
  createApiKey,
  createOrganization,
  recordEvent,
  silentLogger,
  verifySignature,
  type EventInput,
} from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { MockProvider } from '../../providers/src/mock.js';
import { postWebhook } from '../../common/src/webhook-post.js';
import { WebhookSender } from '../../operator/src/webhooks/sender.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { apiClient, type ApiClient } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';

/**
 * Outbound webhooks against real HTTP receivers on loopback and a real PostgreSQL, with the
 * retry schedule on a manual clock. Senders are ticked by hand; several instances with their
 * own identities stand for several processes (all of a sender's state is in PostgreSQL).
 */
interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  /** Manual-clock time of arrival. */
  at: number;
}

type Answer = number | 'hang';

class Receiver {
  readonly received: Received[] = [];
  private server!: Server;
  url = '';
  constructor(private readonly answers: Answer[] | ((n: number) => Answer)) {}
  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => (body += chunk));
      req.on('end', () => {
        const n = this.received.length;
        this.received.push({ headers: req.headers, body, at: clock.now().getTime() });
        const answer = typeof this.answers === 'function' ? this.answers(n) : (this.answers[n] ?? this.answers.at(-1) ?? 200);
        if (answer === 'hang') return; // never answers
        res.writeHead(answer, { 'content-type': 'text/plain' }).end(answer >= 300 ? `receiver says no (${answer})` : 'ok');
      });
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks`;
    return this;
  }
  events() {
    return this.received.map((request) => JSON.parse(request.body) as { id: string; event: string; createdAt: string; data: Record<string, unknown> });
  }
  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

const clock = new ManualClock('2026-07-01T12:00:00Z');
let pool: pg.Pool;
let api: TestApi;
let live: ApiClient;
let test: ApiClient;
let strict: ApiClient;
let organizationId: string;
const receivers: Receiver[] = [];
const metrics = new Registry();
let senderCount = 0;

function sender(identity = `sender-${++senderCount}`, registry = new Registry()): WebhookSender {
  return new WebhookSender({ pool, clock, log: silentLogger, metrics: registry, identity, allowPrivate: true, claimMs: 60_000 });
}

async function receiver(answers: Answer[] | ((n: number) => Answer) = [200]): Promise<Receiver> {
  const created = await new Receiver(answers).start();
  receivers.push(created);
  return created;
}

let eventCount = 0;
async function emit(type: EventInput['type'], data: Record<string, unknown> = {}, mode: 'live' | 'test' = 'live'): Promise<void> {
  await recordEvent(pool, { type, organizationId, mode, subjectId: 'agt_x', occurrence: `webhooks-test/${++eventCount}`, data: { agentId: 'agt_x', ...data } }, clock.now());
}

async function register(url: string, events: string[], client = live, secret?: string) {
  const response = await client.post('/v1/webhooks', { url, events, ...(secret ? { secret } : {}) });
  expect(response.status, JSON.stringify(response.body)).toBe(201);
  return response.body as { id: string; secret: string; url: string; events: string[] };
}

beforeAll(async () => {
  const mock = new MockProvider({ computes: ['python', 'node', 'go'], browser: false, gpuTypes: [], storage: false, checkpoint: 'none' });
  api = await startTestApi({ clock, providers: new ProviderRegistry([mock], 'mock'), app: { webhookPolicy: { allowHttp: true, allowPrivate: true } } });
  pool = api.pool;
  organizationId = (await createOrganization(pool, 'webhooks')).id;
  live = (await api.client(organizationId, 'live')).api;
  test = (await api.client(organizationId, 'test')).api;
  // The same API with the default policy: https only, no private addresses.
  const locked = await api.another({ webhookPolicy: { allowHttp: false, allowPrivate: false } });
  strict = apiClient(locked.baseUrl, (await createApiKey(pool, { organizationId, mode: 'live' })).key);
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  await api.close();
});

describe('webhook routes', () => {
  it('creates a webhook with a generated secret shown once, then masked', async () => {
    const created = await register('https://hooks.example.com/berth', ['agent.completed', 'agent.failed', 'agent.completed']);
    expect(created).toEqual({
      id: expect.stringMatching(/^wh_[0-9a-z]{26}$/),
      url: 'https://hooks.example.com/berth',
      events: ['agent.completed', 'agent.failed'],
      secret: expect.stringMatching(/^whsec_[A-Za-z0-9_-]{32}$/),
      createdAt: clock.now().toISOString(),
    });
    const masked = `${created.secret.slice(0, 8)}…`;
    expect((await live.get(`/v1/webhooks/${created.id}`)).body).toEqual({ ...created, secret: masked });
    const list = (await live.get('/v1/webhooks')).body.data;
    expect(list.find((hook: { id: string }) => hook.id === created.id)).toEqual({ ...created, secret: masked });
    expect(JSON.stringify(list)).not.toContain(created.secret);
    // Another mode's key does not see it.
    expect((await test.get(`/v1/webhooks/${created.id}`)).status).toBe(404);
  });

  it('keeps a secret given by the caller', async () => {
    const created = await register('https://hooks.example.com/own', ['agent.started'], live, 'my-own-secret-0123456789');
    expect(created.secret).toBe('my-own-secret-0123456789');
  });

  it.each([
    [{ url: 'not a url', events: ['agent.started'] }, 'url', 'absolute URL'],
    [{ url: 'ftp://hooks.example.com', events: ['agent.started'] }, 'url', 'http or https'],
    [{ url: 'https://hooks.example.com', events: [] }, 'events', 'at least one'],
    [{ url: 'https://hooks.example.com', events: ['agent.exploded'] }, 'events.0', 'must be one of: agent.started'],
    [{ url: 'https://hooks.example.com', events: ['agent.started'], secret: 'short' }, 'secret', 'at least 16'],
  ])('refuses %j with 422 naming the field', async (body, field, message) => {
    const response = await live.post('/v1/webhooks', body);
    expect(response.status).toBe(422);
    expect(response.body.error.code).toBe('unprocessable_entity');
    expect(response.body.error.details.fields[field].join(' ')).toContain(message);
  });

  it('refuses http and private, loopback and link-local addresses unless the install allows them', async () => {
    for (const url of [
      'http://hooks.example.com/x',
      'https://127.0.0.1/x',
      'https://localhost:8443/x',
      'https://10.1.2.3/x',
      'https://172.20.0.1/x',
      'https://192.168.1.1/x',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/x',
      'https://[fe80::1]/x',
      'https://[::ffff:10.0.0.1]/x',
    ]) {
      const response = await strict.post('/v1/webhooks', { url, events: ['agent.started'] });
      expect(response.status, url).toBe(422);
      expect(response.body.error.details.fields.url[0], url).toMatch(/https URL|private, loopback or link-local/);
    }
    expect((await strict.post('/v1/webhooks', { url: 'https://93.184.216.34/x', events: ['agent.started'] })).status).toBe(201);
  });

  it('checks the address again after DNS resolution, when delivering', async () => {
    const target = await receiver();
    const port = new URL(target.url).port;
    // localhost is a name here: it passes no literal check, and resolves to loopback.
    const refused = await postWebhook(`http://localhost:${port}/hooks`, '{}', {}, false);
    expect(refused).toMatchObject({ ok: false, error: expect.stringContaining('resolves to 127.0.0.1, a private address') });
    expect(target.received).toEqual([]);
    expect(await postWebhook(`http://localhost:${port}/hooks`, '{}', {}, true)).toMatchObject({ ok: true, status: 200 });
  });

  it('answers 404 for an unknown or malformed id', async () => {
    expect((await live.get('/v1/webhooks/wh_00000000000000000000000000')).status).toBe(404);
    expect((await live.raw('/v1/webhooks/nope', { method: 'DELETE' })).status).toBe(404);
  });
});

describe('delivery', () => {
  // The route tests registered webhooks on addresses nobody answers; they are not part of these.
  beforeAll(async () => {
    await pool.query("UPDATE webhooks SET deleted_at = $1 WHERE deleted_at IS NULL", [clock.now()]);
  });

  it('signs each event for the webhooks subscribed to it, and only those', async () => {
    const a = await receiver();
    const b = await receiver();
    const hookA = await register(a.url, ['agent.started', 'agent.completed']);
    const hookB = await register(b.url, ['budget.threshold']);
    await emit('agent.started', { provider: 'local' });
    await emit('budget.threshold', { threshold: 50, currentCost: { amount: 50, currency: 'usd' } });
    await emit('agent.failed', { error: { code: 'timeout', message: 'x' } });
    await sender().tick();

    expect(a.events().map((event) => event.event)).toEqual(['agent.started']);
    expect(b.events().map((event) => event.event)).toEqual(['budget.threshold']);
    const [request] = a.received;
    const envelope = a.events()[0]!;
    expect(envelope).toEqual({ id: expect.stringMatching(/^evt_/), event: 'agent.started', createdAt: clock.now().toISOString(), data: { agentId: 'agt_x', provider: 'local' } });
    expect(request!.headers['content-type']).toBe('application/json');
    expect(request!.headers['x-svc-delivery']).toMatch(/^del_[0-9a-z]{26}$/);
    // What a receiver does: HMAC-SHA256 of the raw body, compared in constant time.
    const signature = request!.headers['x-svc-signature'] as string;
    expect(signature).toBe(`sha256=${createHmac('sha256', hookA.secret).update(request!.body).digest('hex')}`);
    expect(verifySignature(hookA.secret, request!.body, signature)).toBe(true);
    expect(verifySignature(hookB.secret, request!.body, signature)).toBe(false);
    expect(verifySignature(hookA.secret, `${request!.body} `, signature)).toBe(false);

    const log = (await live.get(`/v1/webhooks/${hookA.id}/deliveries`)).body.data;
    expect(log).toEqual([
      {
        id: request!.headers['x-svc-delivery'],
        eventId: envelope.id,
        event: 'agent.started',
        state: 'succeeded',
        attempts: 1,
        lastStatus: 200,
        lastError: null,
        lastAttemptAt: clock.now().toISOString(),
        nextAttemptAt: null,
        createdAt: clock.now().toISOString(),
        history: [{ attempt: 1, at: clock.now().toISOString(), durationMs: expect.any(Number), status: 200, error: null }],
      },
    ]);
  });

  it('retries a receiver that fails twice: exactly three attempts, 5 s and 30 s apart, with one delivery id', async () => {
    const flaky = await receiver([500, 503, 200]);
    const hook = await register(flaky.url, ['agent.completed']);
    const start = clock.now().getTime();
    await emit('agent.completed', { status: 'completed' });
    const worker = sender();
    await worker.tick();
    clock.advance(4_999);
    await worker.tick();
    expect(flaky.received).toHaveLength(1);
    clock.advance(1);
    await worker.tick();
    clock.advance(29_999);
    await worker.tick();
    expect(flaky.received).toHaveLength(2);
    clock.advance(1);
    await worker.tick();
    clock.advance(600_000);
    await worker.tick();
    expect(flaky.received.map((request) => request.at - start)).toEqual([0, 5_000, 35_000]);
    expect(new Set(flaky.received.map((request) => request.headers['x-svc-delivery'])).size).toBe(1);
    const [delivery] = (await live.get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
    expect(delivery).toMatchObject({ state: 'succeeded', attempts: 3, lastStatus: 200, lastError: null });
    expect(delivery.history.map((attempt: { status: number }) => attempt.status)).toEqual([500, 503, 200]);
    expect(delivery.history[0].error).toBe('answered 500: receiver says no (500)');
  });

  it('gives up after 3 retries (5 s, 30 s, 5 min) and logs the delivery as failed', async () => {
    const down = await receiver([500]);
    const hook = await register(down.url, ['agent.failed']);
    const start = clock.now().getTime();
    await emit('agent.failed', { error: { code: 'timeout', message: 'x' } });
    const worker = sender(undefined, metrics);
    for (const step of [0, 5_000, 30_000, 300_000, 3_600_000]) {
      clock.advance(step);
      await worker.tick();
    }
    expect(down.received.map((request) => request.at - start)).toEqual([0, 5_000, 35_000, 335_000]);
    const [delivery] = (await live.get(`/v1/webhooks/${hook.id}/deliveries?state=failed`)).body.data;
    expect(delivery).toMatchObject({ state: 'failed', attempts: 4, lastStatus: 500, nextAttemptAt: null });
    const text = parsePrometheus(await metrics.metrics());
    expect(metricValue(text, 'berth_webhook_attempts_total', { event: 'agent.failed', outcome: 'failed', attempt: '4' })).toBe(1);
    expect(metricValue(text, 'berth_webhook_attempts_total', { event: 'agent.failed', outcome: 'retry', attempt: '1' })).toBe(1);
  });

  it('cuts a receiver that does not answer at 10 s, and schedules the retry', async () => {
    const silent = await receiver(['hang']);
    const hook = await register(silent.url, ['agent.paused']);
    await emit('agent.paused', { reason: 'requested' });
    const began = Date.now();
    await sender().tick();
    const took = Date.now() - began;
    expect(took).toBeGreaterThanOrEqual(10_000);
    expect(took).toBeLessThan(12_000);
    const [delivery] = (await live.get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
    expect(delivery).toMatchObject({ state: 'pending', attempts: 1, lastStatus: null, lastError: 'no answer within 10 s' });
    expect(Date.parse(delivery.nextAttemptAt) - clock.now().getTime()).toBe(5_000);
    await live.raw(`/v1/webhooks/${hook.id}`, { method: 'DELETE' }); // stop the retries here
  }, 20_000);

  it('continues the schedule in a new sender after the first one died between attempts, sending nothing twice', async () => {
    const flaky = await receiver([500, 200]);
    const hook = await register(flaky.url, ['agent.run.completed']);
    await emit('agent.run.completed', { status: 'completed', cost: { model: 1, compute: 0, total: 1, currency: 'usd' }, billingMode: 'managed' });
    await sender('process-1').tick(); // attempt 1 fails; then process-1 is gone
    clock.advance(5_000);
    const second = sender('process-2');
    await second.tick();
    await second.tick();
    expect(flaky.received).toHaveLength(2);
    expect(flaky.received[1]!.headers['x-svc-delivery']).toBe(flaky.received[0]!.headers['x-svc-delivery']);
    const { rows } = await pool.query('SELECT count(*)::int AS n FROM webhook_deliveries WHERE webhook_id = $1', [hook.id]);
    expect(rows[0].n).toBe(1);
  });

  it('takes over a delivery whose sender died during an attempt, once its claim has expired', async () => {
    const target = await receiver([200]);
    const hook = await register(target.url, ['agent.started']);
    await emit('agent.started');
    const worker = sender();
    await worker.fanOut();
    // A sender claimed it and died before recording anything.
    await pool.query("UPDATE webhook_deliveries SET claimed_by = 'dead', claim_expires_at = $2 WHERE webhook_id = $1", [hook.id, new Date(clock.now().getTime() + 60_000)]);
    await worker.tick();
    expect(target.received).toHaveLength(0);
    clock.advance(60_000);
    await worker.tick();
    expect(target.received).toHaveLength(1);
  });

  it('attempts each delivery once when several senders run at the same time', async () => {
    const target = await receiver([200]);
    await register(target.url, ['agent.completed']);
    for (let i = 0; i < 10; i++) await emit('agent.completed', { n: i });
    await Promise.all([sender().tick(), sender().tick(), sender().tick()]);
    expect(target.received).toHaveLength(10);
    expect(new Set(target.events().map((event) => event.data.n))).toEqual(new Set([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]));
  });

  it('sends nothing more to a deleted webhook, and cancels what was pending', async () => {
    const flaky = await receiver([500]);
    const hook = await register(flaky.url, ['agent.started']);
    await emit('agent.started');
    const worker = sender();
    await worker.tick();
    expect((await live.raw(`/v1/webhooks/${hook.id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    await emit('agent.started');
    clock.advance(10 * 60_000);
    await worker.tick();
    expect(flaky.received).toHaveLength(1);
    expect((await live.get(`/v1/webhooks/${hook.id}`)).status).toBe(404);
    const { rows } = await pool.query('SELECT state FROM webhook_deliveries WHERE webhook_id = $1', [hook.id]);
    expect(rows).toEqual([{ state: 'cancelled' }]);
  });

  it("gives a test key's webhooks the test-mode events only", async () => {
    const liveTarget = await receiver();
    const testTarget = await receiver();
    await register(liveTarget.url, ['session.limit_reached']);
    await register(testTarget.url, ['session.limit_reached'], test);
    await emit('session.limit_reached', { mode: 'test' }, 'test');
    await sender().tick();
    expect(testTarget.events().map((event) => event.data.mode)).toEqual(['test']);
    expect(liveTarget.received).toEqual([]);
  });
});

describe('POST /v1/webhooks/:id/test', () => {
  it('sends a signed sample agent.completed and answers with the result', async () => {
    const target = await receiver([200, 502]);
    const hook = await register(target.url, ['agent.completed']);
    const result = await live.post(`/v1/webhooks/${hook.id}/test`);
    expect(result.status).toBe(200);
    expect(result.body).toEqual({ deliveryId: expect.stringMatching(/^del_/), delivered: true, status: 200, error: null, durationMs: expect.any(Number) });
    const [request] = target.received;
    expect(verifySignature(hook.secret, request!.body, request!.headers['x-svc-signature'] as string)).toBe(true);
    expect(request!.headers['x-svc-delivery']).toBe(result.body.deliveryId);
    const sample = JSON.parse(request!.body);
    expect(sample).toMatchObject({ event: 'agent.completed', id: expect.stringMatching(/^evt_/) });
    expect(Object.keys(sample.data).sort()).toEqual(
      ['agentId', 'artifacts', 'compute', 'cost', 'model', 'output', 'sessionId', 'status', 'taskId', 'test', 'userId'].sort(),
    );
    expect(sample.data.cost).toEqual({ amount: 12, currency: 'usd' });

    clock.advance(1_000);
    const failed = await live.post(`/v1/webhooks/${hook.id}/test`);
    expect(failed.body).toMatchObject({ delivered: false, status: 502, error: expect.stringContaining('answered 502') });
    const log = (await live.get(`/v1/webhooks/${hook.id}/deliveries`)).body.data;
    expect(log.map((delivery: { state: string; eventId: null }) => [delivery.state, delivery.eventId])).toEqual([
      ['failed', null],
      ['succeeded', null],
    ]);
  });
});

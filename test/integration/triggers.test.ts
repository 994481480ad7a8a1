import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySignature } from '../../common/src/index.js';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, type ApiClient, type ApiResponse } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';

/**
 * Webhook triggers through a real `berth up` over HTTP: fires signed as the spec says (bare hex,
 * `sha256=`), refused ones (bad, missing, stale, replayed, deleted, unknown, not JSON, too
 * large), and the jobs they start followed to completion in real gVisor sandboxes against a
 * local server speaking the OpenAI protocol. `trigger.fired` reaches a webhook receiver on
 * loopback. A process killed right after accepting a fire loses nothing: the next one runs it.
 */
let model: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
/** Printed by the first start only. */
let liveKey: string;
let testKey: string;
let db: pg.Pool;
let databaseUrl: string;
let receiver: Server;
let receiverUrl: string;
const delivered: { signature: string; body: string }[] = [];
const dataDir = tempDir('berth-triggers-');

/** The model answers with the task it was given, so a job's output shows the fire's body reached it. */
const script = (body: any): FakeTurn => {
  const task = body.messages.filter((message: any) => message.role === 'user').at(-1)?.content;
  return { text: `handled ${typeof task === 'string' ? task : JSON.stringify(task)}`, usage: { input: 100_000, output: 50_000 } };
};

const env = () => ({
  DATABASE_URL: databaseUrl,
  BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
  BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '10.00', output: '10.00' } }),
  BERTH_WEBHOOK_ALLOW_HTTP: 'true',
  BERTH_WEBHOOK_ALLOW_PRIVATE: 'true',
});

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      delivered.push({ signature: String(req.headers['x-svc-signature']), body });
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({ dataDir, env: env() });
  liveKey = berth.liveKey!;
  testKey = berth.testKey!;
  live = berth.api(liveKey);
  const definition = await live.post('/v1/agent-definitions', { name: 'ticket-bot', model: 'openai/gpt-4o-mini', systemPrompt: 'You triage tickets.', timeout: '10m' });
  expect(definition.status).toBe(201);
});
afterAll(async () => {
  expect(await berth.stop()).toBe(0);
  removeDataDir(dataDir);
  await db.end();
  await model.close();
  receiver.closeAllConnections();
  await new Promise((resolve) => receiver.close(resolve));
});

const hmac = (secret: string, content: string | Buffer) => createHmac('sha256', secret).update(content).digest('hex');
const unixNow = () => String(Math.floor(Date.now() / 1000));

/** A request to a fire URL as any sender makes it: no API key, the body as bytes, the headers given. */
function fire(url: string, body: string | Buffer, headers: Record<string, string>): Promise<ApiResponse> {
  const path = new URL(url).pathname;
  return berth.api(undefined).raw(path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
}

const jobCount = async () => Number((await db.query('SELECT count(*) FROM jobs')).rows[0].count);

function jobFinished(jobId: string, client = live): Promise<any> {
  return eventually(
    async () => {
      const job = (await client.get(`/v1/jobs/${jobId}`)).body;
      return ['completed', 'failed', 'cancelled'].includes(job.state) ? job : undefined;
    },
    { timeoutMs: 90_000, intervalMs: 200, what: `job ${jobId} to finish` },
  );
}

function expectRefused(response: ApiResponse, status: number, code: string, reason?: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error).toMatchObject({ code, requestId: expect.stringMatching(/^req_/), ...(reason ? { details: expect.objectContaining({ reason }) } : {}) });
}

describe('creating and reading triggers', () => {
  it('shows the secret once and redacted afterwards, with the public URL', async () => {
    const created = await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'alice', name: 'new-ticket', type: 'webhook' });
    expect(created.status).toBe(201);
    const definitions = (await live.get('/v1/agent-definitions')).body;
    expect(created.body).toEqual({
      id: expect.stringMatching(/^trg_[0-9a-z]{26}$/),
      name: 'new-ticket',
      type: 'webhook',
      agent: definitions.data[0].id,
      userId: 'alice',
      url: `${berth.baseUrl}/triggers/${created.body.id}/fire`,
      secret: expect.stringMatching(/^trgsec_[A-Za-z0-9_-]{43}$/),
      createdAt: expect.any(String),
      lastFiredAt: null,
    });
    const { secret } = created.body;
    const read = (await live.get(`/v1/triggers/${created.body.id}`)).body;
    expect(read).toEqual({ ...created.body, secret: `${secret.slice(0, 8)}…` });
    const listed = await live.get('/v1/triggers');
    expect(listed.body.data).toContainEqual(read);
    expect(JSON.stringify(listed.body)).not.toContain(secret.slice(8));
    // At rest, the secret is sealed, not kept as text.
    const { rows } = await db.query('SELECT * FROM triggers WHERE id = $1', [created.body.id]);
    expect(JSON.stringify(rows[0])).not.toContain(secret.slice(8));
    expect(rows[0].secret_ciphertext.toString('latin1')).not.toContain(secret.slice(8));
  });

  it('refuses bad requests with the envelope and writes nothing', async () => {
    const before = (await db.query('SELECT count(*) FROM triggers')).rows[0].count;
    const unknownAgent = await live.post('/v1/triggers', { agent: 'nobody', userId: 'alice', type: 'webhook' });
    expectRefused(unknownAgent, 422, 'unprocessable_entity');
    expect(Object.keys(unknownAgent.body.error.details.fields)).toEqual(['agent']);
    expectRefused(await live.post('/v1/triggers', { agent: 'ticket-bot', type: 'webhook' }), 422, 'unprocessable_entity');
    expectRefused(await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'alice', type: 'cron' }), 422, 'unprocessable_entity');
    expectRefused(await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'alice', type: 'webhook', secret: 'mine' }), 422, 'unprocessable_entity');
    expectRefused(await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'alice', type: 'event' }), 501, 'not_implemented');
    expect((await db.query('SELECT count(*) FROM triggers')).rows[0].count).toBe(before);
    expectRefused(await live.get('/v1/triggers/trg_01jq3vf3j5m7p9s1u3w5y7a9c1'), 404, 'not_found');
    // The test key (the other mode) sees none of the live key's triggers.
    expect((await berth.api(testKey).get('/v1/triggers')).body).toEqual({ data: [] });
  });
});

describe('firing a trigger', () => {
  let trigger: any;
  let hook: any;

  beforeAll(async () => {
    hook = (await live.post('/v1/webhooks', { url: receiverUrl, events: ['trigger.fired'] })).body;
    trigger = (await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'bob', type: 'webhook' })).body;
  });

  it('runs the job of a correctly signed request to completion, with the body as its input', async () => {
    const body = JSON.stringify({ ticket: 4711, subject: 'login loops' });
    const response = await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, body) });
    expect(response.status, JSON.stringify(response.body)).toBe(202);
    expect(response.body).toEqual({ ok: true, jobId: expect.stringMatching(/^job_[0-9a-z]{26}$/) });

    const job = await jobFinished(response.body.jobId);
    expect(job).toMatchObject({
      id: response.body.jobId,
      state: 'completed',
      source: { type: 'trigger', id: trigger.id },
      agent: trigger.agent,
      userId: 'bob',
      input: { ticket: 4711, subject: 'login loops' },
      sessionId: expect.stringMatching(/^ses_/),
      agentId: expect.stringMatching(/^agt_/),
      taskId: expect.stringMatching(/^task_/),
      error: null,
      finishedAt: expect.any(String),
    });
    expect(job.output).toContain('4711');
    expect(model.requests.some((request) => JSON.stringify(request).includes('ticket\\":4711'))).toBe(true);
    // The model saw the body as the task, and the job's cost is its task's, from the ledger.
    const task = (await live.get(`/v1/tasks/${job.taskId}`)).body;
    expect(task).toMatchObject({ status: 'completed', agentId: job.agentId, sessionId: job.sessionId, output: job.output });
    expect(job.cost).toEqual(task.cost);
    expect(job.cost.amount).toBeGreaterThanOrEqual(150);
    const session = (await live.post('/v1/sessions/by-user/bob', {})).body;
    expect(session.id).toBe(job.sessionId);

    expect((await live.get(`/v1/triggers/${trigger.id}`)).body.lastFiredAt).toEqual(expect.any(String));
    const delivery = await eventually(async () => delivered.find((entry) => JSON.parse(entry.body).data.jobId === job.id), {
      what: 'trigger.fired at the webhook receiver',
    });
    expect(verifySignature(hook.secret, delivery.body, delivery.signature)).toBe(true);
    expect(JSON.parse(delivery.body)).toMatchObject({
      event: 'trigger.fired',
      data: { triggerId: trigger.id, jobId: job.id, agent: trigger.agent, userId: 'bob', signedAt: null },
    });
  });

  it('accepts the signature with the sha256= prefix, and the same unsigned-timestamp body twice', async () => {
    const body = JSON.stringify({ ticket: 4712 });
    const headers = { 'x-trigger-signature': `sha256=${hmac(trigger.secret, body)}` };
    const first = await fire(trigger.url, body, headers);
    const second = await fire(trigger.url, body, headers);
    expect([first.status, second.status]).toEqual([202, 202]);
    expect(first.body.jobId).not.toBe(second.body.jobId);
    for (const { jobId } of [first.body, second.body]) expect((await jobFinished(jobId)).state).toBe('completed');
  });

  it('refuses a wrong or missing signature with 401 and queues nothing', async () => {
    const body = JSON.stringify({ ticket: 1 });
    const before = await jobCount();
    expectRefused(await fire(trigger.url, body, { 'x-trigger-signature': hmac('trgsec_not-the-secret', body) }), 401, 'unauthorized', 'bad_signature');
    expectRefused(await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, `${body} `) }), 401, 'unauthorized', 'bad_signature');
    expectRefused(await fire(trigger.url, body, { 'x-trigger-signature': 'sha256=' }), 401, 'unauthorized', 'bad_signature');
    expectRefused(await fire(trigger.url, body, {}), 401, 'unauthorized', 'missing_signature');
    // A bearer key is not a signature.
    expectRefused(await fire(trigger.url, body, { authorization: `Bearer ${liveKey}` }), 401, 'unauthorized', 'missing_signature');
    expect(await jobCount()).toBe(before);
  });

  it('with a signed timestamp: accepts it once, refuses its replay and a stale one', async () => {
    const body = JSON.stringify({ ticket: 4713 });
    const timestamp = unixNow();
    const headers = { 'x-trigger-signature': hmac(trigger.secret, `${timestamp}.${body}`), 'x-trigger-timestamp': timestamp };
    const accepted = await fire(trigger.url, body, headers);
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    const before = await jobCount();
    const replays = await Promise.all([fire(trigger.url, body, headers), fire(trigger.url, body, headers)]);
    for (const replay of replays) expectRefused(replay, 409, 'conflict', 'replayed');

    const old = String(Number(timestamp) - 600);
    expectRefused(
      await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, `${old}.${body}`), 'x-trigger-timestamp': old }),
      401,
      'unauthorized',
      'stale_timestamp',
    );
    // The body alone signed while a timestamp is sent: the timestamp is not covered, so refused.
    expectRefused(await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, body), 'x-trigger-timestamp': timestamp }), 401, 'unauthorized', 'bad_signature');
    expectRefused(await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, `soon.${body}`), 'x-trigger-timestamp': 'soon' }), 401, 'unauthorized', 'bad_timestamp');
    expect(await jobCount()).toBe(before);

    const job = await jobFinished(accepted.body.jobId);
    expect(job.state).toBe('completed');
    const event = await eventually(async () => delivered.map((entry) => JSON.parse(entry.body)).find((entry) => entry.data.jobId === job.id));
    expect(event.data.signedAt).toBe(new Date(Number(timestamp) * 1000).toISOString());
  });

  it('refuses a body that is not JSON (once signed) and one over the limit', async () => {
    const notJson = 'ticket=4714';
    expectRefused(await fire(trigger.url, notJson, { 'x-trigger-signature': hmac(trigger.secret, notJson) }), 422, 'unprocessable_entity');
    const nul = JSON.stringify({ text: 'a\u0000b' });
    expectRefused(await fire(trigger.url, nul, { 'x-trigger-signature': hmac(trigger.secret, nul) }), 422, 'unprocessable_entity');
    const large = JSON.stringify({ blob: 'x'.repeat(300 * 1024) });
    expectRefused(await fire(trigger.url, large, { 'x-trigger-signature': hmac(trigger.secret, large) }), 413, 'payload_too_large');
    // Not JSON and not signed: the signature is checked first.
    expectRefused(await fire(trigger.url, notJson, {}), 401, 'unauthorized', 'missing_signature');
    // Other methods meet the 405, whatever their body.
    for (const method of ['PUT', 'PATCH', 'DELETE']) {
      const response = await berth.api(undefined).raw(new URL(trigger.url).pathname, { method, headers: { 'content-type': 'application/json' }, body: 'null' });
      expectRefused(response, 405, 'method_not_allowed');
      expect(response.headers.get('allow')).toBe('POST');
    }
  });

  it('answers 404 for an unknown trigger and, at once, for a deleted one', async () => {
    const body = '{}';
    expectRefused(await fire(`${berth.baseUrl}/triggers/trg_01jq3vf3j5m7p9s1u3w5y7a9c1/fire`, body, { 'x-trigger-signature': hmac(trigger.secret, body) }), 404, 'not_found');
    expectRefused(await fire(`${berth.baseUrl}/triggers/not-a-trigger/fire`, body, { 'x-trigger-signature': hmac(trigger.secret, body) }), 404, 'not_found');

    const doomed = (await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'carol', type: 'webhook' })).body;
    expect((await fire(doomed.url, body, { 'x-trigger-signature': hmac(doomed.secret, body) })).status).toBe(202);
    expect((await live.raw(`/v1/triggers/${doomed.id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    expectRefused(await fire(doomed.url, body, { 'x-trigger-signature': hmac(doomed.secret, body) }), 404, 'not_found');
    expectRefused(await live.get(`/v1/triggers/${doomed.id}`), 404, 'not_found');
    expectRefused(await live.raw(`/v1/triggers/${doomed.id}`, { method: 'DELETE' }), 404, 'not_found');
    expect((await live.get('/v1/triggers')).body.data.map((entry: any) => entry.id)).not.toContain(doomed.id);
  });

  it('refuses fires of a trigger whose agent definition was archived since, with 409', async () => {
    const definition = (await live.post('/v1/agent-definitions', { name: 'short-lived', model: 'openai/gpt-4o-mini' })).body;
    const orphan = (await live.post('/v1/triggers', { agent: definition.id, userId: 'erin', type: 'webhook' })).body;
    expect((await live.raw(`/v1/agent-definitions/${definition.id}`, { method: 'DELETE' })).status).toBe(200);
    const before = await jobCount();
    const body = '{}';
    const refused = await fire(orphan.url, body, { 'x-trigger-signature': hmac(orphan.secret, body) });
    expectRefused(refused, 409, 'conflict');
    expect(refused.body.error.details).toEqual({ definitionId: definition.id });
    expect(await jobCount()).toBe(before);
    // Creating a trigger for it now is refused up front.
    expectRefused(await live.post('/v1/triggers', { agent: definition.id, userId: 'erin', type: 'webhook' }), 422, 'unprocessable_entity');
  });

  it("runs a test key's fire on the mock model and provider", async () => {
    const test = berth.api(testKey);
    expect((await test.post('/v1/agent-definitions', { name: 'ticket-bot' })).status).toBe(201);
    const mock = (await test.post('/v1/triggers', { agent: 'ticket-bot', userId: 'tess', type: 'webhook' })).body;
    const body = JSON.stringify({ ticket: 9 });
    const response = await fire(mock.url, body, { 'x-trigger-signature': hmac(mock.secret, body) });
    expect(response.status).toBe(202);
    const job = await jobFinished(response.body.jobId, test);
    expect(job).toMatchObject({ state: 'completed', source: { type: 'trigger', id: mock.id }, cost: { amount: 0 } });
    expect(job.output).toEqual(expect.any(String));
    // The mock model answered it: the local model server never saw this input.
    expect(model.requests.filter((request) => JSON.stringify(request).includes('ticket\\":9'))).toEqual([]);
    // The live key sees neither the test key's job nor its trigger.
    expectRefused(await live.get(`/v1/jobs/${job.id}`), 404, 'not_found');
    expectRefused(await live.get(`/v1/triggers/${mock.id}`), 404, 'not_found');
  });

  it('counts fires by outcome in /metrics', async () => {
    const samples = parsePrometheus((await berth.api(undefined).get('/metrics')).body);
    for (const [outcome, least] of [['accepted', 6], ['bad_signature', 4], ['missing_signature', 3], ['replayed', 2], ['stale_timestamp', 1], ['not_found', 3], ['bad_body', 2], ['definition_archived', 1]] as const) {
      expect(metricValue(samples, 'berth_trigger_fires_total', { outcome }), outcome).toBeGreaterThanOrEqual(least);
    }
  });

  it('hides jobs from keys of other organizations and modes', async () => {
    // A live key's job (the file also fires with the test key: which one LIMIT 1 finds is not defined).
    const [row] = (await db.query("SELECT id FROM jobs WHERE source = 'trigger' AND mode = 'live' ORDER BY created_at LIMIT 1")).rows;
    expect((await live.get(`/v1/jobs/${row.id}`)).status).toBe(200);
    expectRefused(await berth.api(testKey).get(`/v1/jobs/${row.id}`), 404, 'not_found');
    expectRefused(await live.get('/v1/jobs/job_01jq3vg6k8n0q2s4u6w8y0b2d4'), 404, 'not_found');
  });
});

describe('a fire accepted right before the process dies', () => {
  it('runs in the next process', async () => {
    const trigger = (await live.post('/v1/triggers', { agent: 'ticket-bot', userId: 'dave', type: 'webhook' })).body;
    const body = JSON.stringify({ ticket: 4715 });
    const response = await fire(trigger.url, body, { 'x-trigger-signature': hmac(trigger.secret, body) });
    expect(response.status).toBe(202);
    expect(await berth.stop('SIGKILL')).toBe(null);

    berth = await startBerth({ dataDir, env: env() });
    live = berth.api(liveKey);
    const job = await jobFinished(response.body.jobId);
    expect(job).toMatchObject({ state: 'completed', input: { ticket: 4715 }, userId: 'dave' });
    expect(job.output).toContain('4715');
  }, 180_000);
});


import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBerth, tempDir, type BerthProcess } from '../helpers/berth.js';
import { startFakeOpenAI, type FakeModelServer, type FakeTurn } from '../helpers/fake-models.js';
import { eventually, type ApiClient, type ApiResponse } from '../helpers/http.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { removeDataDir } from '../helpers/runsc.js';
import { openSse } from '../helpers/sse.js';

/**
 * Channels through a real `berth up` over HTTP: replies are runs of the channel's agent
 * definition in real gVisor sandboxes against a local server speaking the OpenAI protocol; Slack
 * and SendGrid are local servers speaking their wire formats, and the phone provider is played by
 * signing requests as Twilio does.
 */
let model: FakeModelServer;
let berth: BerthProcess;
let live: ApiClient;
let anonymous: ApiClient;
let db: pg.Pool;
const dataDir = tempDir('berth-channels-');

/** Requests a provider's local stand-in received: path, headers and the JSON body. */
interface Received {
  path: string;
  headers: IncomingMessage['headers'];
  body: any;
}
const slackPosts: Received[] = [];
/** Posts the local Slack answered 500 (it answers so while `slackFailures` is above 0). */
const slackRefused: Received[] = [];
let slackFailures = 0;
const sendgridMails: Received[] = [];
let providers: Server;

/** The model answers with the last thing the user said and how many messages it was sent. */
const script = (body: any): FakeTurn => {
  const users = body.messages.filter((message: any) => message.role === 'user');
  const last = users.at(-1)?.content;
  const earlier = body.messages.filter((message: any) => message.role !== 'system').length - 1;
  // 100,000 input tokens at $10 a million: one dollar.
  const usage = last === 'Spend a dollar.' ? { input: 100_000, output: 0 } : { input: 50, output: 10 };
  return { text: `reply to "${typeof last === 'string' ? last : JSON.stringify(last)}" after ${earlier} earlier`, usage };
};

beforeAll(async () => {
  model = await startFakeOpenAI(script);
  providers = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      const received = { path: req.url ?? '', headers: req.headers, body: JSON.parse(text || 'null') };
      if (req.url === '/slack/api/chat.postMessage' && slackFailures > 0) {
        slackFailures--;
        slackRefused.push(received);
        res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: false, error: 'internal_error' }));
      } else if (req.url === '/slack/api/chat.postMessage') {
        slackPosts.push(received);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ok: true, channel: received.body.channel, ts: '1700000000.000200' }));
      } else if (req.url === '/sendgrid/v3/mail/send') {
        sendgridMails.push(received);
        res.writeHead(202).end();
      } else res.writeHead(404).end();
    });
  });
  await new Promise<void>((resolve) => providers.listen(0, '127.0.0.1', resolve));
  const providersUrl = `http://127.0.0.1:${(providers.address() as AddressInfo).port}`;
  const databaseUrl = await createTestDatabase();
  db = new pg.Pool({ connectionString: databaseUrl });
  berth = await startBerth({
    dataDir,
    env: {
      DATABASE_URL: databaseUrl,
      BERTH_MODEL_PROVIDERS: JSON.stringify({ openai: { api: 'openai', baseUrl: model.baseUrl } }),
      BERTH_MODEL_PRICES: JSON.stringify({ 'openai/gpt-4o-mini': { input: '10.00', output: '10.00' } }),
      BERTH_CHANNEL_LIMITS: JSON.stringify({ visitorMessages: 2 }),
      BERTH_SLACK_API_URL: `${providersUrl}/slack/api`,
      BERTH_SENDGRID_API_URL: `${providersUrl}/sendgrid`,
    },
  });
  live = berth.api(berth.liveKey!);
  anonymous = berth.api(undefined);
  const definition = await live.post('/v1/agent-definitions', { name: 'helper', model: 'openai/gpt-4o-mini', systemPrompt: 'You help visitors.', timeout: '10m' });
  expect(definition.status, JSON.stringify(definition.body)).toBe(201);
}, 120_000);
afterAll(async () => {
  expect(await berth?.stop()).toBe(0);
  removeDataDir(dataDir);
  await db?.end();
  await model?.close();
  providers?.closeAllConnections();
  await new Promise((resolve) => providers?.close(resolve));
});

function expectError(response: ApiResponse, status: number, code: string) {
  expect(response.status, JSON.stringify(response.body)).toBe(status);
  expect(response.body.error).toMatchObject({ code, requestId: expect.stringMatching(/^req_/) });
}

/** The requests the model received whose last user message is `text`. */
const modelRequestsFor = (text: string) => model.requests.filter((body: any) => body.messages.filter((m: any) => m.role === 'user').at(-1)?.content === text) as any[];

describe('managing channels', () => {
  let chat: any;

  it('creates a chat_embed channel with its script tag at the versioned widget URL', async () => {
    const created = await live.post('/v1/channels', { type: 'chat_embed', agent: 'helper', name: 'Support', theme: { primaryColor: '#0b5fff', title: 'Ask us' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    chat = created.body;
    const definitions = (await live.get('/v1/agent-definitions')).body.data;
    expect(chat).toEqual({
      id: expect.stringMatching(/^ch_[0-9a-z]{26}$/),
      type: 'chat_embed',
      name: 'Support',
      agent: definitions[0].id,
      theme: { primaryColor: '#0b5fff', title: 'Ask us' },
      allowedOrigins: [],
      scriptTag: `<script src="${berth.baseUrl}/widget/v1/berth-chat.js" data-channel-id="${chat.id}" async></script>`,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    expect((await live.get(`/v1/channels/${chat.id}`)).body).toEqual(chat);
    expect((await live.get('/v1/channels')).body.data.map((channel: any) => channel.id)).toContain(chat.id);
    expect((await anonymous.get(`/channels/${chat.id}/config`)).body).toEqual({ channelId: chat.id, type: 'chat_embed', theme: chat.theme });
  });

  it('refuses bad input with 422 naming the field', async () => {
    const cases: [unknown, string][] = [
      [{ agent: 'helper' }, 'type'],
      [{ type: 'fax', agent: 'helper' }, 'type'],
      [{ type: 'chat_embed' }, 'agent'],
      [{ type: 'chat_embed', agent: 'nobody' }, 'agent'],
      [{ type: 'chat_embed', agent: 'helper', theme: { primaryColor: 'blue' } }, 'theme.primaryColor'],
      [{ type: 'chat_embed', agent: 'helper', workspace: 'T0123ABC' }, 'workspace'],
      [{ type: 'slack', agent: 'helper', signingSecret: 'abcdefgh1234', botToken: 'xoxb-1-2' }, 'workspace'],
      [{ type: 'slack', agent: 'helper', workspace: 'T0123ABC', signingSecret: 'abcdefgh1234', botToken: 'not-a-token' }, 'botToken'],
      [{ type: 'email', agent: 'helper', address: 'not an address', apiKey: 'SG.x' }, 'address'],
      [{ type: 'phone', agent: 'helper', phoneNumber: '555-1234', authToken: 'abcdefgh1234' }, 'phoneNumber'],
      [{ type: 'chat_embed', agent: 'helper', allowedOrigins: ['shop.example'] }, 'allowedOrigins.0'],
    ];
    for (const [body, field] of cases) {
      const response = await live.post('/v1/channels', body);
      expectError(response, 422, 'unprocessable_entity');
      expect(Object.keys(response.body.error.details.fields), JSON.stringify(body)).toContain(field);
    }
    // A key no type takes is named in the body's errors, as on every route.
    const unknown = await live.post('/v1/channels', { type: 'chat_embed', agent: 'helper', colour: 'red' });
    expectError(unknown, 422, 'unprocessable_entity');
    expect(JSON.stringify(unknown.body.error.details.fields)).toContain('colour');
    const before = Number((await db.query('SELECT count(*) FROM channels')).rows[0].count);
    expect(before).toBe(1);
  });

  it('updates fields of its type, refuses others and a change of type', async () => {
    const updated = await live.patch(`/v1/channels/${chat.id}`, { theme: { primaryColor: '#aa3300' }, allowedOrigins: ['https://shop.example'] });
    expect(updated.status, JSON.stringify(updated.body)).toBe(200);
    expect(updated.body).toMatchObject({ theme: { primaryColor: '#aa3300' }, allowedOrigins: ['https://shop.example'] });
    expectError(await live.patch(`/v1/channels/${chat.id}`, { address: 'a@example.com' }), 422, 'unprocessable_entity');
    expectError(await live.patch(`/v1/channels/${chat.id}`, { type: 'slack' }), 422, 'unprocessable_entity');
    expectError(await live.get('/v1/channels/ch_00000000000000000000000000'), 404, 'not_found');
  });

  it('is not seen, changed or deleted with a key of another mode', async () => {
    const other = berth.api(berth.testKey!);
    expectError(await other.get(`/v1/channels/${chat.id}`), 404, 'not_found');
    expectError(await other.patch(`/v1/channels/${chat.id}`, { name: 'taken' }), 404, 'not_found');
    expectError(await other.raw(`/v1/channels/${chat.id}`, { method: 'DELETE' }), 404, 'not_found');
    expect((await other.get('/v1/channels')).body).toEqual({ data: [] });
    expect((await live.get(`/v1/channels/${chat.id}`)).body.name).toBe('Support');
  });

  it('answers a preflight from an allowed origin and refuses another', async () => {
    const allowed = await anonymous.raw(`/channels/${chat.id}/messages`, {
      method: 'OPTIONS',
      headers: { origin: 'https://shop.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type' },
    });
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get('access-control-allow-origin')).toBe('https://shop.example');
    expect(allowed.headers.get('access-control-allow-methods')).toContain('POST');
    expect(allowed.headers.get('access-control-allow-headers')).toContain('content-type');
    const refused = await anonymous.raw(`/channels/${chat.id}/messages`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expectError(refused, 403, 'forbidden');
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    const read = await anonymous.raw(`/channels/${chat.id}/messages?visitorId=v1`, { headers: { origin: 'https://shop.example' } });
    expect(read.status).toBe(200);
    expect(read.headers.get('access-control-allow-origin')).toBe('https://shop.example');
    expect(read.body).toEqual({ conversationId: null, messages: [] });
  });

  describe('a conversation', () => {
    it('is answered synchronously, and the model sees the history on the next message', async () => {
      // The visitor's limit is counted in fixed minutes of the server's clock: this conversation and
      // the refused message after it are sent within one, well clear of its end.
      const intoMinute = Date.now() % 60_000;
      if (intoMinute > 30_000) await new Promise((resolve) => setTimeout(resolve, 60_500 - intoMinute));
      const stream = await openSse(`${berth.baseUrl}/channels/${chat.id}/stream?visitorId=visitor-1`, undefined, { origin: 'https://shop.example' });
      expect(stream.status).toBe(200);
      expect(stream.headers.get('access-control-allow-origin')).toBe('https://shop.example');
      const first = await anonymous.post(`/channels/${chat.id}/messages`, { text: 'My name is Ada.', visitorId: 'visitor-1' }, { origin: 'https://shop.example' });
      expect(first.status, JSON.stringify(first.body)).toBe(200);
      expect(first.body).toEqual({
        messageId: expect.stringMatching(/^msg_/),
        conversationId: expect.stringMatching(/^conv_/),
        response: { id: expect.stringMatching(/^msg_/), role: 'assistant', content: 'reply to "My name is Ada." after 0 earlier' },
      });
      const second = await anonymous.post(`/channels/${chat.id}/messages`, { text: 'What is my name?', visitorId: 'visitor-1' });
      expect(second.status, JSON.stringify(second.body)).toBe(200);
      expect(second.body.conversationId).toBe(first.body.conversationId);
      expect(second.body.response.content).toBe('reply to "What is my name?" after 2 earlier');
      const [request] = modelRequestsFor('What is my name?');
      expect(request.messages.filter((message: any) => message.role !== 'system')).toEqual([
        { role: 'user', content: 'My name is Ada.' },
        { role: 'assistant', content: 'reply to "My name is Ada." after 0 earlier' },
        { role: 'user', content: 'What is my name?' },
      ]);
      expect(request.messages.find((message: any) => message.role === 'system')?.content).toBe('You help visitors.');

      // The stream saw both messages of each turn, and each reply's text as it was written before the reply itself.
      await stream.waitFor((events) => events.filter((event) => event.event === 'message').length >= 4, 10_000);
      stream.close();
      const events = stream.events.filter((event) => event.event !== 'heartbeat');
      expect(events[0]).toEqual({ event: 'connected', data: { channelId: chat.id, visitorId: 'visitor-1' } });
      expect(events.filter((event) => event.event === 'message').map((event) => event.data)).toEqual([
        { role: 'user', content: 'My name is Ada.', messageId: first.body.messageId },
        { role: 'assistant', content: first.body.response.content, messageId: first.body.response.id },
        { role: 'user', content: 'What is my name?', messageId: second.body.messageId },
        { role: 'assistant', content: second.body.response.content, messageId: second.body.response.id },
      ]);
      const deltas = events.filter((event) => event.event === 'delta' && event.data.messageId === second.body.response.id);
      expect(deltas.map((event) => event.data.text).join('')).toBe(second.body.response.content);
      const replyAt = events.findIndex((event) => event.event === 'message' && event.data.messageId === second.body.response.id);
      expect(events.indexOf(deltas[0]!)).toBeLessThan(replyAt);

      const history = await anonymous.get(`/channels/${chat.id}/messages?visitorId=visitor-1`);
      expect(history.body.conversationId).toBe(first.body.conversationId);
      expect(history.body.messages.map((message: any) => [message.role, message.content])).toEqual([
        ['user', 'My name is Ada.'],
        ['assistant', 'reply to "My name is Ada." after 0 earlier'],
        ['user', 'What is my name?'],
        ['assistant', 'reply to "What is my name?" after 2 earlier'],
      ]);
      expect(history.body.messages[3].id).toBe(second.body.response.id);
      const latest = await anonymous.get(`/channels/${chat.id}/messages?visitorId=visitor-1&limit=1`);
      expect(latest.body.messages.map((message: any) => message.content)).toEqual(['reply to "What is my name?" after 2 earlier']);
      // Another visitor has a conversation of their own.
      expect((await anonymous.get(`/channels/${chat.id}/messages?visitorId=visitor-2`)).body).toEqual({ conversationId: null, messages: [] });
    }, 120_000);

    it('is metered in one session of the channel', async () => {
      const { rows } = await db.query(
        `SELECT s.user_id, count(DISTINCT j.id)::int AS jobs, sum(l.amount_nanocents) > 0 AS charged FROM jobs j
         JOIN session_users s ON s.session_id = j.session_id JOIN usage_ledger l ON l.session_id = j.session_id
         WHERE j.source = 'channel' AND j.source_id = $1 GROUP BY s.user_id`,
        [chat.id],
      );
      expect(rows).toEqual([{ user_id: chat.id, jobs: 2, charged: true }]);
    });

    it('refuses a visitor over the limit with 429, Retry-After and details.retryAfter', async () => {
      const refused = await anonymous.post(`/channels/${chat.id}/messages`, { text: 'A third one', visitorId: 'visitor-1' });
      expectError(refused, 429, 'rate_limited');
      expect(refused.body.error.details).toMatchObject({ limit: 'visitorMessages', max: 2, retryAfter: expect.any(Number) });
      expect(refused.headers.get('retry-after')).toBe(String(refused.body.error.details.retryAfter));
      expect(modelRequestsFor('A third one')).toHaveLength(0);
    });

    it('refuses bad input and a body over the size limit', async () => {
      const empty = await anonymous.post(`/channels/${chat.id}/messages`, { text: '  ', visitorId: 'visitor-3' });
      expectError(empty, 422, 'unprocessable_entity');
      expect(Object.keys(empty.body.error.details.fields)).toEqual(['text']);
      const badVisitor = await anonymous.post(`/channels/${chat.id}/messages`, { text: 'hi', visitorId: 'has spaces' });
      expect(Object.keys(badVisitor.body.error.details.fields)).toEqual(['visitorId']);
      expectError(await anonymous.post(`/channels/${chat.id}/messages`, { text: 'x'.repeat(4001), visitorId: 'visitor-3' }), 422, 'unprocessable_entity');
      expectError(await anonymous.post(`/channels/${chat.id}/messages`, { text: 'x'.repeat(20_000), visitorId: 'visitor-3' }), 413, 'payload_too_large');
      expectError(await anonymous.get(`/channels/${chat.id}/messages`), 422, 'unprocessable_entity');
    });
  });
});

describe("a channel's session", () => {
  it('caps what the channel spends: over its maxCost, messages answer 402', async () => {
    const channel = (await live.post('/v1/channels', { type: 'chat_embed', agent: 'helper' })).body;
    const spent = await anonymous.post(`/channels/${channel.id}/messages`, { text: 'Spend a dollar.', visitorId: 'spender' });
    expect(spent.status, JSON.stringify(spent.body)).toBe(200);
    const session = await live.post(`/v1/sessions/by-user/${channel.id}`, {});
    expect(session.status).toBe(200);
    const capped = await live.patch(`/v1/sessions/${session.body.id}`, { limits: { maxCost: { amount: 50, currency: 'usd', period: 'month' } } });
    expect(capped.status, JSON.stringify(capped.body)).toBe(200);
    const refused = await anonymous.post(`/channels/${channel.id}/messages`, { text: 'And another?', visitorId: 'spender' });
    expectError(refused, 402, 'session_limit_exceeded');
    expect(modelRequestsFor('And another?')).toHaveLength(0);
    // The visitor's message is kept; no reply was made.
    const history = (await anonymous.get(`/channels/${channel.id}/messages?visitorId=spender`)).body.messages;
    expect(history.map((message: any) => message.role)).toEqual(['user', 'assistant', 'user']);
  }, 120_000);
});

describe('Slack', () => {
  const signingSecret = '8f742231b10e8888abcd99yyyzzz85a5';
  let channel: any;
  const events = () => `/channels/${channel.id}/slack/events`;
  const sign = (timestamp: string, body: string) => `v0=${createHmac('sha256', signingSecret).update(`v0:${timestamp}:${body}`).digest('hex')}`;
  const post = (body: string, headers: Record<string, string>) => anonymous.raw(events(), { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const now = () => String(Math.floor(Date.now() / 1000));

  beforeAll(async () => {
    const created = await live.post('/v1/channels', {
      type: 'slack',
      agent: 'helper',
      workspace: 'T0123ABC',
      channels: ['C0SUPPORT'],
      botName: 'Helper',
      signingSecret,
      botToken: 'xoxb-1234-5678-abcdef',
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    channel = created.body;
  });

  it('keeps its credentials sealed and shows their last characters', async () => {
    expect(channel).toMatchObject({ signingSecret: '…85a5', botToken: '…cdef', botName: 'Helper', channels: ['C0SUPPORT'], inboundUrl: `${berth.baseUrl}/channels/${channel.id}/slack/events` });
    const { rows } = await db.query('SELECT settings::text, credentials_ciphertext FROM channels WHERE id = $1', [channel.id]);
    expect(rows[0].settings).not.toContain(signingSecret);
    expect(rows[0].credentials_ciphertext.toString('latin1')).not.toContain('xoxb');
  });

  it('answers url_verification with its challenge when signed', async () => {
    const body = JSON.stringify({ token: 'x', challenge: 'c-3eZbrw1aBm2rZ', type: 'url_verification' });
    const timestamp = now();
    const answer = await post(body, { 'x-slack-signature': sign(timestamp, body), 'x-slack-request-timestamp': timestamp });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ challenge: 'c-3eZbrw1aBm2rZ' });
  });

  it('refuses a bad, a missing and a stale signature', async () => {
    const body = JSON.stringify({ challenge: 'c', type: 'url_verification' });
    const timestamp = now();
    const bad = await post(body, { 'x-slack-signature': sign(timestamp, `${body} `), 'x-slack-request-timestamp': timestamp });
    expectError(bad, 401, 'unauthorized');
    expect(bad.body.error.details.reason).toBe('bad_signature');
    expect((await post(body, { 'x-slack-request-timestamp': timestamp })).body.error.details.reason).toBe('missing_signature');
    const old = String(Number(timestamp) - 301);
    const stale = await post(body, { 'x-slack-signature': sign(old, body), 'x-slack-request-timestamp': old });
    expectError(stale, 401, 'unauthorized');
    expect(stale.body.error.details.reason).toBe('stale_timestamp');
  });

  it('answers a message event in its thread through chat.postMessage, once', async () => {
    const body = JSON.stringify({
      type: 'event_callback',
      team_id: 'T0123ABC',
      event_id: 'Ev0PV52K21',
      event: { type: 'message', user: 'U061F7AUR', text: 'Is the shop open on Sunday?', channel: 'C0SUPPORT', channel_type: 'channel', ts: '1700000000.000100' },
    });
    const timestamp = now();
    const headers = { 'x-slack-signature': sign(timestamp, body), 'x-slack-request-timestamp': timestamp };
    // Slack fails the first post: the reply is posted on the next try.
    slackFailures = 1;
    const acked = await post(body, headers);
    expect(acked.status, JSON.stringify(acked.body)).toBe(200);
    expect(acked.body).toEqual({ ok: true });
    // Slack retries a delivery it thinks was lost, and sends a mention as app_mention too: one message, one answer.
    expect((await post(body, { ...headers, 'x-slack-retry-num': '1' })).status).toBe(200);
    const mention = JSON.stringify({
      type: 'event_callback',
      team_id: 'T0123ABC',
      event_id: 'Ev0PV52K22',
      event: { type: 'app_mention', user: 'U061F7AUR', text: 'Is the shop open on Sunday?', channel: 'C0SUPPORT', ts: '1700000000.000100' },
    });
    expect((await post(mention, { 'x-slack-signature': sign(timestamp, mention), 'x-slack-request-timestamp': timestamp })).status).toBe(200);
    await eventually(async () => (slackPosts.length > 0 ? true : undefined), { timeoutMs: 90_000, what: 'chat.postMessage' });
    expect(slackRefused.map((request) => request.body.text)).toEqual(['reply to "Is the shop open on Sunday?" after 0 earlier']);
    expect(slackPosts[0]!.headers.authorization).toBe('Bearer xoxb-1234-5678-abcdef');
    expect(slackPosts[0]!.headers['content-type']).toContain('application/json');
    expect(slackPosts[0]!.body).toEqual({
      channel: 'C0SUPPORT',
      text: 'reply to "Is the shop open on Sunday?" after 0 earlier',
      thread_ts: '1700000000.000100',
      username: 'Helper',
    });
    // A message in a channel the bot is not set to answer in, and the bot's own message, are ignored.
    for (const event of [
      { type: 'message', user: 'U1', text: 'elsewhere', channel: 'C0OTHER', ts: '1700000001.000100' },
      { type: 'message', bot_id: 'B1', text: 'from a bot', channel: 'C0SUPPORT', ts: '1700000002.000100' },
    ]) {
      const ignored = JSON.stringify({ type: 'event_callback', team_id: 'T0123ABC', event_id: `Ev${event.ts}`, event });
      expect((await post(ignored, { 'x-slack-signature': sign(timestamp, ignored), 'x-slack-request-timestamp': timestamp })).status).toBe(200);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(slackPosts).toHaveLength(1);
    expect(modelRequestsFor('Is the shop open on Sunday?')).toHaveLength(1);
    expect(modelRequestsFor('elsewhere')).toHaveLength(0);
  }, 120_000);
});

describe('email', () => {
  let channel: any;
  const sign = (body: string) => `sha256=${createHmac('sha256', channel.webhookSecret).update(body).digest('hex')}`;
  const post = (body: string, contentType: string, signature = sign(body)) =>
    anonymous.raw(`/channels/${channel.id}/email`, { method: 'POST', headers: { 'content-type': contentType, 'x-berth-signature': signature }, body });

  beforeAll(async () => {
    const created = await live.post('/v1/channels', { type: 'email', agent: 'helper', address: 'help@shop.example', apiKey: 'SG.key-for-tests-1234' });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    channel = created.body;
    expect(channel.webhookSecret).toMatch(/^chsec_[A-Za-z0-9_-]{43}$/);
    expect((await live.get(`/v1/channels/${channel.id}`)).body.webhookSecret).toBe(`${channel.webhookSecret.slice(0, 8)}…`);
  });

  it('takes the documented JSON and mails the reply through SendGrid', async () => {
    const body = JSON.stringify({ from: 'Ada@Example.com', to: 'Help@shop.example', subject: 'Opening hours', text: 'When do you open?', messageId: '<m1@example.com>' });
    const accepted = await post(body, 'application/json');
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    expect(accepted.body).toEqual({ ok: true, messageId: expect.stringMatching(/^msg_/), conversationId: expect.stringMatching(/^conv_/) });
    const mail = await eventually(async () => sendgridMails.find((request) => request.body.subject === 'Re: Opening hours'), { timeoutMs: 90_000, what: 'the reply mail' });
    expect(mail.headers.authorization).toBe('Bearer SG.key-for-tests-1234');
    expect(mail.body).toEqual({
      personalizations: [{ to: [{ email: 'ada@example.com' }] }],
      from: { email: 'help@shop.example' },
      subject: 'Re: Opening hours',
      content: [{ type: 'text/plain', value: 'reply to "When do you open?" after 0 earlier' }],
      headers: { 'In-Reply-To': '<m1@example.com>', References: '<m1@example.com>' },
    });
    expectError(await post(body, 'application/json', sign(`${body}x`)), 401, 'unauthorized');
    const elsewhere = await post(JSON.stringify({ from: 'ada@example.com', to: 'sales@shop.example', text: 'y' }), 'application/json');
    expectError(elsewhere, 422, 'unprocessable_entity');
    expect(Object.keys(elsewhere.body.error.details.fields)).toEqual(['to']);
    const missing = await post(JSON.stringify({ subject: 'x', text: 'y' }), 'application/json');
    expectError(missing, 422, 'unprocessable_entity');
    expect(Object.keys(missing.body.error.details.fields)).toEqual(['from']);
  }, 120_000);

  it('parses a raw MIME message into the same conversation of its sender', async () => {
    const mime = [
      'From: Ada Lovelace <ada@example.com>',
      'To: help@shop.example',
      'Subject: Re: Opening hours',
      'Message-ID: <m2@example.com>',
      'MIME-Version: 1.0',
      'Content-Type: multipart/alternative; boundary="b1"',
      '',
      '--b1',
      'Content-Type: text/plain; charset=utf-8',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'And on Sunday? Caf=C3=A9 too.',
      '--b1',
      'Content-Type: text/html; charset=utf-8',
      '',
      '<p>And on Sunday? Café too.</p>',
      '--b1--',
      '',
    ].join('\r\n');
    const accepted = await post(mime, 'message/rfc822');
    expect(accepted.status, JSON.stringify(accepted.body)).toBe(202);
    const mail = await eventually(async () => sendgridMails.find((request) => request.body.content[0].value.includes('Sunday')), { timeoutMs: 90_000, what: 'the second reply' });
    expect(mail.body.content[0].value).toBe('reply to "And on Sunday? Café too." after 2 earlier');
    expect(mail.body.subject).toBe('Re: Opening hours');
    expect(mail.body.headers['In-Reply-To']).toBe('<m2@example.com>');
    // Redelivered: stored once, answered once.
    expect((await post(mime, 'message/rfc822')).body).toEqual({ ok: true, duplicate: true });
  }, 120_000);
});

describe('phone', () => {
  const authToken = 'twilio-auth-token-1234';
  let channel: any;
  const url = () => `${berth.baseUrl}/channels/${channel.id}/phone`;
  /** As Twilio signs: base64 HMAC-SHA1 of the URL and each parameter name and value, sorted by name. */
  const sign = (params: Record<string, string>) =>
    createHmac('sha1', authToken)
      .update(url() + Object.keys(params).sort().map((name) => name + params[name]).join(''))
      .digest('base64');
  const call = (params: Record<string, string>, signature = sign(params)) =>
    anonymous.raw(`/channels/${channel.id}/phone`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'x-twilio-signature': signature },
      body: new URLSearchParams(params).toString(),
    });

  beforeAll(async () => {
    const created = await live.post('/v1/channels', { type: 'phone', agent: 'helper', phoneNumber: '+15551234567', voice: 'Polly.Joanna', authToken });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    channel = created.body;
  });

  it('greets a new call, then speaks the reply to what the caller said', async () => {
    const greeting = await call({ CallSid: 'CA0001', From: '+15557654321', To: '+15551234567' });
    expect(greeting.status).toBe(200);
    expect(greeting.headers.get('content-type')).toContain('text/xml');
    expect(greeting.body).toContain('<Gather input="speech"');
    const answered = await call({ CallSid: 'CA0001', From: '+15557654321', To: '+15551234567', SpeechResult: 'Where is my order?' });
    expect(answered.status).toBe(200);
    expect(answered.body).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<Response><Say voice="Polly.Joanna">reply to &quot;Where is my order?&quot; after 0 earlier</Say>' +
        `<Gather input="speech" action="${url()}" method="POST" speechTimeout="auto"/></Response>`,
    );
    expectError(await call({ CallSid: 'CA0001', SpeechResult: 'x' }, 'forged'), 401, 'unauthorized');
    expectError(await call({ CallSid: 'CA0002', To: '+15550000000', SpeechResult: 'wrong number' }), 403, 'forbidden');
    expect(modelRequestsFor('wrong number')).toHaveLength(0);
  }, 120_000);
});

describe('a deleted channel', () => {
  it('answers 404 at once on every public route and webhook', async () => {
    const chat = (await live.post('/v1/channels', { type: 'chat_embed', agent: 'helper' })).body;
    const email = (await live.post('/v1/channels', { type: 'email', agent: 'helper', address: 'a@shop.example', apiKey: 'SG.k' })).body;
    expect((await anonymous.get(`/channels/${chat.id}/messages?visitorId=v`)).status).toBe(200);
    const open = await openSse(`${berth.baseUrl}/channels/${chat.id}/stream?visitorId=v`, undefined);
    await open.waitFor((events) => events.some((event) => event.event === 'connected'));
    expect((await live.raw(`/v1/channels/${chat.id}`, { method: 'DELETE' })).body).toEqual({ ok: true });
    await live.raw(`/v1/channels/${email.id}`, { method: 'DELETE' });
    expectError(await anonymous.post(`/channels/${chat.id}/messages`, { text: 'hello?', visitorId: 'v' }), 404, 'not_found');
    expectError(await anonymous.get(`/channels/${chat.id}/messages?visitorId=v`), 404, 'not_found');
    expectError(await anonymous.get(`/channels/${chat.id}/stream?visitorId=v`), 404, 'not_found');
    expectError(await anonymous.get(`/channels/${chat.id}/config`), 404, 'not_found');
    expectError(await anonymous.raw(`/channels/${email.id}/email`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }), 404, 'not_found');
    expectError(await live.get(`/v1/channels/${chat.id}`), 404, 'not_found');
    expect(modelRequestsFor('hello?')).toHaveLength(0);
    // A stream that was open ends too.
    await eventually(async () => (open.ended ? true : undefined), { timeoutMs: 10_000, what: 'the open stream to end' });
  });
});

describe('metrics', () => {
  it('count messages, replies, refusals and inbound webhooks', async () => {
    const metrics = parsePrometheus((await anonymous.get('/metrics')).body);
    expect(metricValue(metrics, 'berth_channel_messages_total', { type: 'chat_embed' })).toBe(4);
    expect(metricValue(metrics, 'berth_channel_replies_total', { type: 'chat_embed', result: 'answered' })).toBe(3);
    expect(metricValue(metrics, 'berth_channel_replies_total', { type: 'chat_embed', result: 'failed' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_limit_refusals_total', { limit: 'visitorMessages' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_inbound_total', { type: 'slack', result: 'accepted' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_inbound_total', { type: 'slack', result: 'duplicate' })).toBe(2);
    expect(metricValue(metrics, 'berth_channel_inbound_total', { type: 'slack', result: 'bad_signature' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_inbound_total', { type: 'email', result: 'accepted' })).toBe(2);
    expect(metricValue(metrics, 'berth_channel_outbound_total', { type: 'slack', result: 'sent' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_outbound_total', { type: 'slack', result: 'retried' })).toBe(1);
    expect(metricValue(metrics, 'berth_channel_outbound_total', { type: 'email', result: 'sent' })).toBe(2);
    expect(metricValue(metrics, 'berth_jobs_finished_total', { source: 'channel', state: 'completed' })).toBeGreaterThanOrEqual(5);
  });
});

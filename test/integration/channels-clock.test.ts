import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DEFAULT_CHANNEL_LIMITS,
  ManualClock,
  createOrganization,
  findOrCreateConversation,
  insertChannelMessage,
  newId,
} from '../../common/src/index.js';
import { ProviderRegistry } from '../../providers/src/registry.js';
import { startTestApi, type TestApi } from '../helpers/app.js';
import { IdleProvider } from '../helpers/fake-providers.js';
import { apiClient, eventually, type ApiClient } from '../helpers/http.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { openSse } from '../helpers/sse.js';

/**
 * The time-bound parts of the public channel routes, on an API whose clock the test moves: the
 * per-minute limits are hit and reset, and a channel stream sends its heartbeat every 15 s and
 * closes itself after 10 minutes, without the test waiting for either.
 */
const clock = new ManualClock('2026-05-01T09:00:00Z');
let testApi: TestApi;
let api: ApiClient;
let channelId: string;

beforeAll(async () => {
  testApi = await startTestApi({ clock, providers: new ProviderRegistry([new IdleProvider({ name: 'local' })], 'local') });
  const organizationId = (await createOrganization(testApi.pool, 'channels-clock')).id;
  api = (await testApi.client(organizationId, 'live')).api;
  expect((await api.post('/v1/agent-definitions', { name: 'helper', systemPrompt: 'Help.' })).status).toBe(201);
  const created = await api.post('/v1/channels', { type: 'chat_embed', agent: 'helper' });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  channelId = created.body.id;
});
afterAll(async () => {
  await testApi?.close();
});

describe('the reads limit of a client IP', () => {
  it('refuses the request over it with the seconds to the window end, and lets requests through again in the next window', async () => {
    const metrics = new Registry();
    const limited = await testApi.another({ metrics, channels: { limits: { ...DEFAULT_CHANNEL_LIMITS, ipReads: 3 } } });
    const visitor = apiClient(limited.baseUrl);
    const read = () => visitor.get(`/channels/${channelId}/messages?visitorId=v-limits`);
    clock.set('2026-05-01T09:00:10Z');
    for (let i = 0; i < 3; i++) expect((await read()).status).toBe(200);
    const refused = await read();
    expect(refused.status).toBe(429);
    expect(refused.body.error).toMatchObject({ code: 'rate_limited', details: { retryAfter: 50, limit: 'ipReads', max: 3 } });
    expect(refused.headers.get('retry-after')).toBe('50');
    clock.advance(30_000);
    const still = await read();
    expect(still.status).toBe(429);
    expect(still.body.error.details.retryAfter).toBe(20);
    clock.advance(20_000);
    expect((await read()).status).toBe(200);
    expect(metricValue(parsePrometheus(await metrics.metrics()), 'berth_channel_limit_refusals_total', { limit: 'ipReads' })).toBe(2);
  });
});

describe('a channel stream', () => {
  it('says connected, streams the messages of the visitor, beats every 15 s and closes after 10 minutes', async () => {
    clock.set('2026-05-01T10:00:00Z');
    const stream = await openSse(`${testApi.baseUrl}/channels/${channelId}/stream?visitorId=v-stream`, undefined);
    expect(stream.status).toBe(200);
    await stream.waitFor((events) => events.length >= 1, 5_000);
    expect(stream.events[0]).toEqual({ event: 'connected', data: { channelId, visitorId: 'v-stream' } });

    // Messages stored in the visitor's conversation (the first makes it), and none of another visitor's.
    const now = clock.now();
    const conversation = await findOrCreateConversation(testApi.pool, { id: newId('conv', now), channelId, visitorId: 'v-stream', replyTo: {} }, now);
    const other = await findOrCreateConversation(testApi.pool, { id: newId('conv', now), channelId, visitorId: 'v-other', replyTo: {} }, now);
    await insertChannelMessage(testApi.pool, { id: newId('msg', now), conversationId: other.id, role: 'user', content: 'not yours', jobId: null }, now);
    const asked = await insertChannelMessage(testApi.pool, { id: newId('msg', now), conversationId: conversation.id, role: 'user', content: 'hi', jobId: null }, now);
    const answered = await insertChannelMessage(testApi.pool, { id: newId('msg', now), conversationId: conversation.id, role: 'assistant', content: 'hello', jobId: null }, now);
    await stream.waitFor((events) => events.filter((event) => event.event === 'message').length >= 2, 5_000);
    expect(stream.events.filter((event) => event.event === 'message')).toEqual([
      { event: 'message', data: { role: 'user', content: 'hi', messageId: asked!.id } },
      { event: 'message', data: { role: 'assistant', content: 'hello', messageId: answered!.id } },
    ]);

    expect(stream.events.some((event) => event.event === 'heartbeat')).toBe(false);
    clock.advance(15_000);
    await stream.waitFor((events) => events.some((event) => event.event === 'heartbeat'), 5_000);
    expect(stream.events.find((event) => event.event === 'heartbeat')!.data).toEqual({ t: Date.parse('2026-05-01T10:00:15Z') });

    const ended = new Promise<void>((resolve) => {
      const check = setInterval(() => {
        if (stream.ended) {
          clearInterval(check);
          resolve();
        }
      }, 50);
    });
    clock.advance(9 * 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(stream.ended).toBe(false);
    clock.advance(45_000);
    await ended;
    expect(stream.events.filter((event) => event.event === 'heartbeat').length).toBeGreaterThanOrEqual(2);
  });
});

describe('a server that stops', () => {
  it('answers a message still waiting for its reply with 504 at once, and keeps the message', async () => {
    // No operator runs here: the reply never comes, so only the stop ends the wait.
    const stopping = await testApi.another({ metrics: new Registry() });
    const pending = apiClient(stopping.baseUrl).post(`/channels/${channelId}/messages`, { text: 'still there?', visitorId: 'v-stop' });
    await eventually(async () => ((await testApi.pool.query("SELECT 1 FROM channel_messages WHERE content = 'still there?'")).rowCount ? true : undefined), {
      what: 'the message stored',
    });
    const started = Date.now();
    await stopping.app.close();
    const answer = await pending;
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(answer.status, JSON.stringify(answer.body)).toBe(504);
    expect(answer.body.error).toMatchObject({ code: 'timeout', details: { jobId: expect.stringMatching(/^job_/) } });
    const history = await api.get(`/channels/${channelId}/messages?visitorId=v-stop`);
    expect(history.body.messages.map((message: any) => message.content)).toEqual(['still there?']);
  });
});

describe('a channel whose agent definition was archived', () => {
  it('refuses messages with 409 and stores nothing', async () => {
    const definitionId = (await api.get(`/v1/channels/${channelId}`)).body.agent;
    expect((await api.raw(`/v1/agent-definitions/${definitionId}`, { method: 'DELETE' })).status).toBe(200);
    clock.advance(60_000);
    const refused = await apiClient(testApi.baseUrl).post(`/channels/${channelId}/messages`, { text: 'anyone there?', visitorId: 'v-archived' });
    expect(refused.status, JSON.stringify(refused.body)).toBe(409);
    expect(refused.body.error).toMatchObject({ code: 'conflict', details: { definitionId } });
    const { rows } = await testApi.pool.query("SELECT count(*)::int AS n FROM channel_messages WHERE content = 'anyone there?'");
    expect(rows[0].n).toBe(0);
    // The one job is that of the message the stopping server took.
    expect((await testApi.pool.query("SELECT count(*)::int AS n FROM jobs WHERE source = 'channel'")).rows[0].n).toBe(1);
  });
});

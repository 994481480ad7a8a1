import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ManualClock,
  SecretBox,
  channelCredentialsPlace,
  createOrganization,
  createPool,
  deleteChannel,
  enqueueJob,
  findOrCreateConversation,
  insertChannel,
  insertChannelMessage,
  migrate,
  newId,
  recordChannelReply,
  silentLogger,
  type Pool,
} from '../../common/src/index.js';
import { ChannelReplySender } from '../../operator/src/channels/sender.js';
import { metricValue, parsePrometheus } from '../helpers/prometheus.js';
import { createTestDatabase } from '../helpers/postgres.js';
import { randomBytes } from 'node:crypto';

/**
 * The sender of Slack and email replies against real PostgreSQL and a local server speaking
 * Slack's `chat.postMessage`, on a clock the test moves: a reply the job stored is sent, one
 * Slack refuses is tried again at its times and then given up, one of a deleted channel is not
 * sent, and two senders never send one reply twice.
 */
const clock = new ManualClock('2026-06-01T12:00:00Z');
const box = new SecretBox(randomBytes(32));
let pool: Pool;
let slack: Server;
let slackUrl: string;
/** What the local Slack received; it answers 500 while `refusing` is true. */
const posts: { authorization: string | undefined; body: any }[] = [];
let refusing = false;
let organizationId: string;
let definitionId: string;

beforeAll(async () => {
  pool = createPool(await createTestDatabase());
  await migrate(pool);
  organizationId = (await createOrganization(pool, 'channel-replies')).id;
  definitionId = newId('adef', clock.now());
  await pool.query(
    `INSERT INTO agent_definitions (id, organization_id, mode, name, current_version, created_at, updated_at) VALUES ($1, $2, 'live', 'helper', 1, $3, $3)`,
    [definitionId, organizationId, clock.now()],
  );
  slack = createServer((req, res) => {
    let text = '';
    req.on('data', (chunk: Buffer) => (text += chunk.toString()));
    req.on('end', () => {
      posts.push({ authorization: req.headers.authorization, body: JSON.parse(text) });
      if (refusing) res.writeHead(500, { 'content-type': 'application/json' }).end('{"ok":false,"error":"internal_error"}');
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    });
  });
  await new Promise<void>((resolve) => slack.listen(0, '127.0.0.1', resolve));
  slackUrl = `http://127.0.0.1:${(slack.address() as AddressInfo).port}/api`;
});
afterAll(async () => {
  slack?.closeAllConnections();
  await new Promise((resolve) => slack?.close(resolve));
  await pool?.end();
});

const sender = (identity: string, metrics = new Registry()) =>
  new ChannelReplySender({ pool, clock, log: silentLogger, metrics, box, identity, slackApiUrl: slackUrl, sendgridApiUrl: 'http://127.0.0.1:9' });

/** A Slack channel, a thread's conversation in it, a visitor's message and its job, and the job's reply stored as the executor stores it. */
async function storedReply(text: string): Promise<{ channelId: string; replyId: string }> {
  const now = clock.now();
  const id = newId('ch', now);
  const place = { id, organizationId, mode: 'live' as const };
  await insertChannel(
    pool,
    {
      ...place,
      type: 'slack',
      name: null,
      definitionId,
      settings: { workspace: 'T1', botName: 'Helper' },
      allowedOrigins: [],
      credentials: box.seal(channelCredentialsPlace(place), JSON.stringify({ botToken: 'xoxb-test', signingSecret: 'secret-123' })),
      credentialHints: {},
    },
    now,
  );
  const conversation = await findOrCreateConversation(pool, { id: newId('conv', now), channelId: id, visitorId: 'slack:C1:1.1', replyTo: { channel: 'C1', threadTs: '1.1' } }, now);
  const job = await enqueueJob(pool, { organizationId, mode: 'live', source: 'channel', sourceId: id, userId: id, definitionId, input: 'hi' }, now);
  await insertChannelMessage(pool, { id: newId('msg', now), conversationId: conversation.id, role: 'user', content: 'hi', jobId: job.id }, now);
  await recordChannelReply(pool, job, text, now);
  // Stored twice (a finish tried again): one reply, one send.
  await recordChannelReply(pool, job, text, now);
  const { rows } = await pool.query("SELECT id FROM channel_messages WHERE job_id = $1 AND role = 'assistant'", [job.id]);
  expect(rows).toHaveLength(1);
  return { channelId: id, replyId: rows[0].id };
}

const stateOf = async (id: string) =>
  (await pool.query('SELECT delivery_state, delivery_attempts, delivery_error FROM channel_messages WHERE id = $1', [id])).rows[0];

describe('the channel reply sender', () => {
  it('sends a stored reply in its thread once, however many senders look', async () => {
    const metrics = new Registry();
    const { replyId } = await storedReply('the first answer');
    const [a, b] = [sender('sender-a', metrics), sender('sender-b')];
    const tried = await Promise.all([a.tick(), b.tick(), a.tick()]);
    expect(tried.reduce((sum, n) => sum + n, 0)).toBe(1);
    expect(posts).toEqual([{ authorization: 'Bearer xoxb-test', body: { channel: 'C1', text: 'the first answer', thread_ts: '1.1', username: 'Helper' } }]);
    expect(await stateOf(replyId)).toEqual({ delivery_state: 'sent', delivery_attempts: 1, delivery_error: null });
    expect(await a.tick()).toBe(0);
    expect(metricValue(parsePrometheus(await metrics.metrics()), 'berth_channel_outbound_total', { type: 'slack', result: 'sent' })).toBe(1);
  });

  it('tries a refused reply again after 2 s, 10 s and 60 s, then gives up', async () => {
    posts.length = 0;
    refusing = true;
    const { replyId } = await storedReply('a refused answer');
    const one = sender('sender-a');
    expect(await one.tick()).toBe(1);
    expect(await stateOf(replyId)).toMatchObject({ delivery_state: 'pending', delivery_attempts: 1, delivery_error: expect.stringContaining('500') });
    clock.advance(1_999);
    expect(await one.tick()).toBe(0);
    for (const wait of [1, 10_000, 60_000]) {
      clock.advance(wait);
      expect(await one.tick()).toBe(1);
    }
    expect(posts).toHaveLength(4);
    expect(await stateOf(replyId)).toMatchObject({ delivery_state: 'failed', delivery_attempts: 4 });
    clock.advance(3_600_000);
    expect(await one.tick()).toBe(0);
    refusing = false;
  });

  it('does not send a reply of a channel deleted before it went out', async () => {
    posts.length = 0;
    const { channelId, replyId } = await storedReply('too late');
    await deleteChannel(pool, channelId, clock.now());
    expect(await sender('sender-a').tick()).toBe(1);
    expect(posts).toEqual([]);
    expect(await stateOf(replyId)).toMatchObject({ delivery_state: 'failed', delivery_error: 'the channel was deleted' });
  });
});

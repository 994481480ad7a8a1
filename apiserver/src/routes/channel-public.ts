import { ApiError, findChannel, getJob, replyMessageId, type ChannelLimits, type ChannelMessage, type ChannelRecord, type Clock, type Logger, type Pool } from '@berth/common';
import type { Request } from 'express';
import { z } from 'zod';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import type { ChannelLimiter } from '../services/channel-limits.js';
import type { ConversationService } from '../services/conversations.js';
import type { StreamHub } from '../services/stream-hub.js';

/** The channel stream closes itself after this long; the client opens another. */
export const CHANNEL_STREAM_LIFETIME_MS = 10 * 60_000;
export const MAX_MESSAGE_TEXT = 4_000;
export const MAX_PUBLIC_BODY_BYTES = 16 * 1024;
/** How soon an open stream of a deleted channel ends. */
const DELETED_CHECK_MS = 5_000;

export interface ChannelSettings {
  limits: ChannelLimits;
  replyTimeoutMs: number;
}

export const channelParam = z.object({ channelId: z.string().min(1).max(128).describe('the channel id (`ch_…`): the access token of these routes') }).strict();
const visitorIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.:@-]{1,128}$/, 'must be 1 to 128 letters, digits and _ . : @ -')
  .describe('who is chatting: an id the widget makes and keeps in localStorage');
const messageSchema = z.object({
  id: z.string().describe('`msg_…`'),
  role: z.enum(['user', 'assistant']),
  content: z.string(),
  createdAt: z.string(),
});
const streamEventSchema = z
  .object({ event: z.enum(['connected', 'message', 'delta', 'heartbeat']), data: z.string().describe('the payload, as JSON') })
  .meta({ id: 'ChannelStreamEvent', description: 'one event of a channel stream' });

/** The channel behind a public route: of `type` when given, not deleted; else 404. */
export async function liveChannel(pool: Pool, id: string, type?: ChannelRecord['type']): Promise<ChannelRecord> {
  const channel = await findChannel(pool, id);
  if (!channel || (type && channel.type !== type)) throw new ApiError('not_found', `no ${type ? `${type} ` : ''}channel ${id}`);
  return channel;
}

const clientIp = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

/**
 * The public chat routes of `chat_embed` channels (no API key: the channel id is the access
 * token): the widget's settings, a message answered synchronously, the history, and the stream.
 */
export function channelPublicRoutes(
  table: RouteTable,
  deps: {
    pool: Pool;
    clock: Clock;
    log: Logger;
    conversations: ConversationService;
    /** The agents' event streams: a reply's text is relayed from its run's as the model writes it. */
    agentStreams: StreamHub;
    limiter: ChannelLimiter;
    settings: ChannelSettings;
    heartbeatMs: number;
  },
): void {
  const { pool, conversations, limiter, settings } = deps;

  /**
   * Relays the text the model streams while it writes the reply to `message` (a visitor's
   * message), as `delta` events of the reply's id, until the reply is stored or the stream ends.
   * The job's agent is made for that job alone, so every event of its stream is of this run.
   */
  function relayReply(message: ChannelMessage, write: (text: string) => void, closed: Promise<void>): void {
    if (message.role !== 'user' || !message.jobId) return;
    const jobId = message.jobId;
    void (async () => {
      let done = false;
      void closed.then(() => (done = true));
      let agentId: string | null = null;
      while (!done && !agentId) {
        const job = await getJob(pool, jobId);
        if (!job || ['completed', 'failed', 'cancelled'].includes(job.state)) return;
        agentId = job.agentId;
        if (!agentId) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      if (done || !agentId) return;
      let stop: () => void = () => undefined;
      const finished = new Promise<void>((resolve) => (stop = resolve));
      const unsubscribe = await deps.agentStreams.subscribe(agentId, '0', (events) => {
        for (const event of events) {
          if (event.type === 'thinking' && typeof event.data.text === 'string') write(event.data.text);
          if (event.type === 'output' || event.type === 'error') stop();
        }
      });
      await Promise.race([finished, closed]);
      unsubscribe();
    })().catch((error: unknown) => deps.log.warn({ err: error, jobId }, 'relaying a reply as it is written failed; its message still comes'));
  }

  table.add(
    defineRoute({
      method: 'get',
      path: '/channels/:channelId/config',
      operationId: 'getChannelConfig',
      tag: 'Channels',
      summary: "A chat channel's public settings",
      description: 'No API key: what the widget needs to draw itself. Only `chat_embed` channels; others and deleted ones are 404. Counted against the reads limit of the client IP.',
      auth: false,
      params: channelParam,
      responses: {
        200: {
          description: 'the settings',
          schema: z.object({ channelId: z.string(), type: z.literal('chat_embed'), theme: z.record(z.string(), z.unknown()) }).meta({ id: 'ChannelConfig' }),
          example: { channelId: 'ch_01m80gqv9d4kjqfcmvs2q4jxem', type: 'chat_embed', theme: { primaryColor: '#0b5fff', title: 'Ask us' } },
        },
      },
      errors: ['not_found', 'forbidden', 'rate_limited'],
      handler: async ({ req, params }) => {
        const channel = await liveChannel(pool, params.channelId, 'chat_embed');
        await limiter.read(clientIp(req));
        return { status: 200, body: { channelId: channel.id, type: 'chat_embed', theme: channel.settings.theme ?? {} } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/channels/:channelId/messages',
      operationId: 'postChannelMessage',
      tag: 'Channels',
      summary: 'Send a message and get the reply',
      description:
        "No API key: the channel id is the access token. Stores `text` in the visitor's conversation (made on the first message), runs the channel's agent definition on the whole conversation, and answers with the reply once it is there (synchronous). " +
        '`messageId` is the stored id of the visitor\'s message; `response.id` that of the reply (the `messageId` of its stream event). ' +
        `Limits: per channel, per visitor and per client IP a minute (429 \`rate_limited\` with \`details.retryAfter\` and \`Retry-After\`); \`text\` up to ${MAX_MESSAGE_TEXT} characters, the body up to ${MAX_PUBLIC_BODY_BYTES / 1024} KiB. ` +
        'A run that fails is 502 `provider_error` (`details.reason`); a reply slower than the reply timeout is 504 `timeout` (stored and streamed when it comes). Only `chat_embed` channels; deleted ones are 404 at once. A browser origin not in the channel\'s `allowedOrigins` is 403.',
      auth: false,
      params: channelParam,
      body: z
        .object({
          text: z.string().trim().min(1, 'must not be empty').max(MAX_MESSAGE_TEXT).describe("the visitor's message"),
          visitorId: visitorIdSchema,
        })
        .strict(),
      requestExample: { text: 'Where is my order 1042?', visitorId: 'v_8f3k2m9x' },
      responses: {
        200: {
          description: 'the reply',
          schema: z
            .object({
              messageId: z.string().describe("the visitor's message (`msg_…`)"),
              conversationId: z.string().describe('`conv_…`'),
              response: z.object({ id: z.string().describe('the reply (`msg_…`)'), role: z.literal('assistant'), content: z.string() }),
            })
            .meta({ id: 'ChannelReply' }),
          example: {
            messageId: 'msg_01m80gqv9d4kjqfcmvs2q4jxem',
            conversationId: 'conv_01m80gqv9d4kjqfcmvs2q4jxem',
            response: { id: 'msg_01m80gr2q3w8c6d5e4f3g2h1jk', role: 'assistant', content: 'Order 1042 left our warehouse yesterday.' },
          },
        },
      },
      errors: ['not_found', 'forbidden', 'rate_limited', 'conflict', 'provider_error', 'timeout', 'session_limit_exceeded'],
      handler: async ({ req, params, body }) => {
        const channel = await liveChannel(pool, params.channelId, 'chat_embed');
        await limiter.message(channel.id, body.visitorId, clientIp(req));
        const received = await conversations.receive(channel.id, { visitorId: body.visitorId, text: body.text }, req.log);
        if (!received) throw new ApiError('internal_error', 'the message was not stored');
        const reply = await conversations.awaitReply(received, body.visitorId, settings.replyTimeoutMs);
        return {
          status: 200,
          body: { messageId: received.message.id, conversationId: received.conversationId, response: { id: reply.id, role: 'assistant', content: reply.content } },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/channels/:channelId/messages',
      operationId: 'listChannelMessages',
      tag: 'Channels',
      summary: "A visitor's conversation",
      description:
        "No API key. The visitor's conversation id (null before their first message) and its latest `limit` messages, oldest first. Counted against the reads limit of the client IP. Only `chat_embed` channels.",
      auth: false,
      params: channelParam,
      query: z
        .object({
          visitorId: visitorIdSchema,
          limit: z
            .string()
            .regex(/^[0-9]{1,9}$/, 'must be a whole number in decimal digits')
            .transform(Number)
            .pipe(z.number().int().min(1).max(200))
            .default(50)
            .describe('at most this many, 1 to 200 (default 50)'),
        })
        .strict(),
      responses: {
        200: {
          description: 'the conversation',
          schema: z.object({ conversationId: z.string().nullable(), messages: z.array(messageSchema) }).meta({ id: 'ChannelHistory' }),
          example: {
            conversationId: 'conv_01m80gqv9d4kjqfcmvs2q4jxem',
            messages: [
              { id: 'msg_01m80gqv9d4kjqfcmvs2q4jxem', role: 'user', content: 'Where is my order 1042?', createdAt: '2026-03-02T10:00:00.000Z' },
              { id: 'msg_01m80gr2q3w8c6d5e4f3g2h1jk', role: 'assistant', content: 'It left our warehouse yesterday.', createdAt: '2026-03-02T10:00:02.000Z' },
            ],
          },
        },
      },
      errors: ['not_found', 'forbidden', 'rate_limited'],
      handler: async ({ req, params, query }) => {
        const channel = await liveChannel(pool, params.channelId, 'chat_embed');
        await limiter.read(clientIp(req));
        const history = await conversations.history(channel.id, query.visitorId, query.limit);
        return {
          status: 200,
          body: {
            conversationId: history.conversationId,
            messages: history.messages.map(({ id, role, content, createdAt }) => ({ id, role, content, createdAt })),
          },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/channels/:channelId/stream',
      operationId: 'streamChannel',
      tag: 'Channels',
      summary: "Stream a visitor's conversation",
      description:
        'No API key. Server-sent events: `connected` `{ channelId, visitorId }` first; `message` `{ role, content, messageId }` for each message of the visitor\'s conversation stored after the stream opened (their own, also from another tab, and each reply); ' +
        '`delta` `{ messageId, text }` while a reply is being written: pieces of its text as the model streams them, `messageId` being the id its `message` will have (which then replaces them); `heartbeat` `{ t }` (milliseconds) every 15 s. ' +
        'The server closes the stream after 10 minutes (and within 5 s of the channel being deleted); open a new one. Counted against the reads limit of the client IP. Only `chat_embed` channels.',
      auth: false,
      params: channelParam,
      query: z.object({ visitorId: visitorIdSchema }).strict(),
      responses: {
        200: {
          description: 'an event stream',
          contentType: 'text/event-stream',
          schema: streamEventSchema,
          example: { event: 'message', data: '{"role":"assistant","content":"Hello!","messageId":"msg_01m80gr2q3w8c6d5e4f3g2h1jk"}' },
        },
      },
      errors: ['not_found', 'forbidden', 'rate_limited'],
      handler: async ({ req, res, params, query }) => {
        const channel = await liveChannel(pool, params.channelId, 'chat_embed');
        await limiter.read(clientIp(req));
        let stream: ReturnType<typeof openEventStream> | undefined;
        const early: Parameters<Parameters<ConversationService['follow']>[2]>[0] = [];
        // Replies already sent whole: a piece of their text relayed late is not sent after them.
        const replied = new Set<string>();
        const send = (messages: typeof early) => {
          for (const message of messages) {
            stream!.write('message', { role: message.role, content: message.content, messageId: message.id });
            replied.add(message.id);
            if (message.role === 'user' && message.jobId) {
              const messageId = replyMessageId(message.jobId);
              relayReply(message, (text) => replied.has(messageId) || stream!.write('delta', { messageId, text }), stream!.closed);
            }
          }
        };
        // Subscribed before the headers go out: a message sent once the stream answered is not missed.
        const unsubscribe = await conversations.follow(channel.id, query.visitorId, (messages) => (stream ? send(messages) : early.push(...messages)));
        stream = openEventStream(req, res, deps.heartbeatMs, { clock: deps.clock, lifetimeMs: CHANNEL_STREAM_LIFETIME_MS });
        stream.write('connected', { channelId: channel.id, visitorId: query.visitorId });
        send(early.splice(0));
        // A channel deleted while its streams are open ends them too.
        const gone = setInterval(() => {
          void findChannel(pool, channel.id).then((live) => live || res.end(), () => undefined);
        }, DELETED_CHECK_MS);
        await stream.closed;
        clearInterval(gone);
        unsubscribe();
      },
    }),
  );
}

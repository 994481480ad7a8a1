import { ApiError, checkTriggerSignature, findChannel, getJob, replyMessageId, type ChannelMessage, type ChannelRecord, type Clock, type Logger, type Pool, type SecretBox } from '@berth/common';
import type { Request } from 'express';
import { Counter, type Registry } from 'prom-client';
import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import { openEventStream } from '../http/sse.js';
import type { ChannelLimiter } from '../services/channel-limits.js';
import { checkSlackSignature, postSlackMessage, slackConversationOf, SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER, type SlackMessageEvent } from '../services/channel-slack.js';
import { MAX_EMAIL_TEXT, parseRawEmail, replySubject, sendGridMail, type InboundEmail } from '../services/channel-email.js';
import { checkTwilioSignature, speakAndListen, TWILIO_SIGNATURE_HEADER } from '../services/channel-phone.js';
import { DEFAULT_VOICE, openCredentials } from '../services/channels.js';
import type { ConversationService, Received } from '../services/conversations.js';
import type { StreamHub } from '../services/stream-hub.js';

/** The channel stream closes itself after this long; the client opens another. */
export const CHANNEL_STREAM_LIFETIME_MS = 10 * 60_000;
export const MAX_MESSAGE_TEXT = 4_000;
export const MAX_PUBLIC_BODY_BYTES = 16 * 1024;
export const MAX_INBOUND_BODY_BYTES = 1024 * 1024;
/** Twilio waits 15 s for a webhook's answer; a reply not ready sooner is apologised for. */
const PHONE_REPLY_TIMEOUT_MS = 12_000;
export const EMAIL_SIGNATURE_HEADER = 'x-berth-signature';
/** How soon an open stream of a deleted channel ends. */
const DELETED_CHECK_MS = 5_000;

export interface ChannelSettings {
  limits: import('@berth/common').ChannelLimits;
  replyTimeoutMs: number;
  slackApiUrl: string;
  sendgridApiUrl: string;
}

const channelParam = z.object({ channelId: z.string().min(1).max(128).describe('the channel id (`ch_…`): the access token of these routes') }).strict();
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

const clientIp = (req: Request) => req.ip ?? req.socket.remoteAddress ?? 'unknown';

export function channelPublicRoutes(
  table: RouteTable,
  deps: {
    pool: Pool;
    clock: Clock;
    box: SecretBox;
    log: Logger;
    metrics: Registry;
    conversations: ConversationService;
    /** The agents' event streams: a reply's text is relayed from its run's as the model writes it. */
    agentStreams: StreamHub;
    limiter: ChannelLimiter;
    settings: ChannelSettings;
    heartbeatMs: number;
    publicUrl: string | undefined;
  },
): void {
  const { pool, conversations, limiter, settings } = deps;
  const inbound = new Counter({
    name: 'berth_channel_inbound_total',
    help: 'Inbound channel webhooks (Slack, email, phone), by channel type and result',
    labelNames: ['type', 'result'],
    registers: [deps.metrics],
  });
  const outbound = new Counter({
    name: 'berth_channel_outbound_total',
    help: 'Replies sent out through a provider (Slack chat.postMessage, SendGrid mail/send), by channel type and result',
    labelNames: ['type', 'result'],
    registers: [deps.metrics],
  });

  /** The channel behind a public route: of `type` when given, not deleted; else 404. */
  async function liveChannel(id: string, type?: ChannelRecord['type']): Promise<ChannelRecord> {
    const channel = await findChannel(pool, id);
    if (!channel || (type && channel.type !== type)) throw new ApiError('not_found', `no ${type ?? ''} channel ${id}`.replace('  ', ' '));
    return channel;
  }

  /** Refused inbound requests: counted, then answered with the error. */
  function refuse(type: string, result: string, error: ApiError): never {
    inbound.inc({ type, result });
    throw error;
  }

  /** Waits for the reply in the background and hands it to a provider; an answer already went to the webhook. */
  function replyLater(received: Received, visitorId: string, send: (text: string) => Promise<void>): void {
    const type = received.channel.type;
    void (async () => {
      try {
        const reply = await conversations.awaitReply(received, visitorId, settings.replyTimeoutMs);
        await send(reply.content);
        outbound.inc({ type, result: 'sent' });
      } catch (error) {
        outbound.inc({ type, result: 'failed' });
        deps.log.warn({ err: error, channelId: received.channel.id, jobId: received.job.id }, 'a channel reply could not be sent');
      }
    })();
  }

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
        const channel = await liveChannel(params.channelId, 'chat_embed');
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
        const channel = await liveChannel(params.channelId, 'chat_embed');
        await limiter.message(channel.id, body.visitorId, clientIp(req));
        const received = await conversations.receive(channel.id, { visitorId: body.visitorId, text: body.text });
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
        const channel = await liveChannel(params.channelId, 'chat_embed');
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
        const channel = await liveChannel(params.channelId, 'chat_embed');
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
    defineRoute({
      method: 'post',
      path: '/channels/:channelId/slack/events',
      operationId: 'slackEvents',
      tag: 'Channels',
      summary: 'Slack Events API webhook',
      description:
        "The request URL of a `slack` channel's Slack app. `X-Slack-Signature` (`v0=` HMAC-SHA256 of `v0:<X-Slack-Request-Timestamp>:<raw body>`, keyed by the signing secret) is checked; a timestamp more than 300 s from the server's clock is refused (401, `details.reason`: `missing_signature`, `bad_signature`, `bad_timestamp`, `stale_timestamp`). " +
        '`url_verification` is answered with its `challenge`. A message event of the channel\'s workspace (not from a bot, not an edit, in one of its `channels` when it lists any) is stored and acknowledged at once (`{ ok: true }`); the reply is posted in its thread with `chat.postMessage`. Other events are acknowledged and ignored. A message is answered once however often it arrives (a redelivery, or both its `message` and `app_mention` events).',
      auth: false,
      params: channelParam,
      headers: [
        { name: SLACK_SIGNATURE_HEADER, required: true, description: '`v0=` and the hex HMAC-SHA256 of `v0:<timestamp>:<raw body>`', pattern: '^v0=[0-9a-f]{64}$' },
        { name: SLACK_TIMESTAMP_HEADER, required: true, description: 'Unix seconds when Slack signed the request', pattern: '^[0-9]{1,12}$' },
      ],
      rawBody: { limitBytes: MAX_INBOUND_BODY_BYTES, description: 'an Events API payload as Slack sends it', example: { type: 'url_verification', challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' } },
      responses: {
        200: {
          description: 'acknowledged (with the challenge of a url_verification)',
          schema: z.object({ ok: z.literal(true).optional(), challenge: z.string().optional() }).meta({ id: 'SlackAck' }),
          example: { challenge: '3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P' },
        },
      },
      errors: ['unauthorized', 'not_found'],
      handler: async ({ req, params }) => {
        const channel = await liveChannel(params.channelId, 'slack');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const credentials = openCredentials(deps.box, channel);
        const problem = checkSlackSignature(
          credentials.signingSecret ?? '',
          raw,
          { signature: req.get(SLACK_SIGNATURE_HEADER), timestamp: req.get(SLACK_TIMESTAMP_HEADER) },
          deps.clock.now(),
        );
        if (problem) refuse('slack', problem, new ApiError('unauthorized', `the Slack request signature does not hold: ${problem.replace('_', ' ')}`, { reason: problem }));
        let payload: { type?: string; challenge?: string; team_id?: string; event_id?: string; event?: SlackMessageEvent };
        try {
          payload = JSON.parse(raw.toString('utf8')) as typeof payload;
        } catch {
          refuse('slack', 'bad_body', new ApiError('unprocessable_entity', 'the body is not JSON', { fields: { body: ['not JSON'] } }));
        }
        if (payload.type === 'url_verification' && typeof payload.challenge === 'string') {
          inbound.inc({ type: 'slack', result: 'url_verification' });
          return { status: 200, body: { challenge: payload.challenge } };
        }
        const event = payload.event;
        const answerable =
          payload.type === 'event_callback' &&
          payload.team_id === channel.settings.workspace &&
          event !== undefined &&
          (event.type === 'message' || event.type === 'app_mention') &&
          !event.subtype &&
          !event.bot_id &&
          typeof event.text === 'string' &&
          event.text.trim() !== '' &&
          typeof event.channel === 'string' &&
          typeof event.ts === 'string';
        const listed = channel.settings.channels as string[] | undefined;
        if (!answerable || (listed?.length && !listed.includes(event!.channel!))) {
          inbound.inc({ type: 'slack', result: 'ignored' });
          return { status: 200, body: { ok: true } };
        }
        const where = slackConversationOf(event!);
        const received = await conversations.receive(channel.id, {
          visitorId: where.visitorId,
          text: event!.text!.trim().slice(0, MAX_MESSAGE_TEXT),
          replyTo: where.replyTo,
          // A redelivery, and the app_mention twin of a message event, are the same message.
          externalId: `${event!.channel}:${event!.ts}`,
        });
        if (!received) {
          inbound.inc({ type: 'slack', result: 'duplicate' });
          return { status: 200, body: { ok: true } };
        }
        inbound.inc({ type: 'slack', result: 'accepted' });
        replyLater(received, where.visitorId, (text) =>
          postSlackMessage(settings.slackApiUrl, credentials.botToken ?? '', {
            channel: where.replyTo.channel,
            text,
            threadTs: where.replyTo.threadTs,
            username: channel.settings.botName as string | undefined,
          }),
        );
        return { status: 200, body: { ok: true } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/channels/:channelId/email',
      operationId: 'inboundEmail',
      tag: 'Channels',
      summary: 'Inbound email webhook',
      description:
        "Mail to an `email` channel's address, forwarded by your mail provider: JSON `{ from, to?, subject?, text, messageId? }` (`Content-Type: application/json`; `to`, when given, must include the channel's address) or the raw message (`Content-Type: message/rfc822`, read with mailparser: its text part, else its HTML as text). " +
        `Signed: \`${EMAIL_SIGNATURE_HEADER}: sha256=<hex HMAC-SHA256 of the raw body, keyed by the channel's webhookSecret>\` (401 \`details.reason\` otherwise). ` +
        `Text beyond ${MAX_EMAIL_TEXT} characters is cut. Answers 202 once stored; the reply is mailed to the sender with SendGrid (\`Re: <subject>\`, \`In-Reply-To\`). One conversation per sender address; a redelivered message (same Message-ID) is answered once.`,
      auth: false,
      params: channelParam,
      headers: [{ name: EMAIL_SIGNATURE_HEADER, required: true, description: 'HMAC-SHA256 of the raw body keyed by the webhookSecret, hex, optionally after `sha256=`', pattern: '^(sha256=)?[0-9a-f]{64}$' }],
      rawBody: {
        limitBytes: MAX_INBOUND_BODY_BYTES,
        description: 'the mail as JSON, or as the raw RFC 5322 message',
        example: { from: 'ada@example.com', subject: 'Order 1042', text: 'Where is my order?', messageId: '<CAF3k2@mail.example.com>' },
        contentTypes: ['application/json', 'message/rfc822'],
      },
      responses: {
        202: {
          description: 'stored; the reply follows by mail',
          schema: z.object({ ok: z.literal(true), messageId: z.string(), conversationId: z.string() }).meta({ id: 'InboundAccepted' }),
          example: { ok: true, messageId: 'msg_01m80gqv9d4kjqfcmvs2q4jxem', conversationId: 'conv_01m80gqv9d4kjqfcmvs2q4jxem' },
        },
        200: {
          description: 'a message delivered before: not answered again',
          schema: z.object({ ok: z.literal(true), duplicate: z.literal(true) }).meta({ id: 'InboundDuplicate' }),
          example: { ok: true, duplicate: true },
        },
      },
      errors: ['unauthorized', 'not_found', 'conflict', 'unsupported_media_type'],
      handler: async ({ req, params }) => {
        const channel = await liveChannel(params.channelId, 'email');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const credentials = openCredentials(deps.box, channel);
        const check = checkTriggerSignature(credentials.webhookSecret ?? '', raw, { signature: req.get(EMAIL_SIGNATURE_HEADER), timestamp: undefined }, deps.clock.now());
        if (!check.ok) refuse('email', check.problem, new ApiError('unauthorized', `the ${EMAIL_SIGNATURE_HEADER} signature does not hold`, { reason: check.problem }));
        const mail = await readEmail(req, raw).catch((error: unknown) => refuse('email', 'bad_body', error instanceof ApiError ? error : new ApiError('unprocessable_entity', 'the mail could not be read')));
        const address = (channel.settings.address as string).toLowerCase();
        if (mail.to !== undefined && !mail.to.toLowerCase().includes(address)) {
          refuse('email', 'wrong_address', new ApiError('unprocessable_entity', `the mail is not to this channel's address ${address}`, { fields: { to: [`must include ${address}`] } }));
        }
        const from = mail.from.toLowerCase();
        const received = await conversations.receive(channel.id, {
          visitorId: `email:${from}`,
          text: mail.text.slice(0, MAX_EMAIL_TEXT),
          replyTo: { address: from, subject: mail.subject ?? null, messageId: mail.messageId ?? null },
          externalId: mail.messageId,
        });
        if (!received) {
          inbound.inc({ type: 'email', result: 'duplicate' });
          return { status: 200, body: { ok: true, duplicate: true } };
        }
        inbound.inc({ type: 'email', result: 'accepted' });
        replyLater(received, `email:${from}`, (text) =>
          sendGridMail(settings.sendgridApiUrl, credentials.apiKey ?? '', {
            from: channel.settings.address as string,
            to: from,
            subject: replySubject(mail.subject),
            text,
            inReplyTo: mail.messageId,
          }),
        );
        return { status: 202, body: { ok: true, messageId: received.message.id, conversationId: received.conversationId } };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/channels/:channelId/phone',
      operationId: 'inboundCall',
      tag: 'Channels',
      summary: 'Phone (voice) webhook',
      description:
        "The voice webhook of a `phone` channel's number, and the action of each `<Gather input=\"speech\">` it answers with: Twilio's form-encoded request (`CallSid`, `From`, `To`, `SpeechResult`: the caller's words from the provider's speech-to-text), signed with `X-Twilio-Signature` (401 otherwise); a call to another number than the channel's `phoneNumber` is 403. " +
        'Answers TwiML: the reply spoken with the channel\'s `voice`, then listening again; without `SpeechResult` (the call just started) a greeting. One conversation per call. A reply slower than 12 s is apologised for and spoken on the next turn of the conversation\'s history.',
      auth: false,
      params: channelParam,
      headers: [{ name: TWILIO_SIGNATURE_HEADER, required: true, description: 'base64 HMAC-SHA1 of the URL and the sorted parameters, keyed by the auth token' }],
      rawBody: {
        limitBytes: MAX_INBOUND_BODY_BYTES,
        description: 'form-encoded, as Twilio sends it',
        example: 'CallSid=CA1234&From=%2B15557654321&SpeechResult=Where+is+my+order',
        contentTypes: ['application/x-www-form-urlencoded'],
      },
      responses: {
        200: {
          description: 'TwiML to speak and listen',
          contentType: 'text/xml',
          example: '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Say voice="alice">It left yesterday.</Say><Gather input="speech" action="https://berth.example/channels/ch_01m80gqv9d4kjqfcmvs2q4jxem/phone" method="POST" speechTimeout="auto"/></Response>',
        },
      },
      errors: ['unauthorized', 'forbidden', 'not_found', 'conflict'],
      handler: async ({ req, res, params }) => {
        const channel = await liveChannel(params.channelId, 'phone');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const form = new URLSearchParams(raw.toString('utf8'));
        const origin = deps.publicUrl ?? requestOrigin(req) ?? '';
        const url = `${origin.replace(/\/+$/, '')}${req.originalUrl}`;
        const credentials = openCredentials(deps.box, channel);
        if (!checkTwilioSignature(credentials.authToken ?? '', url, form, req.get(TWILIO_SIGNATURE_HEADER))) {
          refuse('phone', 'bad_signature', new ApiError('unauthorized', `${TWILIO_SIGNATURE_HEADER} does not match this request`, { reason: 'bad_signature' }));
        }
        const calledNumber = form.get('To');
        if (calledNumber !== null && calledNumber !== channel.settings.phoneNumber) {
          refuse('phone', 'wrong_number', new ApiError('forbidden', `this channel answers ${String(channel.settings.phoneNumber)}, not ${calledNumber}`, { reason: 'wrong_number' }));
        }
        const voice = (channel.settings.voice as string | undefined) ?? DEFAULT_VOICE;
        const callSid = form.get('CallSid');
        const speech = form.get('SpeechResult')?.trim();
        const answer = (text: string) => {
          res.status(200).type('text/xml').send(speakAndListen(text, voice, url));
        };
        if (!callSid || !/^[A-Za-z0-9]{1,64}$/.test(callSid)) {
          refuse('phone', 'bad_body', new ApiError('unprocessable_entity', 'CallSid is missing', { fields: { CallSid: ['required'] } }));
        }
        if (!speech) {
          inbound.inc({ type: 'phone', result: 'greeting' });
          return answer('Hello, how can I help you?');
        }
        const visitorId = `phone:${callSid}`;
        const received = await conversations.receive(channel.id, {
          visitorId,
          text: speech.slice(0, MAX_MESSAGE_TEXT),
          replyTo: { from: form.get('From') ?? null },
        });
        inbound.inc({ type: 'phone', result: 'accepted' });
        try {
          const reply = await conversations.awaitReply(received!, visitorId, Math.min(PHONE_REPLY_TIMEOUT_MS, settings.replyTimeoutMs));
          outbound.inc({ type: 'phone', result: 'sent' });
          return answer(reply.content);
        } catch (error) {
          outbound.inc({ type: 'phone', result: 'failed' });
          deps.log.warn({ err: error, channelId: channel.id }, 'a phone reply was not ready');
          return answer('Sorry, I could not answer that just now. Please say it again.');
        }
      },
    }),
  );
}

const emailJson = z
  .object({
    from: z.email().max(254),
    to: z.string().max(1000).optional(),
    subject: z.string().max(1000).optional(),
    text: z.string().trim().min(1, 'must not be empty'),
    messageId: z.string().min(1).max(998).optional(),
  })
  .strict();

async function readEmail(req: Request, raw: Buffer): Promise<InboundEmail & { to: string | undefined }> {
  if (req.is('application/json')) {
    let body: unknown;
    try {
      body = JSON.parse(raw.toString('utf8'));
    } catch {
      throw new ApiError('unprocessable_entity', 'the body is not JSON', { fields: { body: ['not JSON'] } });
    }
    const parsed = emailJson.safeParse(body);
    if (!parsed.success) {
      const fields: Record<string, string[]> = {};
      for (const issue of parsed.error.issues) (fields[issue.path.join('.') || 'body'] ??= []).push(issue.message);
      throw new ApiError('unprocessable_entity', `invalid email: ${Object.keys(fields).join(', ')}`, { fields });
    }
    return { from: parsed.data.from, to: parsed.data.to, subject: parsed.data.subject, text: parsed.data.text, messageId: parsed.data.messageId };
  }
  if (req.is('message/rfc822')) {
    const mail = await parseRawEmail(raw);
    const fields: Record<string, string[]> = {};
    if (!mail.from) fields.from = ['the message has no From address'];
    if (!mail.text?.trim()) fields.text = ['the message has no text'];
    if (Object.keys(fields).length > 0) throw new ApiError('unprocessable_entity', `invalid email: ${Object.keys(fields).join(', ')}`, { fields });
    return { from: mail.from!, to: mail.to, subject: mail.subject, text: mail.text!.trim(), messageId: mail.messageId };
  }
  throw new ApiError('unsupported_media_type', 'send the mail as application/json or message/rfc822', { contentType: req.get('content-type') ?? null });
}

import { ApiError, checkTriggerSignature, openChannelCredentials, type Clock, type Pool, type SecretBox } from '@berth/common';
import type { Request } from 'express';
import { Counter, type Registry } from 'prom-client';
import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import { checkSlackSignature, slackConversationOf, SLACK_SIGNATURE_HEADER, SLACK_TIMESTAMP_HEADER, type SlackMessageEvent } from '../services/channel-slack.js';
import { MAX_EMAIL_TEXT, parseRawEmail, type InboundEmail } from '../services/channel-email.js';
import { checkTwilioSignature, speakAndListen, TWILIO_SIGNATURE_HEADER } from '../services/channel-phone.js';
import { DEFAULT_VOICE } from '../services/channels.js';
import type { ConversationService } from '../services/conversations.js';
import { channelParam, liveChannel, MAX_MESSAGE_TEXT, type ChannelSettings } from './channel-public.js';

export const MAX_INBOUND_BODY_BYTES = 1024 * 1024;
export const EMAIL_SIGNATURE_HEADER = 'x-berth-signature';
/** Twilio waits 15 s for a webhook's answer; a reply not ready sooner is apologised for. */
const PHONE_REPLY_TIMEOUT_MS = 12_000;

/**
 * The inbound webhooks of Slack, email and phone channels: each checks its provider's signature,
 * puts the message into the same conversation model as the chat routes; Slack and email replies
 * are sent by the operator's channel reply sender once stored, a phone reply is the TwiML answer.
 */
export function channelWebhookRoutes(
  table: RouteTable,
  deps: {
    pool: Pool;
    clock: Clock;
    box: SecretBox;
    metrics: Registry;
    conversations: ConversationService;
    settings: ChannelSettings;
    publicUrl: string | undefined;
  },
): void {
  const { pool, conversations, settings } = deps;
  const inbound = new Counter({
    name: 'berth_channel_inbound_total',
    help: 'Inbound channel webhooks (Slack, email, phone), by channel type and result',
    labelNames: ['type', 'result'],
    registers: [deps.metrics],
  });

  /** Refused inbound requests: counted, then answered with the error. */
  function refuse(type: string, result: string, error: ApiError): never {
    inbound.inc({ type, result });
    throw error;
  }

  table.add(
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
        const channel = await liveChannel(pool, params.channelId, 'slack');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const credentials = openChannelCredentials(deps.box, channel);
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
        }, req.log);
        if (!received) {
          inbound.inc({ type: 'slack', result: 'duplicate' });
          return { status: 200, body: { ok: true } };
        }
        inbound.inc({ type: 'slack', result: 'accepted' });
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
        const channel = await liveChannel(pool, params.channelId, 'email');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const credentials = openChannelCredentials(deps.box, channel);
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
        }, req.log);
        if (!received) {
          inbound.inc({ type: 'email', result: 'duplicate' });
          return { status: 200, body: { ok: true, duplicate: true } };
        }
        inbound.inc({ type: 'email', result: 'accepted' });
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
        const channel = await liveChannel(pool, params.channelId, 'phone');
        const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
        const form = new URLSearchParams(raw.toString('utf8'));
        const origin = deps.publicUrl ?? requestOrigin(req) ?? '';
        const url = `${origin.replace(/\/+$/, '')}${req.originalUrl}`;
        const credentials = openChannelCredentials(deps.box, channel);
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
        }, req.log);
        inbound.inc({ type: 'phone', result: 'accepted' });
        try {
          const reply = await conversations.awaitReply(received!, visitorId, Math.min(PHONE_REPLY_TIMEOUT_MS, settings.replyTimeoutMs));
          return answer(reply.content);
        } catch (error) {
          req.log.warn({ err: error, channelId: channel.id }, 'a phone reply was not ready');
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

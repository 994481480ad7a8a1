import { CHANNEL_TYPES } from '@berth/common';
import { z } from 'zod';
import { requestOrigin } from '../http/origin.js';
import { defineRoute, type RouteTable } from '../http/route.js';
import type { ChannelService } from '../services/channels.js';
import { okSchema } from './schemas.js';

const themeSchema = z
  .object({
    primaryColor: z.string().regex(/^#[0-9a-fA-F]{6}$/, 'must be a colour as #rrggbb').optional().describe('buttons and the visitor\'s messages, `#rrggbb`'),
    mode: z.enum(['light', 'dark']).optional().describe('default light'),
    position: z.enum(['bottom-right', 'bottom-left']).optional().describe('where the chat button sits; default bottom-right'),
    title: z.string().min(1).max(60).optional().describe('the panel\'s heading'),
    greeting: z.string().min(1).max(500).optional().describe('shown before the first message'),
    placeholder: z.string().min(1).max(100).optional().describe('the input\'s placeholder'),
  })
  .strict()
  .meta({ id: 'ChannelTheme', description: 'how the chat widget looks' });

const originSchema = z
  .string()
  .max(256)
  .regex(/^https?:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?$/, 'must be a web origin: scheme and host (and port), such as https://shop.example');

/** Every field a channel of some type takes; which type takes which is checked by the service (422 naming the field). */
const channelFields = {
  agent: z.string().min(1).max(256).describe('the agent definition that answers: its name or `adef_…` id'),
  name: z.string().min(1).max(128).optional().describe('for people'),
  theme: themeSchema.optional().describe('chat_embed'),
  allowedOrigins: z.array(originSchema).max(50).optional().describe('chat_embed: the origins whose pages may use the public routes; empty: any'),
  workspace: z.string().regex(/^T[A-Z0-9]{2,30}$/, 'must be a Slack team id (T…)').optional().describe('slack (required): the team id whose events are accepted'),
  channels: z
    .array(z.string().regex(/^[CGD][A-Z0-9]{2,30}$/, 'must be a Slack channel id (C…, G… or D…)'))
    .max(100)
    .optional()
    .describe('slack: channel ids to answer in; empty: every channel the bot is in'),
  botName: z.string().min(1).max(80).optional().describe('slack: the name replies are posted under'),
  signingSecret: z.string().min(8).max(256).optional().describe("slack (required): the app's signing secret; verifies X-Slack-Signature"),
  botToken: z.string().regex(/^xox[bp]-[A-Za-z0-9-]{1,250}$/, 'must be a Slack bot token (xoxb-…)').optional().describe('slack (required): the token replies are posted with'),
  address: z.email().max(254).optional().describe('email (required): the address mail is sent to; replies come from it'),
  apiKey: z.string().min(1).max(512).optional().describe('email (required): the SendGrid API key replies are sent with'),
  phoneNumber: z.string().regex(/^\+[1-9][0-9]{6,14}$/, 'must be an E.164 number such as +15551234567').optional().describe('phone (required): the number callers dial'),
  voice: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be a voice name such as alice or Polly.Joanna').optional().describe('phone: the voice replies are spoken with (default alice)'),
  authToken: z.string().min(8).max(256).optional().describe('phone (required): the Twilio auth token; verifies X-Twilio-Signature'),
};

const createBody = z.object({ type: z.enum(CHANNEL_TYPES).describe('what the channel connects'), ...channelFields }).strict();
const updateBody = z
  .object({ ...channelFields, agent: channelFields.agent.optional(), name: z.string().min(1).max(128).nullable().optional().describe('for people; null removes it') })
  .strict();

const hint = z.string().describe('a credential: `…` and its last 4 characters');
export const channelSchema = z
  .object({
    id: z.string().describe('`ch_…`: also the access token of its public routes'),
    type: z.enum(CHANNEL_TYPES),
    name: z.string().nullable(),
    agent: z.string().describe('the agent definition (`adef_…`) that answers'),
    theme: themeSchema.optional(),
    allowedOrigins: z.array(z.string()).optional(),
    scriptTag: z.string().optional().describe('chat_embed: the tag to put on your pages'),
    workspace: z.string().optional(),
    channels: z.array(z.string()).optional(),
    botName: z.string().optional(),
    signingSecret: hint.optional(),
    botToken: hint.optional(),
    address: z.string().optional(),
    apiKey: hint.optional(),
    webhookSecret: z.string().optional().describe('email: signs the inbound webhook; in full only in the response that created the channel'),
    phoneNumber: z.string().optional(),
    voice: z.string().optional(),
    authToken: hint.optional(),
    inboundUrl: z.string().optional().describe('slack, email, phone: the webhook URL to give the provider'),
    createdAt: z.string(),
    updatedAt: z.string(),
  })
  .meta({ id: 'Channel' });

const channelExample = {
  id: 'ch_01m80gqv9d4kjqfcmvs2q4jxem',
  type: 'chat_embed',
  name: 'Support chat',
  agent: 'adef_01m80gq2x7e5rb3ztmvy9w0k4c',
  theme: { primaryColor: '#0b5fff', title: 'Ask us' },
  allowedOrigins: ['https://shop.example'],
  scriptTag: '<script src="https://berth.example/widget/v1/berth-chat.js" data-channel-id="ch_01m80gqv9d4kjqfcmvs2q4jxem" async></script>',
  createdAt: '2026-03-02T10:00:00.000Z',
  updatedAt: '2026-03-02T10:00:00.000Z',
};

const channelIdParam = z.object({ id: z.string().min(1).max(128).describe('channel id (`ch_…`)') }).strict();

export function channelRoutes(table: RouteTable, deps: { channels: ChannelService; publicUrl: string | undefined }): void {
  const { channels } = deps;
  const base = (req: Parameters<typeof requestOrigin>[0]) => deps.publicUrl ?? requestOrigin(req) ?? '';
  table.add(
    defineRoute({
      method: 'post',
      path: '/v1/channels',
      operationId: 'createChannel',
      tag: 'Channels',
      summary: 'Create a channel',
      description:
        'Connects the agent definition `agent` to a chat widget (`chat_embed`: the response carries the `scriptTag` for your pages), a Slack workspace (`slack`), an inbound email address (`email`) or a phone number (`phone`). ' +
        'Each type takes its own fields; a field of another type, or a missing required one, is 422 naming it. Credentials are sealed at rest and shown only as `…` and their last 4 characters. ' +
        'An `email` channel gets a generated `webhookSecret`, in full only here. Replies are runs of the definition in one session per channel (user id: the channel id).',
      body: createBody,
      requestExample: { type: 'chat_embed', agent: 'support', name: 'Support chat', theme: { primaryColor: '#0b5fff', title: 'Ask us' }, allowedOrigins: ['https://shop.example'] },
      responses: { 201: { description: 'the channel', schema: channelSchema, example: channelExample } },
      errors: ['unprocessable_entity'],
      handler: async ({ req, principal, body }) => ({ status: 201, body: await channels.create(principal, body, base(req)) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/channels',
      operationId: 'listChannels',
      tag: 'Channels',
      summary: 'List channels',
      description: 'Newest first; deleted channels are not listed.',
      responses: { 200: { description: 'the channels', schema: z.object({ data: z.array(channelSchema) }), example: { data: [channelExample] } } },
      errors: [],
      handler: async ({ req, principal }) => ({ status: 200, body: await channels.list(principal, base(req)) }),
    }),
    defineRoute({
      method: 'get',
      path: '/v1/channels/:id',
      operationId: 'getChannel',
      tag: 'Channels',
      summary: 'Get a channel',
      description: 'Credentials shown as `…` and their last 4 characters.',
      params: channelIdParam,
      responses: { 200: { description: 'the channel', schema: channelSchema, example: channelExample } },
      errors: ['not_found'],
      handler: async ({ req, principal, params }) => ({ status: 200, body: await channels.get(principal, params.id, base(req)) }),
    }),
    defineRoute({
      method: 'patch',
      path: '/v1/channels/:id',
      operationId: 'updateChannel',
      tag: 'Channels',
      summary: 'Update a channel',
      description:
        'Replaces the fields given (any of the create body but `type`, which cannot change); a credential given replaces the one kept. A field of another type is 422 naming it. Takes effect for the next message.',
      params: channelIdParam,
      body: updateBody,
      requestExample: { theme: { primaryColor: '#aa3300' }, allowedOrigins: ['https://shop.example', 'https://www.shop.example'] },
      responses: { 200: { description: 'the channel', schema: channelSchema, example: channelExample } },
      errors: ['not_found', 'unprocessable_entity'],
      handler: async ({ req, principal, params, body }) => ({ status: 200, body: await channels.update(principal, params.id, body, base(req)) }),
    }),
    defineRoute({
      method: 'delete',
      path: '/v1/channels/:id',
      operationId: 'deleteChannel',
      tag: 'Channels',
      summary: 'Delete a channel',
      description: 'Every public route and webhook of the channel answers 404 from now on (a message being stored when this is called finishes first). Its conversations are kept.',
      params: channelIdParam,
      responses: { 200: { description: 'deleted', schema: okSchema, example: { ok: true } } },
      errors: ['not_found'],
      handler: async ({ principal, params }) => ({ status: 200, body: await channels.delete(principal, params.id) }),
    }),
  );
}

import { randomBytes } from 'node:crypto';
import {
  ApiError,
  channelCredentialsPlace,
  deleteChannel,
  findChannel,
  insertChannel,
  listChannels,
  maskSecret,
  newId,
  openChannelCredentials,
  resolveDefinition,
  updateChannel,
  type ChannelRecord,
  type ChannelType,
  type Clock,
  type Pool,
  type Principal,
  type SecretBox,
} from '@berth/common';

/** The fields each type takes besides `type`, `agent` and `name`; credentials are sealed, the rest kept as settings. */
export const CHANNEL_FIELDS: Record<ChannelType, { settings: string[]; credentials: string[]; required: string[] }> = {
  chat_embed: { settings: ['theme', 'allowedOrigins'], credentials: [], required: [] },
  slack: { settings: ['workspace', 'channels', 'botName'], credentials: ['signingSecret', 'botToken'], required: ['workspace', 'signingSecret', 'botToken'] },
  email: { settings: ['address'], credentials: ['apiKey'], required: ['address', 'apiKey'] },
  phone: { settings: ['phoneNumber', 'voice'], credentials: ['authToken'], required: ['phoneNumber', 'authToken'] },
};
const COMMON_FIELDS = new Set(['type', 'agent', 'name']);

export const WIDGET_PATH = '/widget/v1/berth-chat.js';
export const DEFAULT_VOICE = 'alice';

/** Where each inbound webhook of a type is, under the channel. */
export const INBOUND_PATHS: Partial<Record<ChannelType, string>> = { slack: 'slack/events', email: 'email', phone: 'phone' };

export type ChannelInput = Record<string, unknown> & { type: ChannelType; agent: string; name?: string | undefined };

/** A 422 naming each field that is not of this type, and each required one that is missing. */
function checkFields(type: ChannelType, body: Record<string, unknown>, creating: boolean): void {
  const { settings, credentials, required } = CHANNEL_FIELDS[type];
  const allowed = new Set([...COMMON_FIELDS, ...settings, ...credentials]);
  const fields: Record<string, string[]> = {};
  for (const [field, value] of Object.entries(body)) {
    if (value !== undefined && !allowed.has(field)) fields[field] = [`not a field of a ${type} channel`];
  }
  if (creating) for (const field of required) if (body[field] === undefined) fields[field] = [`required for a ${type} channel`];
  if (Object.keys(fields).length > 0) {
    throw new ApiError('unprocessable_entity', `invalid ${type} channel: ${Object.keys(fields).join(', ')}`, { fields });
  }
}

/** `…` and the last 4 characters: enough to tell credentials apart, too little to use. */
// By code points: a cut through a surrogate pair would answer a string that is not Unicode.
const hintOf = (value: string) => `…${Array.from(value).slice(-4).join('')}`;

export function generateWebhookSecret(): string {
  return `chsec_${randomBytes(32).toString('base64url')}`;
}

export interface ChannelView {
  id: string;
  type: ChannelType;
  name: string | null;
  agent: string;
  scriptTag?: string;
  inboundUrl?: string;
  createdAt: string;
  updatedAt: string;
  [field: string]: unknown;
}

/** The channel as the API shows it: settings as given, credentials as hints, the URLs under `base`. */
export function channelView(channel: ChannelRecord, base: string, shownSecrets: Record<string, string> = {}): ChannelView {
  const origin = base.replace(/\/+$/, '');
  const inbound = INBOUND_PATHS[channel.type];
  const settings = { ...channel.settings };
  if (channel.type === 'chat_embed') settings.allowedOrigins = channel.allowedOrigins;
  if (channel.type === 'phone') settings.voice ??= DEFAULT_VOICE;
  if (channel.type === 'slack') settings.channels ??= [];
  return {
    id: channel.id,
    type: channel.type,
    name: channel.name,
    agent: channel.definitionId,
    ...settings,
    ...channel.credentialHints,
    ...shownSecrets,
    ...(channel.type === 'chat_embed'
      ? { scriptTag: `<script src="${origin}${WIDGET_PATH}" data-channel-id="${channel.id}" async></script>` }
      : {}),
    ...(inbound ? { inboundUrl: `${origin}/channels/${channel.id}/${inbound}` } : {}),
    createdAt: channel.createdAt,
    updatedAt: channel.updatedAt,
  };
}


export function createChannelService(deps: { pool: Pool; clock: Clock; box: SecretBox }) {
  const { pool, clock, box } = deps;

  function seal(channel: Pick<ChannelRecord, 'id' | 'organizationId' | 'mode'>, credentials: Record<string, string>) {
    if (Object.keys(credentials).length === 0) return { credentials: null, credentialHints: {} };
    const credentialHints = Object.fromEntries(
      Object.entries(credentials).map(([name, value]) => [name, name === 'webhookSecret' ? maskSecret(value) : hintOf(value)]),
    );
    return { credentials: box.seal(channelCredentialsPlace(channel), JSON.stringify(credentials)), credentialHints };
  }

  function split(type: ChannelType, body: Record<string, unknown>) {
    const { settings: settingNames, credentials: credentialNames } = CHANNEL_FIELDS[type];
    const settings: Record<string, unknown> = {};
    const credentials: Record<string, string> = {};
    for (const name of settingNames) if (body[name] !== undefined && name !== 'allowedOrigins') settings[name] = body[name];
    for (const name of credentialNames) if (body[name] !== undefined) credentials[name] = body[name] as string;
    return { settings, credentials };
  }

  async function find(principal: Principal, id: string): Promise<ChannelRecord> {
    const channel = await findChannel(pool, id, principal);
    if (!channel) throw new ApiError('not_found', `no channel ${id}`);
    return channel;
  }

  return {
    async create(principal: Principal, body: ChannelInput, base: string): Promise<ChannelView> {
      checkFields(body.type, body, true);
      const definition = await resolveDefinition(pool, principal, body.agent, 'agent');
      const id = newId('ch', clock.now());
      const { settings, credentials } = split(body.type, body);
      // The email webhook is signed like a trigger's fire: its secret is made here and shown once.
      const shown: Record<string, string> = body.type === 'email' ? { webhookSecret: generateWebhookSecret() } : {};
      const place = { id, organizationId: principal.organizationId, mode: principal.mode };
      const channel = await insertChannel(
        pool,
        {
          ...place,
          type: body.type,
          name: body.name ?? null,
          definitionId: definition.id,
          settings,
          allowedOrigins: (body.allowedOrigins as string[] | undefined) ?? [],
          ...seal(place, { ...credentials, ...shown }),
        },
        clock.now(),
      );
      return channelView(channel, base, shown);
    },

    async list(principal: Principal, base: string): Promise<{ data: ChannelView[] }> {
      return { data: (await listChannels(pool, principal)).map((channel) => channelView(channel, base)) };
    },

    async get(principal: Principal, id: string, base: string): Promise<ChannelView> {
      return channelView(await find(principal, id), base);
    },

    /** Replaces the fields given; `type` cannot change; credentials given replace the ones kept. */
    async update(principal: Principal, id: string, body: Record<string, unknown>, base: string): Promise<ChannelView> {
      const channel = await find(principal, id);
      checkFields(channel.type, body, false);
      const definitionId = body.agent !== undefined ? (await resolveDefinition(pool, principal, body.agent as string, 'agent')).id : channel.definitionId;
      const { settings, credentials } = split(channel.type, body);
      const kept = openChannelCredentials(box, channel);
      const updated = await updateChannel(
        pool,
        {
          id: channel.id,
          name: body.name !== undefined ? (body.name as string | null) : channel.name,
          definitionId,
          settings: { ...channel.settings, ...settings },
          allowedOrigins: (body.allowedOrigins as string[] | undefined) ?? channel.allowedOrigins,
          ...seal(channel, { ...kept, ...credentials }),
        },
        clock.now(),
      );
      return channelView(updated, base);
    },

    async delete(principal: Principal, id: string): Promise<{ ok: true }> {
      const channel = await find(principal, id);
      if (!(await deleteChannel(pool, channel.id, clock.now()))) throw new ApiError('not_found', `no channel ${id}`);
      return { ok: true };
    },
  };
}

export type ChannelService = ReturnType<typeof createChannelService>;

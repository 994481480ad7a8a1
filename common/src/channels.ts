/**
 * Channels and their conversations in PostgreSQL (migration 0016): the rows the API server's
 * channel routes write and read, and the one write the job executor makes when a channel's job
 * ends (`recordChannelReply`). What each type's settings hold is validated by the API; here they
 * are opaque JSON.
 */
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import type { ConversationTurn, Job } from './jobs.js';
import { reencryptSealedColumns, type SecretBox, type SecretPlace } from './secrets.js';
import { z } from 'zod';

export const CHANNEL_TYPES = ['chat_embed', 'slack', 'email', 'phone'] as const;
export type ChannelType = (typeof CHANNEL_TYPES)[number];

/** Earlier messages a reply's run sees at most: the newest ones of the conversation. */
export const CHANNEL_HISTORY_MESSAGES = 100;

/** Requests a minute the public channel routes accept; BERTH_CHANNEL_LIMITS overrides any of them. */
export const channelLimitsSchema = z
  .object({
    channelMessages: z.number().int().min(1).default(600).describe('messages a minute to one channel, from everyone'),
    visitorMessages: z.number().int().min(1).default(20).describe('messages a minute from one visitor of a channel'),
    ipMessages: z.number().int().min(1).default(60).describe('messages a minute from one client IP address, to any channel'),
    ipReads: z.number().int().min(1).default(300).describe('reads (history, stream, config) a minute from one client IP address'),
  })
  .strict();
export type ChannelLimits = z.output<typeof channelLimitsSchema>;
export const DEFAULT_CHANNEL_LIMITS: ChannelLimits = channelLimitsSchema.parse({});

export interface SealedCredentials {
  keyId: string;
  nonce: Buffer;
  ciphertext: Buffer;
}

export interface ChannelRecord {
  id: string;
  organizationId: string;
  mode: Mode;
  type: ChannelType;
  name: string | null;
  definitionId: string;
  settings: Record<string, unknown>;
  allowedOrigins: string[];
  credentials: SealedCredentials | null;
  credentialHints: Record<string, string>;
  createdAt: string;
  updatedAt: string;
}

interface ChannelRow {
  id: string;
  organization_id: string;
  mode: Mode;
  type: ChannelType;
  name: string | null;
  definition_id: string;
  settings: Record<string, unknown>;
  allowed_origins: string[];
  credentials_key_id: string | null;
  credentials_nonce: Buffer | null;
  credentials_ciphertext: Buffer | null;
  credential_hints: Record<string, string>;
  created_at: Date;
  updated_at: Date;
}

const CHANNEL_COLUMNS = `id, organization_id, mode, type, name, definition_id, settings, allowed_origins, credentials_key_id,
  credentials_nonce, credentials_ciphertext, credential_hints, created_at, updated_at`;

function toChannel(row: ChannelRow): ChannelRecord {
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    type: row.type,
    name: row.name,
    definitionId: row.definition_id,
    settings: row.settings,
    allowedOrigins: row.allowed_origins,
    credentials:
      row.credentials_key_id && row.credentials_nonce && row.credentials_ciphertext
        ? { keyId: row.credentials_key_id, nonce: row.credentials_nonce, ciphertext: row.credentials_ciphertext }
        : null,
    credentialHints: row.credential_hints,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Where a channel's credentials are sealed: their own place, so the ciphertext opens for that channel only. */
export const channelCredentialsPlace = (channel: { organizationId: string; mode: Mode; id: string }): SecretPlace => ({
  organizationId: channel.organizationId,
  mode: channel.mode,
  scope: channel.id,
  name: 'channel-credentials',
});

/** The credentials of a channel, opened. */
export function openChannelCredentials(box: SecretBox, channel: ChannelRecord): Record<string, string> {
  if (!channel.credentials) return {};
  return JSON.parse(box.open(channelCredentialsPlace(channel), channel.credentials)) as Record<string, string>;
}

export async function insertChannel(db: Queryable, channel: Omit<ChannelRecord, 'createdAt' | 'updatedAt'>, now: Date): Promise<ChannelRecord> {
  const { rows } = await db.query<ChannelRow>(
    `INSERT INTO channels (id, organization_id, mode, type, name, definition_id, settings, allowed_origins, credentials_key_id,
       credentials_nonce, credentials_ciphertext, credential_hints, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $13) RETURNING ${CHANNEL_COLUMNS}`,
    [
      channel.id,
      channel.organizationId,
      channel.mode,
      channel.type,
      channel.name,
      channel.definitionId,
      ...configValues(channel),
      now,
    ],
  );
  return toChannel(rows[0]!);
}

/** The values of the columns from settings to credential_hints, in the order of the table. */
function configValues(channel: Pick<ChannelRecord, 'settings' | 'allowedOrigins' | 'credentials' | 'credentialHints'>): unknown[] {
  return [
    JSON.stringify(channel.settings),
    channel.allowedOrigins,
    channel.credentials?.keyId ?? null,
    channel.credentials?.nonce ?? null,
    channel.credentials?.ciphertext ?? null,
    JSON.stringify(channel.credentialHints),
  ];
}

/**
 * A channel that is not deleted; with `scope`, only one of that organization and mode. `forShare`
 * holds its row until the transaction ends: a delete (an update of the row) waits for it.
 */
export async function findChannel(db: Queryable, id: string, scope?: { organizationId: string; mode: Mode }, options: { forShare?: boolean } = {}): Promise<ChannelRecord | undefined> {
  const { rows } = await db.query<ChannelRow>(
    `SELECT ${CHANNEL_COLUMNS} FROM channels WHERE id = $1 AND deleted_at IS NULL${options.forShare ? ' FOR SHARE' : ''}`,
    [id],
  );
  const channel = rows[0] ? toChannel(rows[0]) : undefined;
  if (channel && scope && (channel.organizationId !== scope.organizationId || channel.mode !== scope.mode)) return undefined;
  return channel;
}

export async function listChannels(db: Queryable, scope: { organizationId: string; mode: Mode }): Promise<ChannelRecord[]> {
  const { rows } = await db.query<ChannelRow>(
    `SELECT ${CHANNEL_COLUMNS} FROM channels WHERE organization_id = $1 AND mode = $2 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC`,
    [scope.organizationId, scope.mode],
  );
  return rows.map(toChannel);
}

export async function updateChannel(
  db: Queryable,
  channel: Pick<ChannelRecord, 'id' | 'name' | 'definitionId' | 'settings' | 'allowedOrigins' | 'credentials' | 'credentialHints'>,
  now: Date,
): Promise<ChannelRecord> {
  const { rows } = await db.query<ChannelRow>(
    `UPDATE channels SET name = $2, definition_id = $3, settings = $4, allowed_origins = $5, credentials_key_id = $6, credentials_nonce = $7,
       credentials_ciphertext = $8, credential_hints = $9, updated_at = $10
     WHERE id = $1 AND deleted_at IS NULL RETURNING ${CHANNEL_COLUMNS}`,
    [channel.id, channel.name, channel.definitionId, ...configValues(channel), now],
  );
  return toChannel(rows[0]!);
}

/** Marks the channel deleted; false when it was not there (or already deleted). */
export async function deleteChannel(db: Queryable, id: string, now: Date): Promise<boolean> {
  const result = await db.query('UPDATE channels SET deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL', [id, now]);
  return (result.rowCount ?? 0) > 0;
}

export interface Conversation {
  id: string;
  channelId: string;
  visitorId: string;
  replyTo: Record<string, unknown>;
  createdAt: string;
}

interface ConversationRow {
  id: string;
  channel_id: string;
  visitor_id: string;
  reply_to: Record<string, unknown>;
  created_at: Date;
}

const toConversation = (row: ConversationRow): Conversation => ({
  id: row.id,
  channelId: row.channel_id,
  visitorId: row.visitor_id,
  replyTo: row.reply_to,
  createdAt: row.created_at.toISOString(),
});

export async function findConversation(db: Queryable, channelId: string, visitorId: string): Promise<Conversation | undefined> {
  const { rows } = await db.query<ConversationRow>(
    'SELECT id, channel_id, visitor_id, reply_to, created_at FROM channel_conversations WHERE channel_id = $1 AND visitor_id = $2',
    [channelId, visitorId],
  );
  return rows[0] ? toConversation(rows[0]) : undefined;
}

/** The visitor's conversation, made when missing; `replyTo` replaces what was kept (the latest place to answer). */
export async function findOrCreateConversation(
  db: Queryable,
  input: { id: string; channelId: string; visitorId: string; replyTo: Record<string, unknown> },
  now: Date,
): Promise<Conversation> {
  const { rows } = await db.query<ConversationRow>(
    `INSERT INTO channel_conversations (id, channel_id, visitor_id, reply_to, created_at) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (channel_id, visitor_id) DO UPDATE SET reply_to = channel_conversations.reply_to || EXCLUDED.reply_to
     RETURNING id, channel_id, visitor_id, reply_to, created_at`,
    [input.id, input.channelId, input.visitorId, JSON.stringify(input.replyTo), now],
  );
  return toConversation(rows[0]!);
}

export interface ChannelMessage {
  seq: string;
  id: string;
  conversationId: string;
  role: 'user' | 'assistant';
  content: string;
  jobId: string | null;
  createdAt: string;
}

interface MessageRow {
  seq: string;
  id: string;
  conversation_id: string;
  role: 'user' | 'assistant';
  content: string;
  job_id: string | null;
  created_at: Date;
}

const MESSAGE_COLUMNS = 'seq, id, conversation_id, role, content, job_id, created_at';

const toMessage = (row: MessageRow): ChannelMessage => ({
  seq: String(row.seq),
  id: row.id,
  conversationId: row.conversation_id,
  role: row.role,
  content: row.content,
  jobId: row.job_id,
  createdAt: row.created_at.toISOString(),
});

/**
 * Stores a message; undefined when one with the same `externalId` is already in the conversation
 * (a provider delivering the same message again).
 */
export async function insertChannelMessage(
  db: Queryable,
  message: { id: string; conversationId: string; role: 'user' | 'assistant'; content: string; jobId: string | null; externalId?: string | undefined },
  now: Date,
): Promise<ChannelMessage | undefined> {
  const { rows } = await db.query<MessageRow>(
    `INSERT INTO channel_messages (id, conversation_id, role, content, job_id, external_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (conversation_id, external_id) WHERE external_id IS NOT NULL DO NOTHING RETURNING ${MESSAGE_COLUMNS}`,
    [message.id, message.conversationId, message.role, message.content, message.jobId, message.externalId ?? null, now],
  );
  return rows[0] ? toMessage(rows[0]) : undefined;
}

/** Links a stored user message to the job that answers it. */
export async function setMessageJob(db: Queryable, messageId: string, jobId: string): Promise<void> {
  await db.query('UPDATE channel_messages SET job_id = $2 WHERE id = $1', [messageId, jobId]);
}

/** The newest `limit` messages of a conversation, oldest first. */
export async function latestMessages(db: Queryable, conversationId: string, limit: number): Promise<ChannelMessage[]> {
  const { rows } = await db.query<MessageRow>(
    `SELECT * FROM (SELECT ${MESSAGE_COLUMNS} FROM channel_messages WHERE conversation_id = $1 ORDER BY seq DESC LIMIT $2) newest ORDER BY seq`,
    [conversationId, limit],
  );
  return rows.map(toMessage);
}

export async function messagesAfter(db: Queryable, conversationId: string, afterSeq: string, limit = 500): Promise<ChannelMessage[]> {
  const { rows } = await db.query<MessageRow>(
    `SELECT ${MESSAGE_COLUMNS} FROM channel_messages WHERE conversation_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT $3`,
    [conversationId, afterSeq, limit],
  );
  return rows.map(toMessage);
}

/** The sequence number of the newest message of any conversation ('0' when there is none): streams start after it. */
export async function latestMessageSeq(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ seq: string | null }>('SELECT max(seq)::text AS seq FROM channel_messages');
  return rows[0]?.seq ?? '0';
}

/** The conversation before a message, as the turns a run starts from (the newest CHANNEL_HISTORY_MESSAGES). */
export async function historyBefore(db: Queryable, conversationId: string, beforeSeq: string): Promise<ConversationTurn[]> {
  const { rows } = await db.query<{ role: 'user' | 'assistant'; content: string }>(
    `SELECT role, content FROM (SELECT seq, role, content FROM channel_messages WHERE conversation_id = $1 AND seq < $2::bigint
       ORDER BY seq DESC LIMIT $3) newest ORDER BY seq`,
    [conversationId, beforeSeq, CHANNEL_HISTORY_MESSAGES],
  );
  return rows.map((row) => ({ role: row.role, content: row.content }));
}

/** The id of the reply a job writes: fixed by the job, so writing it twice writes it once. */
export const replyMessageId = (jobId: string): string => `msg_${jobId.slice('job_'.length)}`;

/** Channel types whose replies go out through a provider, sent by the channel reply sender. */
export const SENT_CHANNEL_TYPES: readonly ChannelType[] = ['slack', 'email'];

/**
 * Stores the answer of a channel's job as the assistant's message of the conversation the job
 * answers (the one holding the user message that names the job); idempotent. A reply of a
 * Slack or email channel is stored as pending delivery, due now, in the same statement.
 */
export async function recordChannelReply(db: Queryable, job: Pick<Job, 'id'>, output: string, now: Date): Promise<void> {
  await db.query(
    `INSERT INTO channel_messages (id, conversation_id, role, content, job_id, created_at, delivery_state, delivery_next_at)
     SELECT $1, m.conversation_id, 'assistant', $2, $3, $4,
       CASE WHEN ch.type = ANY($5) THEN 'pending' END, CASE WHEN ch.type = ANY($5) THEN $4::timestamptz END
     FROM channel_messages m JOIN channel_conversations c ON c.id = m.conversation_id JOIN channels ch ON ch.id = c.channel_id
     WHERE m.job_id = $3 AND m.role = 'user'
     ON CONFLICT (id) DO NOTHING`,
    [replyMessageId(job.id), output, job.id, now, SENT_CHANNEL_TYPES],
  );
}

/** The reply a job wrote, if it has. */
export async function findReply(db: Queryable, jobId: string): Promise<ChannelMessage | undefined> {
  const { rows } = await db.query<MessageRow>(`SELECT ${MESSAGE_COLUMNS} FROM channel_messages WHERE id = $1`, [replyMessageId(jobId)]);
  return rows[0] ? toMessage(rows[0]) : undefined;
}

/** Re-encrypts the credentials of every channel not under the current key (`berth secrets rotate`); returns how many. */
export function reencryptChannelCredentials(db: Queryable, box: SecretBox): Promise<number> {
  return reencryptSealedColumns(db, box, { table: 'channels', prefix: 'credentials' }, channelCredentialsPlace);
}

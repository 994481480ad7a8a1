import { findChannel, openChannelCredentials, type Clock, type Logger, type Pool, type SecretBox } from '@berth/common';
import { Counter, Gauge, type Registry } from 'prom-client';
import { PassLoop } from '../runtime/passes.js';
import { postSlackMessage, replySubject, sendGridMail } from './outbound.js';

/** Waits before the second, third and fourth try of a reply a provider did not take; then it has failed. */
export const CHANNEL_REPLY_RETRY_DELAYS_MS = [2_000, 10_000, 60_000];

export interface ChannelReplySenderOptions {
  pool: Pool;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  /** Opens the channels' credentials (bot token, API key). */
  box: SecretBox;
  /** This process, in claims. */
  identity: string;
  slackApiUrl: string;
  sendgridApiUrl: string;
  /** How often to look for due replies (default 500 ms). */
  pollMs?: number;
  /** A send not finished after this is taken over by another sender (default 60 s). */
  claimMs?: number;
}

interface DueReply {
  id: string;
  content: string;
  delivery_attempts: number;
  channel_id: string;
  channel_type: string;
  reply_to: Record<string, string | null | undefined>;
}

/**
 * Sends the replies of Slack and email channels through their providers: the job executor
 * stores such a reply as pending delivery (common/src/channels.ts, `recordChannelReply`), and
 * any sender claims it (SKIP LOCKED, with a lease), posts it with `chat.postMessage` or mails it
 * with SendGrid, and records the outcome; a reply the provider does not take is tried again
 * after 2 s, 10 s and 60 s, then marked failed. The state is in PostgreSQL, so a reply stored
 * while no sender ran, or whose sender died, is sent by the next one. A reply of a channel
 * deleted meanwhile is not sent.
 */
export class ChannelReplySender {
  private readonly sent: Counter<'type' | 'result'>;
  private readonly pending: Gauge;
  private readonly loop: PassLoop;

  constructor(private readonly options: ChannelReplySenderOptions) {
    this.loop = new PassLoop(() => this.tick(), { pollMs: options.pollMs ?? 500, log: options.log, failure: 'channel reply pass failed; the next one retries' });
    this.sent = new Counter({
      name: 'berth_channel_outbound_total',
      help: 'Channel replies sent through a provider (Slack chat.postMessage, SendGrid mail/send), by channel type and result (sent, retried, failed, dropped)',
      labelNames: ['type', 'result'],
      registers: [options.metrics],
    });
    this.pending = new Gauge({
      name: 'berth_channel_outbound_pending',
      help: 'Channel replies waiting to be sent through their provider',
      registers: [options.metrics],
    });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: sends what is due; returns how many it tried. */
  async tick(): Promise<number> {
    const due = await this.claimDue();
    await Promise.all(due.map((reply) => this.send(reply)));
    const { rows } = await this.options.pool.query<{ n: number }>("SELECT count(*)::int AS n FROM channel_messages WHERE delivery_state = 'pending'");
    this.pending.set(rows[0]?.n ?? 0);
    return due.length;
  }

  private async claimDue(): Promise<DueReply[]> {
    const now = this.options.clock.now();
    const { rows } = await this.options.pool.query<DueReply>(
      `WITH due AS (
         SELECT id FROM channel_messages
         WHERE delivery_state = 'pending' AND delivery_next_at <= $1 AND (delivery_claim_expires_at IS NULL OR delivery_claim_expires_at <= $1)
         ORDER BY delivery_next_at LIMIT 16 FOR UPDATE SKIP LOCKED)
       UPDATE channel_messages m SET delivery_claimed_by = $2, delivery_claim_expires_at = $3
       FROM due, channel_conversations c, channels ch WHERE m.id = due.id AND c.id = m.conversation_id AND ch.id = c.channel_id
       RETURNING m.id, m.content, m.delivery_attempts, c.channel_id, ch.type AS channel_type, c.reply_to`,
      [now, this.options.identity, new Date(now.getTime() + (this.options.claimMs ?? 60_000))],
    );
    return rows;
  }

  private async send(reply: DueReply): Promise<void> {
    const { pool, clock } = this.options;
    const log = this.options.log.child({ messageId: reply.id, channelId: reply.channel_id });
    const channel = await findChannel(pool, reply.channel_id);
    if (!channel) {
      await this.record(reply, 'failed', 'the channel was deleted', null);
      this.sent.inc({ type: reply.channel_type, result: 'dropped' });
      log.info('a reply of a deleted channel is not sent');
      return;
    }
    const attempt = reply.delivery_attempts + 1;
    try {
      const credentials = openChannelCredentials(this.options.box, channel);
      const to = reply.reply_to;
      if (channel.type === 'slack') {
        await postSlackMessage(this.options.slackApiUrl, credentials.botToken ?? '', {
          channel: to.channel ?? '',
          text: reply.content,
          threadTs: to.threadTs ?? undefined,
          username: channel.settings.botName as string | undefined,
        });
      } else if (channel.type === 'email') {
        await sendGridMail(this.options.sendgridApiUrl, credentials.apiKey ?? '', {
          from: channel.settings.address as string,
          to: to.address ?? '',
          subject: replySubject(to.subject),
          text: reply.content,
          inReplyTo: to.messageId,
        });
      } else {
        throw new Error(`replies of ${channel.type} channels are not sent by a provider`);
      }
      await this.record(reply, 'sent', null, null);
      this.sent.inc({ type: channel.type, result: 'sent' });
    } catch (error) {
      const retryIn = CHANNEL_REPLY_RETRY_DELAYS_MS[attempt - 1];
      const message = error instanceof Error ? error.message : String(error);
      await this.record(reply, retryIn === undefined ? 'failed' : 'pending', message, retryIn === undefined ? null : new Date(clock.now().getTime() + retryIn));
      this.sent.inc({ type: channel.type, result: retryIn === undefined ? 'failed' : 'retried' });
      if (retryIn === undefined) log.warn({ err: error, attempt }, 'a channel reply could not be sent; giving up after its retries');
      else log.info({ err: error, attempt, retryInMs: retryIn }, 'sending a channel reply failed; trying again');
    }
  }

  /** Writes the outcome of a try; only the claim holder does (one that lost its claim leaves it to the new holder). */
  private async record(reply: DueReply, state: 'pending' | 'sent' | 'failed', error: string | null, nextAt: Date | null): Promise<void> {
    await this.options.pool.query(
      `UPDATE channel_messages SET delivery_state = $3, delivery_attempts = delivery_attempts + 1, delivery_error = $4, delivery_next_at = $5,
         delivery_claimed_by = NULL, delivery_claim_expires_at = NULL
       WHERE id = $1 AND delivery_claimed_by = $2 AND delivery_state = 'pending'`,
      [reply.id, this.options.identity, state, error, nextAt],
    );
  }
}

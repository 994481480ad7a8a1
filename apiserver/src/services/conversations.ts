import {
  ApiError,
  LATENCY_BUCKETS,
  enqueueJob,
  findChannel,
  findConversation,
  findOrCreateConversation,
  findReply,
  getJob,
  historyBefore,
  insertChannelMessage,
  latestMessageSeq,
  latestMessages,
  newId,
  replyMessageId,
  withTransaction,
  type ChannelMessage,
  type ChannelRecord,
  type Clock,
  type Job,
  type Logger,
  type Pool,
} from '@berth/common';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { ChannelHub } from './channel-hub.js';

/** How often a wait for a reply looks at its job besides the notifications (a failed job writes no message). */
const JOB_CHECK_MS = 500;

export interface Received {
  channel: ChannelRecord;
  conversationId: string;
  message: ChannelMessage;
  job: Job;
}

function createMetrics(registry: Registry) {
  return {
    messages: new Counter({
      name: 'berth_channel_messages_total',
      help: 'Messages received on channels (stored and queued for an answer), by channel type',
      labelNames: ['type'],
      registers: [registry],
    }),
    replies: new Counter({
      name: 'berth_channel_replies_total',
      help: 'Waits for a channel reply, by channel type and result (answered, failed, timeout)',
      labelNames: ['type', 'result'],
      registers: [registry],
    }),
    replySeconds: new Histogram({
      name: 'berth_channel_reply_seconds',
      help: 'Time from a channel message to its reply (or to the failure or timeout), by channel type and result',
      labelNames: ['type', 'result'],
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
  };
}

/**
 * The conversation model every channel type shares: a message arrives (widget, Slack, email,
 * phone), is stored in the visitor's conversation and answered by a job of the channel's agent
 * definition that starts from the conversation so far; the job's end stores the reply
 * (`recordChannelReply`), which reaches whoever waits for it through the channel hub.
 */
export function createConversationService(deps: { pool: Pool; clock: Clock; hub: ChannelHub; log: Logger; metrics: Registry }) {
  const { pool, clock, hub } = deps;
  const metrics = createMetrics(deps.metrics);
  /** Ends the waits under way when the server stops, so that none holds the process open. */
  const stopping = new Set<() => void>();
  // Set by close(): a wait that registers after it (its message was stored as the server began to
  // stop) ends at once too, rather than at its timeout.
  let closed = false;

  return {
    /**
     * Stores a visitor's message and queues its answer, in one transaction that holds the channel
     * (a delete waits for it, and every later message finds the channel gone). Undefined when the
     * provider delivered a message with this `externalId` before. `log`: the request's.
     */
    async receive(
      channelId: string,
      input: { visitorId: string; text: string; replyTo?: Record<string, unknown>; externalId?: string | undefined },
      log: Logger,
    ): Promise<Received | undefined> {
      const now = clock.now();
      const received = await withTransaction(pool, async (tx) => {
        const channel = await findChannel(tx, channelId, undefined, { forShare: true });
        if (!channel) throw new ApiError('not_found', `no channel ${channelId}`);
        const { rows } = await tx.query<{ archived: boolean }>('SELECT archived_at IS NOT NULL AS archived FROM agent_definitions WHERE id = $1', [channel.definitionId]);
        if (rows[0]?.archived) throw new ApiError('conflict', `the agent definition ${channel.definitionId} of this channel is archived`, { definitionId: channel.definitionId });
        const conversation = await findOrCreateConversation(
          tx,
          { id: newId('conv', now), channelId: channel.id, visitorId: input.visitorId, replyTo: input.replyTo ?? {} },
          now,
        );
        const message = await insertChannelMessage(
          tx,
          { id: newId('msg', now), conversationId: conversation.id, role: 'user', content: input.text, jobId: null, externalId: input.externalId },
          now,
        );
        if (!message) return undefined;
        // One session per channel (ADR 28): the job's user is the channel.
        const job = await enqueueJob(
          tx,
          {
            organizationId: channel.organizationId,
            mode: channel.mode,
            source: 'channel',
            sourceId: channel.id,
            userId: channel.id,
            definitionId: channel.definitionId,
            input: input.text,
            history: await historyBefore(tx, conversation.id, message.seq),
          },
          now,
        );
        await tx.query('UPDATE channel_messages SET job_id = $2 WHERE id = $1', [message.id, job.id]);
        return { channel, conversationId: conversation.id, message: { ...message, jobId: job.id }, job };
      });
      if (received) {
        metrics.messages.inc({ type: received.channel.type });
        log.info({ channelId, conversationId: received.conversationId, messageId: received.message.id, jobId: received.job.id }, 'channel message stored');
      } else log.info({ channelId, externalId: input.externalId }, 'channel message delivered again; not answered twice');
      return received;
    },

    /**
     * Waits for the reply of a received message: resolves with it, or throws 502 `provider_error`
     * (the run failed; `details.reason` is its code), 402 when the channel's session is over a
     * limit, or 504 `timeout` after `timeoutMs` (the reply, when it comes, is stored all the same).
     */
    async awaitReply(received: Received, visitorId: string, timeoutMs: number): Promise<ChannelMessage> {
      const type = received.channel.type;
      const started = performance.now();
      const observe = (result: string) => {
        metrics.replies.inc({ type, result });
        metrics.replySeconds.observe({ type, result }, (performance.now() - started) / 1000);
      };
      const replyId = replyMessageId(received.job.id);
      let settle: (outcome: { reply?: ChannelMessage; error?: ApiError }) => void = () => undefined;
      const outcome = new Promise<{ reply?: ChannelMessage; error?: ApiError }>((resolve) => (settle = resolve));
      const unsubscribe = await hub.subscribe(
        { channelId: received.channel.id, visitorId, conversationId: received.conversationId },
        received.message.seq,
        (messages) => {
          const reply = messages.find((message) => message.id === replyId);
          if (reply) settle({ reply });
        },
      );
      const check = async () => {
        const reply = await findReply(pool, received.job.id);
        if (reply) return settle({ reply });
        const job = await getJob(pool, received.job.id);
        if (job && (job.state === 'failed' || job.state === 'cancelled')) settle({ error: replyError(job) });
      };
      const stop = () => settle({ error: new ApiError('timeout', 'the server is stopping; the reply is stored and streamed when it comes', { jobId: received.job.id }) });
      stopping.add(stop);
      if (closed) stop();
      const poll = setInterval(() => void check().catch((error: unknown) => deps.log.warn({ err: error }, 'checking a channel job failed')), JOB_CHECK_MS);
      const timer = setTimeout(
        () => settle({ error: new ApiError('timeout', `no reply within ${Math.round(timeoutMs / 1000)} s; it is stored and streamed when it comes`, { jobId: received.job.id }) }),
        timeoutMs,
      );
      try {
        const { reply, error } = await outcome;
        if (error) {
          observe(error.code === 'timeout' ? 'timeout' : 'failed');
          throw error;
        }
        observe('answered');
        return reply!;
      } finally {
        stopping.delete(stop);
        clearInterval(poll);
        clearTimeout(timer);
        unsubscribe();
      }
    },

    /** Ends every wait for a reply now (504 `timeout` to a waiting request): the server is stopping. */
    close(): void {
      closed = true;
      for (const stop of [...stopping]) stop();
    },

    /** The visitor's conversation and its latest `limit` messages, oldest first. */
    async history(channelId: string, visitorId: string, limit: number): Promise<{ conversationId: string | null; messages: ChannelMessage[] }> {
      const conversation = await findConversation(pool, channelId, visitorId);
      if (!conversation) return { conversationId: null, messages: [] };
      return { conversationId: conversation.id, messages: await latestMessages(pool, conversation.id, limit) };
    },

    /** Subscribes a stream to the visitor's conversation from now on. */
    async follow(channelId: string, visitorId: string, deliver: (messages: ChannelMessage[]) => void): Promise<() => void> {
      await hub.start();
      // Read after listening: nothing stored in between is missed.
      const after = await latestMessageSeq(pool);
      return hub.subscribe({ channelId, visitorId }, after, deliver);
    },

    metrics,
  };
}

function replyError(job: Job): ApiError {
  const reason = job.error?.code ?? job.state;
  if (reason === 'session_limit_exceeded') {
    return new ApiError('session_limit_exceeded', `the channel's session is over a limit: ${job.error?.message ?? ''}`, { jobId: job.id });
  }
  return new ApiError('provider_error', `the agent could not answer: ${job.error?.message ?? job.state}`, { reason, jobId: job.id });
}

export type ConversationService = ReturnType<typeof createConversationService>;

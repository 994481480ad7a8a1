import type { Registry } from 'prom-client';
import { findConversation, messagesAfter, type ChannelMessage, type Logger, type Pool } from '@berth/common';
import { NotificationFanout } from './fanout.js';

/** Messages read at a time for one subscriber. */
const PAGE = 500;

interface Where {
  channelId: string;
  visitorId: string;
  /** Unknown until the visitor's first message makes the conversation. */
  conversationId: string | undefined;
}

/**
 * Fans the messages of conversations out to whoever waits for them (channel streams, and requests
 * waiting for a reply); `berth_channel_messages` carries the conversation id. A subscriber whose
 * visitor had no conversation yet looks for it on each notification of a conversation it does not
 * know, until it is there.
 */
export class ChannelHub {
  private readonly fanout: NotificationFanout<Where, ChannelMessage>;

  constructor(pool: Pool, connectionString: string, log: Logger, metrics?: Registry) {
    this.fanout = new NotificationFanout(
      { connectionString, channel: 'berth_channel_messages', name: 'channel-hub', log, metrics },
      {
        concerns: (where, conversationId) => where.conversationId === undefined || where.conversationId === conversationId,
        read: async (where, after) => {
          where.conversationId ??= (await findConversation(pool, where.channelId, where.visitorId))?.id;
          if (where.conversationId === undefined) return { items: [], last: after, more: false };
          const messages = await messagesAfter(pool, where.conversationId, after, PAGE);
          return { items: messages, last: messages.at(-1)?.seq ?? after, more: messages.length === PAGE };
        },
      },
    );
  }

  /**
   * Subscribes to the visitor's conversation: messages stored after `afterSeq` (a message sequence
   * number read after `start()`) go to `deliver`, in order.
   */
  subscribe(
    where: { channelId: string; visitorId: string; conversationId?: string | undefined },
    afterSeq: string,
    deliver: (messages: ChannelMessage[]) => void,
  ): Promise<() => void> {
    // Anything stored between the caller reading `afterSeq` and this subscription is read at once.
    return this.fanout.subscribe({ ...where, conversationId: where.conversationId }, afterSeq, deliver, { readNow: true });
  }

  /** Starts listening; a subscriber's starting point must be read after this. */
  start(): Promise<void> {
    return this.fanout.start();
  }

  close(): Promise<void> {
    return this.fanout.close();
  }
}

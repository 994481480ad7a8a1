import type { Registry } from 'prom-client';
import { NotificationListener, findConversation, messagesAfter, type ChannelMessage, type Logger, type Pool } from '@berth/common';

interface Subscriber {
  channelId: string;
  visitorId: string;
  /** Unknown until the visitor's first message makes the conversation. */
  conversationId: string | undefined;
  lastSeq: string;
  deliver(messages: ChannelMessage[]): void;
  /** Serialises reads so that messages go out in order, once. */
  reading: Promise<void>;
}

/**
 * Fans the messages of conversations out to whoever waits for them (channel streams, and requests
 * waiting for a reply): one LISTEN connection per process on `berth_channel_messages` (its payload
 * is the conversation id); on each notification the subscribers of that conversation read what
 * they have not seen. A subscriber whose visitor had no conversation yet learns it from the first
 * notification of a new conversation of its channel. After a lost connection every subscriber
 * reads on from the last message it saw.
 */
export class ChannelHub {
  private readonly subscribers = new Set<Subscriber>();
  private readonly listener: NotificationListener;

  constructor(
    private readonly pool: Pool,
    connectionString: string,
    private readonly log: Logger,
    metrics?: Registry,
  ) {
    this.listener = new NotificationListener({
      connectionString,
      channels: ['berth_channel_messages'],
      name: 'channel-hub',
      log,
      ...(metrics ? { metrics } : {}),
      onNotification: (_channel, conversationId) => {
        for (const subscriber of this.subscribers) {
          if (subscriber.conversationId === conversationId || subscriber.conversationId === undefined) this.pull(subscriber);
        }
      },
      onReconnect: () => {
        for (const subscriber of this.subscribers) this.pull(subscriber);
      },
    });
  }

  private pull(subscriber: Subscriber): void {
    subscriber.reading = subscriber.reading
      .then(async () => {
        if (!this.subscribers.has(subscriber)) return;
        if (subscriber.conversationId === undefined) {
          subscriber.conversationId = (await findConversation(this.pool, subscriber.channelId, subscriber.visitorId))?.id;
          if (subscriber.conversationId === undefined) return;
        }
        for (;;) {
          const messages = await messagesAfter(this.pool, subscriber.conversationId, subscriber.lastSeq);
          if (messages.length === 0) return;
          subscriber.lastSeq = messages.at(-1)!.seq;
          subscriber.deliver(messages);
        }
      })
      .catch((error: unknown) => this.log.warn({ err: error, channelId: subscriber.channelId }, 'reading channel messages failed; the next notification reads again'));
  }

  /**
   * Subscribes to the visitor's conversation: messages stored after `afterSeq` go to `deliver`, in
   * order. `afterSeq` is a message sequence number read after this call started listening.
   */
  async subscribe(
    where: { channelId: string; visitorId: string; conversationId?: string | undefined },
    afterSeq: string,
    deliver: (messages: ChannelMessage[]) => void,
  ): Promise<() => void> {
    await this.listener.start();
    const subscriber: Subscriber = { ...where, conversationId: where.conversationId, lastSeq: afterSeq, deliver, reading: Promise.resolve() };
    this.subscribers.add(subscriber);
    // Anything stored between the caller reading `afterSeq` and this subscription is read now.
    this.pull(subscriber);
    return () => {
      this.subscribers.delete(subscriber);
    };
  }

  /** Starts listening; a subscriber's starting point must be read after this. */
  start(): Promise<void> {
    return this.listener.start();
  }

  async close(): Promise<void> {
    this.subscribers.clear();
    await this.listener.close();
  }
}

import type { Registry } from 'prom-client';
import { NotificationListener, type Logger } from '@berth/common';

/** What a fan-out reads for one subscriber: which notifications concern it, and what it has not seen. */
export interface FanoutSource<Where, Item> {
  /** Whether a notification's payload may bring something new for this subscriber. */
  concerns(where: Where, payload: string | undefined): boolean;
  /**
   * The next items after `after`, oldest first, and the position of the last one; empty when
   * there are none. Called again while it returns `more`.
   */
  read(where: Where, after: string): Promise<{ items: Item[]; last: string; more: boolean }>;
}

interface Subscriber<Where, Item> {
  where: Where;
  after: string;
  deliver(items: Item[]): void;
  /** Serialises reads so that items go out in order, once. */
  reading: Promise<void>;
}

/**
 * Fans rows out to subscribers as PostgreSQL announces them: one LISTEN connection per process,
 * and on each notification every subscriber it concerns reads what it has not seen yet, from the
 * position of the last item it was given. When the connection is lost and made again, every
 * subscriber reads on from there, so nothing written meanwhile is missed.
 */
export class NotificationFanout<Where, Item> {
  private readonly subscribers = new Set<Subscriber<Where, Item>>();
  private readonly listener: NotificationListener;
  private readonly log: Logger;

  constructor(
    options: { connectionString: string; channel: string; name: string; log: Logger; metrics?: Registry | undefined },
    private readonly source: FanoutSource<Where, Item>,
  ) {
    this.log = options.log;
    this.listener = new NotificationListener({
      connectionString: options.connectionString,
      channels: [options.channel],
      name: options.name,
      log: options.log,
      ...(options.metrics ? { metrics: options.metrics } : {}),
      onNotification: (_channel, payload) => {
        for (const subscriber of this.subscribers) if (this.source.concerns(subscriber.where, payload)) this.pull(subscriber);
      },
      onReconnect: () => {
        for (const subscriber of this.subscribers) this.pull(subscriber);
      },
    });
  }

  private pull(subscriber: Subscriber<Where, Item>): void {
    subscriber.reading = subscriber.reading
      .then(async () => {
        for (;;) {
          if (!this.subscribers.has(subscriber)) return;
          const { items, last, more } = await this.source.read(subscriber.where, subscriber.after);
          if (items.length === 0) return;
          subscriber.after = last;
          subscriber.deliver(items);
          if (!more) return;
        }
      })
      .catch((error: unknown) => this.log.warn({ err: error }, 'reading for a subscriber failed; the next notification or reconnect reads again'));
  }

  /** Listens (once); a subscriber's starting position must be read after this resolved. */
  start(): Promise<void> {
    return this.listener.start();
  }

  /** Items after `after` go to `deliver`, in order; with `readNow`, what is there already is read at once. */
  async subscribe(where: Where, after: string, deliver: (items: Item[]) => void, options: { readNow: boolean }): Promise<() => void> {
    await this.listener.start();
    const subscriber: Subscriber<Where, Item> = { where, after, deliver, reading: Promise.resolve() };
    this.subscribers.add(subscriber);
    if (options.readNow) this.pull(subscriber);
    return () => {
      this.subscribers.delete(subscriber);
    };
  }

  async close(): Promise<void> {
    this.subscribers.clear();
    await this.listener.close();
  }
}

import pg from 'pg';
import { latestStreamSeq, streamEventsAfter, type Logger, type Pool, type StreamEvent } from '@berth/common';

interface Subscriber {
  agentId: string;
  lastSeq: string;
  deliver(events: StreamEvent[]): void;
  /** Serialises reads so that events go out in order, once. */
  reading: Promise<void>;
}

/**
 * Fans the stream events of agents out to SSE subscribers: one LISTEN connection per process,
 * and for each notification every subscriber of that agent reads what it has not seen yet.
 * A subscriber that reconnects with Last-Event-ID starts after that id; a new one starts after
 * the newest event, so it receives everything from the moment it connected.
 */
export class StreamHub {
  private readonly subscribers = new Set<Subscriber>();
  private listener: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private closed = false;

  constructor(
    private readonly pool: Pool,
    private readonly connectionString: string,
    private readonly log: Logger,
  ) {}

  private ensureListening(): Promise<void> {
    this.connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.connectionString });
      client.on('notification', (message) => {
        const { agentId } = JSON.parse(message.payload ?? '{}') as { agentId?: string };
        for (const subscriber of this.subscribers) if (subscriber.agentId === agentId) this.pull(subscriber);
      });
      client.on('error', (error) => {
        this.log.warn({ err: error }, 'stream notifications lost; reconnecting');
        this.listener = undefined;
        this.connecting = undefined;
        if (!this.closed && this.subscribers.size > 0) {
          setTimeout(() => {
            void this.ensureListening().then(() => {
              for (const subscriber of this.subscribers) this.pull(subscriber); // catch up on what was missed
            });
          }, 1_000).unref();
        }
      });
      await client.connect();
      await client.query('LISTEN berth_stream');
      this.listener = client;
    })();
    return this.connecting;
  }

  private pull(subscriber: Subscriber): void {
    subscriber.reading = subscriber.reading.then(async () => {
      if (!this.subscribers.has(subscriber)) return;
      for (;;) {
        const events = await streamEventsAfter(this.pool, subscriber.agentId, subscriber.lastSeq);
        if (events.length === 0) return;
        subscriber.lastSeq = events.at(-1)!.seq;
        subscriber.deliver(events);
      }
    }).catch((error: unknown) => this.log.warn({ err: error }, 'reading stream events failed'));
  }

  /** Subscribes; events after `lastEventId` (or from now) go to `deliver`, in order. */
  async subscribe(agentId: string, lastEventId: string | undefined, deliver: (events: StreamEvent[]) => void): Promise<() => void> {
    await this.ensureListening();
    // Listening before reading the starting point: nothing written in between is missed.
    const lastSeq = lastEventId ?? (await latestStreamSeq(this.pool, agentId));
    const subscriber: Subscriber = { agentId, lastSeq, deliver, reading: Promise.resolve() };
    this.subscribers.add(subscriber);
    if (lastEventId !== undefined) this.pull(subscriber);
    return () => {
      this.subscribers.delete(subscriber);
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.subscribers.clear();
    await this.listener?.end().catch(() => undefined);
  }
}

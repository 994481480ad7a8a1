import type { Registry } from 'prom-client';
import { NotificationListener, latestStreamSeq, streamEventsAfter, type Logger, type Pool, type StreamEvent } from '@berth/common';

/** Events read at a time for one subscriber. */
const PAGE = 500;

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
 * the newest event, so it receives everything from the moment it connected. When the LISTEN
 * connection is lost and made again, every subscriber reads on from the last event it saw, so
 * open streams miss nothing across a database restart.
 */
export class StreamHub {
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
      channels: ['berth_stream'],
      name: 'stream-hub',
      log,
      ...(metrics ? { metrics } : {}),
      onNotification: (_channel, payload) => {
        const { agentId } = JSON.parse(payload ?? '{}') as { agentId?: string };
        for (const subscriber of this.subscribers) if (subscriber.agentId === agentId) this.pull(subscriber);
      },
      onReconnect: () => {
        for (const subscriber of this.subscribers) this.pull(subscriber);
      },
    });
  }

  private pull(subscriber: Subscriber): void {
    subscriber.reading = subscriber.reading.then(async () => {
      if (!this.subscribers.has(subscriber)) return;
      for (;;) {
        const events = await streamEventsAfter(this.pool, subscriber.agentId, subscriber.lastSeq, PAGE);
        if (events.length === 0) return;
        subscriber.lastSeq = events.at(-1)!.seq;
        subscriber.deliver(events);
        // A page that is not full was the end: no second read to learn that there is nothing more.
        if (events.length < PAGE) return;
      }
    }).catch((error: unknown) => this.log.warn({ err: error, agentId: subscriber.agentId }, 'reading stream events failed; the next notification or reconnect reads again'));
  }

  /** Subscribes; events after `lastEventId` (or from now) go to `deliver`, in order. */
  async subscribe(agentId: string, lastEventId: string | undefined, deliver: (events: StreamEvent[]) => void): Promise<() => void> {
    await this.listener.start();
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
    this.subscribers.clear();
    await this.listener.close();
  }
}

import type { Registry } from 'prom-client';
import { NotificationListener, runEventsAfter, type Logger, type Pool, type WorkflowStreamEvent } from '@berth/common';

/** Events read at a time for one subscriber. */
const PAGE = 500;

interface Subscriber {
  runId: string;
  lastSeq: string;
  deliver(events: WorkflowStreamEvent[]): void;
  /** Serialises reads so that events go out in order, once. */
  reading: Promise<void>;
}

/**
 * Fans the stream events of workflow runs out to SSE subscribers, as the agent StreamHub does
 * for agents: one LISTEN connection (`berth_workflow_stream`, one notification per statement
 * and run), and for each notification every subscriber of that run reads what it has not seen.
 * Last-Event-ID starts after that event; without it, from the run's first event (a run has few,
 * and a client that connects after starting the run still sees `started`). A lost and remade
 * LISTEN connection has every subscriber read on from the last event it saw.
 */
export class WorkflowStreamHub {
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
      channels: ['berth_workflow_stream'],
      name: 'workflow-stream-hub',
      log,
      ...(metrics ? { metrics } : {}),
      onNotification: (_channel, runId) => {
        for (const subscriber of this.subscribers) if (subscriber.runId === runId) this.pull(subscriber);
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
        for (;;) {
          const events = await runEventsAfter(this.pool, subscriber.runId, subscriber.lastSeq, PAGE);
          if (events.length === 0) return;
          subscriber.lastSeq = events.at(-1)!.seq;
          subscriber.deliver(events);
          if (events.length < PAGE) return;
        }
      })
      .catch((error: unknown) => this.log.warn({ err: error, runId: subscriber.runId }, 'reading workflow run events failed; the next notification or reconnect reads again'));
  }

  /** Subscribes; events after `lastEventId` (or all of the run's) go to `deliver`, in order. */
  async subscribe(runId: string, lastEventId: string | undefined, deliver: (events: WorkflowStreamEvent[]) => void): Promise<() => void> {
    await this.listener.start();
    // Listening before the first read: nothing written in between is missed.
    const subscriber: Subscriber = { runId, lastSeq: lastEventId ?? '0', deliver, reading: Promise.resolve() };
    this.subscribers.add(subscriber);
    this.pull(subscriber);
    return () => {
      this.subscribers.delete(subscriber);
    };
  }

  async close(): Promise<void> {
    this.subscribers.clear();
    await this.listener.close();
  }
}

import type { Registry } from 'prom-client';
import { latestStreamSeq, streamEventsAfter, type Logger, type Pool, type StreamEvent } from '@berth/common';
import { NotificationFanout } from './fanout.js';

/** Events read at a time for one subscriber. */
const PAGE = 500;

/**
 * Fans the stream events of agents out to SSE subscribers (`berth_stream` carries the agent id).
 * A subscriber that reconnects with Last-Event-ID starts after that id; a new one starts after
 * the newest event, so it receives everything from the moment it connected.
 */
export class StreamHub {
  private readonly fanout: NotificationFanout<string, StreamEvent>;

  constructor(
    private readonly pool: Pool,
    connectionString: string,
    log: Logger,
    metrics?: Registry,
  ) {
    this.fanout = new NotificationFanout(
      { connectionString, channel: 'berth_stream', name: 'stream-hub', log, metrics },
      {
        concerns: (agentId, payload) => (JSON.parse(payload ?? '{}') as { agentId?: string }).agentId === agentId,
        read: async (agentId, after) => {
          const events = await streamEventsAfter(pool, agentId, after, PAGE);
          // A page that is not full was the end: no second read to learn that there is nothing more.
          return { items: events, last: events.at(-1)?.seq ?? after, more: events.length === PAGE };
        },
      },
    );
  }

  /** Subscribes; events after `lastEventId` (or from now) go to `deliver`, in order. */
  async subscribe(agentId: string, lastEventId: string | undefined, deliver: (events: StreamEvent[]) => void): Promise<() => void> {
    await this.fanout.start();
    // Listening before reading the starting point: nothing written in between is missed.
    const after = lastEventId ?? (await latestStreamSeq(this.pool, agentId));
    return this.fanout.subscribe(agentId, after, deliver, { readNow: lastEventId !== undefined });
  }

  close(): Promise<void> {
    return this.fanout.close();
  }
}

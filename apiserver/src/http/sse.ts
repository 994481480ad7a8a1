import { systemClock, type Clock } from '@berth/common';
import type { Request, Response } from 'express';

/** How often an open stream sends a heartbeat, so proxies and clients know it is alive. */
export const HEARTBEAT_MS = 15_000;

export interface EventStreamOptions {
  /** Time as the heartbeats and the lifetime see it (tests move it); default the system clock. */
  clock?: Clock;
  /** The stream is ended by the server this long after it opened (default: never). */
  lifetimeMs?: number;
}

/**
 * Starts a `text/event-stream` response and returns a writer of events. Heartbeats and the end of
 * the stream's lifetime are due by `clock`: a timer looks at it (at most every second, more often
 * for shorter heartbeats), so a test that moves the clock sees them without waiting.
 */
export function openEventStream(req: Request, res: Response, heartbeatMs = HEARTBEAT_MS, options: EventStreamOptions = {}) {
  const clock = options.clock ?? systemClock;
  res.status(200);
  res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
  res.setHeader('Cache-Control', 'no-cache, no-transform');
  res.setHeader('Connection', 'keep-alive');
  res.setHeader('X-Accel-Buffering', 'no'); // nginx must not buffer a stream
  res.flushHeaders();
  res.write('retry: 2000\n\n');
  const write = (event: string, data: unknown, id?: string) => {
    res.write(`${id !== undefined ? `id: ${id}\n` : ''}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const opened = clock.now().getTime();
  let nextHeartbeat = opened + heartbeatMs;
  const endsAt = options.lifetimeMs !== undefined ? opened + options.lifetimeMs : Infinity;
  const tick = setInterval(() => {
    const now = clock.now().getTime();
    if (now >= endsAt) {
      end();
      return;
    }
    if (now >= nextHeartbeat) {
      // Heartbeats carry no id, so they never move a client's Last-Event-ID.
      write('heartbeat', { t: now });
      nextHeartbeat = now + heartbeatMs;
    }
  }, Math.min(heartbeatMs, 1_000));
  let finish: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => {
    const close = () => {
      clearInterval(tick);
      resolve();
    };
    finish = close;
    if (req.socket.destroyed) close(); // the client left before the stream opened
    else {
      req.on('close', close);
      res.on('finish', close);
    }
  });
  /** Ends the stream from the server's side (what it streams has ended). */
  const end = () => {
    finish();
    res.end();
  };
  return { write, closed, end };
}

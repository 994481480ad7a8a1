import type { Request, Response } from 'express';

/** How often an open stream sends a heartbeat, so proxies and clients know it is alive. */
export const HEARTBEAT_MS = 15_000;

/** Starts a `text/event-stream` response and returns a writer of events. */
export function openEventStream(req: Request, res: Response, heartbeatMs = HEARTBEAT_MS) {
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
  // Heartbeats carry no id, so they never move a client's Last-Event-ID.
  const heartbeat = setInterval(() => write('heartbeat', { t: Date.now() }), heartbeatMs);
  let finish: () => void = () => undefined;
  const closed = new Promise<void>((resolve) => {
    const close = () => {
      clearInterval(heartbeat);
      resolve();
    };
    finish = close;
    if (req.socket.destroyed) close(); // the client left before the stream opened
    else req.on('close', close);
  });
  /** Ends the stream from the server's side (what it streams has ended). */
  const end = () => {
    finish();
    res.end();
  };
  return { write, closed, end };
}

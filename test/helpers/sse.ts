/** One server-sent event as a client receives it. */
export interface SseEvent {
  id?: string;
  event: string;
  data: any;
}

export interface SseStream {
  events: SseEvent[];
  /** Resolves with the events once `predicate` holds for them, or fails after the timeout. */
  waitFor(predicate: (events: SseEvent[]) => boolean, timeoutMs?: number): Promise<SseEvent[]>;
  status: number;
  headers: Headers;
  /** The server ended the stream (not the client's close). */
  readonly ended: boolean;
  close(): void;
}

/** Opens an event stream with fetch and parses it as EventSource would (event, id, data lines). */
export async function openSse(url: string, key: string | undefined, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, {
    headers: { ...(key ? { authorization: `Bearer ${key}` } : {}), accept: 'text/event-stream', ...headers },
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  if (response.ok && response.body) {
    void (async () => {
      const decoder = new TextDecoder();
      let buffer = '';
      try {
        for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
          buffer += decoder.decode(chunk, { stream: true });
          let end: number;
          while ((end = buffer.indexOf('\n\n')) >= 0) {
            const block = buffer.slice(0, end);
            buffer = buffer.slice(end + 2);
            const event: Partial<SseEvent> & { lines: string[] } = { lines: [] };
            for (const line of block.split('\n')) {
              if (line.startsWith('event: ')) event.event = line.slice(7);
              else if (line.startsWith('id: ')) event.id = line.slice(4);
              else if (line.startsWith('data: ')) event.lines.push(line.slice(6));
            }
            if (event.event === undefined) continue; // comments and the retry hint
            events.push({ event: event.event, ...(event.id !== undefined ? { id: event.id } : {}), data: JSON.parse(event.lines.join('\n')) });
            for (const wake of waiters) wake();
          }
        }
        ended = true;
      } catch {
        // aborted by close()
      }
    })();
  }
  return {
    events,
    status: response.status,
    headers: response.headers,
    get ended() {
      return ended;
    },
    close: () => controller.abort(),
    waitFor(predicate, timeoutMs = 30_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(events)) return;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(events);
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`stream did not reach the expected state in ${timeoutMs} ms; got ${JSON.stringify(events.map((event) => event.event))}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
  };
}

/** The events that make up runs (heartbeats aside). */
export function runEvents(events: SseEvent[]): SseEvent[] {
  return events.filter((event) => event.event !== 'heartbeat');
}

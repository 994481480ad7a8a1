import pg from 'pg';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../log.js';

export interface NotificationListenerOptions {
  connectionString: string;
  /** Channels to LISTEN on (lowercase identifiers). */
  channels: string[];
  /** Names this listener in logs and in the `listener` label of its metrics. */
  name: string;
  log: Logger;
  onNotification(channel: string, payload: string | undefined): void;
  /**
   * Called after every connection that follows a lost one (or a failed first attempt):
   * notifications sent meanwhile are gone, so the user catches up by reading the state.
   */
  onReconnect?(): void;
  metrics?: Registry;
  /** First delay before reconnecting; doubled after each failure up to `maxDelayMs`. */
  minDelayMs?: number;
  maxDelayMs?: number;
}

const RECONNECTS = 'berth_database_listener_reconnects_total';
const CONNECTED = 'berth_database_listener_connected';

/** The listener metrics of a registry, created by the first listener that reports there. */
function listenerMetrics(registry: Registry): { reconnects: Counter<'listener'>; connected: Gauge<'listener'> } {
  const reconnects =
    (registry.getSingleMetric(RECONNECTS) as Counter<'listener'> | undefined) ??
    new Counter({
      name: RECONNECTS,
      help: 'LISTEN connections to PostgreSQL made again after one was lost, by listener; each is followed by a catch-up read',
      labelNames: ['listener'],
      registers: [registry],
    });
  const connected =
    (registry.getSingleMetric(CONNECTED) as Gauge<'listener'> | undefined) ??
    new Gauge({
      name: CONNECTED,
      help: 'Whether the LISTEN connection of a listener is up (1) or being re-established (0)',
      labelNames: ['listener'],
      registers: [registry],
    });
  return { reconnects, connected };
}

/**
 * One LISTEN connection to PostgreSQL that stays up: when it drops (or cannot be made) it is
 * made again after a capped exponential backoff, for as long as the listener is open, and
 * `onReconnect` tells the user that notifications may have been missed. Nothing it does ends in
 * an unhandled rejection or an unhandled 'error' event.
 */
export class NotificationListener {
  private client: pg.Client | undefined;
  private timer: NodeJS.Timeout | undefined;
  private delayMs: number;
  private started = false;
  private closed = false;
  /** Notifications may have been missed since the last connection (or none was made yet after a failure). */
  private missed = false;
  /** Callers of `start()` waiting for the outcome of the next attempt. */
  private waiters: { resolve(): void; reject(error: unknown): void }[] = [];
  private readonly metrics: ReturnType<typeof listenerMetrics> | undefined;

  constructor(private readonly options: NotificationListenerOptions) {
    for (const channel of options.channels) {
      if (!/^[a-z_][a-z0-9_]*$/.test(channel)) throw new Error(`not a channel name: ${channel}`);
    }
    this.delayMs = options.minDelayMs ?? 100;
    this.metrics = options.metrics ? listenerMetrics(options.metrics) : undefined;
  }

  get connected(): boolean {
    return this.client !== undefined;
  }

  /**
   * Starts listening (once; later calls only wait). Resolves when connected; rejects when the
   * next attempt fails, while the listener goes on trying in the background.
   */
  start(): Promise<void> {
    if (this.closed || this.client) return Promise.resolve();
    const outcome = new Promise<void>((resolve, reject) => this.waiters.push({ resolve, reject }));
    if (!this.started) {
      this.started = true;
      this.metrics?.connected.set({ listener: this.options.name }, 0);
      void this.connect();
    }
    return outcome;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.options.connectionString, keepAlive: true, connectionTimeoutMillis: 10_000 });
    client.on('notification', (message) => {
      try {
        this.options.onNotification(message.channel, message.payload);
      } catch (error) {
        this.options.log.error({ err: error, listener: this.options.name }, 'handling a notification failed');
      }
    });
    client.on('error', (error) => this.lost(client, error));
    client.on('end', () => this.lost(client, new Error('the LISTEN connection ended')));
    try {
      await client.connect();
      for (const channel of this.options.channels) await client.query(`LISTEN ${channel}`);
    } catch (error) {
      client.end().catch(() => undefined);
      this.settle(error);
      this.retry(error);
      return;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      this.settle();
      return;
    }
    this.client = client;
    this.delayMs = this.options.minDelayMs ?? 100;
    this.metrics?.connected.set({ listener: this.options.name }, 1);
    const reconnected = this.missed;
    this.missed = false;
    this.settle();
    if (!reconnected) return;
    this.metrics?.reconnects.inc({ listener: this.options.name });
    this.options.log.info({ listener: this.options.name }, 'LISTEN connection restored; catching up');
    try {
      this.options.onReconnect?.();
    } catch (error) {
      this.options.log.error({ err: error, listener: this.options.name }, 'catching up after a reconnect failed');
    }
  }

  private settle(error?: unknown): void {
    for (const waiter of this.waiters.splice(0)) {
      if (error === undefined) waiter.resolve();
      else waiter.reject(error);
    }
  }

  private lost(client: pg.Client, error: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    client.end().catch(() => undefined);
    this.metrics?.connected.set({ listener: this.options.name }, 0);
    this.retry(error);
  }

  private retry(error: unknown): void {
    if (this.closed || this.timer) return;
    this.missed = true;
    const maxDelayMs = this.options.maxDelayMs ?? 10_000;
    // Jittered, so that many processes do not all reconnect in the same instant.
    const delay = Math.round(this.delayMs * (0.5 + Math.random() / 2));
    this.delayMs = Math.min(this.delayMs * 2, maxDelayMs);
    this.options.log.warn({ err: error, listener: this.options.name, retryInMs: delay }, 'LISTEN connection lost; reconnecting');
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.connect();
    }, delay);
    this.timer.unref();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.settle();
    const client = this.client;
    this.client = undefined;
    this.metrics?.connected.set({ listener: this.options.name }, 0);
    await client?.end().catch(() => undefined);
  }
}

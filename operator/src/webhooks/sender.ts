import {
  LATENCY_BUCKETS,
  RETRY_DELAYS_MS,
  newId,
  postWebhook,
  signPayload,
  withTransaction,
  type Clock,
  type Logger,
  type Pool,
} from '@berth/common';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { PassLoop } from '../runtime/passes.js';

export interface SenderOptions {
  pool: Pool;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  /** This process, in claims. */
  identity: string;
  allowPrivate: boolean;
  /** How often to look for due deliveries when no event wakes the sender (default 1 s). */
  pollMs?: number;
  /** Deliveries attempted at once (default 8). */
  concurrency?: number;
  /** An attempt not finished after this is taken over by another sender (default 60 s). */
  claimMs?: number;
}

interface DeliveryRow {
  id: string;
  webhook_id: string;
  event_type: string;
  payload: string;
  attempts: number;
  url: string;
  secret: string;
  deleted_at: Date | null;
}

function createSenderMetrics(registry: Registry) {
  return {
    deliveries: new Counter({
      name: 'berth_webhook_attempts_total',
      help: 'Webhook delivery attempts, by event, outcome (delivered, retry, failed) and attempt number',
      labelNames: ['event', 'outcome', 'attempt'],
      registers: [registry],
    }),
    latency: new Histogram({
      name: 'berth_webhook_attempt_duration_seconds',
      help: 'Time from sending a webhook to its answer (or the 10 s cut)',
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    oldestPending: new Gauge({
      name: 'berth_webhook_oldest_pending_seconds',
      help: 'Age of the oldest webhook delivery not yet delivered or given up on',
      registers: [registry],
    }),
  };
}

/**
 * Delivers webhooks: fans new events of the outbox out into one delivery per subscribed
 * webhook (in one transaction with marking them fanned out), then attempts the deliveries that
 * are due. A delivery is claimed by one sender at a time; its schedule (attempts, next attempt)
 * lives in PostgreSQL, so any sender continues it after a crash or restart. Every attempt of a
 * delivery carries the same X-Svc-Delivery id.
 */
export class WebhookSender {
  private readonly metrics: ReturnType<typeof createSenderMetrics>;
  private readonly loop: PassLoop;

  constructor(private readonly options: SenderOptions) {
    this.loop = new PassLoop(() => this.tick(), { pollMs: options.pollMs ?? 1_000, log: options.log, failure: 'webhook pass failed; the next one retries' });
    this.metrics = createSenderMetrics(options.metrics);
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** One pass: fan out, then attempt what is due. Returns the attempts made. */
  async tick(): Promise<number> {
    await this.fanOut();
    const due = await this.claimDue();
    const concurrency = this.options.concurrency ?? 8;
    for (let i = 0; i < due.length; i += concurrency) {
      await Promise.all(due.slice(i, i + concurrency).map((delivery) => this.attempt(delivery)));
    }
    await this.observeQueue();
    return due.length;
  }

  /** Events not fanned out yet become deliveries for every live webhook subscribed to them. */
  async fanOut(): Promise<number> {
    const now = this.options.clock.now();
    return withTransaction(this.options.pool, async (tx) => {
      const { rows: events } = await tx.query<{ id: string; seq: string; organization_id: string; mode: string; type: string; data: unknown; created_at: Date }>(
        'SELECT id, seq, organization_id, mode, type, data, created_at FROM events WHERE NOT fanned_out ORDER BY seq LIMIT 500 FOR UPDATE SKIP LOCKED',
      );
      let created = 0;
      for (const event of events) {
        const { rows: hooks } = await tx.query<{ id: string }>(
          'SELECT id FROM webhooks WHERE organization_id = $1 AND mode = $2 AND deleted_at IS NULL AND $3 = ANY(events) AND created_at <= $4',
          [event.organization_id, event.mode, event.type, event.created_at],
        );
        const payload = JSON.stringify({ id: event.id, event: event.type, createdAt: event.created_at.toISOString(), data: event.data });
        for (const hook of hooks) {
          const inserted = await tx.query(
            `INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, payload, state, next_attempt_at, created_at)
             VALUES ($1, $2, $3, $4, $5, 'pending', $6, $6) ON CONFLICT (webhook_id, event_id) DO NOTHING`,
            [newId('del', now), hook.id, event.id, event.type, payload, now],
          );
          created += inserted.rowCount ?? 0;
        }
      }
      if (events.length > 0) await tx.query('UPDATE events SET fanned_out = true WHERE seq = ANY($1)', [events.map((event) => event.seq)]);
      return created;
    });
  }

  private async claimDue(): Promise<DeliveryRow[]> {
    const now = this.options.clock.now();
    const { rows } = await this.options.pool.query<DeliveryRow>(
      `WITH due AS (
         SELECT id FROM webhook_deliveries
         WHERE state = 'pending' AND next_attempt_at <= $1 AND (claim_expires_at IS NULL OR claim_expires_at <= $1)
         ORDER BY next_attempt_at LIMIT 64 FOR UPDATE SKIP LOCKED)
       UPDATE webhook_deliveries d SET claimed_by = $2, claim_expires_at = $3
       FROM due, webhooks w WHERE d.id = due.id AND w.id = d.webhook_id
       RETURNING d.id, d.webhook_id, d.event_type, d.payload, d.attempts, w.url, w.secret, w.deleted_at`,
      [now, this.options.identity, new Date(now.getTime() + (this.options.claimMs ?? 60_000))],
    );
    return rows;
  }

  private async attempt(delivery: DeliveryRow): Promise<void> {
    if (delivery.deleted_at) {
      await this.options.pool.query("UPDATE webhook_deliveries SET state = 'cancelled', claimed_by = NULL, claim_expires_at = NULL WHERE id = $1", [delivery.id]);
      return;
    }
    const startedAt = this.options.clock.now();
    const result = await postWebhook(
      delivery.url,
      delivery.payload,
      { 'x-svc-signature': signPayload(delivery.secret, delivery.payload), 'x-svc-delivery': delivery.id },
      this.options.allowPrivate,
    );
    const attempt = delivery.attempts + 1;
    const retriesLeft = attempt <= RETRY_DELAYS_MS.length;
    const outcome = result.ok ? 'delivered' : retriesLeft ? 'retry' : 'failed';
    const finishedAt = this.options.clock.now();
    await withTransaction(this.options.pool, async (tx) => {
      await tx.query(
        'INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
        [delivery.id, attempt, startedAt, result.durationMs, result.status ?? null, result.error ?? null],
      );
      // Only the claim holder records the outcome: one that lost its claim (it took too long)
      // leaves the delivery to the sender that took it over.
      await tx.query(
        `UPDATE webhook_deliveries SET state = $3, attempts = $4, next_attempt_at = $5, last_status = $6, last_error = $7,
           last_attempt_at = $8, claimed_by = NULL, claim_expires_at = NULL
         WHERE id = $1 AND claimed_by = $2 AND state = 'pending'`,
        [
          delivery.id,
          this.options.identity,
          result.ok ? 'succeeded' : retriesLeft ? 'pending' : 'failed',
          attempt,
          !result.ok && retriesLeft ? new Date(finishedAt.getTime() + RETRY_DELAYS_MS[attempt - 1]!) : null,
          result.status ?? null,
          result.error ?? null,
          startedAt,
        ],
      );
    });
    this.metrics.deliveries.inc({ event: delivery.event_type, outcome, attempt: String(attempt) });
    this.metrics.latency.observe(result.durationMs / 1000);
    const log = this.options.log.child({ deliveryId: delivery.id, webhookId: delivery.webhook_id, event: delivery.event_type, attempt });
    if (result.ok) log.debug({ status: result.status }, 'webhook delivered');
    else if (retriesLeft) log.info({ status: result.status, error: result.error, retryInMs: RETRY_DELAYS_MS[attempt - 1] }, 'webhook attempt failed; retrying');
    else log.warn({ status: result.status, error: result.error }, 'webhook delivery failed for good after its retries');
  }

  private async observeQueue(): Promise<void> {
    const { rows } = await this.options.pool.query<{ oldest: Date | null }>(
      "SELECT min(created_at) AS oldest FROM webhook_deliveries WHERE state = 'pending'",
    );
    const oldest = rows[0]?.oldest;
    this.metrics.oldestPending.set(oldest ? Math.max(0, (this.options.clock.now().getTime() - oldest.getTime()) / 1000) : 0);
  }
}

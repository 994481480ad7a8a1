import {
  ApiError,
  generateWebhookSecret,
  isId,
  maskSecret,
  newId,
  postWebhook,
  signPayload,
  webhookUrlProblem,
  withTransaction,
  type Clock,
  type Pool,
  type UrlPolicy,
} from '@berth/common';
import type { Principal } from '../http/context.js';

interface WebhookRow {
  id: string;
  url: string;
  events: string[];
  secret: string;
  created_at: Date;
}

export interface DeliveryView {
  id: string;
  eventId: string | null;
  event: string;
  state: 'pending' | 'succeeded' | 'failed' | 'cancelled';
  attempts: number;
  lastStatus: number | null;
  lastError: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  history: { attempt: number; at: string; durationMs: number; status: number | null; error: string | null }[];
}

/** How long a resend holds its delivery: past the 10 s a receiver is given. */
const RESEND_CLAIM_MS = 60_000;

const view = (row: WebhookRow, secret: 'full' | 'masked') => ({
  id: row.id,
  url: row.url,
  events: row.events,
  secret: secret === 'full' ? row.secret : maskSecret(row.secret),
  createdAt: row.created_at.toISOString(),
});

/** The sample of `POST /v1/webhooks/:id/test`: an agent.completed with every field of the spec. */
function sampleCompleted(now: Date, currency: string) {
  return {
    id: newId('evt', now),
    event: 'agent.completed',
    createdAt: now.toISOString(),
    data: {
      test: true,
      agentId: 'agt_sample00000000000000000000',
      sessionId: 'ses_sample00000000000000000000',
      userId: 'sample-user',
      taskId: 'task_sample0000000000000000000',
      status: 'completed',
      output: 'This is a sample agent.completed event sent by POST /v1/webhooks/:id/test.',
      artifacts: ['report.md'],
      cost: { amount: 12, currency },
      compute: { provider: 'local', durationMs: 4210 },
      model: { provider: 'openai', model: 'gpt-4o-mini', inputTokens: 1840, outputTokens: 312 },
    },
  };
}

export function createWebhookService(deps: { pool: Pool; clock: Clock; policy: UrlPolicy; currency: string }) {
  const { pool, clock, policy } = deps;

  async function find(principal: Principal, id: string): Promise<WebhookRow> {
    const { rows } = isId(id, 'wh')
      ? await pool.query<WebhookRow>(
          'SELECT id, url, events, secret, created_at FROM webhooks WHERE id = $1 AND organization_id = $2 AND mode = $3 AND deleted_at IS NULL',
          [id, principal.organizationId, principal.mode],
        )
      : { rows: [] };
    if (!rows[0]) throw new ApiError('not_found', `webhook ${id} does not exist`, { id });
    return rows[0];
  }

  return {
    async create(principal: Principal, input: { url: string; events: string[]; secret?: string | undefined }) {
      const problem = webhookUrlProblem(input.url, policy);
      if (problem) throw new ApiError('unprocessable_entity', `url: ${problem}`, { fields: { url: [problem] } });
      const now = clock.now();
      const row: WebhookRow = {
        id: newId('wh', now),
        url: input.url,
        events: [...new Set(input.events)],
        secret: input.secret ?? generateWebhookSecret(),
        created_at: now,
      };
      await pool.query('INSERT INTO webhooks (id, organization_id, mode, url, events, secret, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
        row.id,
        principal.organizationId,
        principal.mode,
        row.url,
        row.events,
        row.secret,
        row.created_at,
      ]);
      return view(row, 'full');
    },

    async list(principal: Principal) {
      const { rows } = await pool.query<WebhookRow>(
        'SELECT id, url, events, secret, created_at FROM webhooks WHERE organization_id = $1 AND mode = $2 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC',
        [principal.organizationId, principal.mode],
      );
      return { data: rows.map((row) => view(row, 'masked')) };
    },

    async get(principal: Principal, id: string) {
      return view(await find(principal, id), 'masked');
    },

    /** No further events; deliveries not made yet are cancelled. */
    async delete(principal: Principal, id: string) {
      const hook = await find(principal, id);
      await withTransaction(pool, async (tx) => {
        await tx.query('UPDATE webhooks SET deleted_at = $2 WHERE id = $1', [hook.id, clock.now()]);
        await tx.query("UPDATE webhook_deliveries SET state = 'cancelled', next_attempt_at = NULL WHERE webhook_id = $1 AND state = 'pending'", [hook.id]);
      });
      return { ok: true as const };
    },

    /** Sends a sample agent.completed once, now, and answers with what happened; it is in the delivery log too. */
    async test(principal: Principal, id: string) {
      const hook = await find(principal, id);
      const now = clock.now();
      const payload = JSON.stringify(sampleCompleted(now, deps.currency));
      const deliveryId = newId('del', now);
      const result = await postWebhook(hook.url, payload, { 'x-svc-signature': signPayload(hook.secret, payload), 'x-svc-delivery': deliveryId }, policy.allowPrivate);
      await withTransaction(pool, async (tx) => {
        await tx.query(
          `INSERT INTO webhook_deliveries (id, webhook_id, event_id, event_type, payload, state, attempts, last_status, last_error, last_attempt_at, created_at)
           VALUES ($1, $2, NULL, 'agent.completed', $3, $4, 1, $5, $6, $7, $7)`,
          [deliveryId, hook.id, payload, result.ok ? 'succeeded' : 'failed', result.status ?? null, result.error ?? null, now],
        );
        await tx.query('INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error) VALUES ($1, 1, $2, $3, $4, $5)', [
          deliveryId,
          now,
          result.durationMs,
          result.status ?? null,
          result.error ?? null,
        ]);
      });
      return {
        deliveryId,
        delivered: result.ok,
        status: result.status ?? null,
        error: result.error ?? null,
        durationMs: result.durationMs,
      };
    },

    /**
     * Sends an ended delivery's event again, now, once: the same body, signature and delivery id
     * (receivers deduplicate on the event's id), recorded as its next attempt with its outcome.
     * A delivery still pending (its retries under way) or being resent is 409: the sender owns it.
     */
    async resend(principal: Principal, id: string, deliveryId: string) {
      const hook = await find(principal, id);
      const now = clock.now();
      const claim = `resend:${newId('del', now)}`;
      const { rows } = isId(deliveryId, 'del')
        ? await pool.query<{ payload: string; attempts: number; state: DeliveryView['state'] }>(
            `UPDATE webhook_deliveries SET claimed_by = $3, claim_expires_at = $4
             WHERE id = $1 AND webhook_id = $2 AND state IN ('succeeded', 'failed') AND (claim_expires_at IS NULL OR claim_expires_at <= $5)
             RETURNING payload, attempts, state`,
            [deliveryId, hook.id, claim, new Date(now.getTime() + RESEND_CLAIM_MS), now],
          )
        : { rows: [] };
      const claimed = rows[0];
      if (!claimed) {
        const { rows: found } = isId(deliveryId, 'del')
          ? await pool.query<{ state: DeliveryView['state'] }>('SELECT state FROM webhook_deliveries WHERE id = $1 AND webhook_id = $2', [deliveryId, hook.id])
          : { rows: [] };
        if (!found[0]) throw new ApiError('not_found', `webhook ${hook.id} has no delivery ${deliveryId}`, { id: deliveryId });
        throw new ApiError('conflict', `delivery ${deliveryId} is ${found[0].state === 'pending' ? 'still being retried' : `${found[0].state} or being resent`}; resend a delivery that succeeded or failed`, {
          state: found[0].state,
        });
      }
      const result = await postWebhook(hook.url, claimed.payload, { 'x-svc-signature': signPayload(hook.secret, claimed.payload), 'x-svc-delivery': deliveryId }, policy.allowPrivate);
      const attempt = claimed.attempts + 1;
      await withTransaction(pool, async (tx) => {
        await tx.query('INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status, error) VALUES ($1, $2, $3, $4, $5, $6)', [
          deliveryId,
          attempt,
          now,
          result.durationMs,
          result.status ?? null,
          result.error ?? null,
        ]);
        await tx.query(
          `UPDATE webhook_deliveries SET state = $3, attempts = $4, last_status = $5, last_error = $6, last_attempt_at = $7, claimed_by = NULL, claim_expires_at = NULL
           WHERE id = $1 AND claimed_by = $2`,
          [deliveryId, claim, result.ok ? 'succeeded' : 'failed', attempt, result.status ?? null, result.error ?? null, now],
        );
      });
      return {
        deliveryId,
        attempt,
        delivered: result.ok,
        status: result.status ?? null,
        error: result.error ?? null,
        durationMs: result.durationMs,
      };
    },

    /** The delivery log, newest first, with every attempt. */
    async deliveries(principal: Principal, id: string, options: { limit: number; state?: DeliveryView['state'] | undefined }) {
      const hook = await find(principal, id);
      const { rows } = await pool.query<{
        id: string;
        event_id: string | null;
        event_type: string;
        state: DeliveryView['state'];
        attempts: number;
        last_status: number | null;
        last_error: string | null;
        last_attempt_at: Date | null;
        next_attempt_at: Date | null;
        created_at: Date;
        history: { attempt: number; started_at: string; duration_ms: number; status: number | null; error: string | null }[] | null;
      }>(
        `SELECT d.id, d.event_id, d.event_type, d.state, d.attempts, d.last_status, d.last_error, d.last_attempt_at, d.next_attempt_at, d.created_at,
           (SELECT json_agg(a ORDER BY a.attempt) FROM webhook_attempts a WHERE a.delivery_id = d.id) AS history
         FROM webhook_deliveries d WHERE d.webhook_id = $1 AND ($3::text IS NULL OR d.state = $3)
         ORDER BY d.created_at DESC, d.id DESC LIMIT $2`,
        [hook.id, options.limit, options.state ?? null],
      );
      const data: DeliveryView[] = rows.map((row) => ({
        id: row.id,
        eventId: row.event_id,
        event: row.event_type,
        state: row.state,
        attempts: row.attempts,
        lastStatus: row.last_status,
        lastError: row.last_error,
        lastAttemptAt: row.last_attempt_at?.toISOString() ?? null,
        nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
        createdAt: row.created_at.toISOString(),
        history: (row.history ?? []).map((attempt) => ({
          attempt: attempt.attempt,
          at: new Date(attempt.started_at).toISOString(),
          durationMs: attempt.duration_ms,
          status: attempt.status,
          error: attempt.error,
        })),
      }));
      return { data };
    },
  };
}

export type WebhookService = ReturnType<typeof createWebhookService>;

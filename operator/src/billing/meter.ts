import {
  MS_PER_MINUTE,
  computeNanocentsPerMinute,
  computeTotalNanocents,
  dollarsToNanocents,
  objectNameToId,
  recordUsage,
  storageTotalNanocents,
  withTransaction,
  type BillingMode,
  type ComputePrices,
  type Pool,
  type Resource,
} from '@berth/common';
import type { Environment } from '@berth/crds';

/** Charges are written once this much is unmetered (or when the sandbox or archive goes). */
export const COMPUTE_CHARGE_STEP_MS = 60_000;
export const STORAGE_CHARGE_STEP_MS = 3_600_000;

export interface MeterPrices {
  compute: ComputePrices;
  /** Dollars per GB-hour, as a decimal string. */
  storagePerGbHour: string;
  currency: string;
}

export interface MeterResult {
  /** Ledger rows written. */
  charges: number;
  /** Sandbox time charged, in seconds (the ledger's quantity stays in minutes, its billing unit). */
  computeSeconds: number;
}

/**
 * Where an agent's compute came from, for the ledger's billing mode. Every provider is Berth's
 * own until BYOI providers exist; then a BYOI provider's minutes are `byoi_compute`.
 */
export function computeBillingMode(_agent: Resource<'Agent'>): BillingMode {
  return 'managed';
}

/**
 * The compute meter: every lifetime of an agent's sandbox (from `status.startedAt` until
 * `status.computeEndedAt`, or now while it runs) is charged at the provider's per-minute price.
 * Progress is a row per lifetime in `compute_meter`, updated in the transaction that writes the
 * charge, so a crash or restart neither loses a minute nor counts one twice; a sandbox that kept
 * running while no operator did is charged for that time on the next tick.
 */
export class ComputeMeter {
  constructor(
    private readonly pool: Pool,
    private readonly prices: () => MeterPrices,
  ) {}

  /** Charges what `agent` has used up to `now`; `final` charges even less than a step. */
  async meter(agent: Resource<'Agent'>, environment: Environment, now: Date, final = false): Promise<MeterResult> {
    const status = agent.status;
    if (agent.spec.mode !== 'live' || !status?.startedAt) return { charges: 0, computeSeconds: 0 };
    const startedMs = Date.parse(status.startedAt);
    const running = status.sandbox !== undefined && (status.phase === 'idle' || status.phase === 'running' || status.phase === 'booting');
    const endedMs = status.computeEndedAt ? Date.parse(status.computeEndedAt) : undefined;
    const ended = !running && endedMs !== undefined && endedMs >= startedMs;
    // Released without a record of when: nothing more to charge.
    const untilMs = running ? now.getTime() : ended ? endedMs : undefined;
    const agentId = objectNameToId(agent.metadata.name);
    return withTransaction(this.pool, async (tx) => {
      await tx.query(
        `INSERT INTO compute_meter (agent_id, started_at, organization_id, session_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT (agent_id, started_at) DO NOTHING`,
        [agentId, new Date(startedMs), agent.spec.organizationId, agent.spec.sessionId],
      );
      const { rows } = await tx.query<{ metered_ms: string; closed: boolean }>(
        'SELECT metered_ms, closed FROM compute_meter WHERE agent_id = $1 AND started_at = $2 FOR UPDATE',
        [agentId, new Date(startedMs)],
      );
      const meter = rows[0]!;
      if (meter.closed) return { charges: 0, computeSeconds: 0 };
      const meteredMs = Number(meter.metered_ms);
      const targetMs = untilMs === undefined ? meteredMs : Math.max(meteredMs, untilMs - startedMs);
      const closing = !running;
      const due = targetMs - meteredMs >= COMPUTE_CHARGE_STEP_MS || ((closing || final) && targetMs > meteredMs);
      let result: MeterResult = { charges: 0, computeSeconds: 0 };
      if (due) {
        const { compute, currency } = this.prices();
        const perMinute = computeNanocentsPerMinute(compute, {
          provider: status.sandbox?.provider === 'mock' || !status.sandbox ? agent.spec.provider : status.sandbox.provider,
          compute: agent.spec.compute,
          browser: agent.spec.browser,
          gpu: agent.spec.gpu,
        });
        const amount = computeTotalNanocents(perMinute, targetMs) - computeTotalNanocents(perMinute, meteredMs);
        const minutes = (targetMs - meteredMs) / Number(MS_PER_MINUTE);
        await recordUsage(tx, {
          organizationId: agent.spec.organizationId,
          sessionId: agent.spec.sessionId,
          userId: agent.spec.userId,
          environment,
          agentId,
          kind: 'compute',
          provider: agent.spec.provider,
          quantity: minutes.toFixed(9),
          amountNanocents: amount,
          currency,
          billingMode: computeBillingMode(agent),
          dedupeKey: `${agentId}/compute/${startedMs}/${targetMs}`,
          at: new Date(startedMs + targetMs),
        });
        result = { charges: 1, computeSeconds: (targetMs - meteredMs) / 1000 };
      }
      if (due || closing) {
        await tx.query('UPDATE compute_meter SET metered_ms = $3, closed = $4 WHERE agent_id = $1 AND started_at = $2', [
          agentId,
          new Date(startedMs),
          due ? targetMs : meteredMs,
          closing,
        ]);
      }
      return result;
    });
  }

  /** Closes lifetimes whose agent is gone from the store (deleted with its session). */
  async closeOrphans(liveAgentIds: Set<string>): Promise<number> {
    const { rows } = await this.pool.query<{ agent_id: string }>('SELECT DISTINCT agent_id FROM compute_meter WHERE NOT closed');
    const orphans = rows.map((row) => row.agent_id).filter((id) => !liveAgentIds.has(id));
    if (orphans.length === 0) return 0;
    await this.pool.query('UPDATE compute_meter SET closed = true WHERE agent_id = ANY($1) AND NOT closed', [orphans]);
    return orphans.length;
  }
}

/**
 * The storage meter: each snapshot archive is charged per GB-hour from when it was stored
 * until it is deleted, an hour at a time and the rest when it goes; progress is kept on its
 * `snapshot_storage` row, in the transaction of the charge.
 */
export class StorageMeter {
  constructor(
    private readonly pool: Pool,
    private readonly prices: () => MeterPrices,
    private readonly storageKind: string,
  ) {}

  async meter(now: Date): Promise<number> {
    const { rows } = await this.pool.query<{ snapshot_id: string }>(
      `SELECT snapshot_id FROM snapshot_storage
       WHERE mode = 'live' AND (
         (deleted_at IS NULL AND $1::timestamptz - stored_from >= make_interval(secs => (metered_ms + $2) / 1000.0))
         OR (deleted_at IS NOT NULL AND deleted_at - stored_from > make_interval(secs => metered_ms / 1000.0)))`,
      [now, STORAGE_CHARGE_STEP_MS],
    );
    let charges = 0;
    for (const row of rows) charges += await this.meterOne(row.snapshot_id, now);
    return charges;
  }

  private meterOne(snapshotId: string, now: Date): Promise<number> {
    return withTransaction(this.pool, async (tx) => {
      const { rows } = await tx.query<{
        organization_id: string;
        session_id: string;
        agent_id: string;
        user_id: string | null;
        environment: Environment;
        size_bytes: string;
        stored_from: Date;
        deleted_at: Date | null;
        metered_ms: string;
      }>('SELECT * FROM snapshot_storage WHERE snapshot_id = $1 FOR UPDATE SKIP LOCKED', [snapshotId]);
      const row = rows[0];
      if (!row) return 0;
      const meteredMs = Number(row.metered_ms);
      const targetMs = Math.max(meteredMs, (row.deleted_at ?? now).getTime() - row.stored_from.getTime());
      if (targetMs <= meteredMs) return 0;
      const { storagePerGbHour, currency } = this.prices();
      const perGbHour = dollarsToNanocents(storagePerGbHour);
      const sizeBytes = Number(row.size_bytes);
      const amount = storageTotalNanocents(perGbHour, sizeBytes, targetMs) - storageTotalNanocents(perGbHour, sizeBytes, meteredMs);
      const gbHours = (sizeBytes / 1e9) * ((targetMs - meteredMs) / 3_600_000);
      await recordUsage(tx, {
        organizationId: row.organization_id,
        sessionId: row.session_id,
        userId: row.user_id ?? '',
        environment: row.environment,
        agentId: row.agent_id,
        kind: 'storage',
        provider: this.storageKind,
        quantity: gbHours.toFixed(12),
        amountNanocents: amount,
        currency,
        billingMode: 'managed',
        dedupeKey: `${snapshotId}/storage/${targetMs}`,
        at: new Date(row.stored_from.getTime() + targetMs),
      });
      await tx.query('UPDATE snapshot_storage SET metered_ms = $2 WHERE snapshot_id = $1', [snapshotId, targetMs]);
      return 1;
    });
  }
}

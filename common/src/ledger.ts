import type { Environment } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { nanocentsToCents } from './money.js';

export type BillingMode = 'managed' | 'byoi_compute' | 'byoi_models' | 'byoi_both';

export interface LedgerEntry {
  organizationId: string;
  sessionId: string;
  userId: string;
  /** The session's environment; the usage routes filter on it. */
  environment: Environment;
  agentId?: string;
  taskId?: string;
  kind: 'model' | 'compute' | 'storage';
  /** The model vendor, the compute provider, or the snapshot storage kind (`directory`, `s3`). */
  provider: string;
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
  /** Compute: minutes; storage: GB-hours (decimal gigabytes); model: 0 (each row is one call). */
  quantity?: number | string;
  amountNanocents: bigint;
  currency: string;
  billingMode: BillingMode;
  /** Names the charge; writing the same charge twice records it once. */
  dedupeKey: string;
  at: Date;
}

/** The ledger's columns in the order of `ledgerRow`, for statements that insert charges. */
export const LEDGER_COLUMNS = `organization_id, session_id, user_id, agent_id, task_id, kind, provider, model,
  input_tokens, output_tokens, quantity, amount_nanocents, currency, billing_mode, occurred_at, dedupe_key, environment`;

/** A charge as the parameters of one row of `LEDGER_COLUMNS`. */
export function ledgerRow(entry: LedgerEntry): unknown[] {
  return [
    entry.organizationId,
    entry.sessionId,
    entry.userId,
    entry.agentId ?? null,
    entry.taskId ?? null,
    entry.kind,
    entry.provider,
    entry.model ?? null,
    entry.inputTokens ?? 0,
    entry.outputTokens ?? 0,
    entry.quantity ?? 0,
    entry.amountNanocents.toString(),
    entry.currency,
    entry.billingMode,
    entry.at,
    entry.dedupeKey,
    entry.environment,
  ];
}

/** `$first, ..., $(first + 16)`: the placeholders of one ledger row. */
export function ledgerPlaceholders(first: number): string {
  return Array.from({ length: 17 }, (_, index) => `$${first + index}`).join(', ');
}

/** Appends a charge unless this dedupe key was charged already; returns whether it was new. */
export async function recordUsage(db: Queryable, entry: LedgerEntry): Promise<boolean> {
  const result = await db.query(
    `INSERT INTO usage_ledger (${LEDGER_COLUMNS}) VALUES (${ledgerPlaceholders(1)}) ON CONFLICT (dedupe_key) DO NOTHING`,
    ledgerRow(entry),
  );
  return (result.rowCount ?? 0) > 0;
}

export interface TaskCost {
  model: number;
  compute: number;
  total: number;
  currency: string;
}

/**
 * What a task cost, in integer cents: each kind's exact sum rounded once; the total is the sum
 * of the rounded parts, so that the numbers a customer sees add up.
 */
export async function taskCost(db: Queryable, taskId: string, currency: string): Promise<TaskCost> {
  const { rows } = await db.query<{ kind: string; nanocents: string }>(
    'SELECT kind, coalesce(sum(amount_nanocents), 0)::text AS nanocents FROM usage_ledger WHERE task_id = $1 GROUP BY kind',
    [taskId],
  );
  const byKind = new Map(rows.map((row) => [row.kind, BigInt(row.nanocents)]));
  const model = nanocentsToCents(byKind.get('model') ?? 0n);
  const compute = nanocentsToCents(byKind.get('compute') ?? 0n);
  return { model, compute, total: model + compute, currency };
}


import type { Queryable, Resource } from '@berth/common';
import { nanocentsToCents, objectNameToId } from '@berth/common';

export interface BudgetStop {
  code: 'budget_exhausted' | 'session_limit_exceeded';
  message: string;
}

function periodStart(period: 'day' | 'month', now: Date): Date {
  return period === 'day'
    ? new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()))
    : new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
}

async function spentCents(db: Queryable, column: 'agent_id' | 'session_id', id: string, since?: Date): Promise<number> {
  const { rows } = await db.query<{ nanocents: string }>(
    `SELECT coalesce(sum(amount_nanocents), 0)::text AS nanocents FROM usage_ledger
     WHERE ${column} = $1 AND ($2::timestamptz IS NULL OR occurred_at >= $2)`,
    [id, since ?? null],
  );
  return nanocentsToCents(BigInt(rows[0]!.nanocents));
}

/**
 * Checked before every model call: the agent's cost cap and its session's cost limit for the
 * current period (UTC day or month). Spending that has reached a ceiling stops the run.
 */
export async function budgetStop(
  db: Queryable,
  agent: Resource<'Agent'>,
  session: Resource<'Session'> | undefined,
  now: Date,
): Promise<BudgetStop | undefined> {
  const cap = agent.spec.costCap;
  if (cap) {
    const spent = await spentCents(db, 'agent_id', objectNameToId(agent.metadata.name));
    if (spent >= cap.amount) {
      return { code: 'budget_exhausted', message: `the agent's cost cap of ${cap.amount} ${cap.currency} cents is spent (${spent})` };
    }
  }
  const maxCost = session?.spec.limits.maxCost;
  if (session && maxCost) {
    const spent = await spentCents(db, 'session_id', objectNameToId(session.metadata.name), periodStart(maxCost.period, now));
    if (spent >= maxCost.amount) {
      return {
        code: 'session_limit_exceeded',
        message: `the session's limit of ${maxCost.amount} ${maxCost.currency} cents a ${maxCost.period} is reached (${spent})`,
      };
    }
  }
  return undefined;
}

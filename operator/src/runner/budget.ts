import {
  NANOCENTS_PER_CENT,
  hasSpendLimits,
  limitBreach,
  nanocentsToCents,
  objectNameToId,
  sessionSpend,
  type LimitBreach,
  type Queryable,
  type Resource,
} from '@berth/common';

export type BudgetStop =
  | { code: 'budget_exhausted'; message: string; spentCents: number }
  | { code: 'session_limit_exceeded'; message: string; breach: LimitBreach };

/**
 * Checked before every model call. The agent's cost cap: the loop stops when what it spent plus
 * the estimated cost of the next call would cross it. The session's limits (cost for the
 * period, compute minutes, duration): the loop stops once one is reached.
 */
export async function budgetStop(
  db: Queryable,
  agent: Resource<'Agent'>,
  session: Resource<'Session'> | undefined,
  now: Date,
  nextCallNanocents: bigint,
): Promise<BudgetStop | undefined> {
  const cap = agent.spec.costCap;
  if (cap) {
    const { rows } = await db.query<{ nanocents: string }>(
      'SELECT coalesce(sum(amount_nanocents), 0)::text AS nanocents FROM usage_ledger WHERE agent_id = $1',
      [objectNameToId(agent.metadata.name)],
    );
    const spent = BigInt(rows[0]!.nanocents);
    const capNanocents = BigInt(cap.amount) * NANOCENTS_PER_CENT;
    if (spent >= capNanocents || spent + nextCallNanocents > capNanocents) {
      const spentCents = nanocentsToCents(spent);
      const next = nanocentsToCents(nextCallNanocents);
      return {
        code: 'budget_exhausted',
        spentCents,
        message:
          spent >= capNanocents
            ? `the agent's cost cap of ${cap.amount} ${cap.currency} cents is spent (${spentCents})`
            : `the next model call (about ${next} ${cap.currency} cents) would cross the agent's cost cap of ${cap.amount} cents (${spentCents} spent)`,
      };
    }
  }
  if (session && hasSpendLimits(session.spec.limits)) {
    const breach = limitBreach(session, await sessionSpend(db, objectNameToId(session.metadata.name), session.spec.limits, now), now);
    if (breach) return { code: 'session_limit_exceeded', message: breach.message, breach };
  }
  return undefined;
}

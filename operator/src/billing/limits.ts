import {
  Labels,
  isStoreError,
  nanocentsToCents,
  objectNameToId,
  periodKey,
  recordEvent,
  withTransaction,
  type EventInput,
  type LimitBreach,
  type Logger,
  type Pool,
  type Resource,
  type ResourceStore,
  type SessionSpend,
} from '@berth/common';

export interface LimitContext {
  store: ResourceStore;
  pool: Pool;
  currency: string;
  /** session.cost_threshold fires at every multiple of this many cents of a session's total cost. */
  sessionCostStep: number;
  log: Logger;
}

/** What pausing for a limit needs. */
export type EnforceContext = Omit<LimitContext, 'sessionCostStep'>;

/** budget.threshold fires once per period at each of these percentages of maxCost. */
export const BUDGET_THRESHOLDS = [50, 80, 100] as const;

const ACTIVE_PHASES = new Set(['booting', 'idle', 'running']);

/** Agents that hold or are getting compute and have not been asked to stop. */
export function isActive(agent: Resource<'Agent'>): boolean {
  return agent.spec.desiredState === 'active' && ACTIVE_PHASES.has(agent.status?.phase ?? 'booting') && !agent.metadata.deletionTimestamp;
}

function sessionEvent(session: Resource<'Session'>, type: EventInput['type'], instance: string, data: Record<string, unknown>): EventInput {
  const sessionId = objectNameToId(session.metadata.name);
  return {
    type,
    organizationId: session.spec.organizationId,
    mode: session.spec.mode,
    subjectId: sessionId,
    occurrence: `${session.metadata.uid}/${type}/${instance}`,
    data: { sessionId, userId: session.spec.userId, ...data },
  };
}

/** Asks for the pause of an agent, unless something already stopped it; the reconciler does the rest. */
async function requestPause(store: ResourceStore, agent: Resource<'Agent'>, reason: 'session_limit' | 'cost_cap'): Promise<boolean> {
  let paused = false;
  try {
    await store.updateSpec('Agent', agent.metadata.name, (current) => {
      if (current.spec.desiredState !== 'active') return current.spec;
      paused = true;
      return { ...current.spec, desiredState: 'paused', pauseReason: reason };
    });
  } catch (error) {
    if (!isStoreError(error, 'NotFound')) throw error;
  }
  return paused;
}

/**
 * budget.threshold at 50, 80 and 100 % of maxCost, once each per period, and
 * session.cost_threshold each time the session's total crosses another multiple of the step.
 * Event ids come from the occurrence, so checking again writes nothing twice.
 */
export async function recordCostEvents(ctx: LimitContext, session: Resource<'Session'>, spend: SessionSpend, now: Date): Promise<number> {
  const events: EventInput[] = [];
  const maxCost = session.spec.limits.maxCost;
  if (maxCost && maxCost.amount > 0) {
    const current = nanocentsToCents(spend.periodNanocents);
    const period = periodKey(maxCost.period, now);
    for (const threshold of BUDGET_THRESHOLDS) {
      if (current * 100 < threshold * maxCost.amount) continue;
      events.push(
        sessionEvent(session, 'budget.threshold', `${maxCost.amount}/${period}/${threshold}`, {
          threshold,
          currentCost: { amount: current, currency: maxCost.currency },
          maxCost: { amount: maxCost.amount, currency: maxCost.currency },
          percentage: Math.floor((current * 100) / maxCost.amount),
          period: maxCost.period,
        }),
      );
    }
  }
  const total = nanocentsToCents(spend.totalNanocents);
  const crossed = Math.floor(total / ctx.sessionCostStep);
  if (crossed > 0) {
    events.push(
      sessionEvent(session, 'session.cost_threshold', `${ctx.sessionCostStep}/${crossed}`, {
        threshold: { amount: crossed * ctx.sessionCostStep, currency: ctx.currency },
        currentCost: { amount: total, currency: ctx.currency },
      }),
    );
  }
  if (events.length === 0) return 0;
  return withTransaction(ctx.pool, async (tx) => {
    let written = 0;
    for (const event of events) if (await recordEvent(tx, event, now)) written++;
    return written;
  });
}

/**
 * A session reached a limit: session.limit_reached (and for maxCost budget.exhausted) name the
 * agents being paused, then each is paused through the pause path, which keeps its state and
 * writes agent.paused. Written once per breach (period, or limit value).
 */
export async function enforceSessionLimit(
  ctx: EnforceContext,
  session: Resource<'Session'>,
  breach: LimitBreach,
  agents: Resource<'Agent'>[],
  now: Date,
): Promise<string[]> {
  const active = agents.filter(isActive);
  const pausedAgents = active.map((agent) => objectNameToId(agent.metadata.name));
  const currency = session.spec.limits.maxCost?.currency ?? ctx.currency;
  const events = [
    sessionEvent(session, 'session.limit_reached', breach.instance, {
      limit: breach.limit,
      current: breach.current,
      max: breach.max,
      message: breach.message,
      pausedAgents,
    }),
  ];
  if (breach.limit === 'maxCost') {
    events.push(
      sessionEvent(session, 'budget.exhausted', breach.instance, {
        finalCost: { amount: breach.current, currency },
        maxCost: { amount: breach.max, currency },
        pausedAgents,
      }),
    );
  }
  const first = await withTransaction(ctx.pool, async (tx) => {
    let written = false;
    for (const event of events) written = (await recordEvent(tx, event, now)) || written;
    return written;
  });
  const paused: string[] = [];
  for (const agent of active) if (await requestPause(ctx.store, agent, 'session_limit')) paused.push(objectNameToId(agent.metadata.name));
  if (first || paused.length > 0) {
    ctx.log.info({ sessionId: objectNameToId(session.metadata.name), limit: breach.limit, paused }, 'session limit reached; agents paused');
  }
  return paused;
}

/**
 * An agent spent its costCap: budget.exhausted names it, and it is paused (its state is kept;
 * it runs no model call again until resumed).
 */
export async function enforceCostCap(ctx: EnforceContext, agent: Resource<'Agent'>, spentCents: number, now: Date): Promise<boolean> {
  const cap = agent.spec.costCap;
  if (!cap) return false;
  const agentId = objectNameToId(agent.metadata.name);
  await recordEvent(
    ctx.pool,
    {
      type: 'budget.exhausted',
      organizationId: agent.spec.organizationId,
      mode: agent.spec.mode,
      subjectId: agentId,
      occurrence: `${agent.metadata.uid}/budget.exhausted/costCap/${cap.amount}`,
      data: {
        sessionId: agent.spec.sessionId,
        userId: agent.spec.userId,
        agentId,
        limit: 'costCap',
        finalCost: { amount: spentCents, currency: cap.currency },
        maxCost: { amount: cap.amount, currency: cap.currency },
        pausedAgents: [agentId],
      },
    },
    now,
  );
  const paused = isActive(agent) && (await requestPause(ctx.store, agent, 'cost_cap'));
  if (paused) ctx.log.info({ agentId, costCap: cap.amount, spent: spentCents }, 'cost cap spent; agent paused');
  return paused;
}

/** The agents of a session, from the store's label index. */
export async function agentsOf(store: ResourceStore, session: Resource<'Session'>): Promise<Resource<'Agent'>[]> {
  return (await store.list('Agent', { labels: { [Labels.session]: session.metadata.name } })).items;
}

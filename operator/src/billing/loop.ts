import {
  LATENCY_BUCKETS,
  Labels,
  NANOCENTS_PER_CENT,
  hasSpendLimits,
  limitBreach,
  nanocentsToCents,
  objectNameToId,
  sessionSpend,
  type Clock,
  type Logger,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import { Counter, Histogram, type Registry } from 'prom-client';
import { enforceCostCap, enforceSessionLimit, isActive, recordCostEvents, type LimitContext } from './limits.js';
import { ComputeMeter, StorageMeter, type MeterPrices } from './meter.js';

export interface BillingLoopDeps {
  store: ResourceStore;
  pool: Pool;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  prices: () => MeterPrices;
  /** `directory` or `s3`: the provider column of storage charges. */
  storageKind: string;
  sessionCostStep: number;
  intervalMs: number;
  /**
   * Asks for a reconcile of an agent whose spend moved past what its `status.cost` says: the
   * Agent reconciler reads the spend and writes the status (the only writer of it, ADR 18).
   */
  onSpendChange: (agentName: string) => void;
}

export interface TickResult {
  computeCharges: number;
  storageCharges: number;
  sessionsChecked: number;
  agentsPaused: number;
}

function createBillingMetrics(registry: Registry) {
  return {
    ticks: new Counter({ name: 'berth_billing_ticks_total', help: 'Billing loop passes, by result', labelNames: ['result'], registers: [registry] }),
    tickDuration: new Histogram({
      name: 'berth_billing_tick_duration_seconds',
      help: 'Time of one billing pass: metering compute and storage, checking limits',
      buckets: LATENCY_BUCKETS,
      registers: [registry],
    }),
    charges: new Counter({ name: 'berth_ledger_charges_total', help: 'Charges the meters wrote to the usage ledger, by kind', labelNames: ['kind'], registers: [registry] }),
    computeSeconds: new Counter({ name: 'berth_compute_metered_seconds_total', help: 'Sandbox time charged to the usage ledger, in seconds', registers: [registry] }),
    pauses: new Counter({
      name: 'berth_limit_pauses_total',
      help: 'Agents paused because a session limit was reached or their cost cap was spent, by reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
  };
}

/**
 * The operator's billing pass, every `intervalMs` while it leads: charges running sandboxes and
 * stored archives, then checks the sessions whose spend moved (and every session with limits)
 * against their limits and thresholds, and agents against their cost caps.
 */
export class BillingLoop {
  readonly compute: ComputeMeter;
  readonly storage: StorageMeter;
  private readonly metrics: ReturnType<typeof createBillingMetrics>;
  private readonly limits: LimitContext;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<unknown> = Promise.resolve();
  /** Ledger rows up to this id have been looked at for thresholds. */
  private lastLedgerId = '0';

  constructor(private readonly deps: BillingLoopDeps) {
    this.compute = new ComputeMeter(deps.pool, deps.prices);
    this.storage = new StorageMeter(deps.pool, deps.prices, deps.storageKind);
    this.metrics = createBillingMetrics(deps.metrics);
    this.limits = {
      store: deps.store,
      pool: deps.pool,
      currency: deps.prices().currency,
      sessionCostStep: deps.sessionCostStep,
      log: deps.log,
    };
  }

  start(): void {
    if (this.timer) return;
    const pass = () => {
      this.running = this.tick().catch((error: unknown) => {
        this.metrics.ticks.inc({ result: 'error' });
        this.deps.log.error({ err: error }, 'billing pass failed; the next one retries');
      });
    };
    pass();
    this.timer = setInterval(() => {
      void this.running.then(pass);
    }, this.deps.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** Wakes the reconcile of each agent whose spend in cents is not what its status says yet. */
  private wakeAgentsWithNewSpend(agents: Resource<'Agent'>[], spent: Map<string, bigint>): void {
    for (const agent of agents) {
      const amount = nanocentsToCents(spent.get(objectNameToId(agent.metadata.name)) ?? 0n);
      if (agent.status && (agent.status.cost?.amount ?? 0) !== amount) this.deps.onSpendChange(agent.metadata.name);
    }
  }

  /** Each agent's spend so far, exact, from the ledger: one query for the pass. */
  private async agentSpend(agents: Resource<'Agent'>[]): Promise<Map<string, bigint>> {
    if (agents.length === 0) return new Map();
    const { rows } = await this.deps.pool.query<{ agent_id: string; nanocents: string }>(
      'SELECT agent_id, sum(amount_nanocents)::text AS nanocents FROM usage_ledger WHERE agent_id = ANY($1) GROUP BY agent_id',
      [agents.map((agent) => objectNameToId(agent.metadata.name))],
    );
    return new Map(rows.map((row) => [row.agent_id, BigInt(row.nanocents)]));
  }

  async tick(): Promise<TickResult> {
    const { store, pool, clock } = this.deps;
    const end = this.metrics.tickDuration.startTimer();
    const now = clock.now();
    const live = { labels: { [Labels.mode]: 'live' } };
    const [{ items: agents }, { items: sessions }] = await Promise.all([store.list('Agent', live), store.list('Session', live)]);
    const sessionByName = new Map(sessions.map((session) => [session.metadata.name, session]));
    const environmentOf = (agent: Resource<'Agent'>) => sessionByName.get(agent.metadata.labels?.[Labels.session] ?? '')?.spec.environment ?? 'production';

    const result: TickResult = { computeCharges: 0, storageCharges: 0, sessionsChecked: 0, agentsPaused: 0 };
    for (const agent of agents) {
      const metered = await this.compute.meter(agent, environmentOf(agent), now);
      result.computeCharges += metered.charges;
      this.metrics.computeSeconds.inc(metered.computeSeconds);
    }
    await this.compute.closeOrphans(new Set(agents.map((agent) => objectNameToId(agent.metadata.name))));
    result.storageCharges = await this.storage.meter(now);
    this.metrics.charges.inc({ kind: 'compute' }, result.computeCharges);
    this.metrics.charges.inc({ kind: 'storage' }, result.storageCharges);

    // After metering, the ledger holds what this pass charges: read once for costs and caps.
    const spent = await this.agentSpend(agents);
    this.wakeAgentsWithNewSpend(agents, spent);

    // Sessions whose spend moved since the last pass, and every session with limits (time alone
    // can reach maxDuration, and a new period can follow a raised limit).
    const { rows } = await pool.query<{ session_id: string; last: string }>(
      'SELECT session_id, max(id)::text AS last FROM usage_ledger WHERE id > $1 GROUP BY session_id',
      [this.lastLedgerId],
    );
    const moved = new Set(rows.map((row) => row.session_id));
    for (const row of rows) if (BigInt(row.last) > BigInt(this.lastLedgerId)) this.lastLedgerId = row.last;
    const agentsBySession = new Map<string, Resource<'Agent'>[]>();
    for (const agent of agents) {
      const key = agent.metadata.labels?.[Labels.session] ?? '';
      agentsBySession.set(key, [...(agentsBySession.get(key) ?? []), agent]);
    }
    for (const session of sessions) {
      const sessionId = objectNameToId(session.metadata.name);
      if (!moved.has(sessionId) && !hasSpendLimits(session.spec.limits)) continue;
      result.sessionsChecked++;
      const spend = await sessionSpend(pool, sessionId, session.spec.limits, now);
      await recordCostEvents(this.limits, session, spend, now);
      const breach = limitBreach(session, spend, now);
      if (breach) {
        const paused = await enforceSessionLimit(this.limits, session, breach, agentsBySession.get(session.metadata.name) ?? [], now);
        result.agentsPaused += paused.length;
        this.metrics.pauses.inc({ reason: 'session_limit' }, paused.length);
      }
    }

    for (const agent of agents.filter((candidate) => candidate.spec.costCap && isActive(candidate))) {
      const nanocents = spent.get(objectNameToId(agent.metadata.name)) ?? 0n;
      if (nanocents < BigInt(agent.spec.costCap!.amount) * NANOCENTS_PER_CENT) continue;
      if (await enforceCostCap(this.limits, agent, nanocentsToCents(nanocents), now)) {
        result.agentsPaused++;
        this.metrics.pauses.inc({ reason: 'cost_cap' });
      }
    }
    this.metrics.ticks.inc({ result: 'ok' });
    end();
    return result;
  }
}

import { AgentCondition, AgentReason, type AgentPhase, type AgentSpec, type Condition } from '@berth/crds';
import { findCondition } from './conditions.js';

/** The agent's queued or running task, as PostgreSQL has it. */
export interface ObservedTask {
  id: string;
  state: 'queued' | 'running';
  /** Claimed by a runner whose lease has not run out (by the database's clock, which claims go by). */
  held: boolean;
}

/** How an agent ended; final once observed. */
export type AgentEnding = { outcome: 'terminated'; message: string } | { outcome: 'failed'; reason: string; message: string };

/** What one reconcile found out about an agent, and what it did to its sandbox. */
export interface AgentObservation {
  /** The word on the sandbox from this reconcile; absent, the last one stands. */
  sandbox?: { ready: boolean; reason: string; message: string };
  /** The status names a sandbox once this reconcile is done. */
  hasSandbox: boolean;
  /** The snapshot the agent was last paused into. */
  snapshot?: string | undefined;
  /** The agent ended in this reconcile. */
  ended?: AgentEnding;
  task?: ObservedTask | undefined;
  /** The agent's spend so far, in cents, read from the ledger by this reconcile. */
  spentCents?: number;
}

/** What of the Agent the conditions depend on besides the observation. */
export interface AgentForConditions {
  metadata: { generation: number };
  spec: Pick<AgentSpec, 'desiredState' | 'pauseReason' | 'costCap'>;
  status?: { conditions: readonly Condition[] } | undefined;
}

/**
 * The Agent's conditions, from what was observed: the same observation gives the same
 * conditions, and a condition keeps its `lastTransitionTime` while its status stays. Terminated
 * and Failed are final: once present they stay whatever is observed later.
 */
export function computeConditions(observed: AgentObservation, agent: AgentForConditions, now: Date): Condition[] {
  const previous = agent.status?.conditions ?? [];
  const generation = agent.metadata.generation;
  const condition = (type: string, status: 'True' | 'False', reason: string, message: string): Condition => {
    const before = findCondition(previous, type);
    return {
      type,
      status,
      reason,
      message,
      observedGeneration: generation,
      lastTransitionTime: before && before.status === status ? before.lastTransitionTime : now.toISOString(),
    };
  };
  const carried = (type: string): Condition | undefined => {
    const before = findCondition(previous, type);
    return before ? { ...before, observedGeneration: generation } : undefined;
  };
  const conditions: Condition[] = [];

  const sandbox = observed.sandbox
    ? condition(AgentCondition.SandboxReady, observed.sandbox.ready ? 'True' : 'False', observed.sandbox.reason, observed.sandbox.message)
    : carried(AgentCondition.SandboxReady);
  if (sandbox) conditions.push(sandbox);

  const { task } = observed;
  if (task?.state === 'running' && task.held) {
    conditions.push(condition(AgentCondition.Running, 'True', AgentReason.RunInProgress, `run ${task.id} is in progress`));
  } else if (task?.state === 'running') {
    conditions.push(
      condition(AgentCondition.Running, 'False', AgentReason.RunnerLost, `run ${task.id} lost its runner (its lease ran out); it goes on when a runner takes it over`),
    );
  } else if (task?.state === 'queued') {
    conditions.push(condition(AgentCondition.Running, 'False', AgentReason.RunQueued, `run ${task.id} waits for a runner`));
  } else {
    conditions.push(condition(AgentCondition.Running, 'False', AgentReason.NoRun, 'no run in progress'));
  }

  if (agent.spec.desiredState !== 'paused') {
    conditions.push(condition(AgentCondition.Paused, 'False', AgentReason.Active, 'not paused'));
  } else if (observed.hasSandbox) {
    const message = task?.state === 'running' ? `pausing: waiting for run ${task.id} to finish its tool call` : 'pausing: checkpointing the sandbox';
    conditions.push(condition(AgentCondition.Paused, 'False', AgentReason.Pausing, message));
  } else {
    const message = observed.snapshot ? `paused; its state is kept in snapshot ${observed.snapshot}` : 'paused before its sandbox started';
    conditions.push(condition(AgentCondition.Paused, 'True', AgentReason.Paused, message));
  }

  // The cap is compared with the spend this reconcile read; a session's limit is the billing
  // pass's to judge (it spans the session's agents and periods), and its pause records it.
  const stoppedBy = agent.spec.desiredState === 'paused' ? agent.spec.pauseReason : undefined;
  const capSpent = agent.spec.costCap !== undefined && observed.spentCents !== undefined && observed.spentCents >= agent.spec.costCap.amount;
  if (capSpent || (stoppedBy === 'cost_cap' && observed.spentCents === undefined)) {
    conditions.push(
      condition(AgentCondition.BudgetOK, 'False', AgentReason.CostCapReached, stoppedBy === 'cost_cap' ? "the agent's costCap is spent; it was paused" : "the agent's costCap is spent"),
    );
  } else if (stoppedBy === 'session_limit') {
    conditions.push(condition(AgentCondition.BudgetOK, 'False', AgentReason.SessionLimitReached, "its session's cost limit for the period is reached; it was paused"));
  } else {
    conditions.push(condition(AgentCondition.BudgetOK, 'True', AgentReason.WithinBudget, 'within its costCap and its session limits'));
  }

  const terminated =
    observed.ended?.outcome === 'terminated'
      ? condition(AgentCondition.Terminated, 'True', AgentReason.Terminated, observed.ended.message)
      : carried(AgentCondition.Terminated);
  if (terminated) conditions.push(terminated);
  const failed =
    observed.ended?.outcome === 'failed'
      ? condition(AgentCondition.Failed, 'True', observed.ended.reason, observed.ended.message)
      : carried(AgentCondition.Failed);
  if (failed) conditions.push(failed);
  return conditions;
}

/** The user-visible phase, from the conditions alone. */
export function derivePhase(conditions: readonly Condition[]): AgentPhase {
  const holds = (type: string) => findCondition(conditions, type)?.status === 'True';
  if (holds(AgentCondition.Terminated)) return 'terminated';
  if (holds(AgentCondition.Failed)) return 'failed';
  if (holds(AgentCondition.Paused)) return 'paused';
  if (holds(AgentCondition.SandboxReady)) return holds(AgentCondition.Running) ? 'running' : 'idle';
  return 'booting';
}

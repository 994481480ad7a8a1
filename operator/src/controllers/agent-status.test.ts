import { describe, expect, it } from 'vitest';
import { AgentCondition as C, AgentReason as R, type AgentPhase, type Condition } from '@berth/crds';
import { computeConditions, derivePhase, type AgentForConditions, type AgentObservation } from './agent-status.js';

const EARLIER = '2026-05-01T08:00:00.000Z';
const NOW = new Date('2026-05-01T09:00:00Z');

function agent(spec: Partial<AgentForConditions['spec']> = {}, conditions: Condition[] = [], generation = 3): AgentForConditions {
  return { metadata: { generation }, spec: { desiredState: 'active', ...spec }, status: { conditions } };
}

function had(type: string, status: 'True' | 'False', reason: string, message = 'earlier'): Condition {
  return { type, status, reason, message, observedGeneration: 1, lastTransitionTime: EARLIER };
}

const ready = { ready: true, reason: R.Provisioned, message: 'the sandbox is running' };
const running = { id: 'task_1', state: 'running' as const, held: true };

/** type → [status, reason] of each condition, in order. */
function summary(conditions: Condition[]): [string, string, string][] {
  return conditions.map((condition) => [condition.type, condition.status, condition.reason]);
}

describe('computeConditions', () => {
  const cases: { name: string; observed: AgentObservation; agent: AgentForConditions; expected: [string, string, string][] }[] = [
    {
      name: 'a new agent whose sandbox is starting',
      observed: { sandbox: { ready: false, reason: R.Provisioning, message: 'starting' }, hasSandbox: false },
      agent: agent(),
      expected: [
        [C.SandboxReady, 'False', R.Provisioning],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'a ready agent with a run its runner holds',
      observed: { sandbox: ready, hasSandbox: true, task: running },
      agent: agent(),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'True', R.RunInProgress],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'a run whose lease ran out: the runner is gone',
      observed: { hasSandbox: true, task: { ...running, held: false } },
      agent: agent({}, [had(C.SandboxReady, 'True', R.Provisioned), had(C.Running, 'True', R.RunInProgress)]),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'False', R.RunnerLost],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'a run waiting for a runner',
      observed: { hasSandbox: true, task: { id: 'task_2', state: 'queued', held: false } },
      agent: agent({}, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'False', R.RunQueued],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'pausing while a run finishes its tool call',
      observed: { hasSandbox: true, task: running },
      agent: agent({ desiredState: 'paused', pauseReason: 'requested' }, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'True', R.RunInProgress],
        [C.Paused, 'False', R.Pausing],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'paused by its costCap, the sandbox checkpointed and released',
      observed: { sandbox: { ready: false, reason: R.Paused, message: 'paused' }, hasSandbox: false, snapshot: 'snap_1' },
      agent: agent({ desiredState: 'paused', pauseReason: 'cost_cap' }, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'False', R.Paused],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'True', R.Paused],
        [C.BudgetOK, 'False', R.CostCapReached],
      ],
    },
    {
      name: 'its costCap spent by the ledger, before the billing pass paused it',
      observed: { hasSandbox: true, task: running, spentCents: 500 },
      agent: agent({ costCap: { amount: 500, currency: 'usd' } }, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'True', R.RunInProgress],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'False', R.CostCapReached],
      ],
    },
    {
      name: 'within a costCap it has not spent, the spend read by the reconcile',
      observed: { hasSandbox: true, spentCents: 499 },
      agent: agent({ costCap: { amount: 500, currency: 'usd' } }, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'True', R.Provisioned],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'paused for its costCap, then the cap raised above the spend: paused by the record, within budget by the ledger',
      observed: { hasSandbox: false, snapshot: 'snap_1', spentCents: 500 },
      agent: agent({ desiredState: 'paused', pauseReason: 'cost_cap', costCap: { amount: 900, currency: 'usd' } }, [had(C.SandboxReady, 'False', R.Paused)]),
      expected: [
        [C.SandboxReady, 'False', R.Paused],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'True', R.Paused],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: "paused by its session's limit",
      observed: { hasSandbox: false },
      agent: agent({ desiredState: 'paused', pauseReason: 'session_limit' }, [had(C.SandboxReady, 'False', R.Paused)]),
      expected: [
        [C.SandboxReady, 'False', R.Paused],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'True', R.Paused],
        [C.BudgetOK, 'False', R.SessionLimitReached],
      ],
    },
    {
      name: 'resuming: asked to be active, the sandbox not restored yet',
      observed: { sandbox: { ready: false, reason: R.Provisioning, message: 'restoring' }, hasSandbox: false, snapshot: 'snap_1' },
      agent: agent({}, [had(C.SandboxReady, 'False', R.Paused), had(C.Paused, 'True', R.Paused)]),
      expected: [
        [C.SandboxReady, 'False', R.Provisioning],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
      ],
    },
    {
      name: 'terminated in this reconcile',
      observed: { sandbox: { ready: false, reason: R.Terminated, message: 'gone' }, hasSandbox: false, ended: { outcome: 'terminated', message: 'gone' } },
      agent: agent({ desiredState: 'terminated' }, [had(C.SandboxReady, 'True', R.Provisioned)]),
      expected: [
        [C.SandboxReady, 'False', R.Terminated],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
        [C.Terminated, 'True', R.Terminated],
      ],
    },
    {
      name: 'failed earlier: Failed stays whatever is observed now',
      observed: { hasSandbox: false, task: { id: 'task_3', state: 'queued', held: false } },
      agent: agent({}, [had(C.SandboxReady, 'False', R.DeadlineExceeded), had(C.Failed, 'True', R.DeadlineExceeded)]),
      expected: [
        [C.SandboxReady, 'False', R.DeadlineExceeded],
        [C.Running, 'False', R.RunQueued],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
        [C.Failed, 'True', R.DeadlineExceeded],
      ],
    },
    {
      name: 'failing in this reconcile',
      observed: { sandbox: { ready: false, reason: R.RestoreFailed, message: 'corrupt' }, hasSandbox: false, ended: { outcome: 'failed', reason: R.RestoreFailed, message: 'corrupt' } },
      agent: agent(),
      expected: [
        [C.SandboxReady, 'False', R.RestoreFailed],
        [C.Running, 'False', R.NoRun],
        [C.Paused, 'False', R.Active],
        [C.BudgetOK, 'True', R.WithinBudget],
        [C.Failed, 'True', R.RestoreFailed],
      ],
    },
  ];

  it.each(cases)('$name', ({ observed, agent: input, expected }) => {
    expect(summary(computeConditions(observed, input, NOW))).toEqual(expected);
  });

  it('gives every condition the generation observed, and keeps lastTransitionTime while a status stays', () => {
    const conditions = computeConditions(
      { hasSandbox: true, task: { ...running, held: false } },
      agent({}, [had(C.SandboxReady, 'True', R.Provisioned), had(C.Running, 'True', R.RunInProgress), had(C.Paused, 'False', R.Active)], 7),
      NOW,
    );
    expect(conditions.every((condition) => condition.observedGeneration === 7)).toBe(true);
    const at = Object.fromEntries(conditions.map((condition) => [condition.type, condition.lastTransitionTime]));
    expect(at).toEqual({
      [C.SandboxReady]: EARLIER, // carried, status unchanged
      [C.Running]: NOW.toISOString(), // True → False
      [C.Paused]: EARLIER, // False → False
      [C.BudgetOK]: NOW.toISOString(), // new
    });
  });

  it('is a fixed point: the same observation over its own result changes nothing', () => {
    const observed: AgentObservation = { sandbox: ready, hasSandbox: true, task: running };
    const first = computeConditions(observed, agent(), NOW);
    expect(computeConditions(observed, agent({}, first), new Date('2026-05-01T10:00:00Z'))).toEqual(first);
  });

  it('names the run in the Running and Paused messages', () => {
    const conditions = computeConditions({ hasSandbox: true, task: running }, agent({ desiredState: 'paused' }), NOW);
    expect(conditions.find((condition) => condition.type === C.Running)!.message).toContain('task_1');
    expect(conditions.find((condition) => condition.type === C.Paused)!.message).toBe('pausing: waiting for run task_1 to finish its tool call');
  });
});

describe('derivePhase', () => {
  const t = (type: string, reason = 'x') => had(type, 'True', reason);
  const f = (type: string, reason = 'x') => had(type, 'False', reason);
  const cases: { name: string; conditions: Condition[]; phase: AgentPhase }[] = [
    { name: 'no conditions yet', conditions: [], phase: 'booting' },
    { name: 'sandbox starting', conditions: [f(C.SandboxReady), f(C.Running), f(C.Paused)], phase: 'booting' },
    { name: 'sandbox ready, no run', conditions: [t(C.SandboxReady), f(C.Running), f(C.Paused)], phase: 'idle' },
    { name: 'sandbox ready, a run held', conditions: [t(C.SandboxReady), t(C.Running), f(C.Paused)], phase: 'running' },
    { name: 'a run whose runner is lost', conditions: [t(C.SandboxReady), f(C.Running, R.RunnerLost), f(C.Paused)], phase: 'idle' },
    { name: 'a run held but no sandbox (lost, being recreated)', conditions: [f(C.SandboxReady), t(C.Running), f(C.Paused)], phase: 'booting' },
    { name: 'pausing with a run in flight', conditions: [t(C.SandboxReady), t(C.Running), f(C.Paused, R.Pausing)], phase: 'running' },
    { name: 'paused', conditions: [f(C.SandboxReady), f(C.Running), t(C.Paused)], phase: 'paused' },
    { name: 'terminated wins over paused', conditions: [f(C.SandboxReady), t(C.Paused), t(C.Terminated)], phase: 'terminated' },
    { name: 'failed wins over a held run', conditions: [t(C.SandboxReady), t(C.Running), t(C.Failed)], phase: 'failed' },
    { name: 'terminated wins over failed', conditions: [t(C.Failed), t(C.Terminated)], phase: 'terminated' },
    { name: 'BudgetOK False alone does not move the phase', conditions: [t(C.SandboxReady), f(C.Running), f(C.Paused), f(C.BudgetOK)], phase: 'idle' },
  ];

  it.each(cases)('$name → $phase', ({ conditions, phase }) => {
    expect(derivePhase(conditions)).toBe(phase);
  });
});

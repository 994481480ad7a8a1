import { z } from 'zod';
import { egressSchema } from './egress.js';
import { computeSchema, conditionSchema, costSchema, durationSchema, FREE_FORM_BOUNDS, freeFormObject, modeSchema } from './common.js';

export const AGENT_KIND = 'Agent';

/** The user-visible state of an agent (`status` in the API, `status.phase` on the resource). */
export const agentPhaseSchema = z.enum(['booting', 'idle', 'running', 'paused', 'terminated', 'failed']);
export type AgentPhase = z.infer<typeof agentPhaseSchema>;

/**
 * What the API asks for; the operator moves the phase towards it. Terminated is one-way.
 * `paused` stops a run after its tool call in flight; checkpointing the sandbox on pause
 * arrives with the snapshot work.
 */
export const agentDesiredStateSchema = z.enum(['active', 'paused', 'terminated']);
export type AgentDesiredState = z.infer<typeof agentDesiredStateSchema>;

const looseObject = freeFormObject();

/** Most restarts `lifecycle.onFailure.restart` may allow: a sandbox that dies more often has a cause to fix. */
export const MAX_LIFECYCLE_RESTARTS = 10;

/** What happens at the agent's timeout: its sandbox is ended and the agent fails (`terminate`), or it is paused by checkpoint (`pause`). */
export const ON_TIMEOUT_VALUES = ['terminate', 'pause'] as const;

/**
 * The agent's lifecycle policy (ADR 45), stored with it so that it holds across restarts of Berth:
 * `idle.pauseAfter` pauses the agent by checkpoint after that long without exec, run, file or port
 * traffic (the next such call wakes it); `idle.terminateAfter` terminates it after that long without
 * traffic, paused by its idle policy or not; `onFailure.restart` recreates a sandbox that died up to
 * that many times, then fails the agent; `onTimeout` says what its timeout does.
 */
export const lifecycleSchema = z
  .object({
    idle: z
      .object({
        pauseAfter: durationSchema.optional().describe('time without traffic after which the agent is paused: 30s, 5m, 1h'),
        terminateAfter: durationSchema.optional().describe('time without traffic after which the agent is terminated (paused by its idle policy or not): 1h, 24h'),
      })
      .strict()
      .optional(),
    onFailure: z
      .object({
        restart: z
          .number()
          .int('must be a whole number of restarts')
          .min(0)
          .max(MAX_LIFECYCLE_RESTARTS, `must be at most ${MAX_LIFECYCLE_RESTARTS}`)
          .describe('how many times a sandbox that died is recreated before the agent fails'),
      })
      .strict()
      .optional(),
    onTimeout: z.enum(ON_TIMEOUT_VALUES).optional().describe('at the timeout: end the sandbox and fail the agent (terminate, the default) or pause it by checkpoint (pause)'),
  })
  .strict();
export type Lifecycle = z.infer<typeof lifecycleSchema>;

/** Overrides carry agent creation fields, instructions among them (up to 100,000 characters). */
export const OVERRIDES_BOUNDS = { maxDepth: FREE_FORM_BOUNDS.maxDepth, maxBytes: 256 * 1024 };

/** Model settings of an agent's runs (from its definition's `config`, or given at creation). */
export const modelSettingsSchema = z
  .object({
    temperature: z.number().min(0).max(2).optional(),
    maxTokens: z.number().int().positive().optional().describe('most tokens a model answer may have'),
    topP: z.number().min(0).max(1).optional(),
  })
  .strict();
export type ModelSettings = z.infer<typeof modelSettingsSchema>;

export const byoiRefSchema = z.object({ credentialRef: z.string(), config: looseObject.nullable() }).strict();
export type ByoiRef = z.infer<typeof byoiRefSchema>;

export const agentSpecSchema = z.object({
  sessionId: z.string(),
  organizationId: z.string(),
  mode: modeSchema,
  userId: z.string(),
  desiredState: agentDesiredStateSchema,
  /** Why `desiredState` is `paused`: asked through the API, a session limit reached, the agent's costCap spent, a tool call's approval expired, `lifecycle.idle`, a fork checkpointing it, or its timeout under `lifecycle.onTimeout: pause` (ADR 45). */
  pauseReason: z.enum(['requested', 'session_limit', 'cost_cap', 'approval_expired', 'idle', 'fork', 'timeout']).optional(),
  /** Why `desiredState` is `terminated`: asked through the API (absent) or `lifecycle.idle.terminateAfter` (`idle`, ADR 45). */
  terminateReason: z.enum(['idle']).optional(),
  compute: computeSchema,
  browser: z.boolean(),
  storage: z.string().optional(),
  gpu: z.string().optional(),
  model: z.string().optional(),
  instructions: z.string().optional(),
  modelSettings: modelSettingsSchema.optional(),
  tools: z.array(z.string()),
  /** Canonical spelling of the sandbox lifetime, e.g. `15m`. */
  timeout: durationSchema,
  timeoutSeconds: z.number().int().positive(),
  costCap: costSchema.optional(),
  provider: z.string(),
  providerFallback: z.string().optional(),
  /**
   * The organization's BYOI configuration of `provider` (and of `providerFallback`) when the agent
   * was created: its config and the name of the secret with its credential, never the credential.
   * Kept here so that removing the configuration leaves agents in flight where they run.
   */
  byoi: byoiRefSchema.optional(),
  fallbackByoi: byoiRefSchema.optional(),
  region: z.string().optional(),
  approvals: looseObject.optional(),
  knowledge: z.union([z.boolean(), z.string()]).optional(),
  metadata: looseObject.optional(),
  guardrails: looseObject.optional(),
  /** The agent definition (`adef_…`) the agent was created from, and which of its versions. */
  definition: z.string().optional(),
  definitionVersion: z.number().int().positive().optional(),
  overrides: freeFormObject(OVERRIDES_BOUNDS).optional(),
  secrets: z.array(z.string()).optional(),
  mcp: z.union([z.array(z.string()), z.literal('*')]).optional(),
  lifecycle: lifecycleSchema.optional(),
  /**
   * Where the sandbox may connect, through the egress proxy (ADR 46); changeable while the agent
   * runs. Absent: no network at all (agents created before egress policies).
   */
  egress: egressSchema.optional(),
  /** Start (or resume) from this snapshot: its files, and at `native` level its processes and memory. */
  restoreFrom: z
    .object({
      snapshotId: z.string(),
      level: z.enum(['native', 'filesystem']),
      /** A fork (ADR 45): it may start from the checkpoint its source keeps on the host, without the archive. */
      fork: z.boolean().optional(),
    })
    .strict()
    .optional(),
});
export type AgentSpec = z.infer<typeof agentSpecSchema>;

/** Where the agent's sandbox lives; opaque to everything but its provider. */
export const sandboxRefSchema = z.object({
  provider: z.string(),
  id: z.string(),
  details: z.record(z.string(), z.string()).optional(),
});
export type SandboxRef = z.infer<typeof sandboxRefSchema>;

export const agentStatusSchema = z.object({
  phase: agentPhaseSchema,
  observedGeneration: z.number().int(),
  conditions: z.array(conditionSchema),
  sandbox: sandboxRefSchema.optional(),
  /** The provider the agent runs on: `spec.provider`, or `spec.providerFallback` once the primary was unavailable. */
  provider: z.string().optional(),
  /** Why the fallback is used. */
  fallbackReason: z.string().optional(),
  startedAt: z.string().optional(),
  expiresAt: z.string().optional(),
  endedAt: z.string().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  /** When the sandbox of `startedAt` was released (pause, terminate, failure): where compute metering stops. */
  computeEndedAt: z.string().optional(),
  /** Spend so far, in integer cents. */
  cost: costSchema.optional(),
  /** The snapshot the agent was last paused into. */
  snapshot: z.string().optional(),
  /** The snapshot the running sandbox was restored from (`spec.restoreFrom` done). */
  restoredFrom: z.string().optional(),
  /** Sandboxes recreated after they died, counted against `lifecycle.onFailure.restart`. */
  restarts: z.number().int().nonnegative().optional(),
});
export type AgentStatus = z.infer<typeof agentStatusSchema>;

/**
 * Condition types and reasons are constants so that tests and clients can match on them. The
 * Agent reconciler computes them from what it observes and derives `status.phase` from them
 * alone (ADR 18); `SandboxReady` comes first, the others follow in this order.
 */
export const AgentCondition = {
  /** The sandbox is up (True), or why it is not. */
  SandboxReady: 'SandboxReady',
  /** A run holds the agent: its task is claimed by a runner whose lease is fresh. */
  Running: 'Running',
  /** The agent's state is kept in a snapshot and it has no sandbox. */
  Paused: 'Paused',
  /** The agent is not stopped by its costCap or its session's limits. */
  BudgetOK: 'BudgetOK',
  /** Present once the agent was terminated; final. */
  Terminated: 'Terminated',
  /** Present once the agent failed (provisioning, restore, timeout); final. */
  Failed: 'Failed',
} as const;

export const AgentReason = {
  Provisioning: 'Provisioning',
  Provisioned: 'Provisioned',
  ProvisionFailed: 'ProvisionFailed',
  Terminated: 'Terminated',
  DeadlineExceeded: 'DeadlineExceeded',
  SandboxLost: 'SandboxLost',
  /** Failed: the sandbox died more often than `lifecycle.onFailure.restart` allows. */
  RestartLimitReached: 'RestartLimitReached',
  Pausing: 'Pausing',
  Paused: 'Paused',
  Restored: 'Restored',
  RestoreFailed: 'RestoreFailed',
  /** Failed: the snapshot a pause was storing failed for good (its provider refused it). */
  PauseFailed: 'PauseFailed',
  /** The sandbox could not be ended (its provider unreachable or failing); retried with backoff. */
  ReleaseFailed: 'ReleaseFailed',
  /** Running: a runner holds the agent's task under a fresh lease. */
  RunInProgress: 'RunInProgress',
  /** Running False: the agent's task waits for a runner. */
  RunQueued: 'RunQueued',
  /** Running False: the runner of the agent's task stopped renewing its lease; another may take it over. */
  RunnerLost: 'RunnerLost',
  /** Running False: no task of the agent is queued or running. */
  NoRun: 'NoRun',
  /** Paused False: the agent is not asked to pause. */
  Active: 'Active',
  /** BudgetOK True. */
  WithinBudget: 'WithinBudget',
  /** BudgetOK False: the agent's costCap is spent. */
  CostCapReached: 'CostCapReached',
  /** BudgetOK False: its session's maxCost for the period is reached. */
  SessionLimitReached: 'SessionLimitReached',
} as const;

import {
  ApiError,
  LATENCY_BUCKETS,
  Labels,
  idToObjectName,
  newId,
  objectNameToId,
  toolListProblem,
  unsupportedReason,
  type Clock,
  type ExecLanguage,
  type ExecResult,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
} from '@berth/common';
import { SANDBOX_FINALIZER, formatDuration, parseDuration, type AgentSpec, type ByoiRef, type Compute, type Cost, type ModelSettings } from '@berth/crds';
import type { ModelRouter } from '@berth/operator';
import type { ProviderRegistry } from '@berth/providers';
import { Histogram, type Registry } from 'prom-client';
import type { Principal } from '../http/context.js';
import { listPage, type CursorCodec, type PageRequest } from './pagination.js';
import { assertInstallCurrency, type LimitGuard } from './limits.js';
import type { SecretService } from './secrets.js';
import { findOwned } from './scope.js';
import type { SessionService } from './sessions.js';

/** Longest agent lifetime; longer timeouts are capped to it. */
export const MAX_TIMEOUT_SECONDS = 24 * 3600;

/** Longest wait of exec and run for a booting agent (or the exec timeout, when shorter). */
export const BOOT_WAIT_MS = 60_000;

export interface CreateAgentInput {
  modelSettings?: ModelSettings | undefined;
  compute: Compute;
  browser: boolean;
  storage?: string | undefined;
  gpu?: string | undefined;
  model?: string | undefined;
  instructions?: string | undefined;
  tools: string[];
  timeout: string;
  costCap?: Cost | undefined;
  provider?: string | undefined;
  providerFallback?: string | undefined;
  region?: string | undefined;
  approvals?: Record<string, unknown> | undefined;
  knowledge?: boolean | string | undefined;
  metadata?: Record<string, unknown> | undefined;
  guardrails?: Record<string, unknown> | undefined;
  /** The definition id the fields came from (resolved from a name or id), and its version. */
  definition?: string | undefined;
  definitionVersion?: number | undefined;
  overrides?: Record<string, unknown> | undefined;
  secrets?: string[] | undefined;
  mcp?: string[] | '*' | undefined;
}

export function agentView(agent: Resource<'Agent'>) {
  const { spec, status, metadata } = agent;
  return {
    id: objectNameToId(metadata.name),
    sessionId: spec.sessionId,
    status: status?.phase ?? 'booting',
    compute: spec.compute,
    browser: spec.browser,
    storage: spec.storage,
    gpu: spec.gpu,
    model: spec.model,
    instructions: spec.instructions,
    modelSettings: spec.modelSettings,
    tools: spec.tools,
    timeout: spec.timeout,
    costCap: spec.costCap,
    provider: spec.provider,
    providerFallback: spec.providerFallback,
    region: spec.region,
    approvals: spec.approvals,
    knowledge: spec.knowledge,
    metadata: spec.metadata,
    guardrails: spec.guardrails,
    definition: spec.definition,
    definitionVersion: spec.definitionVersion,
    overrides: spec.overrides,
    secrets: spec.secrets,
    mcp: spec.mcp,
    createdAt: metadata.creationTimestamp,
    startedAt: status?.startedAt,
    expiresAt: status?.expiresAt,
    endedAt: status?.endedAt,
    error: status?.error,
    pauseReason: spec.desiredState === 'paused' ? (spec.pauseReason ?? 'requested') : undefined,
    cost: status?.cost,
    conditions: status?.conditions ?? [],
  };
}
export type AgentView = ReturnType<typeof agentView>;

export interface AgentServiceDeps {
  store: ResourceStore;
  providers: ProviderRegistry;
  sessions: SessionService;
  limits: LimitGuard;
  secrets: Pick<SecretService, 'assertExist'>;
  clock: Clock;
  metrics: Registry;
  models: ModelRouter;
  execTimeoutMs: number;
  defaultModel: string;
  cursors: CursorCodec;
  currency: string;
}

export function createAgentService(deps: AgentServiceDeps) {
  const { store, providers, sessions, limits, clock } = deps;
  const execDuration = new Histogram({
    name: 'berth_exec_duration_seconds',
    help: 'Round trip of a synchronous exec in a sandbox',
    labelNames: ['provider', 'language', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [deps.metrics],
  });

  /**
   * The organization's BYOI configuration of a provider the request names, or undefined for one
   * of this install's providers; 422 for a name that is neither.
   */
  async function providerField(principal: Principal, field: 'provider' | 'providerFallback', name: string | undefined): Promise<ByoiRef | undefined> {
    if (name === undefined) return undefined;
    const byoi = await providers.byoiConfig(principal.organizationId, principal.mode, name);
    if (byoi || providers.get(name)) return byoi;
    const valid = providers.names();
    throw new ApiError('unprocessable_entity', `${field}: unknown provider "${name}"; this install has ${valid.join(', ')}, and BYOI providers configured with PUT /v1/providers`, {
      fields: { [field]: [`unknown provider; valid: ${valid.join(', ')} or a configured BYOI provider`] },
      validProviders: valid,
    });
  }

  const find = (principal: Principal, id: string) => findOwned(store, 'Agent', 'agt', principal, id);

  const bootWaitMs = Math.min(BOOT_WAIT_MS, deps.execTimeoutMs);

  /**
   * The agent once it is no longer booting: exec and run on an agent created a moment ago
   * wait for its sandbox instead of answering 409. Waits by watching, at most `bootWaitMs`;
   * whatever state it then has is the caller's to judge.
   */
  async function whenBooted(agent: Resource<'Agent'>): Promise<Resource<'Agent'>> {
    const booting = (current: Resource<'Agent'> | undefined) =>
      current !== undefined && current.spec.desiredState === 'active' && (current.status?.phase ?? 'booting') === 'booting' && !current.metadata.deletionTimestamp;
    if (!booting(agent)) return agent;
    await waitForAgent(store, agent.metadata.name, bootWaitMs, (current) => !booting(current));
    return (await store.get('Agent', agent.metadata.name)) ?? agent;
  }

  /**
   * Why a run of the agent could not call its model now (its vendor has no key here and the
   * organization configured none), or undefined. Test keys answer with the mock model: none.
   */
  async function modelProblem(agent: Resource<'Agent'>): Promise<string | undefined> {
    if (agent.spec.mode === 'test' || agent.spec.model === undefined) return undefined;
    return deps.models.unusableReason(agent.spec.organizationId, agent.spec.model);
  }

  /** 402 while the agent's session has reached a limit. */
  async function assertWithinLimits(agent: Resource<'Agent'>, action: string): Promise<void> {
    const session = await store.get('Session', idToObjectName(agent.spec.sessionId));
    if (session) await limits.assertWithin(session, action);
  }

  return {
    find,
    assertWithinLimits,
    whenBooted,
    modelProblem,

    async create(principal: Principal, sessionId: string, input: CreateAgentInput): Promise<AgentView> {
      assertInstallCurrency(deps.currency, 'costCap.currency', input.costCap?.currency);
      const session = await sessions.find(principal, sessionId);
      const providerName = input.provider ?? providers.defaultProvider;
      const byoi = await providerField(principal, 'provider', providerName);
      const fallbackByoi = await providerField(principal, 'providerFallback', input.providerFallback);
      // A BYOI provider that cannot be reached now is checked when it provisions (or the fallback is).
      const provider = byoi
        ? await providers.forAgent({ ...principal, mode: principal.mode, provider: providerName, byoi }).catch(() => undefined)
        : providers.get(providerName);
      const unsupported = provider ? unsupportedReason(provider, input) : undefined;
      if (unsupported) {
        throw new ApiError('unprocessable_entity', `${unsupported.field}: ${unsupported.message}`, {
          fields: { [unsupported.field]: [unsupported.message] },
          provider: providerName,
        });
      }
      const toolProblem = toolListProblem(input.tools, input.browser);
      if (toolProblem) throw new ApiError('unprocessable_entity', `tools: ${toolProblem}`, { fields: { tools: [toolProblem] } });
      const model = input.model ?? deps.defaultModel;
      const modelProblem = deps.models.problem(model);
      if (modelProblem) throw new ApiError('unprocessable_entity', `model: ${modelProblem}`, { fields: { model: [modelProblem] } });
      const timeoutSeconds = Math.min(parseDuration(input.timeout)!, MAX_TIMEOUT_SECONDS);
      const { provider: _provider, timeout: _timeout, ...rest } = input;
      const spec: AgentSpec = {
        ...rest,
        ...(byoi ? { byoi } : {}),
        ...(fallbackByoi ? { fallbackByoi } : {}),
        sessionId,
        organizationId: principal.organizationId,
        mode: principal.mode,
        userId: session.spec.userId,
        desiredState: 'active',
        model,
        timeout: formatDuration(timeoutSeconds),
        timeoutSeconds,
        provider: providerName,
      };
      if (input.secrets?.length) await deps.secrets.assertExist(principal, sessionId, input.secrets);
      await limits.assertWithin(session, 'creating an agent');
      const agent = await limits.withAgentSlot(session, () => store.create('Agent', {
        name: idToObjectName(newId('agt', clock.now())),
        labels: {
          [Labels.organization]: principal.organizationId,
          [Labels.mode]: principal.mode,
          [Labels.session]: session.metadata.name,
        },
        ownerReferences: [{ kind: 'Session', name: session.metadata.name, uid: session.metadata.uid, controller: true }],
        finalizers: [SANDBOX_FINALIZER],
        spec: JSON.parse(JSON.stringify(spec)) as AgentSpec, // drops undefined fields
        status: { phase: 'booting', observedGeneration: 0, conditions: [] },
      }));
      return agentView(agent);
    },

    async get(principal: Principal, id: string): Promise<AgentView> {
      return agentView(await find(principal, id));
    },

    async listForSession(principal: Principal, sessionId: string, page: PageRequest) {
      const session = await sessions.find(principal, sessionId);
      return listPage(store, deps.cursors, 'Agent', { [Labels.session]: session.metadata.name }, page, agentView);
    },

    async exec(principal: Principal, id: string, request: { language: ExecLanguage; code: string }): Promise<ExecResult> {
      const agent = await whenBooted(await find(principal, id));
      await assertWithinLimits(agent, 'exec');
      const phase = agent.status?.phase ?? 'booting';
      const sandbox = agent.status?.sandbox;
      if (agent.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running') || !sandbox) {
        const state = phase === 'idle' || phase === 'running' ? 'terminating' : phase === 'booting' ? `still booting after ${bootWaitMs / 1000} s` : phase;
        throw new ApiError('conflict', `agent ${id} is ${state}; exec needs a ready sandbox (status idle or running)`, {
          status: phase,
        });
      }
      let provider: SandboxProvider | undefined;
      try {
        provider = await providers.holding(agent.spec, agent.status?.provider);
      } catch (error) {
        throw new ApiError('provider_error', `provider "${agent.status?.provider ?? agent.spec.provider}" is unavailable: ${(error as Error).message}`);
      }
      if (!provider) throw new ApiError('provider_error', `provider "${agent.spec.provider}" is not configured on this install`);
      const timer = execDuration.startTimer({ provider: provider.name, language: request.language });
      try {
        const result = await provider.exec(sandbox, { ...request, timeoutMs: deps.execTimeoutMs });
        timer({ result: 'ok' });
        return result;
      } catch (error) {
        timer({ result: (error as Error).name });
        throw error;
      }
    },

    /**
     * Pauses a running or idle agent: a run's tool call in flight finishes, then the sandbox is
     * checkpointed into a snapshot and its compute released. Answers once the agent is paused
     * (or after `waitMs`, with the agent as it is then).
     */
    async pause(principal: Principal, id: string, waitMs: number): Promise<AgentView> {
      const agent = await find(principal, id);
      await store.updateSpec('Agent', agent.metadata.name, (current) => {
        const phase = current.status?.phase ?? 'booting';
        if (current.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running')) {
          throw new ApiError('conflict', `agent ${id} is ${current.spec.desiredState === 'paused' ? 'pausing' : phase}; only an idle or running agent can be paused`, {
            status: phase,
          });
        }
        return { ...current.spec, desiredState: 'paused', pauseReason: 'requested' };
      });
      await waitForAgent(store, agent.metadata.name, waitMs, (current) => {
        const phase = current?.status?.phase;
        return phase === undefined || phase === 'paused' || phase === 'failed' || phase === 'terminated';
      });
      return agentView((await store.get('Agent', agent.metadata.name)) ?? agent);
    },

    /**
     * Resumes a paused agent from its pause snapshot: natively (processes and memory) when its
     * provider can, else its files. Answers once it is ready again (or after `waitMs`).
     */
    async resume(principal: Principal, id: string, waitMs: number, level: (snapshotId: string) => Promise<'native' | 'filesystem'>): Promise<AgentView> {
      const agent = await find(principal, id);
      await assertWithinLimits(agent, 'resume');
      const phase = agent.status?.phase ?? 'booting';
      if (phase !== 'paused' || agent.spec.desiredState !== 'paused') {
        throw new ApiError('conflict', `agent ${id} is ${phase}; only a paused agent can be resumed`, { status: phase });
      }
      const snapshotId = agent.status?.snapshot;
      const restoreFrom = snapshotId ? { snapshotId, level: await level(snapshotId) } : undefined;
      await store.updateSpec('Agent', agent.metadata.name, (current) => {
        if (current.spec.desiredState !== 'paused') throw new ApiError('conflict', `agent ${id} is being resumed already`);
        const { restoreFrom: _previous, pauseReason: _reason, ...rest } = current.spec;
        return { ...rest, desiredState: 'active', ...(restoreFrom ? { restoreFrom } : {}) };
      });
      await waitForAgent(store, agent.metadata.name, waitMs, (current) => {
        const now = current?.status?.phase;
        return now === undefined || now === 'idle' || now === 'running' || now === 'failed' || now === 'terminated';
      });
      return agentView((await store.get('Agent', agent.metadata.name)) ?? agent);
    },

    /** Asks for the end of the agent; answers once its sandbox is gone, or after `waitMs` regardless. */
    async terminate(principal: Principal, id: string, waitMs: number): Promise<void> {
      const agent = await find(principal, id);
      await store.updateSpec('Agent', agent.metadata.name, (current) =>
        current.spec.desiredState === 'terminated' ? undefined : { ...current.spec, desiredState: 'terminated' },
      );
      await waitForAgent(store, agent.metadata.name, waitMs, (current) => {
        const phase = current?.status?.phase;
        return phase === undefined || phase === 'terminated' || phase === 'failed';
      });
    },
  };
}

export type AgentService = ReturnType<typeof createAgentService>;

/** Waits, by watching, until the agent satisfies `done` or `timeoutMs` passes. */
export async function waitForAgent(
  store: ResourceStore,
  name: string,
  timeoutMs: number,
  done: (agent: Resource<'Agent'> | undefined) => boolean,
): Promise<boolean> {
  let wake: () => void = () => undefined;
  const watch = store.watch('Agent', {
    onEvent: (event) => event.name === name && wake(),
    onResync: () => wake(),
  });
  const deadline = Date.now() + timeoutMs;
  try {
    await watch.ready;
    for (;;) {
      const changed = new Promise<void>((resolve) => (wake = resolve));
      if (done(await store.get('Agent', name))) return true;
      const remaining = deadline - Date.now();
      if (remaining <= 0) return false;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([changed, new Promise<void>((resolve) => (timer = setTimeout(resolve, remaining)))]);
      clearTimeout(timer);
    }
  } finally {
    watch.stop();
  }
}

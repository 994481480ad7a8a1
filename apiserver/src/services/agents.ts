import {
  ApiError,
  LATENCY_BUCKETS,
  Labels,
  METADATA_LABEL_PREFIX,
  objectNameToId,
  waitForAgent,
  type ExecLanguage,
  type ExecResult,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
} from '@berth/common';
import type { AgentFactory, CreateAgentInput, RunStarter } from '@berth/operator';
import type { ProviderRegistry } from '@berth/providers';
import { Histogram, type Registry } from 'prom-client';
import type { Principal } from '../http/context.js';
import { listPage, type CursorCodec, type PageRequest } from './pagination.js';
import { findOwned } from './scope.js';
import type { SessionService } from './sessions.js';

/** Longest wait of exec and run for a booting agent (or the exec timeout, when shorter). */
export const BOOT_WAIT_MS = 60_000;

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
  factory: AgentFactory;
  runs: RunStarter;
  metrics: Registry;
  execTimeoutMs: number;
  cursors: CursorCodec;
}

export function createAgentService(deps: AgentServiceDeps) {
  const { store, providers, sessions } = deps;
  const execDuration = new Histogram({
    name: 'berth_exec_duration_seconds',
    help: 'Round trip of a synchronous exec in a sandbox',
    labelNames: ['provider', 'language', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [deps.metrics],
  });

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

  return {
    find,
    whenBooted,

    async create(principal: Principal, sessionId: string, input: CreateAgentInput): Promise<AgentView> {
      return agentView(await deps.factory.create(principal, await sessions.find(principal, sessionId), input));
    },

    async get(principal: Principal, id: string): Promise<AgentView> {
      return agentView(await find(principal, id));
    },

    /** `metadata`: custom pairs every listed agent has (as labels: string pairs a label can hold). */
    async listForSession(principal: Principal, sessionId: string, page: PageRequest, metadata: Record<string, string> = {}) {
      const session = await sessions.find(principal, sessionId);
      const labels = Object.fromEntries(Object.entries(metadata).map(([key, value]) => [`${METADATA_LABEL_PREFIX}${key}`, value]));
      return listPage(store, deps.cursors, 'Agent', { ...labels, [Labels.session]: session.metadata.name }, page, agentView);
    },

    async exec(principal: Principal, id: string, request: { language: ExecLanguage; code: string }): Promise<ExecResult> {
      const agent = await whenBooted(await find(principal, id));
      await deps.runs.assertWithinLimits(agent, 'exec');
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
      await deps.runs.assertWithinLimits(agent, 'resume');
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

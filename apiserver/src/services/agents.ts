import {
  ApiError,
  EXEC_OPTIONS,
  LATENCY_BUCKETS,
  Labels,
  METADATA_LABEL_PREFIX,
  MAX_TIMEOUT_SECONDS,
  idToObjectName,
  isId,
  objectNameToId,
  pendingApprovalOf,
  ProviderError,
  scopeLabels,
  releaseAgentCallLease,
  renewAgentCallLease,
  takeAgentCallLease,
  touchAgentActivity,
  waitForAgent,
  type BackgroundOutput,
  type BackgroundProcess,
  type Pool,
  type ExecLanguage,
  type ExecResult,
  type ProcessSignal,
  type TerminalHandle,
  type Resource,
  type ResourceStore,
  type SandboxProvider,
  UnsupportedRequestError,
} from '@berth/common';
import { assertCredentialSecretsExist, type AgentFactory, type CreateAgentInput, type RunStarter } from '@berth/operator';
import type { ProviderRegistry } from '@berth/providers';
import { formatDuration, parseDuration, type Egress, type SandboxRef } from '@berth/crds';
import { Gauge, Histogram, type Registry } from 'prom-client';
import type { Principal } from '../http/context.js';
import { listPage, type CursorCodec, type PageRequest } from './pagination.js';
import { resumeLevel } from './snapshots.js';
import { findOwned, findOwnedWithOwner } from './scope.js';
import type { SessionService } from './sessions.js';

/** Longest wait of exec and run for a booting agent (or the exec timeout, when shorter). */
export const BOOT_WAIT_MS = 60_000;
/** Longest wait of a call that wakes an idle-paused agent, for its pause to end and then for its resume. */
export const WAKE_WAIT_MS = 120_000;
/** Longest wait of `GET /v1/agents/{id}?waitFor=`. */
export const MAX_GET_WAIT_SECONDS = 60;
/** How long a call's lease on its agent holds without renewal: a process that died leaves a lease that lapses this late. */
export const CALL_LEASE_MS = 60_000;
/** How often a call in flight renews its lease. */
const CALL_LEASE_RENEW_MS = 20_000;
/** How many times a call whose agent was asked to pause while it took its lease starts over (the wake). */
const LEASE_ATTEMPTS = 3;

/** The agent's ready sandbox for one call; `release` ends the call's lease (ADR 45) and is called once the call is over. */
export interface ReadyAgent {
  agent: Resource<'Agent'>;
  sandbox: SandboxRef;
  provider: SandboxProvider;
  release: () => void;
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
    lifecycle: spec.lifecycle,
    restarts: status?.restarts,
    egress: spec.egress,
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

/** The exec options of `request` the provider is given; 501 naming the first one it cannot honour. */
function execOptions(provider: SandboxProvider, request: ExecInput): { env?: Record<string, string>; cwd?: string; stdin?: Buffer } {
  for (const option of EXEC_OPTIONS) {
    if (request[option] !== undefined && !provider.execOptions?.includes(option)) {
      throw new ApiError('not_implemented', `${option}: provider "${provider.name}" cannot take it; remove "${option}"`, { field: option, provider: provider.name });
    }
  }
  return {
    ...(request.env !== undefined ? { env: request.env } : {}),
    ...(request.cwd !== undefined ? { cwd: request.cwd } : {}),
    ...(request.stdin !== undefined ? { stdin: Buffer.from(request.stdin, 'utf8') } : {}),
  };
}

function notImplemented(field: string, provider: string, what: string): ApiError {
  return new ApiError('not_implemented', `${field}: provider "${provider}" has no ${what}`, { field, provider });
}

/** What is left of the agent's lifetime (its timeout from when its sandbox started). */
function remainingMs(agent: Resource<'Agent'>): number {
  const expiresAt = agent.status?.expiresAt;
  const left = expiresAt === undefined ? agent.spec.timeoutSeconds * 1000 : Date.parse(expiresAt) - Date.now();
  return Math.max(1_000, left);
}

/** An exec request as the API takes it: the spec's language and code, and the options beside them (ADR 39). */
export interface ExecInput {
  language: ExecLanguage;
  code: string;
  env?: Record<string, string> | undefined;
  cwd?: string | undefined;
  stdin?: string | undefined;
  /** Seconds; at most the synchronous limit (the agent's remaining time for a streamed exec). */
  timeout?: number | undefined;
  background?: boolean | undefined;
}

/** A wait for an agent's status (`?waitFor=` of the agent's GET and of its create). */
export interface AgentWait {
  statuses: AgentView['status'][];
  timeoutMs: number;
}

/** Whether the agent has one of the statuses waited for, or has ended (or is gone): the wait is over. */
function hasStatus(wait: AgentWait): (agent: Resource<'Agent'> | undefined) => boolean {
  return (agent) => {
    const phase = agent?.status?.phase ?? 'booting';
    return agent === undefined || wait.statuses.includes(phase) || phase === 'terminated' || phase === 'failed';
  };
}

/** The filters of `GET /v1/agents`. */
export interface AgentFilters {
  sessionId?: string | undefined;
  status?: string[] | undefined;
}

/** How many agents `GET /v1/agents` reads from the store per batch while it filters by status. */
const FILTER_BATCH = 100;

export interface AgentServiceDeps {
  store: ResourceStore;
  providers: ProviderRegistry;
  sessions: SessionService;
  factory: AgentFactory;
  runs: RunStarter;
  metrics: Registry;
  execTimeoutMs: number;
  cursors: CursorCodec;
  /** Where a running agent's pending approval is read. */
  pool: Pool;
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
  const streamsOpen = new Gauge({ name: 'berth_exec_streams_open', help: 'Streamed execs (SSE) running now', labelNames: ['provider'], registers: [deps.metrics] });
  const terminalsOpen = new Gauge({ name: 'berth_terminal_sessions_open', help: 'Terminal (PTY over WebSocket) sessions open now', labelNames: ['provider'], registers: [deps.metrics] });
  const backgroundStarted = new Histogram({
    name: 'berth_background_process_start_seconds',
    help: 'Start of a background process in a sandbox (its count is the number started)',
    labelNames: ['provider', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [deps.metrics],
  });

  const wakeDuration = new Histogram({
    name: 'berth_agent_wake_duration_seconds',
    help: 'Wait of a call (exec, run, stream, terminal, process, file, port proxy) on an agent paused by its idle policy until the agent was resumed (the pause under way, then the resume)',
    labelNames: ['provider', 'result'],
    buckets: LATENCY_BUCKETS,
    registers: [deps.metrics],
  });

  const find = (principal: Principal, id: string) => findOwned(store, 'Agent', 'agt', principal, id);

  const idlePolicy = (agent: Resource<'Agent'>) => agent.spec.lifecycle?.idle;

  /** Records traffic to an agent with an idle policy (ADR 45); agents without one pay nothing. */
  async function touch(agent: Resource<'Agent'>): Promise<void> {
    if (idlePolicy(agent)) await touchAgentActivity(deps.pool, objectNameToId(agent.metadata.name), new Date());
  }

  /**
   * A call's lease on an agent with an idle policy (ADR 45): while it is held, the agent is not
   * idle, and an idle pause decided meanwhile is called off right before its checkpoint. Renewed
   * while the call lasts (a stream, a terminal, a download, a proxied connection); the function
   * returned ends it, and the call's end counts as traffic. Agents without the policy pay nothing.
   */
  async function holdCall(agent: Resource<'Agent'>): Promise<() => void> {
    if (!idlePolicy(agent)) return () => undefined;
    const agentId = objectNameToId(agent.metadata.name);
    const leaseId = await takeAgentCallLease(deps.pool, agentId, CALL_LEASE_MS);
    const timer = setInterval(() => void renewAgentCallLease(deps.pool, leaseId, CALL_LEASE_MS).catch(() => undefined), CALL_LEASE_RENEW_MS);
    timer.unref();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      clearInterval(timer);
      void releaseAgentCallLease(deps.pool, leaseId, agentId, new Date()).catch(() => undefined);
    };
  }

  /**
   * The one place an agent paused by its idle policy is woken (ADR 45): exec, run, streamed exec,
   * terminals, background processes, files and the port proxy come through here (`ready`). A
   * pause under way ends first (its checkpoint is what is restored), then the agent is resumed as
   * `POST /v1/agents/{id}/resume` would (natively where its provider can), and the call waits until
   * it is ready. An agent paused for another reason (asked, a limit, an approval) is left alone:
   * the caller's 409 says so. Concurrent callers resume it once.
   */
  async function ensureAwake(agent: Resource<'Agent'>): Promise<Resource<'Agent'>> {
    const asleep = (current: Resource<'Agent'>) => current.spec.desiredState === 'paused' && current.spec.pauseReason === 'idle';
    const name = agent.metadata.name;
    const phaseOf = (current: Resource<'Agent'> | undefined) => current?.status?.phase ?? 'booting';
    if (agent.spec.desiredState === 'paused' && agent.spec.pauseReason === 'fork') {
      // A fork is being checkpointed from it: the fork resumes it at once after, and the call waits for that.
      const forking = (current: Resource<'Agent'> | undefined) => current?.spec.desiredState === 'paused' && current.spec.pauseReason === 'fork';
      await waitForAgent(store, name, WAKE_WAIT_MS, (current) => !forking(current) && ['idle', 'running', 'failed', 'terminated', 'paused'].includes(phaseOf(current)));
      return (await store.get('Agent', name)) ?? agent;
    }
    if (!asleep(agent)) return agent;
    const provider = agent.status?.provider ?? agent.spec.provider;
    const timer = wakeDuration.startTimer({ provider });
    try {
      await waitForAgent(store, name, WAKE_WAIT_MS, (current) => !current || !asleep(current) || ['paused', 'failed', 'terminated'].includes(phaseOf(current)));
      const current = await store.get('Agent', name);
      if (current && asleep(current) && phaseOf(current) === 'paused') {
        await deps.runs.assertWithinLimits(current, 'waking the agent');
        const snapshotId = current.status?.snapshot;
        const snapshot = snapshotId ? await store.get('Snapshot', idToObjectName(snapshotId)) : undefined;
        const level = snapshot ? resumeLevel(snapshot, snapshot.spec.provider, providers) : 'filesystem';
        await store.updateSpec('Agent', name, (latest) => {
          if (!asleep(latest)) return undefined;
          const { restoreFrom: _previous, pauseReason: _reason, ...rest } = latest.spec;
          return { ...rest, desiredState: 'active', ...(snapshotId ? { restoreFrom: { snapshotId, level } } : {}) };
        });
      }
      await waitForAgent(store, name, WAKE_WAIT_MS, (latest) => !latest || latest.spec.desiredState !== 'active' || ['idle', 'running', 'failed', 'terminated'].includes(phaseOf(latest)));
      const woken = (await store.get('Agent', name)) ?? agent;
      timer({ result: phaseOf(woken) === 'idle' || phaseOf(woken) === 'running' ? 'woken' : phaseOf(woken) });
      return woken;
    } catch (error) {
      timer({ result: 'error' });
      throw error;
    }
  }

  const bootWaitMs = Math.min(BOOT_WAIT_MS, deps.execTimeoutMs);

  /**
   * The agent's sandbox and the provider holding it, for `what`; 409 when it has no ready sandbox, 502 when its provider is gone.
   * `session`: the agent's session read with it, when it was (its limits are checked; without it, the session is read).
   */
  async function sandboxOf(agent: Resource<'Agent'>, id: string, what: string, session?: Resource<'Session'>): Promise<{ sandbox: SandboxRef; provider: SandboxProvider }> {
    await deps.runs.assertWithinLimits(agent, what, session);
    const phase = agent.status?.phase ?? 'booting';
    const sandbox = agent.status?.sandbox;
    if (agent.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running') || !sandbox) {
      const state = phase === 'idle' || phase === 'running' ? 'terminating' : phase === 'booting' ? `still booting after ${bootWaitMs / 1000} s` : phase;
      throw new ApiError('conflict', `agent ${id} is ${state}; ${what} needs a ready sandbox (status idle or running)`, {
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
    return { sandbox, provider };
  }

  /**
   * The agent once it is no longer booting: exec and run on an agent created (or resumed) a moment
   * ago wait for its sandbox instead of answering 409. Waits by watching, at most `bootWaitMs`;
   * whatever state it then has is the caller's to judge.
   */
  async function whenBooted(agent: Resource<'Agent'>): Promise<Resource<'Agent'>> {
    // Paused with `active` asked: a resume (or another call's wake) that the reconciler has not
    // taken up yet, which then boots the agent: the call waits for it as for a boot.
    const booting = (current: Resource<'Agent'> | undefined) =>
      current !== undefined && current.spec.desiredState === 'active' && ['booting', 'paused'].includes(current.status?.phase ?? 'booting') && !current.metadata.deletionTimestamp;
    if (!booting(agent)) return agent;
    return (await waitForAgent(store, agent.metadata.name, bootWaitMs, (current) => !booting(current))) ?? agent;
  }

  /**
   * What a call that failed in its sandbox answers: a provider's failure (the sandbox or its
   * launcher gone) because Berth ended the sandbox meanwhile (the agent reached its timeout, was
   * paused, terminated, or failed by a limit) is that change's 409 with the agent's status now,
   * not a 502: the call raced the agent's lifecycle. A sandbox that died by itself (the agent
   * failed with provider_error, or is booting a new sandbox) stays the provider's 502.
   */
  async function callError(agent: Resource<'Agent'>, id: string, what: string, error: unknown): Promise<unknown> {
    if (!(error instanceof ProviderError) || error instanceof UnsupportedRequestError) return error;
    const current = await store.get('Agent', agent.metadata.name).catch(() => undefined);
    const phase = current?.status?.phase ?? 'terminated';
    const expiresAt = current?.status?.expiresAt;
    const expired = expiresAt !== undefined && Date.parse(expiresAt) <= Date.now();
    const ended =
      current === undefined ||
      current.spec.desiredState !== 'active' ||
      phase === 'paused' ||
      phase === 'terminated' ||
      (phase === 'failed' && current.status?.error?.code !== 'provider_error');
    if (!expired && !ended) return error;
    const change = expired ? `reached its timeout (${current!.spec.timeout})` : `is ${current?.spec.desiredState === 'active' ? phase : (current?.spec.desiredState ?? 'terminated')}`;
    return new ApiError('conflict', `agent ${id} ${change} while ${what} ran: ${error.message}`, { status: phase });
  }

  return {
    /** How long a call waits for an agent's boot (`whenBooted`): 60 s, at most the exec timeout. */
    bootWaitMs,
    find,
    whenBooted,
    callError,
    ensureAwake,
    touch,

    /**
     * Creates an agent; with `wait`, answers it once it has one of the statuses or has ended (or
     * at the deadline), as `get` does. The watch starts before the agent is written, so the
     * reconciler's status write cannot fall between the two, and no read follows the write: the
     * answer goes out as soon as the status write has committed.
     */
    async create(principal: Principal, sessionId: string, input: CreateAgentInput, wait?: AgentWait): Promise<AgentView> {
      // The session is read beside the factory's first read, not before it (and, with a wait,
      // once the watch is up: a 404 read earlier would have no handler meanwhile).
      if (!wait) return agentView(await deps.factory.create(principal, sessions.find(principal, sessionId), input));
      const id = deps.factory.newId();
      let created: Resource<'Agent'> | undefined;
      const write = async () => (created = await deps.factory.create(principal, sessions.find(principal, sessionId), input, { id, fresh: true }));
      return agentView((await waitForAgent(store, idToObjectName(id), wait.timeoutMs, hasStatus(wait), { firstRead: write })) ?? created!);
    },

    /** The agent, and while a tool call of its run waits for a decision, which one. */
    async get(
      principal: Principal,
      id: string,
      wait?: AgentWait,
    ): Promise<AgentView & { awaitingApproval?: { approvalId: string; taskId: string; action: string; expiresAt: string } }> {
      let agent: Resource<'Agent'>;
      if (wait && isId(id, 'agt')) {
        // Watched, not polled: the watch starts before the one read of the agent (its owner checked),
        // and the answer goes out as soon as the reconciler's status write has committed, as that
        // write left the agent (no read more: ADR 45).
        let found: Resource<'Agent'> | undefined;
        const firstRead = async () => (found = await find(principal, id));
        agent = (await waitForAgent(store, idToObjectName(id), wait.timeoutMs, hasStatus(wait), { firstRead })) ?? found!;
      } else {
        agent = await find(principal, id);
      }
      const view = agentView(agent);
      if (view.status !== 'running') return view;
      const pending = await pendingApprovalOf(deps.pool, view.id);
      return pending ? { ...view, awaitingApproval: { approvalId: pending.id, taskId: pending.taskId, action: pending.tool, expiresAt: pending.expiresAt } } : view;
    },

    /** `metadata`: custom pairs every listed agent has (as labels: string pairs a label can hold). */
    async listForSession(principal: Principal, sessionId: string, page: PageRequest, metadata: Record<string, string> = {}) {
      const session = await sessions.find(principal, sessionId);
      const labels = Object.fromEntries(Object.entries(metadata).map(([key, value]) => [`${METADATA_LABEL_PREFIX}${key}`, value]));
      return listPage(store, deps.cursors, 'Agent', { ...labels, [Labels.session]: session.metadata.name }, page, agentView);
    },

    /** The agent's ready sandbox and the provider holding it; 409 when it has none, 502 when its provider is gone. */
    /**
     * The agent's ready sandbox for one call, under a lease (ADR 45) that the caller ends with
     * `release`: 409 when it has none, 502 when its provider is gone. The lease is taken before the
     * agent is read again: an idle pause decided before that is seen here (the call wakes the agent),
     * one decided after sees the lease and is called off before its checkpoint.
     */
    async ready(principal: Principal, id: string, what = 'exec'): Promise<ReadyAgent> {
      for (let attempt = 1; ; attempt++) {
        // The agent and its session in one read of the store: an exec's limits check costs no round trip of its own.
        const { resource: found, owner: session } = await findOwnedWithOwner(store, 'Agent', 'agt', principal, id, 'Session');
        const agent = await whenBooted(await ensureAwake(found));
        // A session read before a wait (a boot, a wake) is read again: its limits are checked as they are now.
        const { sandbox, provider } = await sandboxOf(agent, id, what, agent === found ? session : undefined);
        const release = await holdCall(agent);
        if (!idlePolicy(agent)) return { agent, sandbox, provider, release };
        const current = await store.get('Agent', agent.metadata.name);
        if (current && current.spec.desiredState === 'active' && current.status?.sandbox?.id === sandbox.id) return { agent: current, sandbox, provider, release };
        release();
        if (attempt === LEASE_ATTEMPTS) {
          throw new ApiError('conflict', `agent ${id} was paused or changed ${LEASE_ATTEMPTS} times while ${what} started; try again`, { status: current?.status?.phase ?? 'terminated' });
        }
      }
    },

    /** `operation` on the agent's ready sandbox, its lease held while it runs. */
    async briefly<T>(principal: Principal, id: string, what: string, operation: (ready: ReadyAgent) => Promise<T>): Promise<T> {
      const ready = await this.ready(principal, id, what);
      try {
        return await operation(ready);
      } catch (error) {
        throw await callError(ready.agent, id, what, error);
      } finally {
        ready.release();
      }
    },

    async exec(principal: Principal, id: string, request: ExecInput): Promise<ExecResult> {
      return this.briefly(principal, id, 'exec', async ({ sandbox, provider }) => {
        const options = execOptions(provider, request);
        const timeoutMs = request.timeout === undefined ? deps.execTimeoutMs : Math.min(request.timeout * 1000, deps.execTimeoutMs);
        const timer = execDuration.startTimer({ provider: provider.name, language: request.language });
        try {
          const result = await provider.exec(sandbox, { language: request.language, code: request.code, ...options, timeoutMs });
          timer({ result: 'ok' });
          return result;
        } catch (error) {
          timer({ result: (error as Error).name });
          throw error;
        }
      });
    },

    /**
     * The exec with its output given to `onOutput` as it comes. Its limit is `timeout` when given,
     * else the agent's remaining lifetime (no 120 s cap); `signal` (the client went away) kills it.
     */
    async execStream(
      principal: Principal,
      id: string,
      request: ExecInput,
      stream: { onOutput: (stream: 'stdout' | 'stderr', chunk: Buffer) => void; signal: AbortSignal; onStart: () => void },
    ): Promise<ExecResult> {
      const { agent, sandbox, provider, release } = await this.ready(principal, id, 'a streamed exec');
      streamsOpen.inc({ provider: provider.name });
      try {
        if (!provider.execStream) throw notImplemented('stream', provider.name, 'streamed exec');
        const options = execOptions(provider, request);
        const timeoutMs = Math.min(request.timeout === undefined ? Infinity : request.timeout * 1000, remainingMs(agent));
        stream.onStart();
        return await provider.execStream(sandbox, { language: request.language, code: request.code, ...options, timeoutMs, onOutput: stream.onOutput, signal: stream.signal });
      } finally {
        release();
        streamsOpen.dec({ provider: provider.name });
      }
    },

    /** A program on a terminal in the sandbox, until it exits, `close` or the agent's end. */
    async openTerminal(
      principal: Principal,
      id: string,
      request: { argv: string[]; env?: Record<string, string> | undefined; cwd?: string | undefined; rows: number; cols: number; onOutput: (chunk: Buffer) => void },
    ): Promise<TerminalHandle> {
      const { agent, sandbox, provider, release } = await this.ready(principal, id, 'a terminal');
      let handle: TerminalHandle;
      try {
        if (!provider.openTerminal) throw notImplemented('pty', provider.name, 'terminals');
        handle = await provider.openTerminal(sandbox, {
          argv: request.argv,
          ...(request.env ? { env: request.env } : {}),
          ...(request.cwd ? { cwd: request.cwd } : {}),
          rows: request.rows,
          cols: request.cols,
          timeoutMs: remainingMs(agent),
          onOutput: request.onOutput,
        });
      } catch (error) {
        release();
        throw error;
      }
      terminalsOpen.inc({ provider: provider.name });
      void handle.done
        .finally(() => {
          release();
          terminalsOpen.dec({ provider: provider.name });
        })
        .catch(() => undefined);
      return handle;
    },

    /** `keepStdin`: the process's stdin stays open for writeBackgroundInput (ADR 50). */
    async startBackground(principal: Principal, id: string, request: ExecInput, { keepStdin = false } = {}): Promise<BackgroundProcess> {
      return this.briefly(principal, id, 'a background exec', async ({ sandbox, provider }) => {
        if (!provider.startBackground) throw notImplemented('background', provider.name, 'background processes');
        if (keepStdin && !provider.writeBackgroundInput) throw notImplemented('stdin', provider.name, 'input for background processes');
        const options = execOptions(provider, request);
        const timer = backgroundStarted.startTimer({ provider: provider.name });
        try {
          const process = await provider.startBackground(sandbox, {
            language: request.language,
            code: request.code,
            ...options,
            ...(request.timeout !== undefined ? { timeoutMs: request.timeout * 1000 } : {}),
            ...(keepStdin ? { keepStdin } : {}),
          });
          timer({ result: 'ok' });
          return process;
        } catch (error) {
          timer({ result: (error as Error).name });
          throw error;
        }
      });
    },

    async listBackground(principal: Principal, id: string): Promise<BackgroundProcess[]> {
      return this.briefly(principal, id, 'listing processes', async ({ sandbox, provider }) => {
        if (!provider.listBackground) throw notImplemented('background', provider.name, 'background processes');
        return provider.listBackground(sandbox);
      });
    },

    async signalBackground(principal: Principal, id: string, pid: number, signal: ProcessSignal): Promise<BackgroundProcess> {
      return this.briefly(principal, id, 'signalling a process', async ({ sandbox, provider }) => {
        if (!provider.signalBackground) throw notImplemented('background', provider.name, 'background processes');
        return provider.signalBackground(sandbox, pid, signal);
      });
    },

    async waitBackground(principal: Principal, id: string, pid: number, timeoutMs: number): Promise<BackgroundProcess> {
      return this.briefly(principal, id, 'waiting on a process', async ({ sandbox, provider }) => {
        if (!provider.waitBackground) throw notImplemented('background', provider.name, 'background processes');
        return provider.waitBackground(sandbox, pid, timeoutMs);
      });
    },

    async backgroundOutput(principal: Principal, id: string, pid: number): Promise<BackgroundOutput> {
      return this.briefly(principal, id, 'reading process output', async ({ sandbox, provider }) => {
        if (!provider.backgroundOutput) throw notImplemented('background', provider.name, 'background processes');
        return provider.backgroundOutput(sandbox, pid);
      });
    },

    /** Input for a background process started with `keepStdin`. */
    async writeBackgroundInput(principal: Principal, id: string, pid: number, data: Buffer): Promise<void> {
      return this.briefly(principal, id, 'writing to a process', async ({ sandbox, provider }) => {
        if (!provider.writeBackgroundInput) throw notImplemented('stdin', provider.name, 'input for background processes');
        return provider.writeBackgroundInput(sandbox, pid, data);
      });
    },

    async closeBackgroundInput(principal: Principal, id: string, pid: number): Promise<void> {
      return this.briefly(principal, id, 'closing the input of a process', async ({ sandbox, provider }) => {
        if (!provider.closeBackgroundInput) throw notImplemented('stdin', provider.name, 'input for background processes');
        return provider.closeBackgroundInput(sandbox, pid);
      });
    },

    /** Agents of every session of the caller's organization and mode, newest first, filtered. */
    async list(principal: Principal, filters: AgentFilters, page: PageRequest) {
      const labels: Record<string, string> = { ...scopeLabels(principal) };
      if (filters.sessionId !== undefined) labels[Labels.session] = (await sessions.find(principal, filters.sessionId)).metadata.name;
      if (filters.status === undefined) return listPage(store, deps.cursors, 'Agent', labels, page, agentView);
      // A status is not a label: read batches until a page is full, the cursor naming the last one shown.
      const wanted = new Set(filters.status);
      const listKey = JSON.stringify(['Agent', Object.entries(labels).sort(), [...wanted].sort()]);
      let after = page.cursor === undefined ? undefined : deps.cursors.decode(listKey, page.cursor);
      const data: AgentView[] = [];
      for (;;) {
        const { items, hasMore } = await store.list('Agent', { labels, limit: FILTER_BATCH, order: 'desc', ...(after !== undefined ? { after } : {}) });
        for (const item of items) {
          const view = agentView(item);
          if (!wanted.has(view.status)) continue;
          if (data.length === page.limit) {
            // One more matches: there is a next page, which starts after the last one shown.
            return { data, hasMore: true, cursor: deps.cursors.encode(listKey, idToObjectName(data.at(-1)!.id)) };
          }
          data.push(view);
        }
        if (!hasMore || items.length === 0) return { data, hasMore: false };
        after = items.at(-1)!.metadata.name;
      }
    },

    /**
     * Replaces the agent's timeout, measured from when its sandbox started, as at creation (capped
     * at 24h). Only a longer one: a shorter one could end the agent at once. The controller moves
     * `expiresAt`. Kubernetes cannot raise a running pod's deadline: 501 there.
     */
    /**
     * PATCH /v1/agents/:id: a longer `timeout`, a new `egress` policy, or both, checked together
     * and written in one spec update (nothing when either is refused).
     */
    async update(principal: Principal, id: string, changes: { timeout?: string | undefined; egress?: Egress | undefined }): Promise<AgentView> {
      const agent = await find(principal, id);
      const phase = agent.status?.phase ?? 'booting';
      if (agent.spec.desiredState === 'terminated' || phase === 'terminated' || phase === 'failed') {
        const what = changes.timeout === undefined ? 'its egress policy' : 'its timeout';
        throw new ApiError('conflict', `agent ${id} is ${phase === 'failed' ? 'failed' : 'terminated'}; ${what} cannot change`, { status: phase });
      }
      const providerName = agent.status?.provider ?? agent.spec.provider;
      let seconds: number | undefined;
      if (changes.timeout !== undefined) {
        if (principal.mode === 'live' && providerName === 'kubernetes') {
          throw new ApiError('not_implemented', 'timeout: a Kubernetes pod\'s deadline (activeDeadlineSeconds) cannot be raised once it runs; create the agent with the timeout it needs', {
            field: 'timeout',
            provider: providerName,
          });
        }
        seconds = Math.min(parseDuration(changes.timeout)!, MAX_TIMEOUT_SECONDS);
        if (seconds < agent.spec.timeoutSeconds) {
          throw new ApiError('unprocessable_entity', `timeout: ${formatDuration(seconds)} is shorter than the agent's timeout of ${agent.spec.timeout}; only a longer one is taken`, {
            fields: { timeout: [`must be at least ${agent.spec.timeout}`] },
          });
        }
      }
      const { egress } = changes;
      if (egress !== undefined) {
        const provider = providers.get(providerName);
        if (!provider?.capabilities.egress) {
          throw new ApiError('not_implemented', `egress: provider "${providerName}" does not enforce egress policies yet (its sandboxes' network is set by the install)`, {
            fields: { egress: ['not implemented by this provider'] },
            provider: providerName,
          });
        }
        await assertCredentialSecretsExist(deps.pool, { organizationId: principal.organizationId, mode: principal.mode, sessionId: agent.spec.sessionId }, egress);
      }
      const updated = await store.updateSpec('Agent', agent.metadata.name, (current) => ({
        ...current.spec,
        ...(seconds === undefined ? {} : { timeout: formatDuration(seconds), timeoutSeconds: seconds }),
        ...(egress === undefined ? {} : { egress }),
      }));
      return agentView(updated);
    },

    /** Ends every agent of the session that is not ended yet; the session stays, with its usage. Answers the ids ended. */
    async endSession(principal: Principal, sessionId: string): Promise<string[]> {
      const session = await sessions.find(principal, sessionId);
      const ended: string[] = [];
      let after: string | undefined;
      for (;;) {
        const { items, hasMore } = await store.list('Agent', { labels: { [Labels.session]: session.metadata.name }, limit: FILTER_BATCH, order: 'asc', ...(after !== undefined ? { after } : {}) });
        for (const agent of items) {
          if (agent.spec.desiredState === 'terminated' || agent.status?.phase === 'terminated' || agent.status?.phase === 'failed') continue;
          await store.updateSpec('Agent', agent.metadata.name, (current) =>
            current.spec.desiredState === 'terminated' ? undefined : { ...current.spec, desiredState: 'terminated' },
          );
          ended.push(objectNameToId(agent.metadata.name));
        }
        if (!hasMore || items.length === 0) return ended;
        after = items.at(-1)!.metadata.name;
      }
    },

    /**
     * Pauses a running or idle agent: a run's tool call in flight finishes, then the sandbox is
     * checkpointed into a snapshot and its compute released. Answers once the agent is paused
     * (or after `waitMs`, with the agent as it is then).
     */
    async pause(principal: Principal, id: string, waitMs: number, reason: 'requested' | 'fork' = 'requested'): Promise<AgentView> {
      const agent = await find(principal, id);
      await store.updateSpec('Agent', agent.metadata.name, (current) => {
        const phase = current.status?.phase ?? 'booting';
        if (current.spec.desiredState !== 'active' || (phase !== 'idle' && phase !== 'running')) {
          throw new ApiError('conflict', `agent ${id} is ${current.spec.desiredState === 'paused' ? 'pausing' : phase}; only an idle or running agent can be paused`, {
            status: phase,
          });
        }
        return { ...current.spec, desiredState: 'paused', pauseReason: reason };
      });
      const paused = await waitForAgent(store, agent.metadata.name, waitMs, (current) => {
        const phase = current?.status?.phase;
        return phase === undefined || phase === 'paused' || phase === 'failed' || phase === 'terminated';
      });
      return agentView(paused ?? agent);
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
      const resumed = await waitForAgent(store, agent.metadata.name, waitMs, (current) => {
        const now = current?.status?.phase;
        return now === undefined || now === 'idle' || now === 'running' || now === 'failed' || now === 'terminated';
      });
      return agentView(resumed ?? agent);
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

import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, objectNameToId, type Principal, type ProviderCapabilities } from '@berth/common';
import { formatDuration, parseDuration } from '@berth/crds';
import { z } from 'zod';
import { createAgentBody } from '../routes/schemas.js';
import type { AgentService, AgentView } from '../services/agents.js';
import type { SessionService } from '../services/sessions.js';
import { CODE_INTERPRETER_TEMPLATE, CodeInterpreterStartError, type CodeInterpreterStarter } from './code-interpreter.js';
import type { EnvdTokens } from './tokens.js';

/**
 * E2B's control plane (spec/openapi.yml of e2b-dev/E2B, Apache-2.0) over Berth's agents (ADR 44).
 * A sandbox is an agent: its `sandboxID` is the agent id without `agt_` (so that it fits in a
 * host name), its template a compute type, its session the end-user's named by the metadata key
 * `berth-user`, else one session per API key. Errors are E2B's shape, `{code, message}`.
 */

/** The envd version whose process service (and /health) this surface serves. */
export const ENVD_VERSION = '0.5.2';
/** The metadata key naming the end-user whose session a sandbox goes in. */
export const USER_METADATA_KEY = 'berth-user';
/** Where a sandbox's E2B template is kept in its agent's metadata. */
export const TEMPLATE_METADATA_KEY = 'e2b-template';
/** E2B's default sandbox lifetime when `timeout` is left out (seconds). */
const DEFAULT_TIMEOUT_SECONDS = 15;

/**
 * Templates and the compute type each runs on; `base` is E2B's default template, and the code
 * interpreter's (`@e2b/code-interpreter`) is python with its server started (code-interpreter.ts).
 */
export const TEMPLATES: Record<string, 'python' | 'node' | 'go'> = { base: 'python', python: 'python', node: 'node', go: 'go', [CODE_INTERPRETER_TEMPLATE]: 'python' };

export class E2bError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

const metadataSchema = z.record(z.string().min(1).max(256), z.string().max(4096)).refine((value) => Object.keys(value).length <= 50, 'at most 50 pairs');

/** Fields of E2B's NewSandbox that Berth does not offer: given with a value other than "not asked", the create is refused (400) rather than ignored. */
const newSandboxSchema = z
  .object({
    templateID: z.string().min(1).max(128),
    timeout: z.number().int().min(1).max(24 * 3600).optional(),
    metadata: metadataSchema.optional(),
    envVars: z.record(z.string(), z.string()).optional(),
    secure: z.boolean().optional(),
    allow_internet_access: z.boolean().optional(),
    autoPause: z.boolean().optional(),
    autoPauseMemory: z.boolean().optional(),
    autoResume: z.object({ enabled: z.boolean() }).passthrough().optional(),
    mcp: z.unknown().optional(),
    network: z.record(z.string(), z.unknown()).optional(),
    iam: z.record(z.string(), z.unknown()).optional(),
    volumeMounts: z.array(z.unknown()).optional(),
  })
  .strict();

function refuseUnoffered(body: z.infer<typeof newSandboxSchema>): void {
  const refuse = (field: string, why: string) => {
    throw new E2bError(400, `${field}: ${why}`);
  };
  if (body.envVars && Object.keys(body.envVars).length > 0) refuse('envVars', 'sandbox-wide environment variables are not offered: give envs to each command, or store them as Berth secrets');
  if (body.secure === false) refuse('secure', 'every sandbox here needs its envd access token');
  if (body.autoPause === true) refuse('autoPause', 'pausing at the timeout is not offered: the sandbox ends at its timeout');
  if (body.autoPauseMemory !== undefined) refuse('autoPauseMemory', 'only with autoPause, which is not offered');
  if (body.autoResume?.enabled === true) refuse('autoResume', 'resuming on traffic is not offered: resume with connect');
  if (body.mcp !== undefined && body.mcp !== null) refuse('mcp', 'the MCP gateway is not offered');
  if (body.network && Object.values(body.network).some((value) => value !== undefined && value !== null)) refuse('network', 'network rules are not offered: sandboxes have no network here');
  if (body.iam && Object.keys(body.iam).length > 0) refuse('iam', 'workload identity is not offered');
  if (body.volumeMounts && body.volumeMounts.length > 0) refuse('volumeMounts', 'volumes are not offered');
}

const timeoutBody = z.object({ timeout: z.number().int().min(0).max(24 * 3600) }).strict();
const connectBody = z.object({ timeout: z.number().int().min(0).max(24 * 3600).optional(), memory: z.boolean().optional() }).strict();
const resumeBody = z.object({ timeout: z.number().int().min(0).max(24 * 3600).optional(), autoPause: z.boolean().optional() }).strict();
const pauseBody = z.object({ memory: z.boolean().optional() }).strict();

const listQuery = z
  .object({
    metadata: z.string().max(4096).optional(),
    state: z.string().max(64).optional(),
    limit: z.coerce.number().int().min(1).max(100).default(100),
    nextToken: z.string().max(1024).optional(),
    order: z.enum(['desc']).optional(),
    startedAfter: z.string().datetime({ offset: true }).optional(),
    template: z.string().max(128).optional(),
  })
  .strict();

function parse<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    throw new E2bError(400, `${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  return result.data;
}

export function sandboxIdOf(agentId: string): string {
  return agentId.replace(/^agt_/, '');
}

export function agentIdOf(sandboxId: string): string {
  if (!/^[0-9a-z]{1,64}$/.test(sandboxId)) throw new E2bError(404, `sandbox "${sandboxId}" not found`);
  return `agt_${sandboxId}`;
}

type State = 'running' | 'paused';
function stateOf(view: AgentView): State | undefined {
  if (view.status === 'paused') return 'paused';
  if (view.status === 'booting' || view.status === 'idle' || view.status === 'running') return view.pauseReason ? 'paused' : 'running';
  return undefined;
}

function userMetadata(view: AgentView): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(view.metadata ?? {})) if (key !== TEMPLATE_METADATA_KEY && typeof value === 'string') out[key] = value;
  return out;
}

/**
 * When the sandbox ends: its start plus its timeout, from the agent's spec (the controller moves
 * `expiresAt` to the same a moment after a timeout changes; an answer right after setTimeout shows it already).
 */
function endOf(view: AgentView): string {
  const started = view.startedAt ?? view.createdAt;
  const seconds = parseDuration(view.timeout);
  return seconds === undefined ? (view.expiresAt ?? started) : new Date(Date.parse(started) + seconds * 1000).toISOString();
}

export interface ControlPlaneDeps {
  agents: AgentService;
  sessions: SessionService;
  tokens: EnvdTokens;
  /** Each agent's provider's capabilities (its sandboxes' size). */
  capabilities: (view: AgentView) => ProviderCapabilities | undefined;
  /** The domain the SDK builds sandbox host names from; null leaves it to the SDK's E2B_DOMAIN. */
  domain: string | null;
  /** Starts the code interpreter's server in a sandbox of its template, once the sandbox is ready. */
  startCodeInterpreter: CodeInterpreterStarter;
  /** Called when a sandbox is killed, to forget its processes. */
  onKilled: (agentId: string) => void;
  /**
   * The install's egress allow-list for agents given none (BERTH_EGRESS_ALLOW, ADR 46), where the
   * default provider enforces it; undefined: sandboxes get no network.
   */
  defaultEgress?: { hosts: string[]; cidrs: string[] } | undefined;
}

/** How long create and connect wait for a sandbox to be ready, and kill for it to be gone. */
const WAIT_MS = 120_000;

export function createControlPlane(deps: ControlPlaneDeps) {
  const { agents, sessions } = deps;

  async function find(principal: Principal, sandboxId: string): Promise<AgentView> {
    try {
      const view = await agents.get(principal, agentIdOf(sandboxId));
      if (!stateOf(view)) throw new E2bError(404, `sandbox "${sandboxId}" not found`);
      return view;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) throw new E2bError(404, `sandbox "${sandboxId}" not found`);
      throw error;
    }
  }

  function listed(view: AgentView) {
    const size = deps.capabilities(view)?.sandboxSize;
    return {
      sandboxID: sandboxIdOf(view.id),
      templateID: typeof view.metadata?.[TEMPLATE_METADATA_KEY] === 'string' ? view.metadata[TEMPLATE_METADATA_KEY] : view.compute,
      clientID: view.sessionId,
      startedAt: view.startedAt ?? view.createdAt,
      endAt: endOf(view),
      state: stateOf(view)!,
      metadata: userMetadata(view),
      envdVersion: ENVD_VERSION,
      ...(size ? { cpuCount: size.cpus, memoryMB: Math.floor(size.memoryBytes / 2 ** 20), diskSizeMB: Math.floor(size.diskBytes / 2 ** 20) } : {}),
    };
  }

  function connected(principal: Principal, view: AgentView) {
    return {
      sandboxID: sandboxIdOf(view.id),
      templateID: listed(view).templateID,
      clientID: view.sessionId,
      envdVersion: ENVD_VERSION,
      envdAccessToken: deps.tokens.issue(principal, sandboxIdOf(view.id)),
      // Ports are never public here: a request to one shows this token (E2B's e2b-traffic-access-token).
      trafficAccessToken: deps.tokens.issue(principal, sandboxIdOf(view.id)),
      domain: deps.domain,
    };
  }

  /** A sandbox's timeout counts from now, as E2B's does; Berth's from the sandbox's start, and only grows. */
  async function setTimeoutFromNow(principal: Principal, view: AgentView, seconds: number, allowShorter: boolean): Promise<void> {
    const started = Date.parse(view.startedAt ?? view.createdAt);
    const wanted = Math.ceil((Date.now() - started) / 1000) + seconds;
    const expires = Date.parse(endOf(view));
    if (started + wanted * 1000 <= expires) {
      if (allowShorter) return;
      throw new E2bError(400, `timeout: the sandbox already runs until ${endOf(view)}; a timeout is only ever lengthened here`);
    }
    await agents.update(principal, view.id, { timeout: formatDuration(wanted) });
  }

  async function ready(principal: Principal, view: AgentView): Promise<AgentView> {
    const agent = await agents.whenBooted(await agents.find(principal, view.id));
    return started(await agents.get(principal, objectNameToId(agent.metadata.name)));
  }

  /** The agent, if its sandbox has started; else E2B's 500 saying why. */
  function started(view: AgentView): AgentView {
    if (view.status !== 'idle' && view.status !== 'running') {
      throw new E2bError(500, `sandbox ${sandboxIdOf(view.id)} did not start: ${view.error?.message ?? view.status}`);
    }
    return view;
  }

  return {
    async create(principal: Principal, body: unknown) {
      const request = parse(newSandboxSchema, body);
      refuseUnoffered(request);
      const defaultEgress = deps.defaultEgress && deps.defaultEgress.hosts.length + deps.defaultEgress.cidrs.length > 0 ? deps.defaultEgress : undefined;
      // allowInternetAccess (ADR 44, ADR 46): true is the network this install gives sandboxes
      // (its default egress allow-list), refused where it gives none; false is no network at all,
      // even where a default would apply; absent, the install's default as for any agent.
      if (request.allow_internet_access === true && !defaultEgress) {
        throw new E2bError(
          400,
          'allow_internet_access: this install gives sandboxes no network (BERTH_EGRESS_ALLOW is not set): pass allowInternetAccess: false, or give the agent an egress policy with PATCH /v1/agents/{id}',
        );
      }
      const noNetwork = request.allow_internet_access === false && defaultEgress !== undefined;
      const compute = TEMPLATES[request.templateID];
      if (!compute) throw new E2bError(404, `template "${request.templateID}" not found: this install has ${Object.keys(TEMPLATES).join(', ')}`);
      const metadata = request.metadata ?? {};
      const userId = metadata[USER_METADATA_KEY] ?? `e2b-key-${principal.keyId}`;
      const { session } = await sessions.getOrCreateForUser(principal, userId, {});
      const input = createAgentBody.parse({
        compute,
        timeout: formatDuration(request.timeout ?? DEFAULT_TIMEOUT_SECONDS),
        metadata: { ...metadata, [TEMPLATE_METADATA_KEY]: request.templateID },
        ...(noNetwork ? { egress: { hosts: [], cidrs: [], credentials: [] } } : {}),
      });
      // Created and waited for in one: the wait watches from before the write (no read after it).
      const view = await agents.create(principal, session.id, input, { statuses: ['idle', 'running'], timeoutMs: agents.bootWaitMs });
      try {
        const running = started(view);
        if (request.templateID === CODE_INTERPRETER_TEMPLATE) {
          await deps.startCodeInterpreter(principal, view.id).catch((error: unknown) => {
            throw error instanceof CodeInterpreterStartError ? new E2bError(500, `sandbox ${sandboxIdOf(view.id)}: ${error.message}`) : error;
          });
        }
        return { status: 201, body: connected(principal, running) };
      } catch (error) {
        // The SDK gets no sandbox id from a failed create: nothing would end one still booting.
        await agents.terminate(principal, view.id, 0).catch(() => undefined);
        throw error;
      }
    },

    async get(principal: Principal, sandboxId: string) {
      const view = await find(principal, sandboxId);
      return { status: 200, body: { ...listed(view), ...connected(principal, view) } };
    },

    /** GET /sandboxes (running ones, E2B's first list) and GET /v2/sandboxes (paginated, filtered). */
    async list(principal: Principal, query: unknown, version: 1 | 2) {
      const q = parse(listQuery, query);
      const states = (q.state ?? (version === 1 ? 'running' : 'running,paused')).split(',').map((state) => state.trim());
      for (const state of states) if (state !== 'running' && state !== 'paused') throw new E2bError(400, `state: "${state}" is not running or paused`);
      const metadata = q.metadata ? Object.fromEntries(new URLSearchParams(q.metadata)) : {};
      const phases = states.flatMap((state) => (state === 'running' ? ['booting', 'idle', 'running'] : ['paused']));
      let page;
      try {
        page = await agents.list(principal, { status: phases }, { limit: q.limit, ...(q.nextToken ? { cursor: q.nextToken } : {}) });
      } catch (error) {
        if (error instanceof ApiError && error.status === 422) throw new E2bError(400, 'nextToken: not a token of this list');
        throw error;
      }
      const startedAfter = q.startedAfter ? Date.parse(q.startedAfter) : undefined;
      const data = page.data
        .filter((view) => stateOf(view) && states.includes(stateOf(view)!))
        .map(listed)
        .filter((sandbox) => Object.entries(metadata).every(([key, value]) => sandbox.metadata[key] === value))
        .filter((sandbox) => q.template === undefined || sandbox.templateID === q.template)
        .filter((sandbox) => startedAfter === undefined || Date.parse(sandbox.startedAt) > startedAfter);
      const headers: Record<string, string> = page.hasMore && page.cursor ? { 'x-next-token': page.cursor } : {};
      return { status: 200, body: data, headers };
    },

    async kill(principal: Principal, sandboxId: string) {
      const view = await find(principal, sandboxId);
      await agents.terminate(principal, view.id, WAIT_MS);
      deps.onKilled(view.id);
      return { status: 204 };
    },

    async setTimeout(principal: Principal, sandboxId: string, body: unknown) {
      const { timeout } = parse(timeoutBody, body);
      await setTimeoutFromNow(principal, await find(principal, sandboxId), timeout, false);
      return { status: 204 };
    },

    async pause(principal: Principal, sandboxId: string, body: unknown) {
      const { memory } = parse(pauseBody, body ?? {});
      if (memory === false) throw new E2bError(400, 'memory: a pause here keeps the memory (a native checkpoint); a filesystem-only pause is not offered');
      const view = await find(principal, sandboxId);
      if (stateOf(view) === 'paused') throw new E2bError(409, `sandbox ${sandboxId} is already paused`);
      const paused = await agents.pause(principal, view.id, WAIT_MS);
      if (paused.status !== 'paused') throw new E2bError(500, `sandbox ${sandboxId} did not pause: it is ${paused.status}`);
      return { status: 204 };
    },

    /** connect (200: running, 201: resumed) and the older resume (201; 409 when running). */
    async connect(principal: Principal, sandboxId: string, body: unknown, form: 'connect' | 'resume') {
      const request = form === 'connect' ? parse(connectBody, body ?? {}) : parse(resumeBody, body ?? {});
      if ('memory' in request && request.memory === false) throw new E2bError(400, 'memory: resuming without the memory (a reboot) is not offered');
      if ('autoPause' in request && request.autoPause === true) throw new E2bError(400, 'autoPause: pausing at the timeout is not offered');
      let view = await find(principal, sandboxId);
      let status = 200;
      if (stateOf(view) === 'paused') {
        view = await agents.resume(principal, view.id, WAIT_MS, async () => 'native');
        view = await ready(principal, view);
        status = 201;
      } else if (form === 'resume') {
        throw new E2bError(409, `sandbox ${sandboxId} is already running`);
      } else {
        view = await ready(principal, view);
      }
      if (request.timeout !== undefined) await setTimeoutFromNow(principal, view, request.timeout, true);
      return { status, body: connected(principal, view) };
    },
  };
}

export type ControlPlane = ReturnType<typeof createControlPlane>;

export async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 1024 * 1024) throw new E2bError(413, 'the body is larger than 1 MiB');
    chunks.push(chunk);
  }
  if (size === 0) return undefined;
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new E2bError(400, 'the body is not JSON');
  }
}

export function sendE2b(res: ServerResponse, status: number, body?: unknown, headers: Record<string, string> = {}): void {
  if (body === undefined) {
    res.writeHead(status, headers);
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

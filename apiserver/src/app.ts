import { createCodeInterpreterStarter } from './e2b/code-interpreter.js';
import { createControlPlane } from './e2b/control-plane.js';
import { createFilesystemService } from './e2b/filesystem.js';
import { createSandboxPorts } from './e2b/ports.js';
import { createProcessService } from './e2b/process.js';
import { createE2bSurface } from './e2b/surface.js';
import { EnvdTokens } from './e2b/tokens.js';
import { randomBytes } from 'node:crypto';
import { DEFAULT_CHANNEL_LIMITS, SecretBox, createLimitGuard, type Clock, type PlanSettings, type Logger, type Pool, type ResourceStore, type UrlPolicy, type Embedder } from '@berth/common';
import { createAgentFactory, createRunStarter, type ModelRouter } from '@berth/operator';
import type { ProviderRegistry } from '@berth/providers';
import express, { type Express } from 'express';
import type { Registry } from 'prom-client';
import { authenticate } from './http/auth.js';
import { createRateLimiter } from './http/rate-limit.js';
import { errorHandler, notFoundHandler } from './http/errors.js';
import { observeRequests } from './http/observe.js';
import { openapiDocument } from './http/openapi.js';
import { RouteTable } from './http/route.js';
import { HEARTBEAT_MS } from './http/sse.js';
import { agentDefinitionRoutes } from './routes/agent-definitions.js';
import { execRoutes } from './routes/exec.js';
import { fileRoutes } from './routes/files.js';
import { portRoutes } from './routes/ports.js';
import { createFileService } from './services/files.js';
import { createPortService } from './services/ports.js';
import { createPortProxy } from './http/port-proxy.js';
import { TerminalTokens, terminalUpgrade } from './http/terminal.js';
import type { UpgradeListener } from './http/server.js';
import { agentRoutes } from './routes/agents.js';
import { runRoutes } from './routes/runs.js';
import { scheduleRoutes } from './routes/schedules.js';
import { snapshotRoutes } from './routes/snapshots.js';
import { sessionRoutes } from './routes/sessions.js';
import { systemRoutes } from './routes/system.js';
import { usageRoutes } from './routes/usage.js';
import { usageViewRoutes } from './routes/usage-views.js';
import { webhookRoutes } from './routes/webhooks.js';
import { secretRoutes } from './routes/secrets.js';
import { knowledgeRoutes } from './routes/knowledge.js';
import { mcpServerRoutes } from './routes/mcp-servers.js';
import { agentResourceManagementRoutes } from './routes/agent-resources-management.js';
import { providerRoutes } from './routes/providers.js';
import { triggerRoutes } from './routes/triggers.js';
import { jobRoutes } from './routes/jobs.js';
import { widgetRoutes } from './routes/widget.js';
import { dashboardRoutes } from './routes/dashboard.js';
import { channelRoutes } from './routes/channels.js';
import { MAX_PUBLIC_BODY_BYTES, channelPublicRoutes, type ChannelSettings } from './routes/channel-public.js';
import { channelWebhookRoutes } from './routes/channel-webhooks.js';
import { channelCors } from './http/channel-cors.js';
import { createChannelService } from './services/channels.js';
import { createConversationService } from './services/conversations.js';
import { createChannelLimiter } from './services/channel-limits.js';
import { ChannelHub } from './services/channel-hub.js';
import { fleetRoutes } from './routes/fleets.js';
import { warmPoolRoutes } from './routes/warm-pools.js';
import { forkRoutes } from './routes/forks.js';
import { createForkService } from './services/forks.js';
import { createWarmPoolService } from './services/warm-pools.js';
import { createFleetService } from './services/fleets.js';
import { createTriggerService } from './services/triggers.js';
import { createJobService } from './services/jobs.js';
import { createSecretService } from './services/secrets.js';
import { createKnowledgeService } from './services/knowledge.js';
import { createMcpServerService } from './services/mcp-servers.js';
import { createProviderService } from './services/providers.js';
import { createWebhookService } from './services/webhooks.js';
import { createAgentDefinitionService } from './services/agent-definitions.js';
import { createAgentService } from './services/agents.js';
import { createRunService } from './services/runs.js';
import { createScheduleService } from './services/schedules.js';
import { createSnapshotService } from './services/snapshots.js';
import { StreamHub } from './services/stream-hub.js';
import { WorkflowStreamHub } from './services/workflow-stream-hub.js';
import { createWorkflowService } from './services/workflows.js';
import { workflowRoutes } from './routes/workflows.js';
import { createSessionService } from './services/sessions.js';
import { createUsageService } from './services/usage.js';
import { CursorCodec } from './services/pagination.js';
import { CookieSigner } from './management/cookies.js';
import { authenticateUser, requirePermission } from './management/guard.js';
import { OidcClient, type OidcSettings } from './management/oidc.js';
import { createSignInService, type SignupPolicy } from './management/sign-in.js';
import { signInRoutes } from './routes/sign-in.js';
import { teamRoutes } from './routes/team.js';
import { approvalRoutes } from './routes/approvals.js';
import { createApprovalService } from './services/approvals.js';
import { createTeamService } from './services/team.js';
import { managementDocumentRoute } from './routes/management-document.js';
import { apiKeyRoutes } from './routes/api-keys.js';
import { organizationSettingsRoutes } from './routes/organization-settings.js';
import { dataPlaneViewRoutes } from './routes/data-plane-views.js';
import { eventLogRoutes } from './routes/event-log.js';
import { createEventLogService } from './services/event-log.js';
import { createApiKeyService } from './services/api-keys.js';
import { createOrganizationSettingsService } from './services/organization-settings.js';
import type { RequestHandler } from 'express';

export const API_VERSION = '0.1.0';

export interface AppDeps {
  pool: Pool;
  store: ResourceStore;
  providers: ProviderRegistry;
  clock: Clock;
  log: Logger;
  metrics: Registry;
  models: ModelRouter;
  /** For the stream hub's own LISTEN connection. */
  connectionString: string;
  execTimeoutMs: number;
  /** Most warm-pool sandboxes an organization may keep started (per key mode); default 20. */
  warmSandboxesMax?: number;
  defaultModel: string;
  /** The egress allow-list of agents created without one (BERTH_EGRESS_ALLOW). */
  defaultEgress?: { hosts: string[]; cidrs: string[] };
  currency: string;
  /** Interval of heartbeats on open streams (default 15 s). */
  streamHeartbeatMs?: number;
  publicUrl?: string;
  /** Encrypts secrets at rest; tests that store none may leave it out (a throwaway key). */
  secretBox?: SecretBox;
  /** Other APIs this process serves beside /v1, with their own authentication (the remote provider protocol). */
  mounts?: { path: string; router: express.Router }[];
  /** Which BYOI endpoint and model base URLs are accepted (default: https only, no private addresses). */
  byoiPolicy?: UrlPolicy;
  /** Which webhook URLs are accepted (default: https only, no private addresses). */
  webhookPolicy?: UrlPolicy;
  /** Embeds knowledge chunks when the install configures an embeddings endpoint (BERTH_EMBEDDINGS). */
  embedder?: Embedder;
  /** Plans: the rate limit of `/v1` requests per API key by the organization's plan. */
  plans: PlanSettings;
  /** Whether `/v1` requests are counted and limited (default true); false only for the floor of the rate-limit bench. */
  limitRequests?: boolean;
  /** Limits and reply timeout of channels (defaults: the documented ones). */
  channels?: Partial<ChannelSettings>;
  /** The E2B-compatible surface's domain (api.<domain>, <port>-<sandboxId>.<domain>); without it, only /e2b and the E2b-Sandbox-Id header. */
  e2bDomain?: string;
  /** Whether the controllers this process relies on are running (for /readyz). */
  ready?: () => boolean;
  /** The management plane (`/api`): sign-in and who may create organizations. */
  management?: {
    /** The OpenID Connect provider people sign in with; without one, only one-time links (embedded mode). */
    oidc?: OidcSettings;
    signup?: SignupPolicy;
    /** Where the dashboard and `/api` are served; default: the origin of each request. */
    dashboardUrl?: string;
  };
}

export interface App {
  express: Express;
  routes: RouteTable;
  /** The cookie-authorized management routes (`/api`), documented at `/api/openapi.json`. */
  managementRoutes: RouteTable;
  /** Answers WebSocket upgrades (the terminal); pass it to `createApiServer`. */
  upgrade: UpgradeListener;
  /** Closes what the app holds open (the stream hub's connection). */
  close(): Promise<void>;
}

/** Builds the HTTP API without listening: `main` listens, tests listen on port 0. */
export function createApp(deps: AppDeps): App {
  const limits = createLimitGuard({ pool: deps.pool, store: deps.store, clock: deps.clock });
  const secretBox = deps.secretBox ?? new SecretBox(randomBytes(32));
  const cursors = new CursorCodec(secretBox.subkey('berth/cursors'));
  const sessions = createSessionService({ store: deps.store, pool: deps.pool, clock: deps.clock, cursors, currency: deps.currency });
  const secrets = createSecretService({ pool: deps.pool, box: secretBox, clock: deps.clock, sessions });
  const factory = createAgentFactory({
    store: deps.store,
    pool: deps.pool,
    providers: deps.providers,
    limits,
    models: deps.models,
    clock: deps.clock,
    defaultModel: deps.defaultModel,
    ...(deps.defaultEgress ? { defaultEgress: deps.defaultEgress } : {}),
    currency: deps.currency,
  });
  const runStarter = createRunStarter({ pool: deps.pool, store: deps.store, limits, models: deps.models, clock: deps.clock });
  const agents = createAgentService({
    store: deps.store,
    providers: deps.providers,
    sessions,
    factory,
    runs: runStarter,
    metrics: deps.metrics,
    execTimeoutMs: deps.execTimeoutMs,
    cursors,
    pool: deps.pool,
  });
  const runs = createRunService({ pool: deps.pool, agents, runs: runStarter, currency: deps.currency });
  const hub = new StreamHub(deps.pool, deps.connectionString, deps.log, deps.metrics);
  const workflowHub = new WorkflowStreamHub(deps.pool, deps.connectionString, deps.log, deps.metrics);

  const routes = new RouteTable();
  systemRoutes(routes, {
    pool: deps.pool,
    metrics: deps.metrics,
    openapi: (requestOrigin) => openapiDocument(routes, { version: API_VERSION, serverUrl: deps.publicUrl ?? requestOrigin }),
    ready: deps.ready ?? (() => true),
  });
  sessionRoutes(routes, sessions);
  const definitions = createAgentDefinitionService({ pool: deps.pool, clock: deps.clock, models: deps.models });
  agentDefinitionRoutes(routes, definitions);
  agentRoutes(routes, agents, { execTimeoutMs: deps.execTimeoutMs, definitions });
  const terminalTokens = new TerminalTokens(secretBox.subkey('berth/terminal-tokens'), deps.clock);
  execRoutes(routes, agents, { terminalTokens, heartbeatMs: deps.streamHeartbeatMs });
  const files = createFileService({ agents, metrics: deps.metrics });
  fileRoutes(routes, files, { heartbeatMs: deps.streamHeartbeatMs });
  const ports = createPortService({ db: deps.pool, agents, clock: deps.clock, key: secretBox.subkey('berth/port-tokens') });
  const portProxy = createPortProxy({ db: deps.pool, agents, ports, log: deps.log, metrics: deps.metrics, secureCookies: deps.publicUrl?.startsWith('https:') ?? false });
  portRoutes(routes, { ports, proxy: portProxy, publicUrl: (origin) => deps.publicUrl ?? origin });
  runRoutes(routes, { runs, agents, hub, heartbeatMs: deps.streamHeartbeatMs ?? HEARTBEAT_MS });
  const snapshots = createSnapshotService({ store: deps.store, providers: deps.providers, clock: deps.clock, limits });
  snapshotRoutes(routes, { snapshots, agents, providers: deps.providers });
  forkRoutes(routes, createForkService({ store: deps.store, agents, snapshots, providers: deps.providers }));
  scheduleRoutes(routes, createScheduleService({ store: deps.store, pool: deps.pool, clock: deps.clock }));
  const usage = createUsageService({ pool: deps.pool, clock: deps.clock, currency: deps.currency });
  usageRoutes(routes, usage);
  secretRoutes(routes, secrets);
  const knowledge = createKnowledgeService({
    pool: deps.pool,
    clock: deps.clock,
    sessions,
    cursors,
    metrics: deps.metrics,
    // URL sources are fetched under the rules of outbound webhooks.
    policy: deps.webhookPolicy ?? { allowHttp: false, allowPrivate: false },
    embedder: deps.embedder,
  });
  knowledgeRoutes(routes, knowledge);
  const mcpServers = createMcpServerService({ pool: deps.pool, clock: deps.clock, policy: deps.webhookPolicy ?? { allowHttp: false, allowPrivate: false } });
  mcpServerRoutes(routes, mcpServers);
  providerRoutes(
    routes,
    createProviderService({ pool: deps.pool, clock: deps.clock, models: deps.models, policy: deps.byoiPolicy ?? { allowHttp: false, allowPrivate: false } }),
  );
  webhookRoutes(
    routes,
    createWebhookService({
      pool: deps.pool,
      clock: deps.clock,
      policy: deps.webhookPolicy ?? { allowHttp: false, allowPrivate: false },
      currency: deps.currency,
    }),
  );
  triggerRoutes(routes, {
    triggers: createTriggerService({ pool: deps.pool, clock: deps.clock, box: secretBox, definitions, metrics: deps.metrics }),
    publicUrl: deps.publicUrl,
  });
  fleetRoutes(routes, {
    fleets: createFleetService({ store: deps.store, pool: deps.pool, clock: deps.clock, cursors, currency: deps.currency }),
    hub,
    heartbeatMs: deps.streamHeartbeatMs ?? HEARTBEAT_MS,
  });
  warmPoolRoutes(routes, createWarmPoolService({ store: deps.store, pool: deps.pool, providers: deps.providers, clock: deps.clock, maxSandboxes: deps.warmSandboxesMax ?? 20 }));
  jobRoutes(routes, createJobService({ pool: deps.pool, currency: deps.currency }));
  channelRoutes(routes, { channels: createChannelService({ pool: deps.pool, clock: deps.clock, box: secretBox }), publicUrl: deps.publicUrl });
  const channelHub = new ChannelHub(deps.pool, deps.connectionString, deps.log, deps.metrics);
  const channelSettings: ChannelSettings = {
    limits: DEFAULT_CHANNEL_LIMITS,
    replyTimeoutMs: 120_000,
    ...deps.channels,
  };
  const conversations = createConversationService({ pool: deps.pool, clock: deps.clock, hub: channelHub, log: deps.log, metrics: deps.metrics });
  channelPublicRoutes(routes, {
    pool: deps.pool,
    clock: deps.clock,
    log: deps.log,
    conversations,
    agentStreams: hub,
    limiter: createChannelLimiter({ pool: deps.pool, clock: deps.clock, limits: channelSettings.limits, metrics: deps.metrics }),
    settings: channelSettings,
    heartbeatMs: deps.streamHeartbeatMs ?? HEARTBEAT_MS,
  });
  channelWebhookRoutes(routes, {
    pool: deps.pool,
    clock: deps.clock,
    box: secretBox,
    metrics: deps.metrics,
    conversations,
    settings: channelSettings,
    publicUrl: deps.publicUrl,
  });
  workflowRoutes(routes, {
    workflows: createWorkflowService({ pool: deps.pool, clock: deps.clock, cursors, currency: deps.currency }),
    hub: workflowHub,
    heartbeatMs: deps.streamHeartbeatMs ?? HEARTBEAT_MS,
  });
  widgetRoutes(routes);
  dashboardRoutes(routes);

  // The management plane: a second table, authorized by the sign-in cookie and the caller's role.
  const managementRoutes = new RouteTable();
  const signer = new CookieSigner(secretBox.subkey('berth/sign-in-cookie'));
  const signIn = createSignInService({
    pool: deps.pool,
    clock: deps.clock,
    log: deps.log,
    metrics: deps.metrics,
    oidc: deps.management?.oidc ? new OidcClient(deps.management.oidc) : undefined,
    signup: deps.management?.signup ?? 'invite',
  });
  managementDocumentRoute(managementRoutes, (requestOrigin) =>
    openapiDocument(managementRoutes, { version: API_VERSION, serverUrl: deps.management?.dashboardUrl ?? requestOrigin, plane: 'management' }),
  );
  signInRoutes(managementRoutes, { pool: deps.pool, clock: deps.clock, signIn, signer, dashboardUrl: deps.management?.dashboardUrl });
  teamRoutes(managementRoutes, createTeamService({ pool: deps.pool, clock: deps.clock }));
  agentResourceManagementRoutes(managementRoutes, { knowledge, mcpServers });
  apiKeyRoutes(managementRoutes, createApiKeyService({ pool: deps.pool, clock: deps.clock }));
  organizationSettingsRoutes(
    managementRoutes,
    createOrganizationSettingsService({ pool: deps.pool, clock: deps.clock, plans: deps.plans, currency: deps.currency, cursors }),
  );
  eventLogRoutes(managementRoutes, createEventLogService({ pool: deps.pool, cursors }));
  dataPlaneViewRoutes(managementRoutes, routes, { pool: deps.pool, clock: deps.clock });
  usageViewRoutes(managementRoutes, usage);
  approvalRoutes(routes, managementRoutes, createApprovalService({ pool: deps.pool, clock: deps.clock, cursors, metrics: deps.metrics }));
  const authenticateSession = authenticateUser({ db: deps.pool, clock: deps.clock, signer });

  const rateLimiter = deps.limitRequests === false ? undefined : createRateLimiter({ db: deps.pool, clock: deps.clock, plans: deps.plans, metrics: deps.metrics });
  const envdTokens = new EnvdTokens(secretBox.subkey('berth/envd-tokens'));
  const e2bProcesses = createProcessService({ agents, metrics: deps.metrics });
  const e2bSurface = createE2bSurface({
    db: deps.pool,
    agents,
    controlPlane: createControlPlane({
      agents,
      sessions,
      tokens: envdTokens,
      capabilities: (view) => (view.provider ? deps.providers.get(view.provider)?.capabilities : undefined),
      domain: deps.e2bDomain ?? null,
      startCodeInterpreter: createCodeInterpreterStarter({ agents, metrics: deps.metrics }),
      onKilled: (agentId) => e2bProcesses.forget(agentId),
      defaultEgress: deps.defaultEgress && deps.providers.get(deps.providers.defaultProvider)?.capabilities.egress ? deps.defaultEgress : undefined,
    }),
    processes: e2bProcesses,
    filesystem: createFilesystemService({ files, metrics: deps.metrics }),
    ports: createSandboxPorts({ agents, metrics: deps.metrics }),
    tokens: envdTokens,
    rateLimiter,
    domain: deps.e2bDomain ?? null,
    metrics: deps.metrics,
    log: deps.log,
  });
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(observeRequests(deps.log, deps.metrics));
  // The E2B-compatible surface (ADR 44) answers by host name, header or the /e2b prefix, before
  // any of Berth's own parsing: envd's paths (/health, /files) and bodies are its own.
  app.use(e2bSurface);
  // Before the JSON parser: routes that verify a signature over the body read it as bytes, and
  // routes that stream it (an upload, the port proxy) read it themselves.
  app.use(routes.rawBodyReaders());
  app.use(routes.streamBodyMarkers());
  // Public chat routes: browsers' preflight and origins first, and a small body limit.
  app.use(channelCors(deps.pool));
  app.use('/channels', express.json({ limit: MAX_PUBLIC_BODY_BYTES }));
  app.use(express.json({ limit: '2mb', type: (req) => !(req as express.Request).berthStreamBody && Boolean((req as express.Request).is('application/json')) }));
  for (const mount of deps.mounts ?? []) app.use(mount.path, mount.router);
  const router = express.Router();
  const authenticateKey = authenticate({ db: deps.pool, clock: deps.clock, ...(rateLimiter ? { rateLimiter } : {}) });
  routes.mount(router, (route) => (route.auth === false ? [] : [authenticateKey]));
  managementRoutes.mount(router, (route): RequestHandler[] => {
    if (route.auth === false) return [];
    if (!route.permission) throw new Error(`${route.method.toUpperCase()} ${route.path} names no permission`);
    return route.permission === 'signed-in' ? [authenticateSession] : [authenticateSession, requirePermission({ db: deps.pool }, route.permission)];
  });
  app.use(router);
  app.use(notFoundHandler);
  app.use(errorHandler);
  const terminal = terminalUpgrade({ db: deps.pool, agents, tokens: terminalTokens, log: deps.log });
  const upgrade: UpgradeListener = (req, socket, head) =>
    e2bSurface.matchesUpgrade(req) ? e2bSurface.upgrade(req, socket, head) : portProxy.matches(req.url) ? portProxy.upgrade(req, socket, head) : terminal(req, socket, head);
  return {
    express: app,
    routes,
    managementRoutes,
    upgrade,
    close: async () => {
      conversations.close();
      await Promise.all([hub.close(), workflowHub.close(), channelHub.close()]);
    },
  };
}

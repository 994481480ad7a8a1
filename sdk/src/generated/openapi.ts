/**
 * Generated from the OpenAPI document Berth serves at /v1/openapi.json by
 * sdk/scripts/generate-types.mjs. Do not edit: run `make sdk-types` (a test fails when it is stale).
 */
/* eslint-disable */

/** The document's version (`info.version`). */
export const API_VERSION = "0.1.0";

/** an agent: its creation fields and its status */
export type Agent = {
  /** `agt_…` */
  id: string;
  /** booting → idle (ready) → running (a task) → paused / terminated / failed */
  status: "booting" | "idle" | "running" | "paused" | "terminated" | "failed";
  sessionId: string;
  /** why a paused (or pausing) agent is paused: asked through the API, a session limit reached, its costCap spent, a tool call's approval expired, no traffic for its `lifecycle.idle.pauseAfter` (its next exec, run, file or port call wakes it), a fork being taken of it (it resumes at once after), or its `timeout` under `lifecycle.onTimeout: pause` (resume it for a new lifetime) */
  pauseReason?: "requested" | "session_limit" | "cost_cap" | "approval_expired" | "idle" | "fork" | "timeout";
  terminateReason?: "idle";
  compute: "python" | "node" | "go";
  browser: boolean;
  storage?: string;
  gpu?: string;
  model?: string;
  instructions?: string;
  modelSettings?: {
    temperature?: number;
    /** most tokens a model answer may have */
    maxTokens?: number;
    topP?: number;
  };
  tools: string[];
  /** effective lifetime (capped at 24h) */
  timeout: string;
  costCap?: {
    amount: number;
    currency: string;
  };
  provider: string;
  providerFallback?: string;
  byoi?: {
    credentialRef: string;
    config: {
      [key: string]: unknown;
    } | null;
  };
  fallbackByoi?: {
    credentialRef: string;
    config: {
      [key: string]: unknown;
    } | null;
  };
  region?: string;
  approvals?: {
    [key: string]: unknown;
  };
  knowledge?: boolean | string;
  metadata?: {
    [key: string]: unknown;
  };
  guardrails?: {
    [key: string]: unknown;
  };
  /** the agent definition (`adef_…`) the agent was created from */
  definition?: string;
  /** the version of that definition; later updates of it do not change the agent */
  definitionVersion?: number;
  overrides?: {
    [key: string]: unknown;
  };
  secrets?: string[];
  mcp?: string[] | "*";
  lifecycle?: {
    idle?: {
      /** time without traffic after which the agent is paused: 30s, 5m, 1h */
      pauseAfter?: string;
      /** time without traffic after which the agent is terminated (paused by its idle policy or not): 1h, 24h */
      terminateAfter?: string;
    };
    onFailure?: {
      /** how many times a sandbox that died is recreated before the agent fails */
      restart: number;
    };
    /** at the timeout: end the sandbox and fail the agent (terminate, the default) or pause it by checkpoint (pause) */
    onTimeout?: "terminate" | "pause";
  };
  egress?: {
    /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
    hosts: string[];
    /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
    cidrs: string[];
    /** secrets the proxy adds to requests to a host */
    credentials: {
      /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
      host: string;
      /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
      secret: string;
      /** the header to set (replacing one the sandbox sent); default Authorization */
      header: string;
      /** written before the value; default "Bearer " */
      prefix: string;
    }[];
  };
  restoreFrom?: {
    snapshotId: string;
    level: "native" | "filesystem";
    fork?: boolean;
  };
  createdAt: string;
  /** when the sandbox became ready */
  startedAt?: string;
  /** startedAt + timeout: the sandbox is ended then */
  expiresAt?: string;
  endedAt?: string;
  /** why a failed agent failed */
  error?: {
    code: string;
    message: string;
  };
  /** sandboxes recreated after they died, under `lifecycle.onFailure.restart` */
  restarts?: number;
  /** present while a tool call of the running task waits for a decision (`POST /v1/approvals/{id}/approve` or `deny`); `status` stays `running` */
  awaitingApproval?: {
    approvalId: string;
    taskId: string;
    action: string;
    expiresAt: string;
  };
  /** the agent's spend so far (models, compute, storage), updated by the operator every BERTH_METER_INTERVAL; absent until its first charge */
  cost?: {
    amount: number;
    currency: string;
  };
  /** details behind `status`, Kubernetes-style */
  conditions: {
    type: string;
    status: "True" | "False" | "Unknown";
    reason: string;
    message: string;
    lastTransitionTime: string;
    observedGeneration: number;
  }[];
};

/** a reusable agent configuration, at its current version */
export type AgentDefinition = {
  /** `adef_…` */
  id: string;
  name: string;
  description?: string;
  /** the current version: the one agents are created from */
  version: number;
  compute: "python" | "node" | "go";
  /** absent: agents get the platform default model */
  model?: string;
  systemPrompt?: string;
  tools: string[];
  browser: boolean;
  /** effective lifetime of its agents (capped at 24h) */
  timeout: string;
  config: {
    temperature?: number;
    maxTokens?: number;
    topP?: number;
  };
  /** its agents' egress policy; absent: the install default */
  egress?: {
    /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
    hosts: string[];
    /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
    cidrs: string[];
    /** secrets the proxy adds to requests to a host */
    credentials: {
      /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
      host: string;
      /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
      secret: string;
      /** the header to set (replacing one the sandbox sent); default Authorization */
      header: string;
      /** written before the value; default "Bearer " */
      prefix: string;
    }[];
  };
  /** deleted: kept for its history, but no new agents can be created from it */
  archived: boolean;
  createdAt: string;
  /** the last update, rollback or archiving */
  updatedAt: string;
};

export type AgentDefinitionVersion = {
  version: number;
  createdAt: string;
  /** `created` for version 1 */
  changelog: string;
  /** id of the API key (`key_…`) that wrote the version */
  createdBy: string;
};

/** an agent definition's fields as one of its versions holds them */
export type AgentDefinitionVersionDetail = {
  /** `adef_…` */
  id: string;
  name: string;
  description?: string;
  /** the version read */
  version: number;
  compute: "python" | "node" | "go";
  /** absent: agents get the platform default model */
  model?: string;
  systemPrompt?: string;
  tools: string[];
  browser: boolean;
  /** effective lifetime of its agents (capped at 24h) */
  timeout: string;
  config: {
    temperature?: number;
    maxTokens?: number;
    topP?: number;
  };
  /** its agents' egress policy; absent: the install default */
  egress?: {
    /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
    hosts: string[];
    /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
    cidrs: string[];
    /** secrets the proxy adds to requests to a host */
    credentials: {
      /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
      host: string;
      /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
      secret: string;
      /** the header to set (replacing one the sandbox sent); default Authorization */
      header: string;
      /** written before the value; default "Bearer " */
      prefix: string;
    }[];
  };
  /** true when it is the current version (the one agents are created from) */
  current: boolean;
  /** `created` for version 1 */
  changelog: string;
  /** id of the API key (`key_…`) that wrote the version */
  createdBy: string;
  /** when the version was written */
  createdAt: string;
};

export type AgentPage = {
  data: Agent[];
  hasMore: boolean;
  /** pass as `cursor` for the next page; absent on the last page */
  cursor?: string;
};

/** a tool call that waits for, or got, a decision */
export type Approval = {
  /** `apr_…` */
  id: string;
  agentId: string;
  sessionId: string;
  /** the run whose tool call waits */
  taskId: string;
  /** the tool call, as in the stream's `tool_call` event */
  toolCallId: string;
  /** the tool the model called */
  action: string;
  /** the call's input, with the values of the agent's secrets masked as `[secret:NAME]` */
  parameters: unknown;
  /** `cancelled`: the run ended (the agent paused or terminated, the run failed) while the call waited */
  state: "pending" | "approved" | "denied" | "expired" | "cancelled";
  /** the reviewer's reason */
  reason?: string;
  /** the API key (`key_…`) or user (`usr_…`) that decided */
  decidedBy?: string;
  createdAt: string;
  /** the request expires then: the run ends with `approval_expired` and the agent is paused */
  expiresAt: string;
  decidedAt?: string;
};

export type ApprovalPage = {
  data: Approval[];
  hasMore: boolean;
  /** pass as `cursor` for the next page */
  cursor?: string;
};

export type ApprovalPolicyInput = {
  /** tool calls that need a decision: the first rule that matches asks for it */
  rules: {
    /** tool name or glob (`*` matches any characters): `exec`, `browser_*`, `*` */
    tool: string;
    /** argument name → regular expression; the rule applies only when every named argument matches (e.g. `{"code": "rm\\s+-rf"}`) */
    when?: {
      [key: string]: string;
    };
  }[];
  /** how long a call waits for a decision (default 1h, at most 168h); then it expires and the agent is paused */
  ttl?: string;
};

/** a background process's output: the last 1 MiB of each stream */
export type BackgroundOutput = {
  /** the process id inside the sandbox */
  pid: number;
  /** the command line it was started with */
  argv: string[];
  /** ISO 8601 */
  startedAt: string;
  status: "running" | "exited" | "signaled" | "timedOut" | "failed";
  /** null while it runs; 128 + signal when a signal ended it */
  exitCode: number | null;
  /** ISO 8601; null while it runs */
  endedAt: string | null;
  /** the last 1 MiB of its stdout */
  stdout: string;
  /** the last 1 MiB of its stderr */
  stderr: string;
  /** bytes dropped before what is shown */
  dropped: {
    stdout: number;
    stderr: number;
  };
};

/** a process started with `background: true` */
export type BackgroundProcess = {
  /** the process id inside the sandbox */
  pid: number;
  /** the command line it was started with */
  argv: string[];
  /** ISO 8601 */
  startedAt: string;
  status: "running" | "exited" | "signaled" | "timedOut" | "failed";
  /** null while it runs; 128 + signal when a signal ended it */
  exitCode: number | null;
  /** ISO 8601; null while it runs */
  endedAt: string | null;
};

export type Channel = {
  /** `ch_…`: also the access token of its public routes */
  id: string;
  type: "chat_embed" | "slack" | "email" | "phone";
  name: string | null;
  /** the agent definition (`adef_…`) that answers */
  agent: string;
  theme?: ChannelTheme;
  allowedOrigins?: string[];
  /** chat_embed: the tag to put on your pages */
  scriptTag?: string;
  workspace?: string;
  channels?: string[];
  botName?: string;
  /** a credential: `…` and its last 4 characters */
  signingSecret?: string;
  /** a credential: `…` and its last 4 characters */
  botToken?: string;
  address?: string;
  /** a credential: `…` and its last 4 characters */
  apiKey?: string;
  /** email: signs the inbound webhook; in full only in the response that created the channel */
  webhookSecret?: string;
  phoneNumber?: string;
  voice?: string;
  /** a credential: `…` and its last 4 characters */
  authToken?: string;
  /** slack, email, phone: the webhook URL to give the provider */
  inboundUrl?: string;
  createdAt: string;
  updatedAt: string;
};

export type ChannelConfig = {
  channelId: string;
  type: "chat_embed";
  theme: {
    [key: string]: unknown;
  };
};

export type ChannelHistory = {
  conversationId: string | null;
  messages: {
    /** `msg_…` */
    id: string;
    role: "user" | "assistant";
    content: string;
    createdAt: string;
  }[];
};

export type ChannelReply = {
  /** the visitor's message (`msg_…`) */
  messageId: string;
  /** `conv_…` */
  conversationId: string;
  response: {
    /** the reply (`msg_…`) */
    id: string;
    role: "assistant";
    content: string;
  };
};

/** one event of a channel stream */
export type ChannelStreamEvent = {
  event: "connected" | "message" | "delta" | "heartbeat";
  /** the payload, as JSON */
  data: string;
};

/** how the chat widget looks */
export type ChannelTheme = {
  /** buttons and the visitor's messages, `#rrggbb` */
  primaryColor?: string;
  /** default light */
  mode?: "light" | "dark";
  /** where the chat button sits; default bottom-right */
  position?: "bottom-right" | "bottom-left";
  /** the panel's heading */
  title?: string;
  /** shown before the first message */
  greeting?: string;
  /** the input's placeholder */
  placeholder?: string;
};

export type DailyUsage = {
  /** the UTC day, YYYY-MM-DD */
  date: string;
  cost: {
    amount: number;
    currency: string;
  };
  /** to 2 decimals */
  computeMinutes: number;
  modelCalls: number;
  /** input + output tokens */
  tokens: number;
};

/** the body of every error response */
export type Error = {
  error: {
    /** machine-readable error code; clients branch on it */
    code: "bad_request" | "unauthorized" | "auth/invalid_key" | "auth/key_revoked" | "forbidden" | "not_found" | "method_not_allowed" | "request_timeout" | "conflict" | "payload_too_large" | "unsupported_media_type" | "unprocessable_entity" | "rate_limited" | "headers_too_large" | "session_limit_exceeded" | "internal_error" | "not_implemented" | "provider_error" | "timeout" | "invalid_role" | "already_member" | "transfer_to_pending";
    /** what went wrong, for people */
    message: string;
    /** structured details; `fields` holds field-level errors of a 422 */
    details: {
      [key: string]: unknown;
    };
    /** quote it in support requests */
    requestId: string;
  };
};

/** what a program printed and how it ended; a non-zero exit code is a normal result */
export type ExecResult = {
  stdout: string;
  stderr: string;
  exitCode: number;
  durationMs: number;
};

/** one agent definition run over many items, a bounded number at a time */
export type Fleet = {
  /** `flt_…` */
  id: string;
  /** the name given on creation, or null */
  name: string | null;
  /** the agent definition as given (name or `adef_…` id) */
  agent: string;
  /** the `adef_…` id `agent` named on creation; each item uses its current version when the item starts */
  definitionId: string;
  /** the session every item runs in; its limits apply */
  sessionId: string;
  /** the task template, or null (each item is the task as it is) */
  prompt: string | null;
  /** `running` until every item ended; then `completed` (some items may have failed) or `failed` (every item failed); `paused` when the cost cap or a session limit stopped it (`reason`), `cancelled` when cancelled. Only `running` changes. */
  status: "running" | "paused" | "completed" | "failed" | "cancelled";
  /** why it stopped early, or null */
  reason: "cost_limit" | "session_limit" | "cancelled" | null;
  /** the most items running at once */
  concurrency: number;
  /** the most the fleet may spend, or null */
  costCap: {
    amount: number;
    currency: string;
  } | null;
  /** the number of items */
  total: number;
  completed: number;
  failed: number;
  cancelled: number;
  /** items whose run is queued or under way */
  running: number;
  /** items not started yet */
  pending: number;
  /** spend so far: ended items and what running items spent; null until the operator first looked at it */
  cost: {
    amount: number;
    currency: string;
  } | null;
  /** true once cancel was asked; `status` becomes `cancelled` when the operator has cancelled the rest */
  cancelRequested: boolean;
  /** ISO 8601 */
  createdAt: string;
};

/** one item of a fleet and its result */
export type FleetItem = {
  /** `itm_…` */
  id: string;
  /** its position in `items` on creation, from 0 */
  index: number;
  /** the item as given */
  input: string | {
    [key: string]: unknown;
  };
  status: "pending" | "running" | "completed" | "failed" | "cancelled";
  /** the run's final answer, once completed */
  output: string | null;
  /** why it failed */
  error: {
    code: string;
    message: string;
  } | null;
  /** the run's cost once it ended */
  cost: {
    amount: number;
    currency: string;
  } | null;
  /** `job_…`: its run (GET /v1/jobs/{id}), once started */
  jobId: string | null;
  startedAt: string | null;
  finishedAt: string | null;
};

export type FleetItemPage = {
  data: FleetItem[];
  hasMore: boolean;
  /** the next page; absent on the last */
  cursor?: string;
};

export type FleetPage = {
  data: Fleet[];
  hasMore: boolean;
  /** the next page; absent on the last */
  cursor?: string;
};

/** one event of a fleet stream */
export type FleetStreamEvent = {
  event: "fleet.started" | "item.completed" | "item.failed" | "fleet.paused" | "fleet.completed" | "fleet.cancelled" | "heartbeat";
  /** the payload, as JSON */
  data: string;
  /** the event id for Last-Event-ID; heartbeats have none */
  id?: string;
  /** reconnection delay in milliseconds, sent once when the stream opens */
  retry?: number;
};

export type Forked = {
  /** the agent forked */
  agentId: string;
  /** the checkpoint the forks continue from (`snap_…`) */
  snapshotId: string;
  /** native: processes, memory and files; filesystem: the /workspace files */
  level: "native" | "filesystem";
  /** the new agents, booting: poll each until `idle` */
  agents: {
    id: string;
    status: "booting";
  }[];
};

export type GuardrailsInput = {
  pii?: {
    action: "block" | "redact" | "flag";
    /** what counts as PII; default all */
    kinds?: ("email" | "phone" | "card" | "secret_key")[];
    /** which side the rule checks: `input` (the task and tool results) and/or `output` (the model's answers) */
    on?: ("input" | "output")[];
  };
  /** prompt-injection heuristics on tool results */
  promptInjection?: {
    /** redacting an injection would leave its intent: block or flag only */
    action: "block" | "flag";
  };
  denyList?: {
    action: "block" | "redact" | "flag";
    /** words or phrases, matched case-insensitively */
    terms: string[];
    /** which side the rule checks: `input` (the task and tool results) and/or `output` (the model's answers) */
    on?: ("input" | "output")[];
  };
  /** longest model answer, in characters */
  maxOutputChars?: {
    chars: number;
    /** `redact` cuts the answer at the limit */
    action: "block" | "redact" | "flag";
  };
};

export type InboundAccepted = {
  ok: true;
  messageId: string;
  conversationId: string;
};

export type InboundDuplicate = {
  ok: true;
  duplicate: true;
};

export type Job = {
  /** `job_…` */
  id: string;
  /** queued → running → completed | failed (`timeout` when a workflow step ran past its timeout); cancelled when its schedule was deleted before it started, or its workflow run or fleet was cancelled */
  state: "queued" | "running" | "completed" | "failed" | "cancelled";
  /** what started it */
  source: {
    type: "trigger" | "schedule" | "workflow" | "fleet";
    /** `trg_…`, `sched_…`, `wfr_…` (a step of that workflow run) or `flt_…` */
    id: string;
  };
  /** the agent definition (`adef_…`) it runs, at its current version when the job starts */
  agent: string;
  userId: string;
  /** the input as given: the JSON body of a fire, the input of a schedule; sent to the model as text */
  input: unknown;
  /** the session it runs in: the user's default one, or the one its source gave (a fleet's) */
  sessionId: string | null;
  /** the agent it created (GET /v1/agents/{id}) */
  agentId: string | null;
  /** its run (GET /v1/tasks/{id}, GET /v1/agents/{agentId}/stream) */
  taskId: string | null;
  /** the run's final answer, once completed */
  output: string | null;
  /** why it failed */
  error: {
    code: string;
    message: string;
  } | null;
  /** the run's cost in cents: so far while it runs, final once it ended */
  cost: {
    amount: number;
    currency: string;
  };
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
};

export type KnowledgeCollection = {
  /** `kcol_…` */
  id: string;
  name: string;
  description?: string;
  /** set on a session's default collection (`knowledge: true`) */
  sessionId?: string;
  sourceCount: number;
  chunkCount: number;
  /** bytes of text the chunks hold */
  storageBytes: number;
  createdAt: string;
};

export type KnowledgeCollectionPage = {
  data: KnowledgeCollection[];
  hasMore: boolean;
  /** pass as `cursor` for the next page */
  cursor?: string;
};

export type KnowledgeSource = {
  /** `ksrc_…` */
  id: string;
  collectionId: string;
  type: "text" | "file" | "url";
  name: string;
  url?: string;
  /** failed: a URL that could not be fetched (`error` says why) */
  state: "synced" | "failed";
  error?: string;
  chunkCount: number;
  bytes: number;
  createdAt: string;
  syncedAt?: string;
};

export type KnowledgeSourcePage = {
  data: KnowledgeSource[];
  hasMore: boolean;
  /** pass as `cursor` for the next page */
  cursor?: string;
};

export type McpServer = {
  /** `mcp_…` */
  id: string;
  name: string;
  url: string;
  /** the name of the secret sent, never its value */
  secret?: string;
  header?: string;
  createdAt: string;
};

export type McpServerList = {
  data: McpServer[];
};

export type ModelUsage = {
  /** `<vendor>/<model>` */
  model: string;
  calls: number;
  tokens: {
    input: number;
    output: number;
  };
  cost: {
    amount: number;
    currency: string;
  };
};

export type Ok = {
  ok: true;
};

/** an organization's configuration of a BYOI provider */
export type ProviderConfig = {
  provider: string;
  /** false keeps the configuration but runs the provider managed until it is enabled again */
  enabled: boolean;
  /** the name of the organization secret holding the credential; the value is never returned */
  credentialRef: string;
  config: {
    [key: string]: unknown;
  } | null;
  /** ISO 8601 */
  createdAt: string;
};

export type Readiness = {
  ok: boolean;
  database: boolean;
  controllers: boolean;
};

export type RunAccepted = {
  /** `task_…` */
  taskId: string;
  agentId: string;
};

/** runs an agent from a definition at every matching time of a cron expression */
export type Schedule = {
  /** `sched_…` */
  id: string;
  /** the name given on creation, or null */
  name: string | null;
  /** the agent definition as given (name or `adef_…` id) */
  agent: string;
  /** the `adef_…` id `agent` named when it was written; each run uses its current version */
  definitionId: string;
  /** the end-user whose default session each run uses */
  userId: string;
  /** five fields: minute hour day-of-month month day-of-week */
  cron: string;
  /** IANA time zone the cron is evaluated in */
  timezone: string;
  /** the task of each run; an object is sent to the model as its JSON */
  input: string | {
    [key: string]: unknown;
  } | null;
  paused: boolean;
  /** ISO 8601: the next matching time that will run; null while paused */
  nextRunAt: string | null;
  /** ISO 8601: the matching time of the latest run, or null */
  lastRunAt: string | null;
  /** ISO 8601 */
  createdAt: string;
};

/** one matching time of a schedule that came due, and its run */
export type ScheduleExecution = {
  /** `exec_…` */
  id: string;
  scheduleId: string;
  /** ISO 8601: the matching time this execution is for */
  scheduledFor: string;
  /** ISO 8601: when the operator queued the run; null for a missed time */
  firedAt: string | null;
  /** ISO 8601: when the run began to be set up (session, agent) */
  startedAt: string | null;
  /** ISO 8601: when the run ended */
  finishedAt: string | null;
  /** `missed`: due while no operator ran, found after the grace window (15 minutes) and not run; else the state of its run */
  status: "missed" | "queued" | "running" | "completed" | "failed" | "cancelled";
  /** `job_…`: the job that runs it */
  jobId: string | null;
  sessionId: string | null;
  /** the agent created for the run, ended when the run ends */
  agentId: string | null;
  /** the run (`GET /v1/tasks/:id`) */
  taskId: string | null;
  /** the run’s cost once it ended (models and compute); 0 for test keys */
  cost: {
    /** integer cents */
    amount: number;
    currency: string;
  } | null;
  error: {
    code: string;
    message: string;
  } | null;
};

export type ScheduleHistory = {
  data: ScheduleExecution[];
};

export type ScheduleList = {
  data: Schedule[];
};

/** one end-user of your application */
export type Session = {
  /** `ses_…` */
  id: string;
  /** the customer's end-user identifier */
  userId: string;
  environment: "production" | "staging" | "development";
  /** per-session ceilings; `maxDuration` is the duration ceiling */
  limits: {
    maxCost?: {
      amount: number;
      currency: string;
      period: "day" | "month";
    };
    maxAgents?: number;
    maxComputeMinutes?: number;
    maxDuration?: string;
  };
  metadata: {
    [key: string]: string;
  };
  /** ISO 8601 */
  createdAt: string;
};

export type SessionPage = {
  data: Session[];
  hasMore: boolean;
  /** pass as `cursor` for the next page; absent on the last page */
  cursor?: string;
};

export type SlackAck = {
  ok?: true;
  challenge?: string;
};

/** a checkpoint of an agent */
export type Snapshot = {
  /** `snap_…` */
  id: string;
  agentId: string;
  sessionId: string;
  /** the provider that made it */
  provider: string;
  type: "pause" | "manual";
  /** size of the stored archive; 0 while the snapshot is creating */
  sizeBytes: number;
  /** creating (the checkpoint is on the host; its archive is being stored; the agent can already be resumed on that host) → ready (archived; resumable as a new agent); deleting after DELETE; failed when the checkpoint was lost before it was archived */
  state: "creating" | "ready" | "failed" | "deleting";
  /** native: processes, memory and files; filesystem: the /workspace files */
  level?: "native" | "filesystem";
  createdAt: string;
};

export type SnapshotResumed = {
  agentId: string;
  provider: string;
  region: string;
  resumeLevel: "native" | "filesystem";
  status: "booting";
};

/** one event of an agent stream */
export type StreamEvent = {
  event: "thinking" | "tool_call" | "tool_result" | "output" | "error" | "approval.requested" | "approval.approved" | "approval.denied" | "approval.expired" | "guardrail" | "heartbeat";
  /** the payload, as JSON */
  data: string;
  /** the event id for Last-Event-ID; heartbeats have none */
  id?: string;
  /** reconnection delay in milliseconds, sent once when the stream opens */
  retry?: number;
};

/** one run of the agent loop */
export type Task = {
  id: string;
  agentId: string;
  sessionId: string;
  status: "queued" | "running" | "completed" | "failed" | "cancelled";
  task: string;
  /** the final answer, when completed */
  output?: string;
  /** why it failed or was cancelled */
  error?: {
    code: string;
    message: string;
    [key: string]: unknown;
  };
  /** what the output yielded under the agent's extraction rules (`metadata.extract`): an object valid against their schema; also in `agent.completed` */
  metadata?: {
    [key: string]: unknown;
  };
  /** why a completed run with extraction rules has no metadata: its answer, and the answer to one request for JSON, did not match the schema */
  metadataError?: {
    code: "extraction_failed";
    message: string;
    issues?: string[];
  };
  /** model calls so far */
  steps: number;
  /** what the agent's guardrails found during the run, in order (empty when nothing fired); a `block` ends the run with `guardrail_blocked` */
  guardrails: {
    rule: "pii" | "promptInjection" | "denyList" | "maxOutputChars";
    action: "block" | "redact" | "flag";
    where: "input" | "output";
    /** what fired: `email`, `phone`, `card`, `secret_key`, `injection`, `deny_list`, `size` */
    kind: string;
    /** how many matches (for `size`, the length in characters) */
    count: number;
    /** `task`, `tool:<name>` or `answer` */
    source: string;
  }[];
  usage: {
    inputTokens: number;
    outputTokens: number;
  };
  /** integer cents */
  cost: {
    amount: number;
    currency: string;
  };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
};

export type Trigger = {
  /** `trg_…` */
  id: string;
  name: string | null;
  type: "webhook";
  /** the agent definition (`adef_…`) each fire runs */
  agent: string;
  /** the end-user whose session the runs belong to */
  userId: string;
  /** the public fire URL: `POST` signed requests to it, without an API key */
  url: string;
  /** the signing secret: in full only in the response that created the trigger; after that its first 8 characters and … */
  secret: string;
  createdAt: string;
  /** when a fire was last accepted */
  lastFiredAt: string | null;
};

export type TriggerFired = {
  ok: true;
  /** `job_…`: follow it with GET /v1/jobs/{id} */
  jobId: string;
};

/** UsageSummary, period form */
export type UsagePeriodSummary = {
  /** berthBilled.total + providerDirect.total */
  totalCost: {
    amount: number;
    currency: string;
  };
  /** sessions with a charge in the period */
  activeSessions: number;
  /** sandboxes running now; with `environment`, those of sessions that have a charge in that environment */
  runningAgents: number;
  /** the user with the highest cost in the period (equal costs: the smallest userId); null without usage */
  topUser: {
    userId: string;
    cost: {
      amount: number;
      currency: string;
    };
  } | null;
  /** the `environment` filter, or `all` */
  environment: "production" | "staging" | "development" | "all";
  /** what Berth billed */
  berthBilled: {
    /** sandboxes Berth provided (managed and byoi_models) */
    compute: {
      amount: number;
      currency: string;
    };
    /** model calls on Berth keys (managed and byoi_compute) */
    model: {
      amount: number;
      currency: string;
    };
    /** snapshot storage */
    storage: {
      amount: number;
      currency: string;
    };
    /** always 0: no primitive is charged yet */
    primitives: {
      amount: number;
      currency: string;
    };
    total: {
      amount: number;
      currency: string;
    };
  };
  /** what you paid providers directly */
  providerDirect: {
    /** sandboxes on your own compute provider (byoi_compute and byoi_both) */
    compute: {
      amount: number;
      currency: string;
    };
    /** model calls on your own model keys (byoi_models and byoi_both) */
    model: {
      amount: number;
      currency: string;
    };
    total: {
      amount: number;
      currency: string;
    };
  };
};

/** UsageSummary, range form */
export type UsageRangeSummary = {
  /** the range read, ISO 8601: charges at or after `from` and before `until` */
  period: {
    from: string;
    until: string;
  };
  compute: {
    /** sandbox minutes charged, to 2 decimals */
    minutes: number;
    cost: {
      amount: number;
      currency: string;
    };
  };
  models: {
    inputTokens: number;
    outputTokens: number;
    cost: {
      amount: number;
      currency: string;
    };
  };
  storage: {
    /** decimal gigabytes (1e9 bytes) of snapshot archives stored at `until`, to 3 decimals */
    gb: number;
    /** snapshot storage charged in the range (by GB-hour) */
    cost: {
      amount: number;
      currency: string;
    };
  };
  /** compute + models + storage, each rounded to cents first */
  total: {
    amount: number;
    currency: string;
  };
};

export type UserUsage = {
  compute: {
    /** to 2 decimals */
    minutes: number;
    cost: {
      amount: number;
      currency: string;
    };
  };
  models: {
    calls: number;
    tokens: {
      input: number;
      output: number;
    };
    cost: {
      amount: number;
      currency: string;
    };
  };
  storage: {
    /** GB-hours of snapshot archives charged, to 3 decimals */
    gbHours: number;
    cost: {
      amount: number;
      currency: string;
    };
  };
  /** compute + models + storage, each rounded to cents first */
  total: {
    amount: number;
    currency: string;
  };
  /** every UTC day of the period, oldest first, days without usage included */
  breakdown: {
    /** the UTC day, YYYY-MM-DD */
    date: string;
    total: {
      amount: number;
      currency: string;
    };
  }[];
};

export type WarmPool = {
  /** `wpl_…` */
  id: string;
  provider: string;
  compute: "python" | "node" | "go";
  browser: boolean;
  /** only agents made from this definition (`adef_…`) claim from the pool */
  definition?: string;
  /** unclaimed sandboxes the pool keeps started */
  size: number;
  /** unclaimed sandboxes ready to be claimed now */
  ready: number;
  /** sandboxes being started to refill the pool */
  starting: number;
  /** sandboxes agents claimed from the pool since it was made */
  claims: number;
  /** `Filled`: True when `ready` reached `size`, else why not */
  conditions: {
    type: string;
    status: "True" | "False" | "Unknown";
    reason: string;
    message: string;
    lastTransitionTime: string;
    observedGeneration: number;
  }[];
  createdAt: string;
};

export type Webhook = {
  /** `wh_…` */
  id: string;
  url: string;
  events: ("agent.started" | "agent.completed" | "agent.failed" | "agent.paused" | "agent.restarted" | "agent.terminated" | "agent.run.completed" | "session.limit_reached" | "session.cost_threshold" | "budget.threshold" | "budget.exhausted" | "fleet.started" | "fleet.item_completed" | "fleet.completed" | "fleet.cost_limited" | "schedule.fired" | "trigger.fired" | "workflow.started" | "workflow.step_completed" | "workflow.completed" | "workflow.failed" | "knowledge.sync_completed" | "knowledge.sync_failed" | "approval.requested" | "approval.approved" | "approval.denied" | "approval.expired")[];
  /** in full only in the response that created it; after that its first 8 characters and … */
  secret: string;
  createdAt: string;
};

export type WebhookDelivery = {
  /** `del_…`, sent as X-Svc-Delivery on every attempt */
  id: string;
  /** the event delivered (the envelope `id`); null for the sample of /test */
  eventId: string | null;
  event: string;
  /** pending (to be attempted, or retried at nextAttemptAt), succeeded, failed (after 3 retries), cancelled (webhook deleted) */
  state: "pending" | "succeeded" | "failed" | "cancelled";
  attempts: number;
  /** HTTP status of the last attempt; null when it got no answer */
  lastStatus: number | null;
  /** why the last attempt failed: the status and the start of the body, a timeout, a refused address */
  lastError: string | null;
  lastAttemptAt: string | null;
  nextAttemptAt: string | null;
  createdAt: string;
  history: {
    attempt: number;
    at: string;
    durationMs: number;
    status: number | null;
    error: string | null;
  }[];
};

/** a named, versioned graph of steps, each running an agent definition */
export type Workflow = {
  /** `wf_…` */
  id: string;
  name: string;
  description: string | null;
  /** 1 on creation, one more on each update */
  version: number;
  steps: WorkflowStep[];
  /** deleted: readable, cannot run */
  archived: boolean;
  /** ISO 8601 */
  createdAt: string;
  /** ISO 8601 */
  updatedAt: string;
};

export type WorkflowEstimate = {
  /** integer cents */
  estimated: {
    min: number;
    max: number;
    currency: string;
  };
  /** `low` under 10 completed runs, `medium` 10 to 99, `high` 100 or more */
  confidence: "low" | "medium" | "high";
  /** per step: its cost in completed runs, or 5 to 50 cents without any */
  breakdown: {
    step: string;
    min: number;
    max: number;
    basedOn: number;
  }[];
  /** completed runs the estimate is based on */
  basedOn: number;
};

export type WorkflowPage = {
  data: Workflow[];
  hasMore: boolean;
  /** pass as `cursor` for the next page; absent on the last page */
  cursor?: string;
};

/** one run of a workflow */
export type WorkflowRun = {
  /** `wfr_…` */
  id: string;
  workflowId: string;
  /** the version whose steps the run runs */
  workflowVersion: number;
  /** the end-user whose default session the steps run in */
  userId: string;
  /** `completed`, `failed`, `partial` and `cancelled` are final */
  status: "running" | "completed" | "failed" | "partial" | "cancelled";
  /** the run’s input as given (text, an object, or null) */
  input: unknown;
  /** the output of the final step (the last step no other step depends on), once the run ended */
  output: string | null;
  /** why the run failed (with the failing step) or `cancelled` */
  error: {
    code: string;
    message: string;
    step?: string;
  } | null;
  /** all attempts of all steps so far, in integer cents */
  cost: {
    /** integer cents */
    amount: number;
    currency: string;
  };
  steps: WorkflowStepRun[];
  createdAt: string;
  finishedAt: string | null;
};

export type WorkflowRunPage = {
  data: WorkflowRun[];
  hasMore: boolean;
  /** pass as `cursor` for the next page; absent on the last page */
  cursor?: string;
};

/** one event of a workflow run stream */
export type WorkflowRunStreamEvent = {
  event: "connected" | "started" | "step.completed" | "step.failed" | "run.completed" | "run.failed" | "run.partial" | "run.cancelled" | "heartbeat";
  /** the payload, as JSON */
  data: string;
  /** the event id for Last-Event-ID; `connected` and heartbeats have none */
  id?: string;
  /** reconnection delay in milliseconds, sent once when the stream opens */
  retry?: number;
};

export type WorkflowStep = {
  /** unique in the workflow; `{{steps.<name>.output}}` refers to it */
  name: string;
  /** the agent definition as given (name or `adef_…` id) */
  agent: string;
  /** the `adef_…` id `agent` named when the workflow was written; each attempt uses its current version */
  definitionId: string;
  /** the template of the step’s task */
  input: string;
  /** steps that must have ended before this one starts */
  dependsOn: string[];
  /** further attempts after a failed one */
  retries: number;
  /** bound of one attempt, from its start to its end; null: the agent’s own timeout only */
  timeout: string | null;
  /** a failure after its retries ends the run `partial` instead of `failed` */
  optional: boolean;
};

export type WorkflowStepRun = {
  name: string;
  /** `pending`: waiting for its dependencies; else the state of its latest attempt */
  status: "pending" | "running" | "completed" | "failed" | "cancelled";
  /** attempts started so far */
  attempts: number;
  /** `job_…` of the latest attempt */
  jobId: string | null;
  /** the output text of the attempt that completed */
  output: string | null;
  /** why the latest attempt failed */
  error: {
    code: string;
    message: string;
  } | null;
  /** all its attempts, in integer cents */
  cost: {
    /** integer cents */
    amount: number;
    currency: string;
  };
  startedAt: string | null;
  finishedAt: string | null;
};

/** Every route: path and query parameters, the JSON body, and each response's body by status. */
export interface paths {
  "/": {
    /** The web console */
    get: {
      operationId: "dashboardPage";
      path: never;
      query: never;
      body: never;
      responses: {
        200: string;
        304: never;
        400: Error;
        500: Error;
      };
    };
  };
  "/assets/{file}": {
    /** A file of the web console */
    get: {
      operationId: "dashboardAsset";
      path: {
        file: string;
      };
      query: never;
      body: never;
      responses: {
        200: string;
        304: never;
        400: Error;
        404: Error;
        422: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/config": {
    /** A chat channel's public settings */
    get: {
      operationId: "getChannelConfig";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: never;
      body: never;
      responses: {
        200: ChannelConfig;
        400: Error;
        403: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/email": {
    /** Inbound email webhook */
    post: {
      operationId: "inboundEmail";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: never;
      body: unknown;
      responses: {
        200: InboundDuplicate;
        202: InboundAccepted;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/messages": {
    /** Send a message and get the reply */
    post: {
      operationId: "postChannelMessage";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: never;
      body: {
        /** the visitor's message */
        text: string;
        /** who is chatting: an id the widget makes and keeps in localStorage */
        visitorId: string;
      };
      responses: {
        200: ChannelReply;
        400: Error;
        402: Error;
        403: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        502: Error;
        504: Error;
      };
    };
    /** A visitor's conversation */
    get: {
      operationId: "listChannelMessages";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: {
        /** who is chatting: an id the widget makes and keeps in localStorage */
        visitorId: string;
        /** at most this many, 1 to 200 (default 50) */
        limit?: string;
      };
      body: never;
      responses: {
        200: ChannelHistory;
        400: Error;
        403: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/phone": {
    /** Phone (voice) webhook */
    post: {
      operationId: "inboundCall";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: never;
      body: unknown;
      responses: {
        200: string;
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/slack/events": {
    /** Slack Events API webhook */
    post: {
      operationId: "slackEvents";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: never;
      body: unknown;
      responses: {
        200: SlackAck;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        500: Error;
      };
    };
  };
  "/channels/{channelId}/stream": {
    /** Stream a visitor's conversation */
    get: {
      operationId: "streamChannel";
      path: {
        /** the channel id (`ch_…`): the access token of these routes */
        channelId: string;
      };
      query: {
        /** who is chatting: an id the widget makes and keeps in localStorage */
        visitorId: string;
      };
      body: never;
      responses: {
        200: ChannelStreamEvent;
        400: Error;
        403: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/healthz": {
    /** Liveness */
    get: {
      operationId: "healthz";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          ok: true;
        };
        400: Error;
        500: Error;
      };
    };
  };
  "/metrics": {
    /** Prometheus metrics */
    get: {
      operationId: "metrics";
      path: never;
      query: never;
      body: never;
      responses: {
        200: string;
        400: Error;
        500: Error;
      };
    };
  };
  "/readyz": {
    /** Readiness */
    get: {
      operationId: "readyz";
      path: never;
      query: never;
      body: never;
      responses: {
        200: Readiness;
        400: Error;
        500: Error;
        503: Readiness;
      };
    };
  };
  "/triggers/{id}/fire": {
    /** Fire a trigger */
    post: {
      operationId: "fireTrigger";
      path: {
        /** trigger id (`trg_…`) */
        id: string;
      };
      query: never;
      body: unknown;
      responses: {
        202: TriggerFired;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions": {
    /** Create an agent definition */
    post: {
      operationId: "createAgentDefinition";
      path: never;
      query: never;
      body: {
        /** unique among the organization's definitions that are not archived; 1–100 letters, digits, spaces, -, _ and ., starting with a letter or digit and not ending with a space; not starting with adef_; case-sensitive */
        name: string;
        description?: string;
        /** sandbox runtime */
        compute?: "python" | "node" | "go";
        /** `<vendor>/<model>`; the platform default when omitted */
        model?: string;
        /** the agent's system prompt (its `instructions`) */
        systemPrompt?: string;
        /** tools the agent may call */
        tools?: string[];
        /** needs a browser-capable sandbox template */
        browser?: boolean;
        /** sandbox lifetime: 30s, 5m, 2h, 1h30m; default 15m, capped at 24h */
        timeout?: string;
        /** model settings: temperature (0–2), maxTokens (a positive integer), topP (0–1); other keys are refused */
        config?: {
          temperature?: number;
          /** most tokens a model answer may have */
          maxTokens?: number;
          topP?: number;
        };
        /** where the sandbox may connect (everything else is refused): `hosts` (DNS names, `*.example.com` wildcards), `cidrs` (networks), `credentials` (`{ host, secret, header?, prefix? }`: the egress proxy adds `header: <prefix><secret's value>` to HTTPS requests to host, so the value never enters the sandbox). Omitted: the definition's, else the install default (BERTH_EGRESS_ALLOW, usually none). Changeable while the agent runs with PATCH /v1/agents/{id}. 501 on providers that do not enforce egress */
        egress?: {
          /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
          hosts?: string[];
          /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
          cidrs?: string[];
          /** secrets the proxy adds to requests to a host */
          credentials?: {
            /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
            host: string;
            /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
            secret: string;
            /** the header to set (replacing one the sandbox sent); default Authorization */
            header?: string;
            /** written before the value; default "Bearer " */
            prefix?: string;
          }[];
        };
      };
      responses: {
        201: AgentDefinition;
        400: Error;
        401: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List agent definitions */
    get: {
      operationId: "listAgentDefinitions";
      path: never;
      query: {
        /** also list archived (deleted) definitions */
        includeArchived?: "true" | "false";
      };
      body: never;
      responses: {
        200: {
          data: AgentDefinition[];
        };
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions/{id}": {
    /** Get an agent definition */
    get: {
      operationId: "getAgentDefinition";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: AgentDefinition;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Update an agent definition */
    put: {
      operationId: "updateAgentDefinition";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: {
        /** null removes it */
        description?: string | null;
        compute?: "python" | "node" | "go";
        /** `<vendor>/<model>`; null removes it (agents get the platform default) */
        model?: string | null;
        /** null removes it */
        systemPrompt?: string | null;
        /** replaces the list */
        tools?: string[];
        browser?: boolean;
        timeout?: string;
        /** replaces all model settings; {} removes them */
        config?: {
          temperature?: number;
          /** most tokens a model answer may have */
          maxTokens?: number;
          topP?: number;
        };
        /** replaces the egress policy of its agents; null removes it (they get the install default) */
        egress?: {
          /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
          hosts?: string[];
          /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
          cidrs?: string[];
          /** secrets the proxy adds to requests to a host */
          credentials?: {
            /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
            host: string;
            /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
            secret: string;
            /** the header to set (replacing one the sandbox sent); default Authorization */
            header?: string;
            /** written before the value; default "Bearer " */
            prefix?: string;
          }[];
        } | null;
        /** what changed, for the version history; default: the fields changed */
        changelog?: string;
      };
      responses: {
        200: AgentDefinition;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Archive an agent definition */
    delete: {
      operationId: "deleteAgentDefinition";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions/{id}/duplicate": {
    /** Duplicate an agent definition */
    post: {
      operationId: "duplicateAgentDefinition";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: {
        /** unique among the organization's definitions that are not archived; 1–100 letters, digits, spaces, -, _ and ., starting with a letter or digit and not ending with a space; not starting with adef_; case-sensitive */
        name: string;
      };
      responses: {
        201: {
          /** `adef_…` */
          id: string;
          name: string;
        };
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions/{id}/rollback": {
    /** Roll an agent definition back to a version */
    post: {
      operationId: "rollbackAgentDefinition";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: {
        /** an existing version */
        version: number;
      };
      responses: {
        200: {
          ok: true;
          version: number;
        };
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions/{id}/versions": {
    /** List an agent definition's versions */
    get: {
      operationId: "listAgentDefinitionVersions";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          data: AgentDefinitionVersion[];
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agent-definitions/{id}/versions/{version}": {
    /** Get one version of an agent definition */
    get: {
      operationId: "getAgentDefinitionVersion";
      path: {
        /** agent definition id (`adef_…`) */
        id: string;
        /** the version number, from 1 */
        version: string;
      };
      query: never;
      body: never;
      responses: {
        200: AgentDefinitionVersionDetail;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents": {
    /** List agents across sessions */
    get: {
      operationId: "listAgents";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
        /** only the agents of this session (`ses_…`) */
        sessionId?: string;
        /** comma-separated statuses, e.g. `idle,running` */
        status?: string;
      };
      body: never;
      responses: {
        200: AgentPage;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}": {
    /** Extend an agent's timeout, change its egress policy */
    patch: {
      operationId: "updateAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** the new lifetime: 30m, 2h, 1h30m */
        timeout?: string;
        /** the new egress policy, replacing the whole of the old one */
        egress?: {
          /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
          hosts?: string[];
          /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
          cidrs?: string[];
          /** secrets the proxy adds to requests to a host */
          credentials?: {
            /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
            host: string;
            /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
            secret: string;
            /** the header to set (replacing one the sandbox sent); default Authorization */
            header?: string;
            /** written before the value; default "Bearer " */
            prefix?: string;
          }[];
        };
      };
      responses: {
        200: Agent;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
      };
    };
    /** Get an agent (status poll) */
    get: {
      operationId: "getAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** wait until the agent has this status, or one of these comma-separated ones (or has ended), before answering */
        waitFor?: string;
        /** longest wait for waitFor, in seconds (1–60) */
        waitSeconds?: number;
      };
      body: never;
      responses: {
        200: Agent;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/exec": {
    /** Run code in the sandbox */
    post: {
      operationId: "execInAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** python, typescript or bash */
        language: "python" | "typescript" | "bash";
        /** the program; runs with /workspace as its working directory unless `cwd` says otherwise */
        code: string;
        /** variables added to the sandbox's environment for this program (at most 100, each value up to 32 KiB) */
        env?: {
          [key: string]: string;
        };
        /** working directory: relative to /workspace or absolute under it (default /workspace); leaving /workspace is refused */
        cwd?: string;
        /** text written to the program's stdin, which is then closed (UTF-8, at most 512 KiB); without it stdin is empty */
        stdin?: string;
        /** seconds, 1 to 120 (default and most: 120); a background process: no limit unless given (then up to 120 s too) */
        timeout?: number;
        /** start the program and answer 202 with its process at once; see /v1/agents/{id}/processes */
        background?: boolean;
      };
      responses: {
        200: ExecResult;
        202: BackgroundProcess;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
        504: Error;
      };
    };
  };
  "/v1/agents/{id}/exec/stream": {
    /** Run code with its output streamed (SSE) */
    post: {
      operationId: "execInAgentStreamed";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** python, typescript or bash */
        language: "python" | "typescript" | "bash";
        /** the program */
        code: string;
        /** variables added to the sandbox's environment for this program (at most 100, each value up to 32 KiB) */
        env?: {
          [key: string]: string;
        };
        /** working directory: relative to /workspace or absolute under it (default /workspace); leaving /workspace is refused */
        cwd?: string;
        /** text written to the program's stdin, which is then closed (UTF-8, at most 512 KiB); without it stdin is empty */
        stdin?: string;
        /** seconds (default: the agent's remaining lifetime; never beyond it) */
        timeout?: number;
      };
      responses: {
        200: {
          id?: string;
          event: "stdout" | "stderr" | "exit" | "error" | "heartbeat";
          data: string;
        };
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files": {
    /** Upload a file (streamed) */
    put: {
      operationId: "uploadFile";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        path: string;
        /** octal permission bits (default 644) */
        mode?: string;
        /** make missing directories above it (default false) */
        parents?: "true" | "false";
      };
      body: string;
      responses: {
        201: {
          name: string;
          /** absolute, with the symlinks of the directories above it resolved */
          path: string;
          type: "file" | "directory" | "symlink" | "other";
          /** bytes */
          size: number;
          /** permission bits (420 is 0o644) */
          mode: number;
          /** ISO 8601 */
          modifiedAt: string;
          /** a symlink's target, as written */
          target?: string;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** Download a file (streamed) */
    get: {
      operationId: "downloadFile";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        path: string;
      };
      body: never;
      responses: {
        200: string;
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** Delete a file or directory */
    delete: {
      operationId: "deleteFile";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        path: string;
        /** remove a directory and everything in it (default false) */
        recursive?: "true" | "false";
      };
      body: never;
      responses: {
        204: never;
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/archive": {
    /** Download a directory as a tar archive (streamed) */
    get: {
      operationId: "downloadDirectory";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** the directory (default /workspace) */
        path?: string;
      };
      body: never;
      responses: {
        200: string;
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/list": {
    /** List a directory */
    get: {
      operationId: "listFiles";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** the directory (default /workspace) */
        path?: string;
      };
      body: never;
      responses: {
        200: {
          path: string;
          data: {
            name: string;
            /** absolute, with the symlinks of the directories above it resolved */
            path: string;
            type: "file" | "directory" | "symlink" | "other";
            /** bytes */
            size: number;
            /** permission bits (420 is 0o644) */
            mode: number;
            /** ISO 8601 */
            modifiedAt: string;
            /** a symlink's target, as written */
            target?: string;
          }[];
          omitted: number;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/mkdir": {
    /** Make a directory */
    post: {
      operationId: "makeDirectory";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        path: string;
        /** make missing directories above it too */
        parents?: boolean;
      };
      responses: {
        201: {
          name: string;
          /** absolute, with the symlinks of the directories above it resolved */
          path: string;
          type: "file" | "directory" | "symlink" | "other";
          /** bytes */
          size: number;
          /** permission bits (420 is 0o644) */
          mode: number;
          /** ISO 8601 */
          modifiedAt: string;
          /** a symlink's target, as written */
          target?: string;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/move": {
    /** Move or rename a file or directory */
    post: {
      operationId: "moveFile";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        from: string;
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        to: string;
        /** replace what is at `to` */
        overwrite?: boolean;
      };
      responses: {
        200: {
          name: string;
          /** absolute, with the symlinks of the directories above it resolved */
          path: string;
          type: "file" | "directory" | "symlink" | "other";
          /** bytes */
          size: number;
          /** permission bits (420 is 0o644) */
          mode: number;
          /** ISO 8601 */
          modifiedAt: string;
          /** a symlink's target, as written */
          target?: string;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/stat": {
    /** Describe a file or directory */
    get: {
      operationId: "statFile";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** a path relative to /workspace or absolute under it; one that leaves /workspace (`..`, another absolute path, a symlink pointing out) is refused with 422 */
        path: string;
      };
      body: never;
      responses: {
        200: {
          name: string;
          /** absolute, with the symlinks of the directories above it resolved */
          path: string;
          type: "file" | "directory" | "symlink" | "other";
          /** bytes */
          size: number;
          /** permission bits (420 is 0o644) */
          mode: number;
          /** ISO 8601 */
          modifiedAt: string;
          /** a symlink's target, as written */
          target?: string;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/files/watch": {
    /** Watch a directory for changes (SSE) */
    get: {
      operationId: "watchDirectory";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** the directory (default /workspace) */
        path?: string;
        /** watch every directory under it too (default false) */
        recursive?: "true" | "false";
      };
      body: never;
      responses: {
        200: {
          id?: string;
          event: "change" | "error" | "heartbeat";
          data: string;
        };
        400: Error;
        401: Error;
        403: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/fork": {
    /** Fork an agent */
    post: {
      operationId: "forkAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** how many forks, 1–100 */
        count?: number;
      };
      responses: {
        201: Forked;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/pause": {
    /** Pause an agent */
    post: {
      operationId: "pauseAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: Record<string, never>;
      responses: {
        200: Agent;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/ports": {
    /** Expose a port of the sandbox */
    post: {
      operationId: "exposePort";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** the port a program in the sandbox listens on (127.0.0.1 or 0.0.0.0) */
        port: number;
      };
      responses: {
        200: {
          port: number;
          /** the proxy URL: send the API key as a bearer header */
          url: string;
          createdAt: string;
        };
        201: {
          port: number;
          /** the proxy URL: send the API key as a bearer header */
          url: string;
          createdAt: string;
        };
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List exposed ports */
    get: {
      operationId: "listPorts";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          data: {
            port: number;
            /** the proxy URL: send the API key as a bearer header */
            url: string;
            createdAt: string;
          }[];
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/ports/{port}": {
    /** Close an exposed port */
    delete: {
      operationId: "closePort";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the port, 1 to 65535 */
        port: string;
      };
      query: never;
      body: never;
      responses: {
        204: never;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/ports/{port}/proxy/{path}": {
    /** GET to the program on an exposed port */
    get: {
      operationId: "proxyPortGet";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the exposed port */
        port: string;
        /** the path on the program's server, below `/proxy/` (slashes included; empty for its root) */
        path: string;
      };
      query: {
        /** a port token, for browsers (becomes a cookie) */
        berth_token?: string;
      };
      body: never;
      responses: {
        200: string;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** POST to the program on an exposed port */
    post: {
      operationId: "proxyPortPost";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the exposed port */
        port: string;
        /** the path on the program's server, below `/proxy/` (slashes included; empty for its root) */
        path: string;
      };
      query: {
        /** a port token, for browsers (becomes a cookie) */
        berth_token?: string;
      };
      body: string;
      responses: {
        200: string;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** PUT to the program on an exposed port */
    put: {
      operationId: "proxyPortPut";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the exposed port */
        port: string;
        /** the path on the program's server, below `/proxy/` (slashes included; empty for its root) */
        path: string;
      };
      query: {
        /** a port token, for browsers (becomes a cookie) */
        berth_token?: string;
      };
      body: string;
      responses: {
        200: string;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** PATCH to the program on an exposed port */
    patch: {
      operationId: "proxyPortPatch";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the exposed port */
        port: string;
        /** the path on the program's server, below `/proxy/` (slashes included; empty for its root) */
        path: string;
      };
      query: {
        /** a port token, for browsers (becomes a cookie) */
        berth_token?: string;
      };
      body: string;
      responses: {
        200: string;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
    /** DELETE to the program on an exposed port */
    delete: {
      operationId: "proxyPortDelete";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the exposed port */
        port: string;
        /** the path on the program's server, below `/proxy/` (slashes included; empty for its root) */
        path: string;
      };
      query: {
        /** a port token, for browsers (becomes a cookie) */
        berth_token?: string;
      };
      body: never;
      responses: {
        200: string;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        431: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/ports/{port}/token": {
    /** A token to open an exposed port in a browser */
    post: {
      operationId: "createPortToken";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the port, 1 to 65535 */
        port: string;
      };
      query: never;
      body: Record<string, never>;
      responses: {
        201: {
          token: string;
          /** ISO 8601 */
          expiresAt: string;
          url: string;
        };
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/processes": {
    /** List background processes */
    get: {
      operationId: "listProcesses";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          data: BackgroundProcess[];
        };
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/processes/{pid}/logs": {
    /** Read a background process's output */
    get: {
      operationId: "readProcessOutput";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the process id that `background: true` answered */
        pid: string;
      };
      query: never;
      body: never;
      responses: {
        200: BackgroundOutput;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/processes/{pid}/signal": {
    /** Send a signal to a background process */
    post: {
      operationId: "signalProcess";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the process id that `background: true` answered */
        pid: string;
      };
      query: never;
      body: {
        /** without the SIG prefix */
        signal: "TERM" | "KILL" | "INT" | "HUP" | "QUIT" | "USR1" | "USR2" | "STOP" | "CONT";
      };
      responses: {
        200: BackgroundProcess;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/processes/{pid}/wait": {
    /** Wait for a background process to end */
    post: {
      operationId: "waitProcess";
      path: {
        /** agent id (`agt_…`) */
        id: string;
        /** the process id that `background: true` answered */
        pid: string;
      };
      query: never;
      body: {
        /** seconds to wait at most (0: answer at once) */
        timeout?: number;
      };
      responses: {
        200: BackgroundProcess;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
        502: Error;
      };
    };
  };
  "/v1/agents/{id}/pty": {
    /** A terminal in the sandbox (WebSocket) */
    get: {
      operationId: "openTerminal";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** from POST /v1/agents/{id}/pty/token, instead of the Authorization header */
        token?: string;
        /** the program and its arguments, repeated (`argv=python3&argv=-q`); default bash */
        argv?: string | string[];
        /** terminal rows, 1 to 1000 (default 24) */
        rows?: string;
        /** terminal columns, 1 to 1000 (default 80) */
        cols?: string;
        /** working directory, as for exec (default /workspace) */
        cwd?: string;
      };
      body: never;
      responses: {
        101: never;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        431: Error;
        500: Error;
        501: Error;
      };
    };
  };
  "/v1/agents/{id}/pty/token": {
    /** A short-lived token for the terminal WebSocket */
    post: {
      operationId: "createTerminalToken";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: Record<string, never>;
      responses: {
        201: {
          token: string;
          /** ISO 8601 */
          expiresAt: string;
          /** the WebSocket path, token included */
          path: string;
        };
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/resume": {
    /** Resume a paused agent */
    post: {
      operationId: "resumeAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: Record<string, never>;
      responses: {
        200: Agent;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/run": {
    /** Run the agent loop on a task */
    post: {
      operationId: "runAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: {
        /** what the agent should do */
        task: string;
      };
      responses: {
        202: RunAccepted;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/stream": {
    /** Stream the agent's events */
    get: {
      operationId: "streamAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: {
        /** same as the Last-Event-ID header */
        lastEventId?: string;
      };
      body: never;
      responses: {
        200: StreamEvent;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/agents/{id}/terminate": {
    /** Terminate an agent */
    post: {
      operationId: "terminateAgent";
      path: {
        /** agent id (`agt_…`) */
        id: string;
      };
      query: never;
      body: Record<string, never>;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/approvals": {
    /** List approval requests */
    get: {
      operationId: "listApprovals";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
        /** default `pending`: the requests that wait */
        state?: "pending" | "approved" | "denied" | "expired" | "cancelled" | "any";
        /** only the requests of this agent */
        agentId?: string;
      };
      body: never;
      responses: {
        200: ApprovalPage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/approvals/{id}": {
    /** Get an approval request */
    get: {
      operationId: "getApproval";
      path: {
        /** approval id (`apr_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Approval;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/approvals/{id}/approve": {
    /** Approve a tool call */
    post: {
      operationId: "approveCall";
      path: {
        /** approval id (`apr_…`) */
        id: string;
      };
      query: never;
      body: {
        /** kept with the decision */
        reason?: string;
      };
      responses: {
        200: Approval;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/approvals/{id}/deny": {
    /** Deny a tool call */
    post: {
      operationId: "denyCall";
      path: {
        /** approval id (`apr_…`) */
        id: string;
      };
      query: never;
      body: {
        /** the model receives it as the result of the call */
        reason: string;
      };
      responses: {
        200: Approval;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/channels": {
    /** Create a channel */
    post: {
      operationId: "createChannel";
      path: never;
      query: never;
      body: {
        /** what the channel connects */
        type: "chat_embed" | "slack" | "email" | "phone";
        /** the agent definition that answers: its name or `adef_…` id */
        agent: string;
        /** for people */
        name?: string;
        /** chat_embed */
        theme?: ChannelTheme;
        /** chat_embed: the origins whose pages may use the public routes; empty: any */
        allowedOrigins?: string[];
        /** slack (required): the team id whose events are accepted */
        workspace?: string;
        /** slack: channel ids to answer in; empty: every channel the bot is in */
        channels?: string[];
        /** slack: the name replies are posted under */
        botName?: string;
        /** slack (required): the app's signing secret; verifies X-Slack-Signature */
        signingSecret?: string;
        /** slack (required): the token replies are posted with */
        botToken?: string;
        /** email (required): the address mail is sent to; replies come from it */
        address?: string;
        /** email (required): the SendGrid API key replies are sent with */
        apiKey?: string;
        /** phone (required): the number callers dial */
        phoneNumber?: string;
        /** phone: the voice replies are spoken with (default alice) */
        voice?: string;
        /** phone (required): the Twilio auth token; verifies X-Twilio-Signature */
        authToken?: string;
      };
      responses: {
        201: Channel;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List channels */
    get: {
      operationId: "listChannels";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: Channel[];
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/channels/{id}": {
    /** Get a channel */
    get: {
      operationId: "getChannel";
      path: {
        /** channel id (`ch_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Channel;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Update a channel */
    patch: {
      operationId: "updateChannel";
      path: {
        /** channel id (`ch_…`) */
        id: string;
      };
      query: never;
      body: {
        /** the agent definition that answers: its name or `adef_…` id */
        agent?: string;
        /** for people; null removes it */
        name?: string | null;
        /** chat_embed */
        theme?: ChannelTheme;
        /** chat_embed: the origins whose pages may use the public routes; empty: any */
        allowedOrigins?: string[];
        /** slack (required): the team id whose events are accepted */
        workspace?: string;
        /** slack: channel ids to answer in; empty: every channel the bot is in */
        channels?: string[];
        /** slack: the name replies are posted under */
        botName?: string;
        /** slack (required): the app's signing secret; verifies X-Slack-Signature */
        signingSecret?: string;
        /** slack (required): the token replies are posted with */
        botToken?: string;
        /** email (required): the address mail is sent to; replies come from it */
        address?: string;
        /** email (required): the SendGrid API key replies are sent with */
        apiKey?: string;
        /** phone (required): the number callers dial */
        phoneNumber?: string;
        /** phone: the voice replies are spoken with (default alice) */
        voice?: string;
        /** phone (required): the Twilio auth token; verifies X-Twilio-Signature */
        authToken?: string;
      };
      responses: {
        200: Channel;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a channel */
    delete: {
      operationId: "deleteChannel";
      path: {
        /** channel id (`ch_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/fleets": {
    /** Create a fleet */
    post: {
      operationId: "createFleet";
      path: never;
      query: never;
      body: {
        /** agent definition name or `adef_…` id; unknown or archived is 422 */
        agent: string;
        /** the session (`ses_…`) the items run in; its limits apply to them */
        sessionId: string;
        /** 1 to 1000 items, each text or a JSON object of at most 8 KiB (the whole body at most 2 MiB) */
        items: (string | {
          [key: string]: unknown;
        })[];
        /** task template: `{{item}}` is the item as text (an object as its JSON), `{{item.<key>}}` a top-level field of an object item */
        prompt?: string;
        /** the most items running at once, 1 to 100 (default 10) */
        concurrency?: number;
        /** the most the fleet may spend; reaching it cancels the rest (`fleet.cost_limited`) */
        costCap?: {
          /** integer cents, at least 1 */
          amount: number;
          /** the install's currency */
          currency: string;
        };
        name?: string;
      };
      responses: {
        201: Fleet;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List fleets */
    get: {
      operationId: "listFleets";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: FleetPage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/fleets/{id}": {
    /** Get a fleet */
    get: {
      operationId: "getFleet";
      path: {
        /** fleet id (`flt_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Fleet;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/fleets/{id}/cancel": {
    /** Cancel a fleet */
    post: {
      operationId: "cancelFleet";
      path: {
        /** fleet id (`flt_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Fleet;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/fleets/{id}/items": {
    /** List a fleet's items with their results */
    get: {
      operationId: "listFleetItems";
      path: {
        /** fleet id (`flt_…`) */
        id: string;
      };
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: FleetItemPage;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/fleets/{id}/stream": {
    /** Stream the fleet's events */
    get: {
      operationId: "streamFleet";
      path: {
        /** fleet id (`flt_…`) */
        id: string;
      };
      query: {
        /** same as the Last-Event-ID header */
        lastEventId?: string;
      };
      body: never;
      responses: {
        200: FleetStreamEvent;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/jobs/{id}": {
    /** Follow a job */
    get: {
      operationId: "getJob";
      path: {
        /** job id (`job_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Job;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/knowledge/collections": {
    /** Create a knowledge collection */
    post: {
      operationId: "createKnowledgeCollection";
      path: never;
      query: never;
      body: {
        /** unique in the organization; agents name the collection by it or by id */
        name: string;
        description?: string;
        /** makes it that session's default collection (at most one a session) */
        sessionId?: string;
      };
      responses: {
        201: KnowledgeCollection;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List knowledge collections */
    get: {
      operationId: "listKnowledgeCollections";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: KnowledgeCollectionPage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/knowledge/collections/{id}": {
    /** Get a knowledge collection */
    get: {
      operationId: "getKnowledgeCollection";
      path: {
        /** collection id (`kcol_…`) or name */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: KnowledgeCollection;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a knowledge collection */
    delete: {
      operationId: "deleteKnowledgeCollection";
      path: {
        /** collection id (`kcol_…`) or name */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/knowledge/collections/{id}/sources": {
    /** Add a source to a knowledge collection */
    post: {
      operationId: "addKnowledgeSource";
      path: {
        /** collection id (`kcol_…`) or name */
        id: string;
      };
      query: never;
      body: {
        type: "text";
        /** shown in search results; default `text` */
        name?: string;
        text: string;
      } | {
        type: "file";
        /** the file name; `.html` files are read as HTML */
        name: string;
        /** the file, base64; UTF-8 text (plain, Markdown, CSV, JSON or HTML) */
        content: string;
        contentType?: "text/plain" | "text/markdown" | "text/csv" | "application/json" | "text/html";
      } | {
        type: "url";
        /** fetched once by the server, under the rules of outbound webhooks (https; no private addresses) */
        url: string;
        /** default: the URL */
        name?: string;
      };
      responses: {
        201: KnowledgeSource;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List a knowledge collection's sources */
    get: {
      operationId: "listKnowledgeSources";
      path: {
        /** collection id (`kcol_…`) or name */
        id: string;
      };
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: KnowledgeSourcePage;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/knowledge/collections/{id}/sources/{sourceId}": {
    /** Delete a knowledge source */
    delete: {
      operationId: "deleteKnowledgeSource";
      path: {
        /** collection id (`kcol_…`) or name */
        id: string;
        /** `ksrc_…` */
        sourceId: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/mcp-servers": {
    /** Register an MCP server */
    post: {
      operationId: "registerMcpServer";
      path: never;
      query: never;
      body: {
        /** unique in the organization; its tools reach the model as `mcp__<name>__<tool>` */
        name: string;
        /** the streamable HTTP endpoint; https, no private addresses (the rules of outbound webhooks) */
        url: string;
        /** an organization secret whose value is sent with every request */
        secret?: string;
        /** the header the secret is sent in; default `Authorization`, as `Bearer <value>`; another header gets the value as it is */
        header?: string;
      };
      responses: {
        201: McpServer;
        400: Error;
        401: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List MCP servers */
    get: {
      operationId: "listMcpServers";
      path: never;
      query: never;
      body: never;
      responses: {
        200: McpServerList;
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/mcp-servers/{id}": {
    /** Delete an MCP server */
    delete: {
      operationId: "deleteMcpServer";
      path: {
        /** `mcp_…` or the name */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/openapi.json": {
    /** This API, as OpenAPI 3.1 */
    get: {
      operationId: "openapi";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          openapi: string;
          info: {
            title: string;
            version: string;
            [key: string]: unknown;
          };
          paths: {
            [key: string]: unknown;
          };
          [key: string]: unknown;
        };
        400: Error;
        500: Error;
      };
    };
  };
  "/v1/providers": {
    /** List BYOI provider configurations */
    get: {
      operationId: "listProviders";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: ProviderConfig[];
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/providers/{provider}": {
    /** Configure a provider as BYOI */
    put: {
      operationId: "putProvider";
      path: {
        /** `remote`, `kubernetes`, a model vendor of this install (`openai`, `anthropic`, …) or another name */
        provider: string;
      };
      query: never;
      body: {
        /** the name of an existing organization secret (`POST /v1/secrets`) holding the credential */
        credentialRef: string;
        /** provider settings, checked by provider (see the description); default null */
        config?: {
          [key: string]: unknown;
        } | null;
        /** default true */
        enabled?: boolean;
      };
      responses: {
        200: {
          ok: true;
          provider: string;
          mode: "byoi";
        };
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Return a provider to managed mode */
    delete: {
      operationId: "deleteProvider";
      path: {
        /** `remote`, `kubernetes`, a model vendor of this install (`openai`, `anthropic`, …) or another name */
        provider: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          ok: true;
          provider: string;
          mode: "managed";
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/schedules": {
    /** Create a schedule */
    post: {
      operationId: "createSchedule";
      path: never;
      query: never;
      body: {
        /** agent definition name or `adef_…` id; unknown or archived is 422 */
        agent: string;
        /** the customer's end-user identifier; runs use the user's default session */
        userId: string;
        name?: string;
        /** five fields: minute hour day-of-month month day-of-week (ranges, steps, lists, names) */
        cron: string;
        /** IANA time zone such as "Europe/Berlin"; default UTC */
        timezone?: string;
        /** the task of each run: text, or an object sent to the model as its JSON (at most 64 KiB) */
        input?: string | {
          [key: string]: unknown;
        };
      };
      responses: {
        201: Schedule;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List schedules */
    get: {
      operationId: "listSchedules";
      path: never;
      query: never;
      body: never;
      responses: {
        200: ScheduleList;
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/schedules/{id}": {
    /** Get a schedule */
    get: {
      operationId: "getSchedule";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Schedule;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Update a schedule */
    put: {
      operationId: "updateSchedule";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: {
        /** agent definition name or `adef_…` id; unknown or archived is 422 */
        agent?: string;
        /** the customer's end-user identifier; runs use the user's default session */
        userId?: string;
        name?: string;
        /** five fields: minute hour day-of-month month day-of-week (ranges, steps, lists, names) */
        cron?: string;
        /** IANA time zone such as "Europe/Berlin"; default UTC */
        timezone?: string;
        /** the task of each run: text, or an object sent to the model as its JSON (at most 64 KiB) */
        input?: string | {
          [key: string]: unknown;
        };
      };
      responses: {
        200: Schedule;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a schedule */
    delete: {
      operationId: "deleteSchedule";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/schedules/{id}/history": {
    /** Executions of a schedule */
    get: {
      operationId: "getScheduleHistory";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: ScheduleHistory;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/schedules/{id}/pause": {
    /** Pause a schedule */
    post: {
      operationId: "pauseSchedule";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/schedules/{id}/resume": {
    /** Resume a schedule */
    post: {
      operationId: "resumeSchedule";
      path: {
        /** schedule id (`sched_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/secrets": {
    /** Store organization secrets */
    post: {
      operationId: "putSecrets";
      path: never;
      query: never;
      body: {
        [key: string]: string;
      };
      responses: {
        200: {
          ok: true;
          /** how many names were written */
          count: number;
        };
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List organization secrets */
    get: {
      operationId: "listSecrets";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: {
            name: string;
            createdAt: string;
          }[];
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/secrets/{name}": {
    /** Delete an organization secret */
    delete: {
      operationId: "deleteSecret";
      path: {
        name: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions": {
    /** Create a session */
    post: {
      operationId: "createSession";
      path: never;
      query: never;
      body: {
        /** the customer's end-user identifier */
        userId: string;
        /** default production */
        environment?: "production" | "staging" | "development";
        limits?: {
          maxCost?: {
            amount: number;
            currency: string;
            period: "day" | "month";
          };
          maxAgents?: number;
          maxComputeMinutes?: number;
          maxDuration?: string;
        };
        /** string pairs; at most 50 keys of 64 characters, values of 512 */
        metadata?: {
          [key: string]: string;
        };
      };
      responses: {
        201: Session;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List sessions */
    get: {
      operationId: "listSessions";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: SessionPage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions/by-user/{userId}": {
    /** Get or create a user's session */
    post: {
      operationId: "getOrCreateSessionForUser";
      path: {
        /** the customer's end-user identifier */
        userId: string;
      };
      query: never;
      body: {
        /** applied only when the session is created */
        limits?: {
          maxCost?: {
            amount: number;
            currency: string;
            period: "day" | "month";
          };
          maxAgents?: number;
          maxComputeMinutes?: number;
          maxDuration?: string;
        };
        /** applied only when the session is created */
        metadata?: {
          [key: string]: string;
        };
      };
      responses: {
        200: Session;
        201: Session;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions/{id}": {
    /** Get a session */
    get: {
      operationId: "getSession";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Session;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Change a session's limits or metadata */
    patch: {
      operationId: "updateSession";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: never;
      body: {
        /** replaces all limits; {} removes them */
        limits?: {
          maxCost?: {
            amount: number;
            currency: string;
            period: "day" | "month";
          };
          maxAgents?: number;
          maxComputeMinutes?: number;
          maxDuration?: string;
        };
        /** replaces all metadata */
        metadata?: {
          [key: string]: string;
        };
      };
      responses: {
        200: Session;
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** End a session's agents */
    delete: {
      operationId: "endSession";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          ok: true;
          /** ids of the agents this call ended */
          terminated: string[];
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions/{id}/agents": {
    /** Create an agent */
    post: {
      operationId: "createAgent";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: {
        /** create the agent, then wait until it has this status, or one of these comma-separated ones (or has ended), before answering */
        waitFor?: string;
        /** longest wait for waitFor, in seconds (1–60) */
        waitSeconds?: number;
      };
      body: {
        /** sandbox runtime */
        compute?: "python" | "node" | "go";
        /** needs a browser-capable sandbox template */
        browser?: boolean;
        /** not supported by any current provider: refused */
        storage?: string;
        /** GPU type; omit for CPU-only */
        gpu?: string;
        /** `<vendor>/<model>`; the platform default when omitted */
        model?: string;
        /** system prompt */
        instructions?: string;
        /** model settings of the agent's runs (beyond the spec): temperature (0–2), maxTokens, topP (0–1); an agent made from a definition gets the definition's config */
        modelSettings?: {
          temperature?: number;
          /** most tokens a model answer may have */
          maxTokens?: number;
          topP?: number;
        };
        /** tools the agent may call */
        tools?: string[];
        /** sandbox lifetime: 30s, 5m, 2h, 1h30m; default 15m, capped at 24h */
        timeout?: string;
        /** hard spend ceiling in integer cents */
        costCap?: {
          amount: number;
          currency: string;
        };
        /** omit for the platform default */
        provider?: string;
        /** used when the primary provider is unavailable */
        providerFallback?: string;
        region?: string;
        /** tool calls that wait for a person's decision: `{ rules: [{ tool, when? }], ttl }` (see Approval policies in the docs) */
        approvals?: ApprovalPolicyInput;
        /** true (the session's default collection, made when it has none) or a collection name or id: offers the model the knowledge_search tool over it; an unknown collection is 422 */
        knowledge?: boolean | string;
        /** extraction rules under `extract` (`{ schema: <JSON schema of an object>, instructions? }`: a completed run's output is validated against it, the model asked once more for JSON if needed, and the result put on the task and in `agent.completed`; a schema that is not valid is 422), and custom pairs (every other key), stored and shown with the agent (at most 8 levels, 16 KiB of JSON) */
        metadata?: {
          [key: string]: unknown;
        };
        /** checks of what goes into and comes out of the model: `pii`, `promptInjection`, `denyList`, `maxOutputChars`, each with an action (block, redact, flag) */
        guardrails?: GuardrailsInput;
        /** agent definition name or id: the fields come from its current version */
        definition?: string;
        /** agent creation fields that replace the definition's; only with definition */
        overrides?: {
          [key: string]: unknown;
        };
        /** names of secrets injected into the environment */
        secrets?: string[];
        /** where the sandbox may connect (everything else is refused): `hosts` (DNS names, `*.example.com` wildcards), `cidrs` (networks), `credentials` (`{ host, secret, header?, prefix? }`: the egress proxy adds `header: <prefix><secret's value>` to HTTPS requests to host, so the value never enters the sandbox). Omitted: the definition's, else the install default (BERTH_EGRESS_ALLOW, usually none). Changeable while the agent runs with PATCH /v1/agents/{id}. 501 on providers that do not enforce egress */
        egress?: {
          /** DNS names, or wildcards such as *.github.com, the sandbox may reach */
          hosts?: string[];
          /** networks (IPv4 or IPv6, with a prefix length) the sandbox may reach by address */
          cidrs?: string[];
          /** secrets the proxy adds to requests to a host */
          credentials?: {
            /** the host (or wildcard) whose requests get the header; it must be allowed by `hosts` */
            host: string;
            /** the name of a secret of the organization or the session (`POST /v1/secrets`) */
            secret: string;
            /** the header to set (replacing one the sandbox sent); default Authorization */
            header?: string;
            /** written before the value; default "Bearer " */
            prefix?: string;
          }[];
        };
        /** MCP server ids or names (`POST /v1/mcp-servers`), or * for all of the organization: their tools are offered to the model as `mcp__<server>__<tool>`; an unknown server is 422 */
        mcp?: string[] | "*";
        /** auto-pause, idle termination, failure and timeout policy: `{ idle: { pauseAfter, terminateAfter }, onFailure: { restart }, onTimeout }` (see docs/warm-pools-and-lifecycle.md) */
        lifecycle?: {
          idle?: {
            /** pause the agent by checkpoint after this long without exec, run, stream, terminal, process, file or port traffic (30s, 10m, 2h); its next such call wakes it */
            pauseAfter?: string;
            /** terminate the agent after this long without traffic, whether it was paused by `pauseAfter` meanwhile or not (longer than `pauseAfter` when both are given); `agent.terminated` says `reason: idle` */
            terminateAfter?: string;
          };
          onFailure?: {
            /** recreate a sandbox that died (killed, out of memory, its host restarted) up to this many times (0–10), then fail the agent */
            restart: number;
          };
          /** what the agent's `timeout` does: `terminate` (the default) ends its sandbox and fails it with `timeout`; `pause` pauses it by checkpoint (reason `timeout`), to be resumed with `POST /v1/agents/{id}/resume` for a new lifetime */
          onTimeout?: "terminate" | "pause";
        };
      };
      responses: {
        201: Agent;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
      };
    };
    /** List a session's agents */
    get: {
      operationId: "listSessionAgents";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
        /** a custom pair the agents have, as `key:value` */
        metadata?: string;
      };
      body: never;
      responses: {
        200: AgentPage;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions/{id}/secrets": {
    /** Store session secrets */
    post: {
      operationId: "putSessionSecrets";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: never;
      body: {
        [key: string]: string;
      };
      responses: {
        200: {
          ok: true;
          /** how many names were written */
          count: number;
        };
        400: Error;
        401: Error;
        404: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List session secrets */
    get: {
      operationId: "listSessionSecrets";
      path: {
        /** session id (`ses_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          data: {
            name: string;
            createdAt: string;
          }[];
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/sessions/{id}/secrets/{name}": {
    /** Delete a session secret */
    delete: {
      operationId: "deleteSessionSecret";
      path: {
        /** session id (`ses_…`) */
        id: string;
        name: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/snapshots": {
    /** List snapshots */
    get: {
      operationId: "listSnapshots";
      path: never;
      query: {
        sessionId?: string;
        agentId?: string;
        state?: "creating" | "ready" | "failed" | "deleting";
      };
      body: never;
      responses: {
        200: {
          data: Snapshot[];
        };
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/snapshots/{id}": {
    /** Get a snapshot */
    get: {
      operationId: "getSnapshot";
      path: {
        /** snapshot id (`snap_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Snapshot;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a snapshot */
    delete: {
      operationId: "deleteSnapshot";
      path: {
        /** snapshot id (`snap_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/snapshots/{id}/resume": {
    /** Resume a snapshot as a new agent */
    post: {
      operationId: "resumeSnapshot";
      path: {
        /** snapshot id (`snap_…`) */
        id: string;
      };
      query: never;
      body: {
        /** default: the snapshot's provider */
        provider?: string;
        region?: string;
        /** bring back only the /workspace files, even where a native resume is possible (beyond the spec) */
        level?: "filesystem";
      };
      responses: {
        201: SnapshotResumed;
        400: Error;
        401: Error;
        402: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/tasks/{id}": {
    /** Get a run */
    get: {
      operationId: "getTask";
      path: {
        /** task id (`task_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Task;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/triggers": {
    /** Create a webhook trigger */
    post: {
      operationId: "createTrigger";
      path: never;
      query: never;
      body: {
        /** the agent definition to run: its name or `adef_…` id */
        agent: string;
        /** the end-user the runs are for: their session (made when missing) holds the agents */
        userId: string;
        /** for people */
        name?: string;
        /** `webhook`; `event` answers 501 */
        type: "webhook" | "event";
      };
      responses: {
        201: Trigger;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
        501: Error;
      };
    };
    /** List triggers */
    get: {
      operationId: "listTriggers";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: Trigger[];
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/triggers/{id}": {
    /** Get a trigger */
    get: {
      operationId: "getTrigger";
      path: {
        /** trigger id (`trg_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Trigger;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a trigger */
    delete: {
      operationId: "deleteTrigger";
      path: {
        /** trigger id (`trg_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/usage/daily": {
    /** Usage per day */
    get: {
      operationId: "getDailyUsage";
      path: never;
      query: {
        /** UTC, from a midnight until now: `today`; `week` (from Monday); `last_7_days` and `last_30_days` (that many calendar days, today included); `month` (from the 1st); default `last_30_days` */
        period?: "today" | "week" | "last_7_days" | "last_30_days" | "month";
      };
      body: never;
      responses: {
        200: DailyUsage[];
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/usage/models": {
    /** Usage per model */
    get: {
      operationId: "getModelUsage";
      path: never;
      query: {
        /** UTC, from a midnight until now: `today`; `week` (from Monday); `last_7_days` and `last_30_days` (that many calendar days, today included); `month` (from the 1st); default `month` */
        period?: "today" | "week" | "last_7_days" | "last_30_days" | "month";
      };
      body: never;
      responses: {
        200: {
          data: ModelUsage[];
        };
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/usage/summary": {
    /** Usage summary */
    get: {
      operationId: "getUsageSummary";
      path: never;
      query: {
        /** range form: start, included; default the start of the current billing period (the 1st of the month, 00:00 UTC) */
        from?: string;
        /** range form: end, excluded; default now */
        until?: string;
        /** period form: UTC, from a midnight until now: `today`; `week` (from Monday); `last_7_days` and `last_30_days` (that many calendar days, today included); `month` (from the 1st); default `month` */
        period?: "today" | "week" | "last_7_days" | "last_30_days" | "month";
        /** period form: only charges of sessions in this environment; omit for all */
        environment?: "production" | "staging" | "development";
      };
      body: never;
      responses: {
        200: UsageRangeSummary | UsagePeriodSummary;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/usage/users/{userId}": {
    /** A user's usage */
    get: {
      operationId: "getUserUsage";
      path: {
        /** the customer's end-user identifier */
        userId: string;
      };
      query: {
        /** UTC, from a midnight until now: `today`; `week` (from Monday); `last_7_days` and `last_30_days` (that many calendar days, today included); `month` (from the 1st); default `month` */
        period?: "today" | "week" | "last_7_days" | "last_30_days" | "month";
      };
      body: never;
      responses: {
        200: UserUsage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/warm-pools": {
    /** Create a warm pool */
    post: {
      operationId: "createWarmPool";
      path: never;
      query: never;
      body: {
        /** the compute of the agents that claim its sandboxes */
        compute?: "python" | "node" | "go";
        /** browser sandboxes, for browser agents */
        browser?: boolean;
        /** agent definition name or id: only its agents claim from this pool (they take it before a pool without definition) */
        definition?: string;
        /** sandboxes to keep started, 0–50 */
        size: number;
        /** one of this install's providers that can keep warm sandboxes (local, kubernetes); the default provider when omitted */
        provider?: string;
      };
      responses: {
        201: WarmPool;
        400: Error;
        401: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List warm pools */
    get: {
      operationId: "listWarmPools";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: WarmPool[];
          hasMore: boolean;
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/warm-pools/{id}": {
    /** Get a warm pool */
    get: {
      operationId: "getWarmPool";
      path: {
        /** warm pool id (`wpl_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: WarmPool;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Resize a warm pool */
    patch: {
      operationId: "resizeWarmPool";
      path: {
        /** warm pool id (`wpl_…`) */
        id: string;
      };
      query: never;
      body: {
        /** sandboxes to keep started, 0–50 */
        size: number;
      };
      responses: {
        200: WarmPool;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a warm pool */
    delete: {
      operationId: "deleteWarmPool";
      path: {
        /** warm pool id (`wpl_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/webhooks": {
    /** Register a webhook */
    post: {
      operationId: "createWebhook";
      path: never;
      query: never;
      body: {
        url: string;
        events: ("agent.started" | "agent.completed" | "agent.failed" | "agent.paused" | "agent.restarted" | "agent.terminated" | "agent.run.completed" | "session.limit_reached" | "session.cost_threshold" | "budget.threshold" | "budget.exhausted" | "fleet.started" | "fleet.item_completed" | "fleet.completed" | "fleet.cost_limited" | "schedule.fired" | "trigger.fired" | "workflow.started" | "workflow.step_completed" | "workflow.completed" | "workflow.failed" | "knowledge.sync_completed" | "knowledge.sync_failed" | "approval.requested" | "approval.approved" | "approval.denied" | "approval.expired")[];
        /** default: generated (`whsec_…`) */
        secret?: string;
      };
      responses: {
        201: Webhook;
        400: Error;
        401: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List webhooks */
    get: {
      operationId: "listWebhooks";
      path: never;
      query: never;
      body: never;
      responses: {
        200: {
          data: Webhook[];
        };
        400: Error;
        401: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/webhooks/{id}": {
    /** Get a webhook */
    get: {
      operationId: "getWebhook";
      path: {
        /** webhook id (`wh_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Webhook;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete a webhook */
    delete: {
      operationId: "deleteWebhook";
      path: {
        /** webhook id (`wh_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/webhooks/{id}/deliveries": {
    /** A webhook's delivery log */
    get: {
      operationId: "listWebhookDeliveries";
      path: {
        /** webhook id (`wh_…`) */
        id: string;
      };
      query: {
        /** at most this many, 1 to 200 (default 50) */
        limit?: string;
        state?: "pending" | "succeeded" | "failed" | "cancelled";
      };
      body: never;
      responses: {
        200: {
          data: WebhookDelivery[];
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/webhooks/{id}/deliveries/{deliveryId}/resend": {
    /** Send a delivery again */
    post: {
      operationId: "resendWebhookDelivery";
      path: {
        /** webhook id (`wh_…`) */
        id: string;
        /** delivery id (`del_…`) */
        deliveryId: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          deliveryId: string;
          /** the attempt this was, in the delivery's history */
          attempt: number;
          /** true when the receiver answered 2xx within 10 s */
          delivered: boolean;
          status: number | null;
          error: string | null;
          durationMs: number;
        };
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/webhooks/{id}/test": {
    /** Send a sample event */
    post: {
      operationId: "testWebhook";
      path: {
        /** webhook id (`wh_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: {
          deliveryId: string;
          /** true when the receiver answered 2xx within 10 s */
          delivered: boolean;
          status: number | null;
          error: string | null;
          durationMs: number;
        };
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflow-runs/{runId}": {
    /** Get a workflow run */
    get: {
      operationId: "getWorkflowRun";
      path: {
        /** workflow run id (`wfr_…`) */
        runId: string;
      };
      query: never;
      body: never;
      responses: {
        200: WorkflowRun;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflow-runs/{runId}/cancel": {
    /** Cancel a workflow run */
    post: {
      operationId: "cancelWorkflowRun";
      path: {
        /** workflow run id (`wfr_…`) */
        runId: string;
      };
      query: never;
      body: never;
      responses: {
        200: WorkflowRun;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflow-runs/{runId}/stream": {
    /** Stream a workflow run */
    get: {
      operationId: "streamWorkflowRun";
      path: {
        /** workflow run id (`wfr_…`) */
        runId: string;
      };
      query: {
        /** same as the Last-Event-ID header */
        lastEventId?: string;
      };
      body: never;
      responses: {
        200: WorkflowRunStreamEvent;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflows": {
    /** Create a workflow */
    post: {
      operationId: "createWorkflow";
      path: never;
      query: never;
      body: {
        name: string;
        description?: string | null;
        steps: {
          /** unique in the workflow */
          name: string;
          /** agent definition name or `adef_…` id; unknown or archived is 422 */
          agent: string;
          /** the task, a template: `{{input}}`, `{{input.<field>}}`, `{{steps.<name>.output}}` (a step it depends on); default `{{input}}` */
          input?: string;
          /** names of steps that must end first; default none */
          dependsOn?: string[];
          /** further attempts after a failed one, 0 to 10; default 0 */
          retries?: number;
          /** bound of one attempt such as `10m`; default none (the agent’s own timeout) */
          timeout?: string;
          /** its failure ends the run `partial`, not `failed`; default false */
          optional?: boolean;
        }[];
      };
      responses: {
        201: Workflow;
        400: Error;
        401: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List workflows */
    get: {
      operationId: "listWorkflows";
      path: never;
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
        /** also list archived (deleted) workflows */
        includeArchived?: "true" | "false";
      };
      body: never;
      responses: {
        200: WorkflowPage;
        400: Error;
        401: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflows/{id}": {
    /** Get a workflow */
    get: {
      operationId: "getWorkflow";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Workflow;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Update a workflow */
    put: {
      operationId: "updateWorkflow";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: never;
      body: {
        name?: string;
        description?: string | null;
        steps?: {
          /** unique in the workflow */
          name: string;
          /** agent definition name or `adef_…` id; unknown or archived is 422 */
          agent: string;
          /** the task, a template: `{{input}}`, `{{input.<field>}}`, `{{steps.<name>.output}}` (a step it depends on); default `{{input}}` */
          input?: string;
          /** names of steps that must end first; default none */
          dependsOn?: string[];
          /** further attempts after a failed one, 0 to 10; default 0 */
          retries?: number;
          /** bound of one attempt such as `10m`; default none (the agent’s own timeout) */
          timeout?: string;
          /** its failure ends the run `partial`, not `failed`; default false */
          optional?: boolean;
        }[];
      };
      responses: {
        200: Workflow;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** Delete (archive) a workflow */
    delete: {
      operationId: "deleteWorkflow";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: Ok;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflows/{id}/estimate": {
    /** Estimate the cost of a run */
    post: {
      operationId: "estimateWorkflow";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: never;
      body: never;
      responses: {
        200: WorkflowEstimate;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/v1/workflows/{id}/runs": {
    /** Run a workflow */
    post: {
      operationId: "runWorkflow";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: never;
      body: {
        /** the customer's end-user identifier; the steps run in the user's default session */
        userId: string;
        /** the run’s input: text, or an object (at most 64 KiB); `{{input}}` in a step’s template */
        input?: string | {
          [key: string]: unknown;
        };
      };
      responses: {
        201: WorkflowRun;
        400: Error;
        401: Error;
        404: Error;
        409: Error;
        413: Error;
        415: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
    /** List the runs of a workflow */
    get: {
      operationId: "listWorkflowRuns";
      path: {
        /** workflow id (`wf_…`) */
        id: string;
      };
      query: {
        /** page size, 1 to 100 (default 20) */
        limit?: string;
        /** the `cursor` of the previous page */
        cursor?: string;
      };
      body: never;
      responses: {
        200: WorkflowRunPage;
        400: Error;
        401: Error;
        404: Error;
        422: Error;
        429: Error;
        500: Error;
      };
    };
  };
  "/widget/v1/berth-chat.js": {
    /** The embeddable chat widget */
    get: {
      operationId: "widgetScript";
      path: never;
      query: never;
      body: never;
      responses: {
        200: string;
        304: never;
        400: Error;
        500: Error;
      };
    };
  };
}

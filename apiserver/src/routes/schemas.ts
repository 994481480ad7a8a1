import { posix } from 'node:path';
import {
  agentPhaseSchema,
  agentSpecSchema,
  computeSchema,
  conditionSchema,
  costSchema,
  egressSchema,
  durationSchema,
  environmentSchema,
  freeFormObject,
  metadataSchema,
  modelSchema,
  modelSettingsSchema,
  OVERRIDES_BOUNDS,
  sessionLimitsSchema,
} from '@berth/crds';
import { EXEC_LANGUAGES, approvalPolicySchema, guardrailsSchema } from '@berth/common';
import { z } from 'zod';
import { lifecycleBody } from './lifecycle.js';

/** Request and response schemas of the public API; the OpenAPI document is generated from them. */

export const idParam = (prefix: string, what: string) =>
  z.object({ id: z.string().min(1).max(128).describe(`${what} id (\`${prefix}_…\`)`) }).strict();

export const sessionSchema = z
  .object({
  id: z.string().describe('`ses_…`'),
  userId: z.string().describe("the customer's end-user identifier"),
  environment: environmentSchema,
  limits: sessionLimitsSchema.describe('per-session ceilings; `maxDuration` is the duration ceiling'),
  metadata: z.record(z.string(), z.string()),
  createdAt: z.string().describe('ISO 8601'),
  })
  .meta({ id: 'Session', description: 'one end-user of your application' });

export const userIdSchema = z.string().min(1).max(256);

export const createSessionBody = z
  .object({
    userId: userIdSchema.describe("the customer's end-user identifier"),
    environment: environmentSchema.optional().describe('default production'),
    limits: sessionLimitsSchema.optional(),
    metadata: metadataSchema.optional().describe('string pairs; at most 50 keys of 64 characters, values of 512'),
  })
  .strict();

export const sessionByUserBody = z
  .object({
    limits: sessionLimitsSchema.optional().describe('applied only when the session is created'),
    metadata: metadataSchema.optional().describe('applied only when the session is created'),
  })
  .strict();

export const updateSessionBody = z
  .object({
    limits: sessionLimitsSchema.optional().describe('replaces all limits; {} removes them'),
    metadata: metadataSchema.optional().describe('replaces all metadata'),
  })
  .strict()
  .refine((body) => body.limits !== undefined || body.metadata !== undefined, { message: 'give limits, metadata or both' });

export const sessionPage = z
  .object({
    data: z.array(sessionSchema),
    hasMore: z.boolean(),
    cursor: z.string().optional().describe('pass as `cursor` for the next page; absent on the last page'),
  })
  .meta({ id: 'SessionPage' });

const providerName = z.string().min(1).max(64);
const secretName = z
  .string()
  .max(128)
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment-variable name: letters, digits and _, not starting with a digit');

export const createAgentBody = z
  .object({
    compute: computeSchema.default('python').describe('sandbox runtime'),
    browser: z.boolean().default(false).describe('needs a browser-capable sandbox template'),
    storage: z.string().min(1).max(64).optional().describe('not supported by any current provider: refused'),
    gpu: z.string().min(1).max(64).optional().describe('GPU type; omit for CPU-only'),
    model: modelSchema.optional().describe('`<vendor>/<model>`; the platform default when omitted'),
    instructions: z.string().max(100_000).optional().describe('system prompt'),
    modelSettings: modelSettingsSchema
      .optional()
      .describe("model settings of the agent's runs (beyond the spec): temperature (0–2), maxTokens, topP (0–1); an agent made from a definition gets the definition's config"),
    tools: z.array(z.string().min(1).max(64)).max(64).default([]).describe('tools the agent may call'),
    timeout: durationSchema.default('15m').describe('sandbox lifetime: 30s, 5m, 2h, 1h30m; default 15m, capped at 24h'),
    costCap: costSchema.optional().describe('hard spend ceiling in integer cents'),
    provider: providerName.optional().describe('omit for the platform default'),
    providerFallback: providerName.optional().describe('used when the primary provider is unavailable'),
    region: z.string().min(1).max(64).optional(),
    approvals: approvalPolicySchema
      .optional()
      .describe('tool calls that wait for a person\'s decision: `{ rules: [{ tool, when? }], ttl }` (see Approval policies in the docs)'),
    knowledge: z
      .union([z.boolean(), z.string().min(1).max(200)])
      .optional()
      .describe("true (the session's default collection, made when it has none) or a collection name or id: offers the model the knowledge_search tool over it; an unknown collection is 422"),
    metadata: freeFormObject()
      .optional()
      .describe("extraction rules under `extract` (`{ schema: <JSON schema of an object>, instructions? }`: a completed run's output is validated against it, the model asked once more for JSON if needed, and the result put on the task and in `agent.completed`; a schema that is not valid is 422), and custom pairs (every other key), stored and shown with the agent (at most 8 levels, 16 KiB of JSON)"),
    guardrails: guardrailsSchema
      .optional()
      .describe('checks of what goes into and comes out of the model: `pii`, `promptInjection`, `denyList`, `maxOutputChars`, each with an action (block, redact, flag)'),
    definition: z.string().min(1).max(200).optional().describe('agent definition name or id: the fields come from its current version'),
    overrides: freeFormObject(OVERRIDES_BOUNDS).optional().describe("agent creation fields that replace the definition's; only with definition"),
    secrets: z.array(secretName).max(100).optional().describe('names of secrets injected into the environment'),
    egress: egressSchema
      .optional()
      .describe(
        "where the sandbox may connect (everything else is refused): `hosts` (DNS names, `*.example.com` wildcards), `cidrs` (networks), `credentials` (`{ host, secret, header?, prefix? }`: the egress proxy adds `header: <prefix><secret's value>` to HTTPS requests to host, so the value never enters the sandbox). Omitted: the definition's, else the install default (BERTH_EGRESS_ALLOW, usually none). Changeable while the agent runs with PATCH /v1/agents/{id}. 501 on providers that do not enforce egress",
      ),
    mcp: z
      .union([z.array(z.string().min(1).max(200)).max(100), z.literal('*')])
      .optional()
      .describe('MCP server ids or names (`POST /v1/mcp-servers`), or * for all of the organization: their tools are offered to the model as `mcp__<server>__<tool>`; an unknown server is 422'),
    lifecycle: lifecycleBody.optional(),
  })
  .strict();

/** The agent as the API shows it: the creation fields from the resource spec, minus internal ones, and its status. */
export const agentSchema = z
  .object({
    id: z.string().describe('`agt_…`'),
    status: agentPhaseSchema.describe('booting → idle (ready) → running (a task) → paused / terminated / failed'),
  })
  .extend(
    agentSpecSchema.omit({ organizationId: true, mode: true, userId: true, desiredState: true, timeoutSeconds: true }).shape,
  )
  .extend({
    timeout: z.string().describe('effective lifetime (capped at 24h)'),
    definition: z.string().optional().describe('the agent definition (`adef_…`) the agent was created from'),
    definitionVersion: z.number().int().optional().describe('the version of that definition; later updates of it do not change the agent'),
    createdAt: z.string(),
    startedAt: z.string().optional().describe('when the sandbox became ready'),
    expiresAt: z.string().optional().describe('startedAt + timeout: the sandbox is ended then'),
    endedAt: z.string().optional(),
    error: z.object({ code: z.string(), message: z.string() }).optional().describe('why a failed agent failed'),
    pauseReason: z
      .enum(['requested', 'session_limit', 'cost_cap', 'approval_expired', 'idle', 'fork', 'timeout'])
      .optional()
      .describe('why a paused (or pausing) agent is paused: asked through the API, a session limit reached, its costCap spent, a tool call\'s approval expired, no traffic for its `lifecycle.idle.pauseAfter` (its next exec, run, file or port call wakes it), a fork being taken of it (it resumes at once after), or its `timeout` under `lifecycle.onTimeout: pause` (resume it for a new lifetime)'),
    restarts: z.number().int().optional().describe('sandboxes recreated after they died, under `lifecycle.onFailure.restart`'),
    awaitingApproval: z
      .object({ approvalId: z.string(), taskId: z.string(), action: z.string(), expiresAt: z.string() })
      .optional()
      .describe('present while a tool call of the running task waits for a decision (`POST /v1/approvals/{id}/approve` or `deny`); `status` stays `running`'),
    cost: costSchema.optional().describe("the agent's spend so far (models, compute, storage), updated by the operator every BERTH_METER_INTERVAL; absent until its first charge"),
    conditions: z.array(conditionSchema).describe('details behind `status`, Kubernetes-style'),
  })
  .meta({ id: 'Agent', description: 'an agent: its creation fields and its status' });

export const agentPage = z
  .object({
    data: z.array(agentSchema),
    hasMore: z.boolean(),
    cursor: z.string().optional().describe('pass as `cursor` for the next page; absent on the last page'),
  })
  .meta({ id: 'AgentPage' });

/** Where exec'd programs run by default, and the only tree `cwd` may name. */
export const WORKSPACE = '/workspace';
/** Largest `stdin` an exec takes (it travels in one frame to the sandbox). */
export const MAX_STDIN_BYTES = 512 * 1024;

/**
 * `cwd`: relative to /workspace, or absolute under it; normalised, and refused when it leaves
 * /workspace (`..`, `/etc`), so that a program's directory is always in the agent's workspace.
 */
export const cwdSchema = z
  .string()
  .min(1)
  .max(4096)
  .refine((value) => !value.includes('\0'), 'must not contain NUL')
  .transform((value, context) => {
    const path = posix.resolve(WORKSPACE, value);
    if (path !== WORKSPACE && !path.startsWith(`${WORKSPACE}/`)) {
      context.addIssue({ code: 'custom', message: `must be inside ${WORKSPACE} (relative to it, or absolute under it); "${value}" resolves to ${path}` });
      return z.NEVER;
    }
    return path;
  })
  .describe('working directory: relative to /workspace or absolute under it (default /workspace); leaving /workspace is refused');

export const execEnvSchema = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/, 'an environment variable name: letters, digits, _; not starting with a digit'), z.string().max(32 * 1024).refine((value) => !value.includes('\0'), 'must not contain NUL'))
  .refine((env) => Object.keys(env).length <= 100, 'at most 100 variables')
  .describe("variables added to the sandbox's environment for this program (at most 100, each value up to 32 KiB)");

const execOptionFields = {
  env: execEnvSchema.optional(),
  cwd: cwdSchema.optional(),
  stdin: z
    .string()
    .refine((value) => Buffer.byteLength(value) <= MAX_STDIN_BYTES, `at most ${MAX_STDIN_BYTES / 1024} KiB`)
    .optional()
    .describe(`text written to the program's stdin, which is then closed (UTF-8, at most ${MAX_STDIN_BYTES / 1024} KiB); without it stdin is empty`),
};

export const execBody = z
  .object({
    language: z.enum(EXEC_LANGUAGES).describe('python, typescript or bash'),
    code: z.string().max(1024 * 1024).describe('the program; runs with /workspace as its working directory unless `cwd` says otherwise'),
    ...execOptionFields,
    timeout: z.number().int().min(1).max(120).optional().describe('seconds, 1 to 120 (default and most: 120); a background process: no limit unless given (then up to 120 s too)'),
    background: z.boolean().optional().describe('start the program and answer 202 with its process at once; see /v1/agents/{id}/processes'),
  })
  .strict();

export const execStreamBody = z
  .object({
    language: z.enum(EXEC_LANGUAGES).describe('python, typescript or bash'),
    code: z.string().max(1024 * 1024).describe('the program'),
    ...execOptionFields,
    timeout: z
      .number()
      .int()
      .min(1)
      .max(24 * 3600)
      .optional()
      .describe("seconds (default: the agent's remaining lifetime; never beyond it)"),
  })
  .strict();

export const backgroundProcessSchema = z
  .object({
    pid: z.number().int().describe('the process id inside the sandbox'),
    argv: z.array(z.string()).describe('the command line it was started with'),
    startedAt: z.string().describe('ISO 8601'),
    status: z.enum(['running', 'exited', 'signaled', 'timedOut', 'failed']),
    exitCode: z.number().int().nullable().describe('null while it runs; 128 + signal when a signal ended it'),
    endedAt: z.string().nullable().describe('ISO 8601; null while it runs'),
  })
  .meta({ id: 'BackgroundProcess', description: 'a process started with `background: true`' });

export const backgroundOutputSchema = backgroundProcessSchema
  .extend({
    stdout: z.string().describe('the last 1 MiB of its stdout'),
    stderr: z.string().describe('the last 1 MiB of its stderr'),
    dropped: z.object({ stdout: z.number().int(), stderr: z.number().int() }).describe('bytes dropped before what is shown'),
  })
  .meta({ id: 'BackgroundOutput', description: "a background process's output: the last 1 MiB of each stream" });

export const execResultSchema = z
  .object({
    stdout: z.string(),
    stderr: z.string(),
    exitCode: z.number().int(),
    durationMs: z.number().int(),
  })
  .meta({ id: 'ExecResult', description: 'what a program printed and how it ended; a non-zero exit code is a normal result' });

export const okSchema = z.object({ ok: z.literal(true) }).meta({ id: 'Ok' });

export const emptyBody = z.object({}).strict();

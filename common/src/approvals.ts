import { z } from 'zod';
import { DURATION_PATTERN_SOURCE, parseDuration, type Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import type { EventInput } from './events.js';

/** Longest time a call may wait for a decision. */
export const MAX_APPROVAL_TTL_SECONDS = 7 * 24 * 3600;
export const DEFAULT_APPROVAL_TTL = '1h';

function validPattern(pattern: string): boolean {
  try {
    new RegExp(pattern, 'u');
    return true;
  } catch {
    return false;
  }
}

const ruleSchema = z
  .object({
    tool: z
      .string()
      .min(1)
      .max(64)
      .regex(/^[A-Za-z0-9_*]+$/, 'a tool name, or a glob with * (e.g. browser_*)')
      .describe('tool name or glob (`*` matches any characters): `exec`, `browser_*`, `*`'),
    when: z
      .record(
        z.string().min(1).max(64),
        z.string().min(1).max(500).refine(validPattern, 'not a valid regular expression'),
      )
      .refine((when) => Object.keys(when).length <= 16, 'at most 16 arguments')
      .optional()
      .describe('argument name → regular expression; the rule applies only when every named argument matches (e.g. `{"code": "rm\\\\s+-rf"}`)'),
  })
  .strict();

export const approvalPolicySchema = z
  .object({
    rules: z.array(ruleSchema).min(1).max(50).describe('tool calls that need a decision: the first rule that matches asks for it'),
    ttl: z
      .string()
      .regex(new RegExp(DURATION_PATTERN_SOURCE), 'a duration such as 30m or 1h')
      .refine((text) => {
        const seconds = parseDuration(text);
        return seconds !== undefined && seconds > 0 && seconds <= MAX_APPROVAL_TTL_SECONDS;
      }, 'between 1s and 168h')
      .default(DEFAULT_APPROVAL_TTL)
      .describe('how long a call waits for a decision (default 1h, at most 168h); then it expires and the agent is paused'),
  })
  .strict()
  .meta({ id: 'ApprovalPolicy' });
export type ApprovalPolicy = z.infer<typeof approvalPolicySchema>;
export type ApprovalRule = z.infer<typeof ruleSchema>;

function globToRegExp(glob: string): RegExp {
  return new RegExp(`^${glob.split('*').map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`);
}

function argumentText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value ?? null);
}

/** The index of the first rule that asks for a decision on this call, or undefined. */
export function approvalRuleFor(policy: ApprovalPolicy | undefined, call: { name: string; input: Record<string, unknown> }): number | undefined {
  if (!policy) return undefined;
  const index = policy.rules.findIndex((rule) => {
    if (!globToRegExp(rule.tool).test(call.name)) return false;
    return Object.entries(rule.when ?? {}).every(([argument, pattern]) => argument in call.input && new RegExp(pattern, 'u').test(argumentText(call.input[argument])));
  });
  return index === -1 ? undefined : index;
}

export function approvalTtlSeconds(policy: ApprovalPolicy): number {
  return parseDuration(policy.ttl ?? DEFAULT_APPROVAL_TTL) ?? 3600;
}

/** Secret values shorter than this are not masked: masking `1` or `on` would mask everything. */
const MIN_MASKED_SECRET = 4;
const PREVIEW_STRING_LIMIT = 2_000;

/**
 * What a reviewer sees of a call's input: every secret value the agent holds replaced by
 * `[secret:NAME]`, long strings cut.
 */
export function maskedPreview(input: unknown, secrets: Record<string, string>): unknown {
  const values = Object.entries(secrets)
    .filter(([, value]) => value.length >= MIN_MASKED_SECRET)
    .sort(([, a], [, b]) => b.length - a.length);
  const mask = (text: string): string => {
    let masked = text;
    for (const [name, value] of values) masked = masked.split(value).join(`[secret:${name}]`);
    return masked.length > PREVIEW_STRING_LIMIT ? `${masked.slice(0, PREVIEW_STRING_LIMIT)}…[${masked.length - PREVIEW_STRING_LIMIT} more characters]` : masked;
  };
  const walk = (value: unknown): unknown => {
    if (typeof value === 'string') return mask(value);
    if (Array.isArray(value)) return value.map(walk);
    if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, walk(inner)]));
    return value;
  };
  return walk(input);
}

export type ApprovalState = 'pending' | 'approved' | 'denied' | 'expired' | 'cancelled';

/** A recorded request: what was asked (as `ApprovalRequest`, its times as ISO strings) and its decision. */
export interface Approval extends Omit<ApprovalRequest, 'expiresAt'> {
  state: ApprovalState;
  reason: string | null;
  decidedBy: string | null;
  createdAt: string;
  expiresAt: string;
  decidedAt: string | null;
  callStartedAt: string | null;
}

interface ApprovalRow {
  id: string;
  organization_id: string;
  mode: Mode;
  session_id: string;
  agent_id: string;
  task_id: string;
  tool_call_id: string;
  tool: string;
  preview: unknown;
  rule: number;
  state: ApprovalState;
  reason: string | null;
  decided_by: string | null;
  created_at: Date;
  expires_at: Date;
  decided_at: Date | null;
  call_started_at: Date | null;
}

const COLUMNS = 'id, organization_id, mode, session_id, agent_id, task_id, tool_call_id, tool, preview, rule, state, reason, decided_by, created_at, expires_at, decided_at, call_started_at';

function toApproval(row: ApprovalRow): Approval {
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    sessionId: row.session_id,
    agentId: row.agent_id,
    taskId: row.task_id,
    toolCallId: row.tool_call_id,
    tool: row.tool,
    preview: row.preview,
    rule: row.rule,
    state: row.state,
    reason: row.reason,
    decidedBy: row.decided_by,
    createdAt: row.created_at.toISOString(),
    expiresAt: row.expires_at.toISOString(),
    decidedAt: row.decided_at?.toISOString() ?? null,
    callStartedAt: row.call_started_at?.toISOString() ?? null,
  };
}

export interface ApprovalRequest {
  id: string;
  organizationId: string;
  mode: Mode;
  sessionId: string;
  agentId: string;
  taskId: string;
  toolCallId: string;
  tool: string;
  preview: unknown;
  rule: number;
  expiresAt: Date;
}

/** Records a request; a second request for the same call (a step written again) keeps the first. */
export async function insertApproval(db: Queryable, request: ApprovalRequest): Promise<Approval> {
  const { rows } = await db.query<ApprovalRow>(
    `INSERT INTO approvals (id, organization_id, mode, session_id, agent_id, task_id, tool_call_id, tool, preview, rule, state, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11)
     ON CONFLICT (task_id, tool_call_id) DO UPDATE SET task_id = approvals.task_id
     RETURNING ${COLUMNS}`,
    [request.id, request.organizationId, request.mode, request.sessionId, request.agentId, request.taskId, request.toolCallId, request.tool, JSON.stringify(request.preview), request.rule, request.expiresAt],
  );
  return toApproval(rows[0]!);
}

export async function findApproval(db: Queryable, id: string): Promise<Approval | undefined> {
  const { rows } = await db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE id = $1`, [id]);
  return rows[0] ? toApproval(rows[0]) : undefined;
}

export async function approvalOfCall(db: Queryable, taskId: string, toolCallId: string): Promise<Approval | undefined> {
  const { rows } = await db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE task_id = $1 AND tool_call_id = $2`, [taskId, toolCallId]);
  return rows[0] ? toApproval(rows[0]) : undefined;
}

/** Approvals of an organization (and mode), newest first, optionally of one agent or state; `before` pages by id. */
export async function listApprovals(
  db: Queryable,
  where: { organizationId: string; mode: Mode; agentId?: string; state?: ApprovalState; before?: string; limit: number },
): Promise<Approval[]> {
  const params: unknown[] = [where.organizationId, where.mode];
  const clauses = ['organization_id = $1', 'mode = $2'];
  if (where.agentId) clauses.push(`agent_id = $${params.push(where.agentId)}`);
  if (where.state) clauses.push(`state = $${params.push(where.state)}`);
  if (where.before) clauses.push(`id < $${params.push(where.before)}`);
  const { rows } = await db.query<ApprovalRow>(
    `SELECT ${COLUMNS} FROM approvals WHERE ${clauses.join(' AND ')} ORDER BY id DESC LIMIT $${params.push(where.limit)}`,
    params,
  );
  return rows.map(toApproval);
}

/** The agent's pending approval, if a call of its run waits for one. */
export async function pendingApprovalOf(db: Queryable, agentId: string): Promise<Approval | undefined> {
  const { rows } = await db.query<ApprovalRow>(`SELECT ${COLUMNS} FROM approvals WHERE agent_id = $1 AND state = 'pending' ORDER BY id DESC LIMIT 1`, [agentId]);
  return rows[0] ? toApproval(rows[0]) : undefined;
}

/**
 * Decides a pending approval; undefined when it is no longer pending (decided, or expired: a
 * request past its expiry cannot be approved even before the runner marked it).
 */
export async function decideApproval(
  db: Queryable,
  id: string,
  decision: { state: 'approved' | 'denied' | 'expired'; reason?: string | undefined; decidedBy?: string | undefined },
  at: Date,
): Promise<Approval | undefined> {
  const { rows } = await db.query<ApprovalRow>(
    `UPDATE approvals SET state = $2, reason = $3, decided_by = $4, decided_at = $5
     WHERE id = $1 AND state = 'pending' AND (($2 = 'expired') = (expires_at <= $5))
     RETURNING ${COLUMNS}`,
    [id, decision.state, decision.reason ?? null, decision.decidedBy ?? null, at],
  );
  return rows[0] ? toApproval(rows[0]) : undefined;
}

/** Marks an approved call as started; false when it already was (by a runner that then stopped). */
export async function startApprovedCall(db: Queryable, id: string): Promise<boolean> {
  const result = await db.query(`UPDATE approvals SET call_started_at = now() WHERE id = $1 AND state = 'approved' AND call_started_at IS NULL`, [id]);
  return (result.rowCount ?? 0) > 0;
}

/** Closes the requests of a run that ended while they waited: nothing is left to act on a decision. */
export async function cancelPendingApprovals(db: Queryable, taskId: string, at: Date): Promise<number> {
  const result = await db.query(
    `UPDATE approvals SET state = 'cancelled', reason = 'the run ended before a decision', decided_at = $2 WHERE task_id = $1 AND state = 'pending'`,
    [taskId, at],
  );
  return result.rowCount ?? 0;
}

/** What the agent stream's `approval.*` events carry. */
export function approvalStreamData(approval: Approval): Record<string, unknown> {
  return {
    taskId: approval.taskId,
    approvalId: approval.id,
    id: approval.toolCallId,
    tool: approval.tool,
    parameters: approval.preview,
    state: approval.state,
    expiresAt: approval.expiresAt,
    ...(approval.reason ? { reason: approval.reason } : {}),
  };
}

/** The lifecycle event of an approval in its current state (`approval.requested` while pending). */
export function approvalEvent(approval: Approval): EventInput {
  // A cancelled request has no event of its own: the run's end (agent.failed, agent.paused) says why.
  if (approval.state === 'cancelled') throw new Error(`approval ${approval.id} is cancelled: it has no lifecycle event`);
  const type = approval.state === 'pending' ? 'approval.requested' : (`approval.${approval.state}` as const);
  return {
    type,
    organizationId: approval.organizationId,
    mode: approval.mode,
    subjectId: approval.agentId,
    occurrence: `${approval.id}/${type}`,
    data: {
      approvalId: approval.id,
      agentId: approval.agentId,
      sessionId: approval.sessionId,
      taskId: approval.taskId,
      action: approval.tool,
      parameters: approval.preview,
      expiresAt: approval.expiresAt,
      ...(approval.state === 'pending' ? {} : { reason: approval.reason, decidedAt: approval.decidedAt }),
    },
  };
}

import {
  ApiError,
  appendStreamEvent,
  approvalEvent,
  approvalStreamData,
  decideApproval,
  findApproval,
  listApprovals,
  recordEvent,
  withTransaction,
  type Approval,
  type ApprovalState,
  type Clock,
  type Pool,
} from '@berth/common';
import type { Mode } from '@berth/crds';
import { Counter, type Registry } from 'prom-client';
import type { CursorCodec, PageRequest } from './pagination.js';

/** Where approvals are read and decided: an organization's live or test records. */
export interface ApprovalScope {
  organizationId: string;
  mode: Mode;
}

export function approvalView(approval: Approval) {
  return {
    id: approval.id,
    agentId: approval.agentId,
    sessionId: approval.sessionId,
    taskId: approval.taskId,
    toolCallId: approval.toolCallId,
    action: approval.tool,
    parameters: approval.preview,
    state: approval.state,
    reason: approval.reason ?? undefined,
    decidedBy: approval.decidedBy ?? undefined,
    createdAt: approval.createdAt,
    expiresAt: approval.expiresAt,
    decidedAt: approval.decidedAt ?? undefined,
  };
}
export type ApprovalView = ReturnType<typeof approvalView>;

export function createApprovalService(deps: { pool: Pool; clock: Clock; cursors: CursorCodec; metrics: Registry }) {
  const { pool, clock, cursors } = deps;
  const decisions = new Counter({
    name: 'berth_approval_decisions_total',
    help: 'Decisions on approval requests through the API, by outcome (approved, denied, refused: not pending)',
    labelNames: ['outcome'],
    registers: [deps.metrics],
  });
  const list = `approvals`;

  async function owned(scope: ApprovalScope, id: string): Promise<Approval> {
    const approval = await findApproval(pool, id);
    if (!approval || approval.organizationId !== scope.organizationId || approval.mode !== scope.mode) {
      throw new ApiError('not_found', `approval ${id} not found`);
    }
    return approval;
  }

  return {
    async list(scope: ApprovalScope, query: PageRequest & { agentId?: string | undefined; state: ApprovalState | 'any' }) {
      const before = query.cursor ? cursors.decode(list, query.cursor) : undefined;
      const rows = await listApprovals(pool, {
        ...scope,
        ...(query.agentId ? { agentId: query.agentId } : {}),
        ...(query.state === 'any' ? {} : { state: query.state }),
        ...(before ? { before } : {}),
        limit: query.limit + 1,
      });
      const page = rows.slice(0, query.limit);
      const hasMore = rows.length > query.limit;
      return { data: page.map(approvalView), hasMore, ...(hasMore ? { cursor: cursors.encode(list, page.at(-1)!.id) } : {}) };
    },

    async get(scope: ApprovalScope, id: string): Promise<ApprovalView> {
      return approvalView(await owned(scope, id));
    },

    /**
     * Approves or denies a pending request; the waiting run reads the decision and goes on. The
     * decision, its lifecycle event and its stream event are written together. A request that
     * is decided, or past its expiry, answers 409 `conflict` with `details.state`.
     */
    async decide(scope: ApprovalScope, id: string, decision: { state: 'approved' | 'denied'; reason?: string | undefined; decidedBy: string }): Promise<ApprovalView> {
      const current = await owned(scope, id);
      const now = clock.now();
      const decided = await withTransaction(pool, async (tx) => {
        const row = await decideApproval(tx, id, decision, now);
        if (!row) return undefined;
        await recordEvent(tx, approvalEvent(row), now);
        await appendStreamEvent(tx, { agentId: row.agentId, taskId: row.taskId, type: `approval.${decision.state}`, data: approvalStreamData(row) });
        return row;
      });
      if (!decided) {
        decisions.inc({ outcome: 'refused' });
        const latest = (await findApproval(pool, id)) ?? current;
        const state = latest.state === 'pending' ? 'expired' : latest.state;
        throw new ApiError('conflict', `approval ${id} is ${state}: only a pending request can be decided`, { state });
      }
      decisions.inc({ outcome: decision.state });
      return approvalView(decided);
    },
  };
}
export type ApprovalService = ReturnType<typeof createApprovalService>;

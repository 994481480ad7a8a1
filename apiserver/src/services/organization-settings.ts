import {
  ApiError,
  assertInstallCurrency,
  getOrganizationPlan,
  getSessionDefaults,
  listAudit,
  planRateLimits,
  recordAudit,
  setOrganizationPlan,
  setSessionDefaults,
  withTransaction,
  type AuditActor,
  type Clock,
  type Plan,
  type PlanSettings,
  type Pool,
  type PoolClient,
} from '@berth/common';
import type { SessionLimits } from '@berth/crds';
import type { CursorCodec } from './pagination.js';

const AUDIT_LIST = 'audit-log';

/**
 * What owners and admins set for their organization (its name, plan and budgets) and the
 * audit log of such changes. Each change and its audit entry are written in one transaction,
 * after locking the organization's row, so concurrent changes record what each replaced.
 */
export function createOrganizationSettingsService(deps: { pool: Pool; clock: Clock; plans: PlanSettings; currency: string; cursors: CursorCodec }) {
  const { pool, clock } = deps;

  async function organizationView(organizationId: string) {
    const { rows } = await pool.query<{ id: string; name: string; created_at: Date }>('SELECT id, name, created_at FROM organizations WHERE id = $1', [organizationId]);
    if (!rows[0]) throw new ApiError('not_found', `organization ${organizationId} does not exist`, { organizationId });
    return { id: rows[0].id, name: rows[0].name, createdAt: rows[0].created_at.toISOString() };
  }

  async function planView(organizationId: string) {
    const plan = await getOrganizationPlan(pool, organizationId, deps.plans);
    if (!plan) throw new ApiError('not_found', `organization ${organizationId} does not exist`, { organizationId });
    return { ...plan, defaultPlan: deps.plans.defaultPlan, plans: planRateLimits(deps.plans) };
  }

  async function locked<T>(organizationId: string, work: (tx: PoolClient, row: { name: string; plan: Plan | null }) => Promise<T>): Promise<T> {
    return withTransaction(pool, async (tx) => {
      const { rows } = await tx.query<{ name: string; plan: Plan | null }>('SELECT name, plan FROM organizations WHERE id = $1 FOR UPDATE', [organizationId]);
      if (!rows[0]) throw new ApiError('not_found', `organization ${organizationId} does not exist`, { organizationId });
      return work(tx, rows[0]);
    });
  }

  return {
    organization: organizationView,

    async rename(organizationId: string, actor: AuditActor, name: string) {
      await locked(organizationId, async (tx, before) => {
        await tx.query('UPDATE organizations SET name = $2 WHERE id = $1', [organizationId, name]);
        await recordAudit(tx, { organizationId, actor, action: 'organization.renamed', target: { type: 'organization', id: organizationId }, details: { from: before.name, to: name }, at: clock.now() });
      });
      return organizationView(organizationId);
    },

    plan: planView,

    /** A plan of its own, or null to follow the install's default; it counts from the next request. */
    async changePlan(organizationId: string, actor: AuditActor, plan: Plan | null) {
      await locked(organizationId, async (tx, before) => {
        await setOrganizationPlan(tx, organizationId, plan);
        await recordAudit(tx, { organizationId, actor, action: 'plan.changed', target: { type: 'organization', id: organizationId }, details: { from: before.plan, to: plan }, at: clock.now() });
      });
      return planView(organizationId);
    },

    async budgets(organizationId: string) {
      return { sessionDefaults: await getSessionDefaults(pool, organizationId) };
    },

    /** Applies to sessions created from now on; sessions that exist keep their limits. */
    async setBudgets(organizationId: string, actor: AuditActor, sessionDefaults: SessionLimits) {
      assertInstallCurrency(deps.currency, 'sessionDefaults.maxCost.currency', sessionDefaults.maxCost?.currency);
      await locked(organizationId, async (tx) => {
        const before = await getSessionDefaults(tx, organizationId);
        await setSessionDefaults(tx, organizationId, sessionDefaults);
        await recordAudit(tx, { organizationId, actor, action: 'budgets.changed', target: { type: 'organization', id: organizationId }, details: { from: before, to: sessionDefaults }, at: clock.now() });
      });
      return { sessionDefaults };
    },

    async auditLog(organizationId: string, page: { limit: number; cursor?: string | undefined }) {
      const before = page.cursor ? deps.cursors.decode(`${AUDIT_LIST}:${organizationId}`, page.cursor) : undefined;
      const { entries, hasMore } = await listAudit(pool, organizationId, { limit: page.limit, before });
      const last = entries.at(-1);
      return {
        data: entries.map(({ organizationId: _, seq: __, ...entry }) => entry),
        hasMore,
        ...(hasMore && last ? { nextCursor: deps.cursors.encode(`${AUDIT_LIST}:${organizationId}`, last.seq) } : {}),
      };
    },
  };
}

export type OrganizationSettingsService = ReturnType<typeof createOrganizationSettingsService>;

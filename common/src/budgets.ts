import { sessionLimitsSchema, type SessionLimits } from '@berth/crds';
import type { Queryable } from './db/index.js';

/**
 * An organization's budgets: the limits every new session gets for those it does not give
 * itself (`maxCost`, `maxAgents`, `maxComputeMinutes`, `maxDuration`); `{}` sets none.
 */
export async function getSessionDefaults(db: Queryable, organizationId: string): Promise<SessionLimits> {
  const { rows } = await db.query<{ session_defaults: unknown }>('SELECT session_defaults FROM organizations WHERE id = $1', [organizationId]);
  return rows[0] ? sessionLimitsSchema.parse(rows[0].session_defaults) : {};
}

/** Replaces the organization's session defaults; sessions that exist keep their limits. */
export async function setSessionDefaults(db: Queryable, organizationId: string, limits: SessionLimits): Promise<boolean> {
  const { rowCount } = await db.query('UPDATE organizations SET session_defaults = $2 WHERE id = $1', [organizationId, JSON.stringify(limits)]);
  return (rowCount ?? 0) > 0;
}

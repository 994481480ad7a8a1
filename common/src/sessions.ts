import type { Environment, SessionLimits } from '@berth/crds';
import { getSessionDefaults } from './budgets.js';
import type { Pool } from './db/index.js';
import { idToObjectName, objectNameToId } from './ids.js';
import type { Principal } from './principal.js';
import { Labels, isStoreError, type Resource, type ResourceStore } from './store/types.js';

export interface CreateSessionInput {
  userId: string;
  environment?: Environment | undefined;
  limits?: SessionLimits | undefined;
  metadata?: Record<string, string> | undefined;
}

/** The labels that scope a resource to the principal's organization and mode. */
export function scopeLabels(principal: Pick<Principal, 'organizationId' | 'mode'>): Record<string, string> {
  return { [Labels.organization]: principal.organizationId, [Labels.mode]: principal.mode };
}

/**
 * Writes the Session resource with this id. Limits the input does not give come from the
 * organization's budgets (its session defaults, set on the management plane).
 */
export async function createSessionResource(
  deps: { store: ResourceStore; pool: Pool },
  principal: Principal,
  id: string,
  input: CreateSessionInput,
): Promise<Resource<'Session'>> {
  const defaults = await getSessionDefaults(deps.pool, principal.organizationId);
  return deps.store.create('Session', {
    name: idToObjectName(id),
    labels: scopeLabels(principal),
    spec: {
      organizationId: principal.organizationId,
      mode: principal.mode,
      userId: input.userId,
      environment: input.environment ?? 'production',
      limits: { ...defaults, ...input.limits },
      metadata: input.metadata ?? {},
    },
    status: { phase: 'active' },
  });
}

/** Records the session as the user's default unless the user already has one; returns the default's id. */
export async function claimDefaultSession(pool: Pool, principal: Principal, userId: string, sessionId: string): Promise<string> {
  const key = [principal.organizationId, principal.mode, userId];
  const inserted = await pool.query<{ session_id: string }>(
    `INSERT INTO session_users (organization_id, mode, user_id, session_id) VALUES ($1, $2, $3, $4)
     ON CONFLICT DO NOTHING RETURNING session_id`,
    [...key, sessionId],
  );
  if (inserted.rows[0]) return inserted.rows[0].session_id;
  // A separate statement: it takes a new snapshot, so it sees a claim that a concurrent call just committed.
  const existing = await pool.query<{ session_id: string }>(
    'SELECT session_id FROM session_users WHERE organization_id = $1 AND mode = $2 AND user_id = $3',
    key,
  );
  return existing.rows[0]!.session_id;
}

/**
 * Get-or-create of the user's default session, safe under concurrent calls: the claim row
 * decides which id wins (`candidateId` only when the user has none yet), and the resource is
 * created for that id if it is not there yet (also after a crash between the two writes).
 */
export async function getOrCreateUserSession(
  deps: { store: ResourceStore; pool: Pool },
  principal: Principal,
  candidateId: string,
  input: CreateSessionInput,
): Promise<{ session: Resource<'Session'>; created: boolean }> {
  const sessionId = await claimDefaultSession(deps.pool, principal, input.userId, candidateId);
  const existing = await deps.store.get('Session', idToObjectName(sessionId));
  if (existing) return { session: existing, created: false };
  try {
    return { session: await createSessionResource(deps, principal, sessionId, input), created: true };
  } catch (error) {
    if (!isStoreError(error, 'AlreadyExists')) throw error;
    const raced = await deps.store.get('Session', idToObjectName(sessionId));
    if (!raced) throw error;
    return { session: raced, created: false };
  }
}

export function sessionIdOf(session: Resource<'Session'>): string {
  return objectNameToId(session.metadata.name);
}

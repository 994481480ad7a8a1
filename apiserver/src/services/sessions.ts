import {
  Labels,
  idToObjectName,
  isStoreError,
  newId,
  objectNameToId,
  type Clock,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { Environment, SessionLimits } from '@berth/crds';
import type { Principal } from '../http/context.js';
import { assertInstallCurrency } from './limits.js';
import { listPage, type CursorCodec, type PageRequest } from './pagination.js';
import { findOwned } from './scope.js';

export interface SessionView {
  id: string;
  userId: string;
  environment: Environment;
  limits: SessionLimits;
  metadata: Record<string, string>;
  createdAt: string;
}

export function sessionView(session: Resource<'Session'>): SessionView {
  return {
    id: objectNameToId(session.metadata.name),
    userId: session.spec.userId,
    environment: session.spec.environment,
    limits: session.spec.limits,
    metadata: session.spec.metadata,
    createdAt: session.metadata.creationTimestamp,
  };
}

export interface CreateSessionInput {
  userId: string;
  environment?: Environment;
  limits?: SessionLimits;
  metadata?: Record<string, string>;
}

export function createSessionService(deps: { store: ResourceStore; pool: Pool; clock: Clock; cursors: CursorCodec; currency: string }) {
  const { store, pool, clock } = deps;
  const checkLimits = (limits: SessionLimits | undefined) => assertInstallCurrency(deps.currency, 'limits.maxCost.currency', limits?.maxCost?.currency);

  function scopeLabels(principal: Principal): Record<string, string> {
    return { [Labels.organization]: principal.organizationId, [Labels.mode]: principal.mode };
  }

  async function createResource(principal: Principal, id: string, input: CreateSessionInput): Promise<Resource<'Session'>> {
    return store.create('Session', {
      name: idToObjectName(id),
      labels: scopeLabels(principal),
      spec: {
        organizationId: principal.organizationId,
        mode: principal.mode,
        userId: input.userId,
        environment: input.environment ?? 'production',
        limits: input.limits ?? {},
        metadata: input.metadata ?? {},
      },
      status: { phase: 'active' },
    });
  }

  /** Records the session as the user's default unless the user already has one; returns the default's id. */
  async function claimDefault(principal: Principal, userId: string, sessionId: string): Promise<string> {
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

  const find = (principal: Principal, id: string) => findOwned(store, 'Session', 'ses', principal, id);

  return {
    find,

    async get(principal: Principal, id: string): Promise<SessionView> {
      return sessionView(await find(principal, id));
    },

    async create(principal: Principal, input: CreateSessionInput): Promise<SessionView> {
      checkLimits(input.limits);
      const session = await createResource(principal, newId('ses', clock.now()), input);
      await claimDefault(principal, input.userId, objectNameToId(session.metadata.name));
      return sessionView(session);
    },

    /**
     * Get-or-create of the user's default session, safe under concurrent calls: the claim
     * row decides which id wins, and the resource is created for that id if it is not there
     * yet (also after a crash between the two writes).
     */
    async getOrCreateForUser(
      principal: Principal,
      userId: string,
      input: Omit<CreateSessionInput, 'userId'>,
    ): Promise<{ session: SessionView; created: boolean }> {
      checkLimits(input.limits);
      const candidate = newId('ses', clock.now());
      const sessionId = await claimDefault(principal, userId, candidate);
      const existing = await store.get('Session', idToObjectName(sessionId));
      if (existing) return { session: sessionView(existing), created: false };
      try {
        const session = await createResource(principal, sessionId, { ...input, userId });
        return { session: sessionView(session), created: true };
      } catch (error) {
        if (!isStoreError(error, 'AlreadyExists')) throw error;
        const raced = await store.get('Session', idToObjectName(sessionId));
        if (!raced) throw error;
        return { session: sessionView(raced), created: false };
      }
    },

    /**
     * Replaces the session's limits and/or metadata (each as a whole, when given). Raising a
     * limit that was reached lets run, exec and resume through again; paused agents stay paused
     * until resumed.
     */
    async update(principal: Principal, id: string, input: { limits?: SessionLimits | undefined; metadata?: Record<string, string> | undefined }): Promise<SessionView> {
      checkLimits(input.limits);
      const session = await find(principal, id);
      const updated = await store.updateSpec('Session', session.metadata.name, (current) => ({
        ...current.spec,
        ...(input.limits !== undefined ? { limits: input.limits } : {}),
        ...(input.metadata !== undefined ? { metadata: input.metadata } : {}),
      }));
      return sessionView(updated);
    },

    /** Newest first; the cursor continues after the last session of the previous page. */
    list(principal: Principal, page: PageRequest) {
      return listPage(store, deps.cursors, 'Session', scopeLabels(principal), page, sessionView);
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;

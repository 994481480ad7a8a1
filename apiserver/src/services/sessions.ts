import {
  assertInstallCurrency,
  claimDefaultSession,
  createSessionResource,
  getOrCreateUserSession,
  newId,
  objectNameToId,
  scopeLabels,
  type Clock,
  type CreateSessionInput,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { Environment, SessionLimits } from '@berth/crds';
import type { Principal } from '../http/context.js';
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

export function createSessionService(deps: { store: ResourceStore; pool: Pool; clock: Clock; cursors: CursorCodec; currency: string }) {
  const { store, pool, clock } = deps;
  const checkLimits = (limits: SessionLimits | undefined) => assertInstallCurrency(deps.currency, 'limits.maxCost.currency', limits?.maxCost?.currency);

  const find = (principal: Principal, id: string) => findOwned(store, 'Session', 'ses', principal, id);

  return {
    find,

    async get(principal: Principal, id: string): Promise<SessionView> {
      return sessionView(await find(principal, id));
    },

    async create(principal: Principal, input: CreateSessionInput): Promise<SessionView> {
      checkLimits(input.limits);
      const session = await createSessionResource({ store, pool }, principal, newId('ses', clock.now()), input);
      await claimDefaultSession(pool, principal, input.userId, objectNameToId(session.metadata.name));
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
      const { session, created } = await getOrCreateUserSession({ store, pool }, principal, newId('ses', clock.now()), { ...input, userId });
      return { session: sessionView(session), created };
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

import type { Clock } from './clock.js';
import { withTransaction, type Pool } from './db/index.js';
import { ApiError } from './errors.js';
import { recordEvent } from './events.js';
import { objectNameToId } from './ids.js';
import { hasSpendLimits, limitBreach, periodKey, sessionSpend } from './limits.js';
import { Labels, type Resource, type ResourceStore } from './store/types.js';

/**
 * Amounts must be in the install's currency (BERTH_CURRENCY): prices, the ledger and every limit
 * are in it, and a cap in another currency could only be compared as if it were.
 */
export function assertInstallCurrency(installCurrency: string, field: string, given: string | undefined): void {
  if (given === undefined || given === installCurrency) return;
  const problem = `must be "${installCurrency}", the currency of this install`;
  throw new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
}

/** Agents that count against maxAgents: all but those that ended. */
const ENDED = new Set(['terminated', 'failed']);

/**
 * The refusing side of session limits: while a limit is reached, calls that would use compute or
 * models answer 402 `session_limit_exceeded`; creating an agent beyond `maxAgents` too. The API
 * and the job executor both ask it before they create an agent or start a run.
 */
export function createLimitGuard(deps: { pool: Pool; store: ResourceStore; clock: Clock }) {
  const { pool, store, clock } = deps;
  return {
    /** Throws 402 when the session has reached its cost, compute-minute or duration limit. */
    async assertWithin(session: Resource<'Session'>, action: string): Promise<void> {
      if (session.spec.mode !== 'live' || !hasSpendLimits(session.spec.limits)) return;
      const now = clock.now();
      const sessionId = objectNameToId(session.metadata.name);
      const breach = limitBreach(session, await sessionSpend(pool, sessionId, session.spec.limits, now), now);
      if (breach) {
        throw new ApiError('session_limit_exceeded', `${action} refused: ${breach.message}`, {
          sessionId,
          limit: breach.limit,
          current: breach.current,
          max: breach.max,
        });
      }
    },

    /**
     * Runs `create` when the session has room for one more agent. Concurrent creations in one
     * session (from any API process) queue on an advisory lock, so the limit holds exactly.
     */
    async withAgentSlot<T>(session: Resource<'Session'>, create: () => Promise<T>): Promise<T> {
      const max = session.spec.limits.maxAgents;
      if (max === undefined) return create();
      return withTransaction(pool, async (tx) => {
        await tx.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`maxAgents/${session.metadata.name}`]);
        const { items } = await store.list('Agent', { labels: { [Labels.session]: session.metadata.name } });
        const current = items.filter((agent) => agent.spec.desiredState !== 'terminated' && !ENDED.has(agent.status?.phase ?? 'booting')).length;
        if (current >= max) {
          // session.limit_reached for maxAgents too (nothing is paused: no agent is over the limit);
          // once a day per limit value, however often creations are refused.
          const now = clock.now();
          await recordEvent(
            pool,
            {
              type: 'session.limit_reached',
              organizationId: session.spec.organizationId,
              mode: session.spec.mode,
              subjectId: objectNameToId(session.metadata.name),
              occurrence: `${session.metadata.uid}/session.limit_reached/maxAgents/${max}/${periodKey('day', now)}`,
              data: { sessionId: objectNameToId(session.metadata.name), userId: session.spec.userId, limit: 'maxAgents', current, max, pausedAgents: [] },
            },
            now,
          );
          throw new ApiError('session_limit_exceeded', `the session has ${current} agents, its limit (maxAgents) is ${max}; terminate one first`, {
            sessionId: objectNameToId(session.metadata.name),
            limit: 'maxAgents',
            current,
            max,
          });
        }
        return create();
      });
    },
  };
}

export type LimitGuard = ReturnType<typeof createLimitGuard>;

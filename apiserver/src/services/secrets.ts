import {
  ApiError,
  SECRET_NAME_PATTERN,
  deleteSecret,
  listSecretNames,
  objectNameToId,
  putSecrets,
  withTransaction,
  type Clock,
  type Pool,
  type SecretBox,
} from '@berth/common';
import type { Principal } from '../http/context.js';
import type { SessionService } from './sessions.js';

/**
 * Secrets of an organization or of one session. Values go in and are never given back: not
 * in responses, logs or errors (which name secrets, never show them).
 */
export function createSecretService(deps: { pool: Pool; box: SecretBox; clock: Clock; sessions: SessionService }) {
  const { pool, box, clock, sessions } = deps;

  async function scopeOf(principal: Principal, sessionId: string | undefined) {
    const scope = sessionId === undefined ? '' : objectNameToId((await sessions.find(principal, sessionId)).metadata.name);
    return { organizationId: principal.organizationId, mode: principal.mode, scope };
  }

  return {
    async put(principal: Principal, values: Record<string, string>, sessionId?: string) {
      const where = await scopeOf(principal, sessionId);
      const count = await withTransaction(pool, (tx) => putSecrets(tx, box, where, values, clock.now()));
      return { ok: true as const, count };
    },

    async list(principal: Principal, sessionId?: string) {
      return { data: await listSecretNames(pool, await scopeOf(principal, sessionId)) };
    },

    async delete(principal: Principal, name: string, sessionId?: string) {
      const where = await scopeOf(principal, sessionId);
      if (!SECRET_NAME_PATTERN.test(name) || !(await deleteSecret(pool, { ...where, name }))) {
        throw new ApiError('not_found', `secret ${name} does not exist${sessionId ? ` in session ${sessionId}` : ''}`, { name });
      }
      return { ok: true as const };
    },
  };
}

export type SecretService = ReturnType<typeof createSecretService>;

import { ApiError, KEY_PATTERN, findApiKey, touchApiKey, type Clock, type Queryable } from '@berth/common';
import type { RequestHandler } from 'express';
import type { RateLimiter } from './rate-limit.js';

/**
 * API-key authentication for `/v1`, then the key's rate limit (without `rateLimiter` nothing
 * is limited: only the floor of the rate-limit bench). The three 401 codes:
 * - `unauthorized`: no credentials at all (no `Authorization: Bearer` header);
 * - `auth/invalid_key`: a bearer token that is not a key of this install;
 * - `auth/key_revoked`: a key that existed and was revoked.
 */
export function authenticate(deps: { db: Queryable; clock: Clock; rateLimiter?: RateLimiter }): RequestHandler {
  return async (req, res, next) => {
    const header = req.get('authorization');
    const match = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
    if (!match) {
      throw new ApiError('unauthorized', header ? 'the Authorization header must be "Bearer <API key>"' : 'missing API key: send "Authorization: Bearer <API key>"');
    }
    const key = match[1]!;
    const record = KEY_PATTERN.test(key) ? await findApiKey(deps.db, key) : undefined;
    if (!record) throw new ApiError('auth/invalid_key', 'the API key is not valid');
    if (record.revokedAt) throw new ApiError('auth/key_revoked', 'the API key has been revoked', { revokedAt: record.revokedAt });
    req.principal = { organizationId: record.organizationId, mode: record.mode, keyId: record.id };
    req.log = req.log.child({ keyId: record.id, mode: record.mode });
    touchApiKey(deps.db, record.id, deps.clock.now()).catch((error: unknown) =>
      req.log.warn({ err: error }, 'could not record key use'),
    );
    await deps.rateLimiter?.admit(req.principal, res);
    next();
  };
}

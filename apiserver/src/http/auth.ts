import { ApiError, KEY_PATTERN, findApiKey, touchApiKey, type ApiKeyRecord, type Clock, type Queryable } from '@berth/common';
import type { RequestHandler, Response } from 'express';
import type { RateLimiter } from './rate-limit.js';

/** How often a key's `last_used_at` is written at most (as `touchApiKey` keeps it). */
const TOUCH_INTERVAL_MS = 60_000;

/**
 * API-key authentication for `/v1`, then the key's rate limit (without `rateLimiter` nothing
 * is limited: only the floor of the rate-limit bench). The key's lookup and its rate-limit take
 * are one statement (one round trip; a revoked key's request is not counted). The three 401 codes:
 * - `unauthorized`: no credentials at all (no `Authorization: Bearer` header);
 * - `auth/invalid_key`: a bearer token that is not a key of this install;
 * - `auth/key_revoked`: a key that existed and was revoked.
 */
export function authenticate(deps: { db: Queryable; clock: Clock; rateLimiter?: RateLimiter }): RequestHandler {
  // When this process last recorded each key's use: `last_used_at` moves at most once a minute,
  // so a busy key's requests skip that write's round trip (one of the few each request makes).
  const touched = new Map<string, number>();
  return async (req, res, next) => {
    const { record, admit } = await findBearerKeyCounted(deps.db, deps.rateLimiter, req.get('authorization'));
    req.principal = { organizationId: record.organizationId, mode: record.mode, keyId: record.id };
    req.log = req.log.child({ keyId: record.id, mode: record.mode });
    const now = deps.clock.now();
    if (now.getTime() - (touched.get(record.id) ?? -Infinity) >= TOUCH_INTERVAL_MS) {
      if (touched.size >= 10_000) touched.clear();
      touched.set(record.id, now.getTime());
      touchApiKey(deps.db, record.id, now).catch((error: unknown) => {
        touched.delete(record.id);
        req.log.warn({ err: error }, 'could not record key use');
      });
    }
    admit(res);
    next();
  };
}

/** The key record of an `Authorization: Bearer <API key>` header, or the 401 it deserves. */
export async function verifyBearerKey(db: Queryable, header: string | undefined): Promise<ApiKeyRecord> {
  return validKey(await findApiKey(db, bearerKeyOf(header)));
}

/**
 * The key record of an `Authorization: Bearer <API key>` header (or the 401 it deserves), its
 * request counted by `rateLimiter` in the lookup's round trip; `admit` applies the count (the
 * rate-limit headers, or the 429).
 */
export async function findBearerKeyCounted(
  db: Queryable,
  rateLimiter: RateLimiter | undefined,
  header: string | undefined,
): Promise<{ record: ApiKeyRecord; admit: (res: Response) => void }> {
  const key = bearerKeyOf(header);
  if (!rateLimiter) return { record: validKey(await findApiKey(db, key)), admit: () => undefined };
  const found = await rateLimiter.findKey(key);
  const record = validKey(found?.record);
  return { record, admit: found?.admit ?? (() => undefined) };
}

/**
 * The key of an `Authorization: Bearer <token>` header, or the 401 it deserves: `unauthorized`
 * without the header's form, `auth/invalid_key` for a token not of the keys' form (not looked up).
 */
function bearerKeyOf(header: string | undefined): string {
  const match = header ? /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header) : null;
  if (!match) {
    throw new ApiError('unauthorized', header ? 'the Authorization header must be "Bearer <API key>"' : 'missing API key: send "Authorization: Bearer <API key>"');
  }
  if (!KEY_PATTERN.test(match[1]!)) throw invalidKey();
  return match[1]!;
}

function invalidKey(): ApiError {
  return new ApiError('auth/invalid_key', 'the API key is not valid');
}

/** The record of a key that may be used, or the 401 it deserves. */
function validKey(record: ApiKeyRecord | undefined): ApiKeyRecord {
  if (!record) throw invalidKey();
  if (record.revokedAt) throw new ApiError('auth/key_revoked', 'the API key has been revoked', { revokedAt: record.revokedAt });
  return record;
}

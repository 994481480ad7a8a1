import { createHash, randomBytes } from 'node:crypto';
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';
import { RATE_LIMIT_COLUMNS, rateLimitTakeArguments, toRateLimitDecision, type RateLimitDecision, type RateLimitRow, type RateLimitTake } from './plans.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const SECRET_LENGTH = 40; // ~238 bits
/** Random characters of the key kept visible in listings after creation. */
const VISIBLE_CHARS = 6;

export const KEY_PREFIX: Record<Mode, string> = { live: 'svc_live_', test: 'svc_test_' };

/** `svc_live_` or `svc_test_` followed by 40 base62 characters. */
export const KEY_PATTERN = /^svc_(live|test)_[0-9A-Za-z]{40}$/;

export function generateKey(mode: Mode): string {
  let secret = '';
  // Rejection sampling keeps every character equally likely.
  while (secret.length < SECRET_LENGTH) {
    for (const byte of randomBytes(SECRET_LENGTH)) {
      if (byte < 248 && secret.length < SECRET_LENGTH) secret += BASE62[byte % 62];
    }
  }
  return `${KEY_PREFIX[mode]}${secret}`;
}

export function hashKey(key: string): Buffer {
  return createHash('sha256').update(key).digest();
}

export function visiblePrefix(key: string): string {
  const mode: Mode = key.startsWith(KEY_PREFIX.live) ? 'live' : 'test';
  return key.slice(0, KEY_PREFIX[mode].length + VISIBLE_CHARS);
}

export interface ApiKeyRecord {
  id: string;
  organizationId: string;
  mode: Mode;
  label: string;
  prefix: string;
  createdBy: string | null;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}

interface KeyRow {
  id: string;
  organization_id: string;
  mode: Mode;
  label: string;
  prefix: string;
  created_by: string | null;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const KEY_COLUMNS = 'id, organization_id, mode, label, prefix, created_by, created_at, last_used_at, revoked_at';

function toRecord(row: KeyRow): ApiKeyRecord {
  return {
    id: row.id,
    organizationId: row.organization_id,
    mode: row.mode,
    label: row.label,
    prefix: row.prefix,
    createdBy: row.created_by,
    createdAt: row.created_at.toISOString(),
    lastUsedAt: row.last_used_at?.toISOString() ?? null,
    revokedAt: row.revoked_at?.toISOString() ?? null,
  };
}

/** Creates a key and returns it in full; this is the only time the full key exists outside the client. */
export async function createApiKey(
  db: Queryable,
  input: { organizationId: string; mode: Mode; label?: string; createdBy?: string; createdAt?: Date },
): Promise<{ key: string; record: ApiKeyRecord }> {
  const key = generateKey(input.mode);
  const { rows } = await db.query<KeyRow>(
    `INSERT INTO api_keys (id, organization_id, mode, label, prefix, secret_hash, created_by, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8, now())) RETURNING ${KEY_COLUMNS}`,
    [newId('key', input.createdAt), input.organizationId, input.mode, input.label ?? '', visiblePrefix(key), hashKey(key), input.createdBy ?? null, input.createdAt ?? null],
  );
  return { key, record: toRecord(rows[0]!) };
}

export async function findApiKey(db: Queryable, key: string): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE secret_hash = $1`, [hashKey(key)]);
  return rows[0] ? toRecord(rows[0]) : undefined;
}

/**
 * The key's record and, when it is not revoked, its request counted in its rate-limit window
 * (`rate_limit_take`), in one statement: the round trip of the lookup and the one of the take
 * become one. A revoked key's request is not counted (the take is joined to the key only when
 * `revoked_at` is null, so the function is not called for it); an unknown key finds nothing.
 */
export async function findApiKeyTakingRateLimit(
  db: Queryable,
  key: string,
  take: RateLimitTake,
): Promise<{ record: ApiKeyRecord; decision: RateLimitDecision | undefined } | undefined> {
  const { rows } = await db.query<KeyRow & { [column in keyof RateLimitRow as `take_${column}`]: RateLimitRow[column] | null }>({
    name: 'berth_api_key_take',
    text: `WITH found AS MATERIALIZED (SELECT ${KEY_COLUMNS} FROM api_keys WHERE secret_hash = $1),
       taken AS (SELECT take.* FROM found, rate_limit_take(found.id, found.organization_id, $2, $3, $4, $5) AS take WHERE found.revoked_at IS NULL)
       SELECT found.*, ${RATE_LIMIT_COLUMNS.split(', ').map((column) => `taken.${column} AS take_${column}`).join(', ')} FROM found LEFT JOIN taken ON true`,
    values: [hashKey(key), ...rateLimitTakeArguments(take)],
  });
  const row = rows[0];
  if (!row) return undefined;
  const decision =
    row.take_plan === null
      ? undefined
      : toRateLimitDecision({ plan: row.take_plan, lim: row.take_lim!, allowed: row.take_allowed!, used: row.take_used!, reset_ms: row.take_reset_ms!, retry_ms: row.take_retry_ms! });
  return { record: toRecord(row), decision };
}

export async function listApiKeys(db: Queryable, organizationId?: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<KeyRow>(
    `SELECT ${KEY_COLUMNS} FROM api_keys WHERE $1::text IS NULL OR organization_id = $1 ORDER BY created_at, id`,
    [organizationId ?? null],
  );
  return rows.map(toRecord);
}

/** Keys whose id or visible prefix is exactly `idOrPrefix` (a prefix can in rare cases match several). */
export async function findApiKeysByIdOrPrefix(db: Queryable, idOrPrefix: string): Promise<ApiKeyRecord[]> {
  const { rows } = await db.query<KeyRow>(`SELECT ${KEY_COLUMNS} FROM api_keys WHERE id = $1 OR prefix = $1`, [idOrPrefix]);
  return rows.map(toRecord);
}

/** Revokes one key; revoking twice keeps the first revocation time. */
export async function revokeApiKey(db: Queryable, id: string, at: Date): Promise<ApiKeyRecord | undefined> {
  const { rows } = await db.query<KeyRow>(
    `UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1 RETURNING ${KEY_COLUMNS}`,
    [id, at],
  );
  return rows[0] ? toRecord(rows[0]) : undefined;
}

export async function touchApiKey(db: Queryable, id: string, at: Date): Promise<void> {
  // Recorded at most once a minute per key, so that a busy key does not write on every request.
  await db.query(
    `UPDATE api_keys SET last_used_at = $2 WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2::timestamptz - interval '1 minute')`,
    [id, at],
  );
}

import type { Queryable } from './db/index.js';
import { newId } from './ids.js';

/** Who did it: a signed-in user, or the install itself (the command line, first start). */
export interface AuditActor {
  type: 'user' | 'system';
  /** A user id, or what acted for the install (`berth keys`). */
  id: string;
}

export interface AuditEntry {
  id: string;
  organizationId: string;
  actor: AuditActor;
  /** `<thing>.<verb>`: `api_key.created`, `plan.changed`, `webhook.deleted`. */
  action: string;
  target: { type: string; id: string };
  details: Record<string, unknown>;
  at: string;
}

interface AuditRow {
  id: string;
  organization_id: string;
  actor_type: AuditActor['type'];
  actor_id: string;
  action: string;
  target_type: string;
  target_id: string;
  details: Record<string, unknown>;
  at: Date;
}

function toEntry(row: AuditRow): AuditEntry {
  return {
    id: row.id,
    organizationId: row.organization_id,
    actor: { type: row.actor_type, id: row.actor_id },
    action: row.action,
    target: { type: row.target_type, id: row.target_id },
    details: row.details,
    at: row.at.toISOString(),
  };
}

/**
 * Records one management action. Pass the transaction that makes the change, so that the
 * change and its record are written together or not at all. `details` never holds a secret.
 */
export async function recordAudit(
  db: Queryable,
  entry: { organizationId: string; actor: AuditActor; action: string; target: { type: string; id: string }; details?: Record<string, unknown>; at: Date },
): Promise<AuditEntry> {
  const { rows } = await db.query<AuditRow>(
    `INSERT INTO audit_log (id, organization_id, actor_type, actor_id, action, target_type, target_id, details, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     RETURNING id, organization_id, actor_type, actor_id, action, target_type, target_id, details, at`,
    [
      newId('aud', entry.at),
      entry.organizationId,
      entry.actor.type,
      entry.actor.id,
      entry.action,
      entry.target.type,
      entry.target.id,
      JSON.stringify(entry.details ?? {}),
      entry.at,
    ],
  );
  return toEntry(rows[0]!);
}

/**
 * An organization's audit log, newest first (in the order of recording); `before` is the `seq`
 * of the last entry of the previous page. One more than `limit` is read to say whether another
 * page follows.
 */
export async function listAudit(
  db: Queryable,
  organizationId: string,
  options: { limit: number; before?: string | undefined },
): Promise<{ entries: (AuditEntry & { seq: string })[]; hasMore: boolean }> {
  const { rows } = await db.query<AuditRow & { seq: string }>(
    `SELECT * FROM audit_log WHERE organization_id = $1 AND ($2::bigint IS NULL OR seq < $2::bigint) ORDER BY seq DESC LIMIT $3`,
    [organizationId, options.before ?? null, options.limit + 1],
  );
  return { entries: rows.slice(0, options.limit).map((row) => ({ ...toEntry(row), seq: row.seq })), hasMore: rows.length > options.limit };
}

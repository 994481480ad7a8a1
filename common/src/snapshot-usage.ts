import type { Environment, Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';

/**
 * The record storage billing reads: how big each archive is and from when to when it was kept.
 * Written once when a snapshot becomes ready (again: no-op) and closed when its archive goes.
 */
export async function recordSnapshotStored(
  db: Queryable,
  entry: {
    snapshotId: string;
    organizationId: string;
    mode: Mode;
    sessionId: string;
    agentId: string;
    userId: string;
    environment: Environment;
    sizeBytes: number;
    at: Date;
  },
): Promise<void> {
  await db.query(
    `INSERT INTO snapshot_storage (snapshot_id, organization_id, mode, session_id, agent_id, user_id, environment, size_bytes, stored_from)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (snapshot_id) DO NOTHING`,
    [entry.snapshotId, entry.organizationId, entry.mode, entry.sessionId, entry.agentId, entry.userId, entry.environment, entry.sizeBytes, entry.at],
  );
}

export async function recordSnapshotDeleted(db: Queryable, snapshotId: string, at: Date): Promise<void> {
  await db.query('UPDATE snapshot_storage SET deleted_at = coalesce(deleted_at, $2) WHERE snapshot_id = $1', [snapshotId, at]);
}

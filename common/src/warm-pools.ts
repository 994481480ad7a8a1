import type { Compute, Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';

/** The agents a warm pool's sandboxes fit (ADR 45): copied into each of its rows. */
export interface WarmShape {
  organizationId: string;
  mode: Mode;
  provider: string;
  compute: Compute;
  browser: boolean;
  /** Only agents of this definition; without it, any agent of the shape. */
  definition?: string | undefined;
}

/** One sandbox of a warm pool, as `warm_sandboxes` keeps it. */
export interface WarmSandbox {
  id: string;
  pool: string;
  provider: string;
  state: 'starting' | 'ready' | 'claimed';
  agentId: string | null;
  createdAt: Date;
}

interface WarmSandboxRow {
  id: string;
  pool: string;
  provider: string;
  state: WarmSandbox['state'];
  agent_id: string | null;
  created_at: Date;
}

const COLUMNS = 'id, pool, provider, state, agent_id, created_at';

const toSandbox = (row: WarmSandboxRow): WarmSandbox => ({
  id: row.id,
  pool: row.pool,
  provider: row.provider,
  state: row.state,
  agentId: row.agent_id,
  createdAt: row.created_at,
});

/** Records a sandbox the pool is about to start: a crash half-way leaves a row to clean up. */
export async function insertWarmSandbox(db: Queryable, sandbox: { id: string; pool: string; shape: WarmShape }, at: Date): Promise<void> {
  const { shape } = sandbox;
  await db.query(
    `INSERT INTO warm_sandboxes (id, pool, organization_id, mode, provider, compute, browser, definition, state, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'starting', $9)`,
    [sandbox.id, sandbox.pool, shape.organizationId, shape.mode, shape.provider, shape.compute, shape.browser, shape.definition ?? null, at],
  );
}

export async function markWarmSandboxReady(db: Queryable, id: string, at: Date): Promise<void> {
  await db.query("UPDATE warm_sandboxes SET state = 'ready', ready_at = $2 WHERE id = $1 AND state = 'starting'", [id, at]);
}

/** The pool's sandboxes, oldest first. */
export async function warmSandboxesOf(db: Queryable, pool: string): Promise<WarmSandbox[]> {
  const { rows } = await db.query<WarmSandboxRow>(`SELECT ${COLUMNS} FROM warm_sandboxes WHERE pool = $1 ORDER BY created_at, id`, [pool]);
  return rows.map(toSandbox);
}

/** Forgets an unclaimed sandbox (ended, or never started); a claimed one is its agent's and stays. */
export async function deleteWarmSandbox(db: Queryable, id: string): Promise<boolean> {
  const { rowCount } = await db.query("DELETE FROM warm_sandboxes WHERE id = $1 AND state <> 'claimed'", [id]);
  return (rowCount ?? 0) > 0;
}

/**
 * Forgets a sandbox whose claim by `agentId` is being abandoned (its hand-over failed, or the
 * claim's transaction rolled back): the row goes whether it is still claimed in that transaction or
 * ready again after it, so that no other agent claims a sandbox that is being ended. False when
 * another agent's claim of it committed meanwhile: it is theirs, and must not be ended.
 */
export async function abandonWarmClaim(db: Queryable, id: string, agentId: string): Promise<boolean> {
  const { rowCount } = await db.query("DELETE FROM warm_sandboxes WHERE id = $1 AND (state <> 'claimed' OR agent_id = $2)", [id, agentId]);
  return (rowCount ?? 0) > 0;
}

/** Forgets every row of a pool that is gone (its record of claims with it). */
export async function deleteWarmSandboxesOf(db: Queryable, pool: string): Promise<void> {
  await db.query('DELETE FROM warm_sandboxes WHERE pool = $1', [pool]);
}

/**
 * Takes the oldest ready sandbox that fits the agent (its definition's pool first, then one for
 * any agent of its shape) in one statement: concurrent claims skip the rows others hold, so no
 * sandbox is claimed twice. An agent that claimed before (a reconcile retried after a crash) gets
 * its own sandbox back (`fresh` false: it is not a new claim). `pooled` says whether the
 * organization has warm sandboxes at all (a creation that found none that fits is then a miss).
 */
export async function claimWarmSandbox(
  db: Queryable,
  shape: WarmShape,
  agentId: string,
  at: Date,
): Promise<{ sandbox: WarmSandbox | undefined; pooled: boolean; fresh: boolean }> {
  const { rows } = await db.query<WarmSandboxRow & { pooled: boolean; fresh: boolean | null }>(
    `WITH earlier AS (
       SELECT id FROM warm_sandboxes WHERE agent_id = $1 AND state = 'claimed' LIMIT 1
     ), candidate AS (
       SELECT id FROM warm_sandboxes
        WHERE organization_id = $2 AND mode = $3 AND provider = $4 AND compute = $5 AND browser = $6
          AND (definition IS NULL OR definition = $7) AND state = 'ready' AND NOT EXISTS (SELECT 1 FROM earlier)
        ORDER BY definition IS NULL, created_at, id
        LIMIT 1 FOR UPDATE SKIP LOCKED
     ), taken AS (
       UPDATE warm_sandboxes SET state = 'claimed', agent_id = $1, claimed_at = $8
        WHERE id IN (SELECT id FROM candidate)
        RETURNING ${COLUMNS}
     ), found AS (
       SELECT ${COLUMNS}, true AS fresh FROM taken
       UNION ALL
       SELECT ${COLUMNS}, false AS fresh FROM warm_sandboxes WHERE id IN (SELECT id FROM earlier)
     )
     SELECT found.*, EXISTS (SELECT 1 FROM warm_sandboxes WHERE organization_id = $2 AND mode = $3) AS pooled
       FROM (SELECT 1) one LEFT JOIN found ON true`,
    [agentId, shape.organizationId, shape.mode, shape.provider, shape.compute, shape.browser, shape.definition ?? null, at],
  );
  const row = rows[0]!;
  return { sandbox: row.id ? toSandbox(row) : undefined, pooled: row.pooled, fresh: row.fresh === true };
}

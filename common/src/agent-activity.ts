import type { Queryable } from './db/index.js';

/**
 * Records traffic to an agent (ADR 45): its idle clock starts again. Never moves the time back,
 * so calls that finish out of order keep the latest.
 */
export async function touchAgentActivity(db: Queryable, agentId: string, at: Date): Promise<void> {
  await db.query(
    `INSERT INTO agent_activity (agent_id, last_activity_at) VALUES ($1, $2)
     ON CONFLICT (agent_id) DO UPDATE SET last_activity_at = GREATEST(agent_activity.last_activity_at, EXCLUDED.last_activity_at)`,
    [agentId, at],
  );
}

/** When the agent last had traffic, or undefined when it never had any recorded. */
export async function lastAgentActivity(db: Queryable, agentId: string): Promise<Date | undefined> {
  const { rows } = await db.query<{ last_activity_at: Date }>('SELECT last_activity_at FROM agent_activity WHERE agent_id = $1', [agentId]);
  return rows[0]?.last_activity_at;
}

/** Forgets the agent's traffic (it ended). */
export async function forgetAgentActivity(db: Queryable, agentId: string): Promise<void> {
  await db.query('DELETE FROM agent_activity WHERE agent_id = $1', [agentId]);
}

import { randomBytes } from 'node:crypto';
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
  return (await agentActivity(db, agentId)).lastActivity;
}

/** The agent's traffic as its idle policy sees it: when it last had any, and how many calls hold a lease now. */
export interface AgentActivity {
  lastActivity: Date | undefined;
  callsInFlight: number;
}

/** Both in one round trip; a lease past its `held_until` (its process died) does not count. */
export async function agentActivity(db: Queryable, agentId: string): Promise<AgentActivity> {
  const { rows } = await db.query<{ last_activity_at: Date | null; in_flight: string }>(
    `SELECT (SELECT last_activity_at FROM agent_activity WHERE agent_id = $1) AS last_activity_at,
            (SELECT count(*) FROM agent_call_leases WHERE agent_id = $1 AND held_until > now()) AS in_flight`,
    [agentId],
  );
  return { lastActivity: rows[0]?.last_activity_at ?? undefined, callsInFlight: Number(rows[0]?.in_flight ?? 0) };
}

/**
 * Takes a lease for a call on the agent, held for `holdMs` unless renewed; answers its id. The
 * agent's leases that lapsed (their process died) go in the same statement.
 */
export async function takeAgentCallLease(db: Queryable, agentId: string, holdMs: number): Promise<string> {
  const id = `acl_${randomBytes(12).toString('hex')}`;
  await db.query(
    `WITH lapsed AS (DELETE FROM agent_call_leases WHERE agent_id = $2 AND held_until <= now())
     INSERT INTO agent_call_leases (id, agent_id, held_until) VALUES ($1, $2, now() + $3 * interval '1 millisecond')`,
    [id, agentId, holdMs],
  );
  return id;
}

/** Holds a lease `holdMs` longer (the call goes on). */
export async function renewAgentCallLease(db: Queryable, leaseId: string, holdMs: number): Promise<void> {
  await db.query(`UPDATE agent_call_leases SET held_until = now() + $2 * interval '1 millisecond' WHERE id = $1`, [leaseId, holdMs]);
}

/** The call ended: its lease goes and its end counts as the agent's traffic, in one statement. */
export async function releaseAgentCallLease(db: Queryable, leaseId: string, agentId: string, at: Date): Promise<void> {
  await db.query(
    `WITH released AS (DELETE FROM agent_call_leases WHERE id = $1)
     INSERT INTO agent_activity (agent_id, last_activity_at) VALUES ($2, $3)
     ON CONFLICT (agent_id) DO UPDATE SET last_activity_at = GREATEST(agent_activity.last_activity_at, EXCLUDED.last_activity_at)`,
    [leaseId, agentId, at],
  );
}

/** Forgets the agent's traffic and leases (it ended). */
export async function forgetAgentActivity(db: Queryable, agentId: string): Promise<void> {
  await db.query('WITH leases AS (DELETE FROM agent_call_leases WHERE agent_id = $1) DELETE FROM agent_activity WHERE agent_id = $1', [agentId]);
}

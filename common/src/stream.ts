import type { Queryable } from './db/index.js';

/**
 * What an agent's stream carries; `heartbeat` is sent by the API server, never stored. Beyond the
 * spec's five: `approval.*` while a tool call waits for a decision, and `guardrail` when a
 * guardrail fired.
 */
export type StreamEventType =
  | 'thinking'
  | 'tool_call'
  | 'tool_result'
  | 'output'
  | 'error'
  | 'approval.requested'
  | 'approval.approved'
  | 'approval.denied'
  | 'approval.expired'
  | 'guardrail';

export interface StreamEvent {
  seq: string;
  agentId: string;
  taskId: string | null;
  type: StreamEventType;
  data: Record<string, unknown>;
  createdAt: string;
}

interface StreamRow {
  seq: string;
  agent_id: string;
  task_id: string | null;
  type: StreamEventType;
  data: Record<string, unknown>;
  created_at: Date;
}

export async function appendStreamEvent(
  db: Queryable,
  event: { agentId: string; taskId: string; type: StreamEventType; data: Record<string, unknown> },
): Promise<string> {
  const { rows } = await db.query<{ seq: string }>(
    'INSERT INTO stream_events (agent_id, task_id, type, data) VALUES ($1, $2, $3, $4) RETURNING seq',
    [event.agentId, event.taskId, event.type, JSON.stringify(event.data)],
  );
  return rows[0]!.seq;
}

/** Events of an agent after `afterSeq`, oldest first, at most `limit`. */
export async function streamEventsAfter(db: Queryable, agentId: string, afterSeq: string, limit = 500): Promise<StreamEvent[]> {
  const { rows } = await db.query<StreamRow>(
    `SELECT seq, agent_id, task_id, type, data, created_at FROM stream_events
     WHERE agent_id = $1 AND seq > $2::bigint ORDER BY seq LIMIT $3`,
    [agentId, afterSeq, limit],
  );
  return rows.map((row) => ({
    seq: row.seq,
    agentId: row.agent_id,
    taskId: row.task_id,
    type: row.type,
    data: row.data,
    createdAt: row.created_at.toISOString(),
  }));
}

/** The newest sequence number of an agent's events ('0' when there are none). */
export async function latestStreamSeq(db: Queryable, agentId: string): Promise<string> {
  const { rows } = await db.query<{ seq: string | null }>('SELECT max(seq)::text AS seq FROM stream_events WHERE agent_id = $1', [agentId]);
  return rows[0]?.seq ?? '0';
}

import { createHash } from 'node:crypto';
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';

/** Lifecycle event types of the spec's table; the outbox stores them for streams and webhooks. */
export type EventType =
  | 'agent.started'
  | 'agent.completed'
  | 'agent.failed'
  | 'agent.paused'
  | 'agent.restarted'
  | 'agent.terminated'
  | 'agent.run.completed'
  | 'session.limit_reached'
  | 'session.cost_threshold'
  | 'budget.threshold'
  | 'budget.exhausted'
  | 'fleet.started'
  | 'fleet.item_completed'
  | 'fleet.completed'
  | 'fleet.cost_limited'
  | 'schedule.fired'
  | 'trigger.fired'
  | 'workflow.started'
  | 'workflow.step_completed'
  | 'workflow.completed'
  | 'workflow.failed'
  | 'knowledge.sync_completed'
  | 'knowledge.sync_failed'
  | 'approval.requested'
  | 'approval.approved'
  | 'approval.denied'
  | 'approval.expired';

export interface EventInput {
  type: EventType;
  organizationId: string;
  mode: Mode;
  /** The resource the event is about (an agent id, a session id), for per-subject streams. */
  subjectId?: string;
  data: Record<string, unknown>;
  /**
   * Names the occurrence, e.g. `<agent uid>/agent.started`. The event id is derived from it,
   * so a controller that records the same occurrence twice stores one event.
   */
  occurrence: string;
}

export interface StoredEvent {
  id: string;
  seq: string;
  type: EventType;
  organizationId: string;
  mode: Mode;
  subjectId: string | null;
  data: Record<string, unknown>;
  createdAt: string;
}

const BASE32 = '0123456789abcdefghjkmnpqrstvwxyz';

export function eventIdFor(occurrence: string): string {
  const digest = createHash('sha256').update(occurrence).digest();
  let id = 'evt_';
  for (let i = 0; i < 26; i++) id += BASE32[digest[i]! % 32];
  return id;
}

/**
 * Events as the one parameter of `insertEventsFrom`: inserted by a statement that writes something
 * else too (the status write whose change they announce: ADR 45), in their order.
 */
export function eventsParameter(events: readonly EventInput[], at: Date): string {
  return JSON.stringify(
    events.map((event, n) => ({
      n,
      id: eventIdFor(event.occurrence),
      organization_id: event.organizationId,
      mode: event.mode,
      type: event.type,
      subject_id: event.subjectId ?? null,
      data: event.data,
      created_at: at.toISOString(),
    })),
  );
}

/**
 * The insert of the events of `eventsParameter` given as `parameter` (e.g. `$5`), each unless its
 * occurrence was written already (as `recordEvent`), and only where `condition` holds: a part of a
 * larger statement (a data-modifying `WITH`).
 */
export function insertEventsFrom(parameter: string, condition = 'true'): string {
  return `INSERT INTO events (id, organization_id, mode, type, subject_id, data, created_at)
     SELECT e.id, e.organization_id, e.mode, e.type, e.subject_id, e.data, e.created_at
       FROM jsonb_to_recordset(${parameter}::jsonb) AS e(n integer, id text, organization_id text, mode text, type text, subject_id text, data jsonb, created_at timestamptz)
      WHERE ${condition}
      ORDER BY e.n
     ON CONFLICT (id) DO NOTHING`;
}

/**
 * Writes the events in one statement, each unless its occurrence was already written; returns how
 * many were new.
 */
export async function recordEvents(db: Queryable, events: readonly EventInput[], at: Date): Promise<number> {
  if (events.length === 0) return 0;
  const result = await db.query(insertEventsFrom('$1'), [eventsParameter(events, at)]);
  return result.rowCount ?? 0;
}

/** Writes the event unless this occurrence was already written; returns whether it was new. */
export async function recordEvent(db: Queryable, event: EventInput, at: Date): Promise<boolean> {
  return (await recordEvents(db, [event], at)) > 0;
}

interface EventRow {
  id: string;
  seq: string;
  type: EventType;
  organization_id: string;
  mode: Mode;
  subject_id: string | null;
  data: Record<string, unknown>;
  created_at: Date;
}

export async function listEvents(
  db: Queryable,
  filter: { subjectId?: string; organizationId?: string; type?: EventType },
): Promise<StoredEvent[]> {
  const params: unknown[] = [];
  const where: string[] = [];
  if (filter.subjectId !== undefined) where.push(`subject_id = $${params.push(filter.subjectId)}`);
  if (filter.organizationId !== undefined) where.push(`organization_id = $${params.push(filter.organizationId)}`);
  if (filter.type !== undefined) where.push(`type = $${params.push(filter.type)}`);
  const { rows } = await db.query<EventRow>(
    `SELECT id, seq, type, organization_id, mode, subject_id, data, created_at FROM events
     ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY seq`,
    params,
  );
  return rows.map(toStoredEvent);
}

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    id: row.id,
    seq: row.seq,
    type: row.type,
    organizationId: row.organization_id,
    mode: row.mode,
    subjectId: row.subject_id,
    data: row.data,
    createdAt: row.created_at.toISOString(),
  };
}

/**
 * One page of an organization's events of one mode, newest first: its event log. `beforeSeq`
 * is the `seq` of the last event of the previous page; one more than `limit` is read to say
 * whether another page follows.
 */
export async function listEventPage(
  db: Queryable,
  filter: { organizationId: string; mode: Mode; type?: EventType | undefined; limit: number; beforeSeq?: string | undefined },
): Promise<{ events: StoredEvent[]; hasMore: boolean }> {
  const { rows } = await db.query<EventRow>(
    `SELECT id, seq, type, organization_id, mode, subject_id, data, created_at FROM events
     WHERE organization_id = $1 AND mode = $2 AND ($3::text IS NULL OR type = $3) AND ($4::bigint IS NULL OR seq < $4::bigint)
     ORDER BY seq DESC LIMIT $5`,
    [filter.organizationId, filter.mode, filter.type ?? null, filter.beforeSeq ?? null, filter.limit + 1],
  );
  return { events: rows.slice(0, filter.limit).map(toStoredEvent), hasMore: rows.length > filter.limit };
}

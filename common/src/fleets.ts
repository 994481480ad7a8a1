/**
 * Fleets: one agent definition over many items, a bounded number at a time (ADR 27).
 *
 * The contract:
 * - The API server writes a fleet's rows (`insertFleetRows`: the `fleets` row and every item,
 *   `pending`) and then its Fleet resource; only the operator's Fleet reconciler moves items on.
 * - An item runs as one job (source `fleet`). `claimNextItems` queues the jobs of the next pending
 *   items and writes each job's id into its item row in one transaction, under a per-fleet lock
 *   that also counts the open items: an item is given one job at most (the job id in its row is
 *   the claim), and a fleet never has more than `concurrency` items open, whoever reconciles it.
 * - `settleFinishedItems` copies the outcome of ended jobs (state, output, error, cost) into their
 *   items, once: only rows still `running` are changed, and the caller writes the item's events in
 *   the same transaction.
 * - Stream events of a fleet go to `stream_events` keyed by the fleet id, so the API's stream hub
 *   serves them as it serves an agent's, with Last-Event-ID.
 */
import type { Mode } from '@berth/crds';
import type { Queryable } from './db/index.js';
import { newId } from './ids.js';
import { nanocentsToCents } from './money.js';

export type FleetItemState = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';
export type FleetOutcome = 'completed' | 'cost_limit' | 'session_limit' | 'cancelled';
/** What a fleet's stream carries (besides heartbeats, which are never stored). */
export type FleetStreamEventType = 'fleet.started' | 'item.completed' | 'item.failed' | 'fleet.paused' | 'fleet.completed' | 'fleet.cancelled';

/** What one item may be: text, or a JSON object. */
export type FleetItemInput = string | Record<string, unknown>;

export interface FleetItem {
  id: string;
  fleetId: string;
  index: number;
  input: FleetItemInput;
  state: FleetItemState;
  jobId: string | null;
  output: string | null;
  error: { code: string; message: string } | null;
  cost: { amount: number; currency: string } | null;
  startedAt: string | null;
  finishedAt: string | null;
}

interface FleetItemRow {
  id: string;
  fleet_id: string;
  index: number;
  input: FleetItemInput;
  state: FleetItemState;
  job_id: string | null;
  output: string | null;
  error: { code: string; message: string } | null;
  cost_cents: string | null;
  currency: string | null;
  started_at: Date | null;
  finished_at: Date | null;
}

const ITEM_COLUMNS = 'id, fleet_id, index, input, state, job_id, output, error, cost_cents, currency, started_at, finished_at';

function toItem(row: FleetItemRow): FleetItem {
  return {
    id: row.id,
    fleetId: row.fleet_id,
    index: row.index,
    input: row.input,
    state: row.state,
    jobId: row.job_id,
    output: row.output,
    error: row.error,
    cost: row.cost_cents === null || row.currency === null ? null : { amount: Number(row.cost_cents), currency: row.currency },
    startedAt: row.started_at?.toISOString() ?? null,
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

/** An item as text: a string as it is, an object as its JSON. */
export function fleetItemText(input: FleetItemInput): string {
  return typeof input === 'string' ? input : JSON.stringify(input);
}

const PLACEHOLDER = /\{\{\s*item(?:\.([A-Za-z0-9_-]+))?\s*\}\}/g;

/**
 * The task an item's agent gets: without a prompt, the item as text; with one, the prompt with
 * `{{item}}` replaced by the item as text and `{{item.<key>}}` by that top-level field of an
 * object item (a string as it is, anything else as its JSON, a missing field as nothing).
 */
export function renderFleetTask(prompt: string | undefined, input: FleetItemInput): string {
  if (prompt === undefined) return fleetItemText(input);
  return prompt.replace(PLACEHOLDER, (_match, key: string | undefined) => {
    if (key === undefined) return fleetItemText(input);
    if (typeof input === 'string') return '';
    const value = input[key];
    return value === undefined ? '' : typeof value === 'string' ? value : JSON.stringify(value);
  });
}

/** The placeholders of a prompt that name a field (`{{item.<key>}}`). */
export function promptFieldsOf(prompt: string): string[] {
  return [...prompt.matchAll(PLACEHOLDER)].flatMap((match) => (match[1] ? [match[1]] : []));
}

/** Writes the fleet's row and its items, all `pending`; inside the caller's transaction. Returns the item ids in order. */
export async function insertFleetRows(
  db: Queryable,
  fleet: { id: string; organizationId: string; mode: Mode; items: readonly FleetItemInput[] },
  now: Date,
): Promise<string[]> {
  await db.query('INSERT INTO fleets (id, organization_id, mode, created_at) VALUES ($1, $2, $3, $4)', [fleet.id, fleet.organizationId, fleet.mode, now]);
  const ids = fleet.items.map(() => newId('itm', now));
  await db.query(
    `INSERT INTO fleet_items (id, fleet_id, index, input, state)
     SELECT id, $1, ordinality - 1, input, 'pending' FROM unnest($2::text[], $3::jsonb[]) WITH ORDINALITY AS t(id, input, ordinality)`,
    [fleet.id, ids, fleet.items.map((item) => JSON.stringify(item))],
  );
  return ids;
}

/** Removes a fleet's rows (its resource could not be written). */
export async function deleteFleetRows(db: Queryable, fleetId: string): Promise<void> {
  await db.query('DELETE FROM fleets WHERE id = $1', [fleetId]);
}

/** Items of a fleet in index order, after `afterIndex`, at most `limit`. */
export async function listFleetItems(db: Queryable, fleetId: string, afterIndex: number, limit: number): Promise<FleetItem[]> {
  const { rows } = await db.query<FleetItemRow>(`SELECT ${ITEM_COLUMNS} FROM fleet_items WHERE fleet_id = $1 AND index > $2 ORDER BY index LIMIT $3`, [
    fleetId,
    afterIndex,
    limit,
  ]);
  return rows.map(toItem);
}

export interface FleetTally {
  pending: number;
  running: number;
  completed: number;
  failed: number;
  cancelled: number;
  /** Ended items' costs plus what the open items' runs have spent so far, in cents. */
  costCents: number;
  /** Items that failed because the session's limits refused them. */
  sessionLimited: number;
}

/** Counts of a fleet's items by state and its cost so far. */
export async function tallyFleet(db: Queryable, fleetId: string): Promise<FleetTally> {
  const { rows } = await db.query<{ state: FleetItemState; n: number; cents: string; session_limited: number }>(
    `SELECT state, count(*)::int AS n, coalesce(sum(cost_cents), 0)::text AS cents,
            count(*) FILTER (WHERE error->>'code' = 'session_limit_exceeded')::int AS session_limited
     FROM fleet_items WHERE fleet_id = $1 GROUP BY state`,
    [fleetId],
  );
  const tally: FleetTally = { pending: 0, running: 0, completed: 0, failed: 0, cancelled: 0, costCents: 0, sessionLimited: 0 };
  for (const row of rows) {
    tally[row.state] = row.n;
    tally.costCents += Number(row.cents);
    tally.sessionLimited += row.session_limited;
  }
  if (tally.running > 0) {
    // Runs still open are charged as they go: their spend counts against the cap before they end.
    const { rows: open } = await db.query<{ nanocents: string | null }>(
      `SELECT sum(l.amount_nanocents)::text AS nanocents
       FROM fleet_items i JOIN jobs j ON j.id = i.job_id JOIN usage_ledger l ON l.task_id = j.task_id
       WHERE i.fleet_id = $1 AND i.state = 'running'`,
      [fleetId],
    );
    tally.costCents += nanocentsToCents(BigInt(open[0]?.nanocents ?? '0'));
  }
  return tally;
}

/** An item whose job ended, as `settleFinishedItems` recorded it. */
export type SettledItem = Pick<FleetItem, 'id' | 'index' | 'state' | 'output' | 'error' | 'cost' | 'jobId'>;

/**
 * Copies the outcome of ended jobs into their items (state, the run's output, error, cost) and
 * returns the items changed now; an item already settled is not returned again. Inside the
 * caller's transaction, which writes the items' events.
 */
export async function settleFinishedItems(db: Queryable, fleetId: string): Promise<SettledItem[]> {
  const { rows } = await db.query<FleetItemRow>(
    `UPDATE fleet_items i
     SET state = CASE j.state WHEN 'completed' THEN 'completed' WHEN 'cancelled' THEN 'cancelled' ELSE 'failed' END,
         output = t.output, error = j.error, cost_cents = coalesce(j.cost_cents, 0), currency = j.currency,
         started_at = coalesce(j.started_at, i.started_at), finished_at = j.finished_at
     FROM jobs j LEFT JOIN tasks t ON t.id = j.task_id
     WHERE i.fleet_id = $1 AND i.state = 'running' AND j.id = i.job_id AND j.state IN ('completed', 'failed', 'cancelled')
     RETURNING i.${ITEM_COLUMNS.split(', ').join(', i.')}`,
    [fleetId],
  );
  return rows.map(toItem).sort((a, b) => a.index - b.index);
}

/**
 * Holds the fleet's lock until the caller's transaction ends: claims and the end of a fleet take
 * it, so an end never misses the jobs of a claim made at the same moment, and no claim follows an end.
 */
export async function lockFleet(db: Queryable, fleetId: string): Promise<void> {
  await db.query("SELECT pg_advisory_xact_lock(hashtext('berth_fleet:' || $1))", [fleetId]);
}

/**
 * Takes the per-fleet lock (until the caller's transaction ends), counts the open items and
 * claims pending items up to `concurrency` open, in index order: `enqueue` queues the job of
 * each (in the same transaction) and returns its id, which is written into the item. Returns
 * the items claimed now.
 */
export async function claimNextItems(
  db: Queryable,
  fleetId: string,
  concurrency: number,
  enqueue: (item: Pick<FleetItem, 'id' | 'index' | 'input'>) => Promise<string>,
  now: Date,
): Promise<Pick<FleetItem, 'id' | 'index' | 'jobId'>[]> {
  await lockFleet(db, fleetId);
  const { rows: ended } = await db.query<{ ended: boolean }>('SELECT ended_at IS NOT NULL AS ended FROM fleets WHERE id = $1', [fleetId]);
  if (ended[0]?.ended !== false) return [];
  const { rows: open } = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM fleet_items WHERE fleet_id = $1 AND state = 'running'", [fleetId]);
  const slots = concurrency - open[0]!.n;
  if (slots <= 0) return [];
  const { rows } = await db.query<Pick<FleetItemRow, 'id' | 'index' | 'input'>>(
    "SELECT id, index, input FROM fleet_items WHERE fleet_id = $1 AND state = 'pending' ORDER BY index LIMIT $2",
    [fleetId, slots],
  );
  const claimed: Pick<FleetItem, 'id' | 'index' | 'jobId'>[] = [];
  for (const row of rows) {
    const jobId = await enqueue(row);
    await db.query("UPDATE fleet_items SET state = 'running', job_id = $2, started_at = $3 WHERE id = $1 AND state = 'pending'", [row.id, jobId, now]);
    claimed.push({ id: row.id, index: row.index, jobId });
  }
  return claimed;
}

/** Cancels the items not yet given a job; returns how many. */
export async function cancelPendingItems(db: Queryable, fleetId: string, now: Date): Promise<number> {
  const result = await db.query("UPDATE fleet_items SET state = 'cancelled', finished_at = $2 WHERE fleet_id = $1 AND state = 'pending'", [fleetId, now]);
  return result.rowCount ?? 0;
}

/** Marks the fleet started; true only the first time (the caller then announces it). */
export async function markFleetStarted(db: Queryable, fleetId: string, now: Date): Promise<boolean> {
  const result = await db.query('UPDATE fleets SET started_at = $2 WHERE id = $1 AND started_at IS NULL', [fleetId, now]);
  return (result.rowCount ?? 0) > 0;
}

/** Records why the fleet ended, under the fleet's lock; true only the first time (the caller then announces it). */
export async function markFleetEnded(db: Queryable, fleetId: string, outcome: FleetOutcome, now: Date): Promise<boolean> {
  await lockFleet(db, fleetId);
  const result = await db.query('UPDATE fleets SET ended_at = $2, outcome = $3 WHERE id = $1 AND ended_at IS NULL', [fleetId, now, outcome]);
  return (result.rowCount ?? 0) > 0;
}

export interface FleetRecord {
  id: string;
  startedAt: string | null;
  endedAt: string | null;
  outcome: FleetOutcome | null;
}

export async function getFleetRecord(db: Queryable, fleetId: string): Promise<FleetRecord | undefined> {
  const { rows } = await db.query<{ id: string; started_at: Date | null; ended_at: Date | null; outcome: FleetOutcome | null }>(
    'SELECT id, started_at, ended_at, outcome FROM fleets WHERE id = $1',
    [fleetId],
  );
  const row = rows[0];
  return row ? { id: row.id, startedAt: row.started_at?.toISOString() ?? null, endedAt: row.ended_at?.toISOString() ?? null, outcome: row.outcome } : undefined;
}

/** Appends an event to the fleet's stream (the stream_events table, keyed by the fleet id); returns its id. */
export async function appendFleetStreamEvent(db: Queryable, fleetId: string, type: FleetStreamEventType, data: Record<string, unknown>): Promise<string> {
  const { rows } = await db.query<{ seq: string }>('INSERT INTO stream_events (agent_id, task_id, type, data) VALUES ($1, NULL, $2, $3) RETURNING seq', [
    fleetId,
    type,
    JSON.stringify(data),
  ]);
  return rows[0]!.seq;
}

import {
  ApiError,
  deleteFleetRows,
  getFleetRecord,
  idToObjectName,
  insertFleetRows,
  listFleetItems,
  newId,
  objectNameToId,
  resolveDefinition,
  scopeLabels,
  withTransaction,
  type Clock,
  type FleetItem,
  type FleetItemInput,
  type Pool,
  type Resource,
  type ResourceStore,
} from '@berth/common';
import type { Cost, FleetSpec } from '@berth/crds';
import type { Principal } from '../http/context.js';
import { listPage, type CursorCodec, type PageRequest } from './pagination.js';
import { findOwned } from './scope.js';

export interface CreateFleetInput {
  agent: string;
  sessionId: string;
  items: FleetItemInput[];
  concurrency?: number | undefined;
  costCap?: Cost | undefined;
  prompt?: string | undefined;
  name?: string | undefined;
}

function unprocessable(field: string, problem: string): ApiError {
  return new ApiError('unprocessable_entity', `${field}: ${problem}`, { fields: { [field]: [problem] } });
}

/** The default number of items a fleet runs at once. */
export const DEFAULT_FLEET_CONCURRENCY = 10;

export function fleetView(fleet: Resource<'Fleet'>) {
  const { spec, status, metadata } = fleet;
  const completed = status?.completed ?? 0;
  const failed = status?.failed ?? 0;
  const cancelled = status?.cancelled ?? 0;
  const running = status?.running ?? 0;
  return {
    id: objectNameToId(metadata.name),
    name: spec.name ?? null,
    agent: spec.definition,
    definitionId: spec.definitionId,
    sessionId: spec.sessionId,
    prompt: spec.prompt ?? null,
    status: status?.phase ?? ('running' as const),
    reason: status?.reason ?? null,
    concurrency: spec.concurrency,
    costCap: spec.costCap ?? null,
    total: spec.itemCount,
    completed,
    failed,
    cancelled,
    running,
    pending: Math.max(0, spec.itemCount - completed - failed - cancelled - running),
    cost: status?.cost ?? null,
    cancelRequested: spec.cancelled ?? false,
    createdAt: metadata.creationTimestamp,
  };
}
export type FleetView = ReturnType<typeof fleetView>;

export function fleetItemView(item: FleetItem) {
  return {
    id: item.id,
    index: item.index,
    input: item.input,
    status: item.state,
    output: item.output,
    error: item.error,
    cost: item.cost,
    jobId: item.jobId,
    startedAt: item.startedAt,
    finishedAt: item.finishedAt,
  };
}

/**
 * Fleets: the API writes a fleet's rows (the items, in PostgreSQL) and then its Fleet resource;
 * the operator's Fleet reconciler runs the items and writes the status. Cancel sets the spec's
 * `cancelled`; the reconciler does the cancelling.
 */
export function createFleetService(deps: { store: ResourceStore; pool: Pool; clock: Clock; cursors: CursorCodec; currency: string }) {
  const { store, pool, clock, cursors } = deps;
  const find = (principal: Principal, id: string) => findOwned(store, 'Fleet', 'flt', principal, id);

  return {
    find,

    async create(principal: Principal, input: CreateFleetInput): Promise<FleetView> {
      if (input.costCap && input.costCap.currency !== deps.currency) {
        throw unprocessable('costCap.currency', `must be "${deps.currency}", the currency this install bills in`);
      }
      let session: Resource<'Session'>;
      try {
        session = await findOwned(store, 'Session', 'ses', principal, input.sessionId);
      } catch (error) {
        if (error instanceof ApiError && error.code === 'not_found') throw unprocessable('sessionId', `no session ${input.sessionId}`);
        throw error;
      }
      if (session.metadata.deletionTimestamp) throw unprocessable('sessionId', `session ${input.sessionId} is being deleted`);
      const definition = await resolveDefinition(pool, principal, input.agent, 'agent');
      const now = clock.now();
      const id = newId('flt', now);
      await withTransaction(pool, (tx) => insertFleetRows(tx, { id, organizationId: principal.organizationId, mode: principal.mode, items: input.items }, now));
      const spec: FleetSpec = {
        organizationId: principal.organizationId,
        mode: principal.mode,
        sessionId: input.sessionId,
        userId: session.spec.userId,
        definition: input.agent,
        definitionId: definition.id,
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.prompt !== undefined ? { prompt: input.prompt } : {}),
        itemCount: input.items.length,
        concurrency: input.concurrency ?? DEFAULT_FLEET_CONCURRENCY,
        ...(input.costCap ? { costCap: input.costCap } : {}),
      };
      try {
        const fleet = await store.create('Fleet', { name: idToObjectName(id), labels: scopeLabels(principal), spec });
        return fleetView(fleet);
      } catch (error) {
        // Nothing half-written: the rows go when the resource could not be written.
        await deleteFleetRows(pool, id).catch(() => undefined);
        throw error;
      }
    },

    async get(principal: Principal, id: string): Promise<FleetView> {
      return fleetView(await find(principal, id));
    },

    /** Newest first. */
    async list(principal: Principal, page: PageRequest) {
      return listPage(store, cursors, 'Fleet', scopeLabels(principal), page, fleetView);
    },

    /** Items in index order; the cursor continues after the last item of the previous page. */
    async items(principal: Principal, id: string, page: PageRequest) {
      await find(principal, id);
      const list = `fleet-items:${id}`;
      const after = page.cursor === undefined ? -1 : Number(cursors.decode(list, page.cursor));
      const rows = await listFleetItems(pool, id, after, page.limit + 1);
      const hasMore = rows.length > page.limit;
      const data = rows.slice(0, page.limit);
      return { data: data.map(fleetItemView), hasMore, ...(hasMore ? { cursor: cursors.encode(list, String(data.at(-1)!.index)) } : {}) };
    },

    /**
     * Asks the operator to cancel the items that have not ended; answers the fleet as it is now
     * (its status follows). Cancelling a cancelled fleet changes nothing; a fleet that ended
     * otherwise is 409.
     */
    async cancel(principal: Principal, id: string): Promise<FleetView> {
      const fleet = await find(principal, id);
      const record = await getFleetRecord(pool, id);
      if (record?.outcome && record.outcome !== 'cancelled') {
        throw new ApiError('conflict', `fleet ${id} already ended (${fleet.status?.phase ?? record.outcome}); there is nothing to cancel`, { status: fleet.status?.phase ?? null });
      }
      const updated = await store.updateSpec('Fleet', fleet.metadata.name, (current) => (current.spec.cancelled ? undefined : { ...current.spec, cancelled: true }));
      return fleetView(updated);
    },

    /** Whether the fleet ended, for its stream. */
    async ended(id: string): Promise<boolean> {
      return Boolean((await getFleetRecord(pool, id))?.endedAt);
    },
  };
}

export type FleetService = ReturnType<typeof createFleetService>;

import { listEventPage, type EventType, type Pool, type Principal } from '@berth/common';
import type { CursorCodec } from './pagination.js';

/** An organization's event log: the events its webhooks and streams carry, of one mode, newest first. */
export function createEventLogService(deps: { pool: Pool; cursors: CursorCodec }) {
  return {
    async list(principal: Principal, query: { type?: EventType | undefined; limit: number; cursor?: string | undefined }) {
      const list = `events:${principal.organizationId}:${principal.mode}:${query.type ?? ''}`;
      const beforeSeq = query.cursor ? deps.cursors.decode(list, query.cursor) : undefined;
      const { events, hasMore } = await listEventPage(deps.pool, { organizationId: principal.organizationId, mode: principal.mode, type: query.type, limit: query.limit, beforeSeq });
      const last = events.at(-1);
      return {
        data: events.map((event) => ({ id: event.id, event: event.type, subjectId: event.subjectId, createdAt: event.createdAt, data: event.data })),
        hasMore,
        ...(hasMore && last ? { nextCursor: deps.cursors.encode(list, last.seq) } : {}),
      };
    },
  };
}

export type EventLogService = ReturnType<typeof createEventLogService>;

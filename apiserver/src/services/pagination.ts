import { ApiError, type Kind, type Resource, type ResourceStore } from '@berth/common';
import { z } from 'zod';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export const paginationQuery = z
  .object({
    limit: z.coerce
      .number()
      .int('must be an integer')
      .min(1)
      .max(MAX_PAGE_SIZE)
      .default(DEFAULT_PAGE_SIZE)
      .describe(`page size, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE})`),
    cursor: z.string().min(1).max(512).optional().describe('the `cursor` of the previous page'),
  })
  .strict();

/** Cursors are opaque to clients: the last object name of the page, wrapped so the format can change. */
export function encodeCursor(lastName: string): string {
  return Buffer.from(JSON.stringify({ after: lastName })).toString('base64url');
}

export function decodeCursor(cursor: string): string {
  try {
    const decoded = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { after?: unknown };
    if (typeof decoded.after === 'string' && /^[a-z]+-[0-9a-z]+$/.test(decoded.after)) return decoded.after;
  } catch {
    // fall through to the error below
  }
  throw new ApiError('unprocessable_entity', 'cursor: not a cursor returned by this API', { fields: { cursor: ['invalid cursor'] } });
}

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

/** One page of a kind, newest first (ids sort by creation time), shaped by `view`. */
export async function listPage<K extends Kind, V>(
  store: ResourceStore,
  kind: K,
  labels: Record<string, string>,
  page: PageRequest,
  view: (resource: Resource<K>) => V,
): Promise<{ data: V[]; hasMore: boolean; cursor?: string }> {
  const after = page.cursor === undefined ? undefined : decodeCursor(page.cursor);
  const { items, hasMore } = await store.list(kind, {
    labels,
    limit: page.limit,
    order: 'desc',
    ...(after !== undefined ? { after } : {}),
  });
  const last = items.at(-1);
  return { data: items.map(view), hasMore, ...(hasMore && last ? { cursor: encodeCursor(last.metadata.name) } : {}) };
}

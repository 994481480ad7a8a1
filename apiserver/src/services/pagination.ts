import { createHmac, timingSafeEqual } from 'node:crypto';
import { ApiError, type Kind, type Resource, type ResourceStore } from '@berth/common';
import { z } from 'zod';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/**
 * A whole number from a query string, in decimal digits only: `0x10`, `1e1`, ` 16` and `16.0`
 * are refused rather than read as 16.
 */
export function queryInteger(bounds: { min: number; max: number }) {
  return z
    .string()
    .regex(/^[0-9]{1,9}$/, 'must be a whole number in decimal digits')
    .transform(Number)
    .pipe(z.number().int().min(bounds.min).max(bounds.max));
}

export const paginationQuery = z
  .object({
    limit: queryInteger({ min: 1, max: MAX_PAGE_SIZE })
      .default(DEFAULT_PAGE_SIZE)
      .describe(`page size, 1 to ${MAX_PAGE_SIZE} (default ${DEFAULT_PAGE_SIZE})`),
    cursor: z.string().min(1).max(512).optional().describe('the `cursor` of the previous page'),
  })
  .strict();

/**
 * Cursors are opaque to clients and signed by the install: the last object name of a page and
 * the list it belongs to, with an HMAC, so a forged or edited cursor, or one from another list,
 * is refused (422) instead of silently answering an empty page.
 */
export class CursorCodec {
  constructor(private readonly key: Buffer) {}

  encode(list: string, after: string): string {
    const payload = Buffer.from(JSON.stringify({ after })).toString('base64url');
    return `${payload}.${this.sign(list, payload)}`;
  }

  decode(list: string, cursor: string): string {
    const [payload, signature, ...rest] = cursor.split('.');
    if (payload && signature && rest.length === 0 && this.verify(list, payload, signature)) {
      try {
        const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { after?: unknown };
        if (typeof decoded.after === 'string') return decoded.after;
      } catch {
        // fall through to the error below
      }
    }
    throw new ApiError('unprocessable_entity', 'cursor: not a cursor this API returned for this list', { fields: { cursor: ['invalid cursor'] } });
  }

  private sign(list: string, payload: string): string {
    return createHmac('sha256', this.key).update(list).update('\n').update(payload).digest('base64url');
  }

  private verify(list: string, payload: string, signature: string): boolean {
    const expected = Buffer.from(this.sign(list, payload));
    const given = Buffer.from(signature);
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
}

export interface PageRequest {
  limit: number;
  cursor?: string | undefined;
}

/** One page of a kind, newest first (ids sort by creation time), shaped by `view`. */
export async function listPage<K extends Kind, V>(
  store: ResourceStore,
  cursors: CursorCodec,
  kind: K,
  labels: Record<string, string>,
  page: PageRequest,
  view: (resource: Resource<K>) => V,
): Promise<{ data: V[]; hasMore: boolean; cursor?: string }> {
  // The list a cursor belongs to: its kind and scope (organization, mode, session).
  const list = JSON.stringify([kind, Object.entries(labels).sort()]);
  const after = page.cursor === undefined ? undefined : cursors.decode(list, page.cursor);
  const { items, hasMore } = await store.list(kind, {
    labels,
    limit: page.limit,
    order: 'desc',
    ...(after !== undefined ? { after } : {}),
  });
  const last = items.at(-1);
  return { data: items.map(view), hasMore, ...(hasMore && last ? { cursor: cursors.encode(list, last.metadata.name) } : {}) };
}

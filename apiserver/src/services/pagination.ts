import { ApiError } from '@berth/common';
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

import { describe, expect, it } from 'vitest';
import { ApiError } from '@berth/common';
import { decodeCursor, encodeCursor, paginationQuery } from './pagination.js';

describe('cursors', () => {
  it('round-trip an object name and look opaque', () => {
    const cursor = encodeCursor('ses-01m80gqv9d4kjqfcmvs2q4jxem');
    expect(cursor).not.toContain('ses');
    expect(decodeCursor(cursor)).toBe('ses-01m80gqv9d4kjqfcmvs2q4jxem');
  });

  it.each(['', 'garbage', Buffer.from('{"after":1}').toString('base64url'), Buffer.from('{"after":"a b"}').toString('base64url')])(
    'refuses %j with a 422',
    (cursor) => {
      expect(() => decodeCursor(cursor)).toThrow(ApiError);
    },
  );
});

describe('paginationQuery', () => {
  it('defaults the limit to 20 and coerces numbers from the query string', () => {
    expect(paginationQuery.parse({})).toEqual({ limit: 20 });
    expect(paginationQuery.parse({ limit: '100', cursor: 'c' })).toEqual({ limit: 100, cursor: 'c' });
  });

  it.each([{ limit: '0' }, { limit: '101' }, { limit: '2.5' }, { other: '1' }])('refuses %j', (query) => {
    expect(paginationQuery.safeParse(query).success).toBe(false);
  });
});

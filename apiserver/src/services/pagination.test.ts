import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ApiError } from '@berth/common';
import { CursorCodec, paginationQuery } from './pagination.js';

describe('cursors', () => {
  const codec = new CursorCodec(randomBytes(32));
  const list = '["Session",[["org","o1"]]]';

  it('round-trip an object name and look opaque', () => {
    const cursor = codec.encode(list, 'ses-01m80gqv9d4kjqfcmvs2q4jxem');
    expect(cursor).not.toContain('ses');
    expect(codec.decode(list, cursor)).toBe('ses-01m80gqv9d4kjqfcmvs2q4jxem');
  });

  const genuine = codec.encode(list, 'ses-01m80gqv9d4kjqfcmvs2q4jxem');
  const [payload, signature] = genuine.split('.') as [string, string];
  it.each([
    ['empty', ''],
    ['garbage', 'garbage'],
    ['unsigned (the format before signing)', Buffer.from('{"after":"ses-zzzz"}').toString('base64url')],
    ['an edited payload with the old signature', `${Buffer.from('{"after":"ses-zzzz"}').toString('base64url')}.${signature}`],
    ['a signature cut short', `${payload}.${signature.slice(0, 10)}`],
    ['extra parts', `${genuine}.x`],
  ])('refuses %s with a 422', (_what, cursor) => {
    expect(() => codec.decode(list, cursor)).toThrow(ApiError);
  });

  it('refuses a cursor of another list, or signed by another install', () => {
    expect(() => codec.decode('["Agent",[]]', genuine)).toThrow(ApiError);
    expect(() => new CursorCodec(randomBytes(32)).decode(list, genuine)).toThrow(ApiError);
  });
});

describe('paginationQuery', () => {
  it('defaults the limit to 20 and reads decimal numbers from the query string', () => {
    expect(paginationQuery.parse({})).toEqual({ limit: 20 });
    expect(paginationQuery.parse({ limit: '100', cursor: 'c' })).toEqual({ limit: 100, cursor: 'c' });
  });

  it.each([{ limit: '0' }, { limit: '101' }, { limit: '2.5' }, { limit: '0x10' }, { limit: '1e1' }, { limit: ' 16' }, { limit: '' }, { other: '1' }])(
    'refuses %j',
    (query) => {
      expect(paginationQuery.safeParse(query).success).toBe(false);
    },
  );
});

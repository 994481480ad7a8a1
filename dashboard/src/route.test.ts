import { describe, expect, it } from 'vitest';
import { href, parseRoute } from './route.js';

describe('hash routes', () => {
  it.each([
    ['', { page: 'overview', id: undefined }],
    ['#/', { page: 'overview', id: undefined }],
    ['#/keys', { page: 'keys', id: undefined }],
    ['#/agents/agt_01m84qhpszp2hdnen8xmzdtz8m', { page: 'agents', id: 'agt_01m84qhpszp2hdnen8xmzdtz8m' }],
    ['#/webhooks/wh%2Fodd', { page: 'webhooks', id: 'wh/odd' }],
  ])('%s is %o', (hash, route) => {
    expect(parseRoute(hash)).toEqual(route);
  });

  it('writes what it reads', () => {
    expect(parseRoute(href('sessions', 'ses_1'))).toEqual({ page: 'sessions', id: 'ses_1' });
    expect(href('usage')).toBe('#/usage');
    expect(href('webhooks', 'wh/odd')).toBe('#/webhooks/wh%2Fodd');
  });
});

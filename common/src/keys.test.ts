import { describe, expect, it } from 'vitest';
import { KEY_PATTERN, generateKey, hashKey, visiblePrefix } from './keys.js';

describe('API keys', () => {
  it('have the spec prefixes and 40 base62 characters', () => {
    expect(generateKey('live')).toMatch(/^svc_live_[0-9A-Za-z]{40}$/);
    expect(generateKey('test')).toMatch(/^svc_test_[0-9A-Za-z]{40}$/);
    expect(KEY_PATTERN.test(generateKey('live'))).toBe(true);
  });

  it('are random', () => {
    expect(new Set(Array.from({ length: 1000 }, () => generateKey('live'))).size).toBe(1000);
  });

  it('hash to 32 bytes and show only a short prefix', () => {
    const key = generateKey('test');
    expect(hashKey(key)).toHaveLength(32);
    expect(hashKey(key).equals(hashKey(key))).toBe(true);
    expect(visiblePrefix(key)).toBe(key.slice(0, 15));
  });
});

import { describe, expect, it } from 'vitest';
import { maskSecret } from './webhooks.js';

describe('maskSecret', () => {
  it('shows the first 8 characters', () => {
    expect(maskSecret('whsec_abcdefghijkl')).toBe('whsec_ab…');
  });

  it('never cuts a surrogate pair: the answer is well-formed Unicode', () => {
    const masked = maskSecret('abcdefg😀tail');
    expect(masked).toBe('abcdefg😀…');
    expect(masked).not.toMatch(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/);
  });
});

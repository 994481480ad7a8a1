import { TOOL_CATALOGUE } from '@berth/common';
import { describe, expect, it } from 'vitest';
import { TOOLS } from './tools.js';

describe('TOOLS', () => {
  it('implements exactly the catalogue the API server validates agents against', () => {
    expect([...TOOLS.keys()].sort()).toEqual(Object.keys(TOOL_CATALOGUE).sort());
    for (const [name, spec] of TOOLS) {
      expect(spec.needsBrowser, name).toBe(TOOL_CATALOGUE[name as keyof typeof TOOL_CATALOGUE].needsBrowser);
    }
  });
});
